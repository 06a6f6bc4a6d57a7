/**
 * The runtime's callback layer, which the local engine lacks: task tokens, heartbeats, the
 * task timeout, and the sweep when an execution ends (late callbacks get AWS's errors).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { CallbackRegistry } from '#infra/local/callbacks.ts';

const EXECUTION = 'arn:aws:states:us-east-1:000000000000:execution:m:e';

describe('callback layer', () => {
  it('mints a distinct token per task and resolves it with SendTaskSuccess output', async () => {
    const registry = new CallbackRegistry();
    const a = registry.register(EXECUTION, {});
    const b = registry.register(EXECUTION, {});
    assert.notEqual(a.token, b.token);
    assert.match(a.token, /^local-tt-[0-9a-f-]{36}$/);
    registry.sendSuccess(a.token, { approved: true });
    assert.deepEqual(await a.done, { approved: true });
    assert.equal(registry.pending(EXECUTION).length, 1);
  });

  it('SendTaskFailure fails the task with the given error name and cause', async () => {
    const registry = new CallbackRegistry();
    const { token, done } = registry.register(EXECUTION, {});
    registry.sendFailure(token, 'ApprovalRejected', '{"approved":false}');
    await assert.rejects(done, { name: 'ApprovalRejected', message: '{"approved":false}' });
  });

  it('fails with States.HeartbeatTimeout when no heartbeat comes within HeartbeatSeconds', async () => {
    const registry = new CallbackRegistry();
    const { done } = registry.register(EXECUTION, { heartbeatSeconds: 0.05 });
    await assert.rejects(done, { name: 'States.HeartbeatTimeout' });
  });

  it('SendTaskHeartbeat keeps a task alive past HeartbeatSeconds', async () => {
    const registry = new CallbackRegistry();
    const { token, done } = registry.register(EXECUTION, { heartbeatSeconds: 0.08 });
    for (let i = 0; i < 4; i++) {
      await sleep(40);
      registry.sendHeartbeat(token);
    }
    registry.sendSuccess(token, 'ok');
    assert.equal(await done, 'ok');
  });

  it('fails with States.Timeout at TimeoutSeconds, and a late callback gets TaskTimedOut', async () => {
    const registry = new CallbackRegistry();
    const { token, done } = registry.register(EXECUTION, { timeoutSeconds: 0.05 });
    await assert.rejects(done, { name: 'States.Timeout' });
    assert.throws(() => registry.sendSuccess(token, {}), { name: 'TaskTimedOut' });
    assert.throws(() => registry.sendHeartbeat(token), { name: 'TaskTimedOut' });
  });

  it('sweeps the tokens of an ended execution, and only those', async () => {
    const registry = new CallbackRegistry();
    const mine = registry.register(EXECUTION, {});
    const other = registry.register(`${EXECUTION}-other`, {});
    mine.done.catch(() => undefined);
    registry.sweep(EXECUTION);
    await assert.rejects(mine.done, { name: 'States.Runtime' });
    assert.deepEqual(registry.pending(), [other.token]);
    assert.throws(() => registry.sendSuccess(mine.token, {}), { name: 'TaskTimedOut' });
  });

  it('an unknown token is TaskDoesNotExist; a token not of this runtime is InvalidToken', () => {
    const registry = new CallbackRegistry();
    assert.throws(() => registry.sendSuccess('local-tt-00000000-0000-0000-0000-000000000000', {}), { name: 'TaskDoesNotExist' });
    assert.throws(() => registry.sendSuccess('AAAAKgAAAAIAAAAAAAAAA', {}), { name: 'InvalidToken' });
  });
});
