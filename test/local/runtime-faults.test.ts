/**
 * Faults of the embedded runtime itself: ports in use, a data directory held by another
 * runtime, the data directory deleted between runs, a reused execution name.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalRuntime } from '#infra/local/runtime.ts';
import { EmulatorStartError } from '#shared/errors.ts';
import { ProbeConfig } from '#pipelines/probe/config.ts';

const input = { config: ProbeConfig.parse({ items: [5, 6] }) };
const dirs: string[] = [];
const freshDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'fp-faults-'));
  dirs.push(dir);
  return dir;
};
after(() =>
  dirs.forEach((d) => {
    rmSync(d, { recursive: true, force: true });
  }),
);

async function occupyPort(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.address();
  return { server, port: typeof address === 'object' && address ? address.port : 0 };
}

describe('embedded runtime faults', () => {
  it('an emulator port in use fails with an error naming the emulator and the port, and holds nothing', async () => {
    const { server, port } = await occupyPort();
    const dir = freshDir();
    try {
      await assert.rejects(LocalRuntime.start({ dataDir: dir, portBase: port }), (error: Error) => {
        assert.ok(error instanceof EmulatorStartError);
        assert.match(error.message, new RegExp(`DynamoDB emulator.*127\\.0\\.0\\.1:${port}.*in use`));
        return true;
      });
    } finally {
      server.close();
    }
    // The failed start released the data directory: a start on free ports works.
    const runtime = await LocalRuntime.start({ dataDir: dir });
    await runtime.stop();
  });

  it('a second runtime on the same data directory is refused with the holder named', async () => {
    const dir = freshDir();
    const first = await LocalRuntime.start({ dataDir: dir });
    try {
      // The lock names a live pid; simulate another process by writing one that is alive (our parent).
      const { writeFileSync } = await import('node:fs');
      writeFileSync(join(dir, 'runtime.lock'), String(process.ppid));
      await assert.rejects(LocalRuntime.start({ dataDir: dir }), /in use by another local runtime \(pid \d+\)/);
    } finally {
      await first.stop();
    }
  });

  it('deleting the data directory between runs starts over cold and succeeds', async () => {
    const dir = freshDir();
    let runtime = await LocalRuntime.start({ dataDir: dir, retryDelayMs: 1 });
    const first = await runtime.startExecution('probe', input).done;
    await runtime.stop();
    assert.equal(first.status, 'SUCCEEDED', first.cause);
    rmSync(dir, { recursive: true, force: true });
    runtime = await LocalRuntime.start({ dataDir: dir, retryDelayMs: 1 });
    try {
      const second = await runtime.startExecution('probe', input).done;
      assert.equal(second.status, 'SUCCEEDED', second.cause);
      assert.ok(second.stats.lambdaInvocations > 1, 'the cache went with the directory (more ran than the config check)');
      assert.deepEqual((second.output as { total: number }).total, (first.output as { total: number }).total);
      assert.ok(existsSync(join(dir, 'dynamodb')));
    } finally {
      await runtime.stop();
    }
  });

  it('a reused execution name is refused, as Step Functions does, also after a restart', async () => {
    const dir = freshDir();
    let runtime = await LocalRuntime.start({ dataDir: dir, retryDelayMs: 1 });
    await runtime.startExecution('probe', input, { name: 'once' }).done;
    assert.throws(() => runtime.startExecution('probe', input, { name: 'once' }), { name: 'ExecutionAlreadyExists', message: /Execution Already Exists/ });
    await runtime.stop();
    runtime = await LocalRuntime.start({ dataDir: dir });
    try {
      assert.throws(() => runtime.startExecution('probe', input, { name: 'once' }), /Execution Already Exists/);
    } finally {
      await runtime.stop();
    }
  });

  it('an unknown pipeline is an error listing the known ones', async () => {
    const runtime = await LocalRuntime.start({ dataDir: freshDir() });
    try {
      assert.throws(() => runtime.startExecution('nope', {}), /unknown pipeline "nope"; known pipelines: .*\bprobe\b/);
    } finally {
      await runtime.stop();
    }
  });
});
