/**
 * The RewardSearch stack as synthesized: the trainer sandboxed (no role, the sandbox queue,
 * presigned URLs), the source's hash (not its text) in the training cache key, the trusted grade
 * after each training run, the generation loop and the final through the same fan-out, and the
 * config's seed checks.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Template } from 'aws-cdk-lib/assertions';
import { buildApp } from '#infra/build-app.ts';
import { pipelineNamed, resolveConfig } from '#infra/cli/config.ts';
import { REWARDS_PIPELINE, type RewardSearchStack } from '#pipelines/rewards/stack.ts';
import { definitionOf } from '../support/stacks.ts';

type Nested = {
  Parameters?: Record<string, unknown>;
  Next?: string;
  States?: Record<string, Nested>;
  ItemProcessor?: { States: Record<string, Nested> };
  Branches?: { States: Record<string, Nested> }[];
};

/** Every state nested under a state (Map item processors, Parallel branches), by name. */
function allStates(state: unknown): Record<string, Nested> {
  const found: Record<string, Nested> = {};
  const visit = (s: Nested) => {
    for (const machine of [s.ItemProcessor, ...(s.Branches ?? [])]) {
      for (const [name, child] of Object.entries(machine?.States ?? {})) {
        found[name] = child;
        visit(child);
      }
    }
  };
  visit(state as Nested);
  return found;
}

describe('RewardSearch stack', () => {
  const { app } = buildApp({ skipBundling: true, fastSynth: true, nag: false, pipelines: [pipelineNamed(REWARDS_PIPELINE)] });
  const stack = app.node.findChild('RewardSearch') as RewardSearchStack;
  const template = Template.fromStack(stack);
  const definition = definitionOf(template);
  const states = definition.States as Record<
    string,
    {
      Type: string;
      Next?: string;
      Parameters?: Record<string, unknown>;
      ItemProcessor?: { States: Record<string, { Parameters?: Record<string, unknown>; Next?: string }> };
      Choices?: { Next: string }[];
      Default?: string;
      Result?: Record<string, string>;
    }
  >;

  it('trains each candidate in the sandbox, then grades it outside, both cached; the content-addressed spec keys the cache', () => {
    assert.ok(stack.trainJob.sandboxOutputs?.includes('policy.json'));
    const inner = allStates(states['runs: Items']);
    // The spec (with the source) was staged in S3 by propose: its content-addressed key is the cache key, and it is copied, never read into the state.
    assert.deepEqual(inner['train: Inputs']!.Parameters, { in: { 'spec.$': '$.item.specKey' } });
    assert.equal(inner['train: Job spec'], undefined);
    const copy = inner['train: Copy spec'] as { Resource?: string; Parameters: Record<string, string> };
    assert.match(copy.Resource!, /:states:::aws-sdk:s3:copyObject$/);
    assert.match(copy.Parameters['CopySource.$']!, /\$\.item\.specKey/);
    // The job's own result.json (the candidate's word) stays in S3: the step's result is its URI and the output prefix.
    assert.equal(inner['train: Read result'], undefined);
    assert.deepEqual(Object.keys(inner['train: Job result']!.Parameters!).sort(), ['outputUri.$', 'resultUri.$']);
    assert.ok(inner['train: Presign'], 'presigned URLs for the sandboxed job');
    // The run's wall limit goes to Batch at submit (it replaces the definition's 30 minutes), not into the cache key.
    const submit = inner['train: Run job']!.Parameters as { Timeout?: Record<string, string> };
    assert.deepEqual(submit.Timeout, { 'AttemptDurationSeconds.$': '$.timeoutSeconds' });
    assert.equal((inner['train: Run job'] as { TimeoutSecondsPath?: string }).TimeoutSecondsPath, undefined);
    assert.ok(inner['train: Cache lookup'] && inner['grade: Cache lookup']);
    assert.equal((inner['grade: Inputs']!.Parameters as { in: Record<string, string> }).in['policyUri.$'], "States.Format('{}policy.json', $.train.outputUri)");
  });

  it('loops over generations, then runs the final through the same fan-out and publishes', () => {
    assert.deepEqual(
      states['More generations?']!.Choices!.map((c) => c.Next),
      ['final-plan: Inputs'],
    );
    assert.equal(states['More generations?']!.Default, 'propose: Inputs');
    assert.equal(states['propose: Done']!.Next, 'Count items');
    assert.equal(states['final-plan: Done']!.Next, 'Count items');
    assert.deepEqual(
      states['Search or final?']!.Choices!.map((c) => c.Next),
      ['final-record: Inputs'],
    );
    assert.match(states['Baselines']!.Result!.env!, /def reward\(/);
    assert.match(states['Baselines']!.Result!.shaped!, /def reward\(/);
  });

  it('checks the seeds: grading and the final use seeds no candidate trained on', () => {
    const entry = pipelineNamed(REWARDS_PIPELINE);
    assert.ok(resolveConfig(entry, { size: 'test' }));
    assert.throws(() => resolveConfig(entry, { config: '{"trainSeeds": [1], "gradeSeeds": [1]}' }), /gradeSeeds\.0: is a training seed/);
    assert.throws(() => resolveConfig(entry, { config: '{"gradeSeeds": [5], "finalSeeds": [5]}' }), /finalSeeds\.0: is a search grading seed/);
    assert.throws(() => resolveConfig(entry, { config: '{"trainSeeds": [1, 2], "finalTrainSeeds": [2]}' }), /finalTrainSeeds\.0: is a search training seed/);
    assert.throws(() => resolveConfig(entry, { config: '{"finalTrainSeeds": [7], "finalSeeds": [7]}' }), /finalSeeds\.0: is a final training seed/);
    assert.throws(() => resolveConfig(entry, { config: '{"trainTimeoutSeconds": 30}' }), /trainTimeoutSeconds/);
    assert.throws(() => resolveConfig(entry, { config: '{"trainTimeoutSeconds": 3600}' }), /trainTimeoutSeconds/);
  });
});
