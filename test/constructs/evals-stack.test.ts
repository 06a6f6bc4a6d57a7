/**
 * The evals and lm-sft stacks as synthesized: the trigger on every checkpoint manifest, what an
 * upload publishes keyed by the upload, the eval job on the GPU queue keyed by content (not
 * location), the producer.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Template } from 'aws-cdk-lib/assertions';
import type { Stack } from 'aws-cdk-lib';
import { buildApp } from '#infra/build-app.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { EVALS_PIPELINE } from '#pipelines/evals/stack.ts';
import { LM_SFT_PIPELINE } from '#pipelines/lm-sft/stack.ts';
import { definitionOf, type AslState } from '../support/stacks.ts';

describe('evals and lm-sft stacks', () => {
  const { app } = buildApp({ skipBundling: true, fastSynth: true, nag: false, pipelines: [pipelineNamed(EVALS_PIPELINE), pipelineNamed(LM_SFT_PIPELINE)] });
  const evals = Template.fromStack(app.node.findChild('EvalsEveryCheckpoint') as Stack);
  const producer = Template.fromStack(app.node.findChild('LmSft') as Stack);

  it('starts on every checkpoint manifest, and what an upload publishes is keyed by the upload', () => {
    // The upload rule (the stack's monitoring has a rule of its own, on its Batch jobs).
    const [rule] = Object.values(evals.findResources('AWS::Events::Rule', { Properties: { EventPattern: { source: ['aws.s3'] } } })) as {
      Properties: { EventPattern: { detail: { object: { key: unknown[] } } } };
    }[];
    assert.deepEqual(rule!.Properties.EventPattern.detail.object.key, [{ wildcard: 'checkpoints/*/*/manifest.json' }]);
    const { States: states } = definitionOf(evals);
    // The upload of record: the run's name (one per upload) when an upload started it, else nothing.
    const start = states['Started by upload?'] as AslState & { Choices: { Next: string }[]; Default: string };
    assert.equal(states[start.Choices[0]!.Next]!['Next'], 'Upload of record');
    assert.deepEqual(states['Upload of record']!.Parameters, { 'execution.$': '$$.Execution.Name' });
    assert.equal(states[start.Default]!['Next'], 'No upload of record');
    assert.deepEqual(states['No upload of record']!['Result'], {});
    const map = states['evaluate: Items']!;
    assert.equal((map['ItemSelector'] as Record<string, string>)['upload.$'], '$.upload');
    const inner = (map['ItemProcessor'] as { States: Record<string, AslState> }).States;
    const branch = (inner['evaluate: Item']!['Branches'] as { States: Record<string, AslState> }[])[0]!.States;
    for (const inputs of [
      states['index-checkpoint: Inputs']!.Parameters!['in'],
      branch['index-result: Inputs']!.Parameters!['in'],
      states['index-leaderboard: Inputs']!.Parameters!['in'],
    ]) {
      assert.equal((inputs as Record<string, string>)['event.$'], '$.upload');
    }
    // The eval job's key stays the content: a re-upload of known content is a cache hit.
    assert.doesNotMatch(JSON.stringify(branch['eval: Inputs']!.Parameters), /upload/);
  });

  it('runs one GPU eval job per benchmark, cached by the checkpoint content hash, given the location outside the key', () => {
    const [job] = Object.values(evals.findResources('AWS::Batch::JobDefinition')) as {
      Properties: { ContainerProperties: { Command: string[]; ResourceRequirements: { Type: string; Value: string }[] } };
    }[];
    assert.deepEqual(job!.Properties.ContainerProperties.Command, ['python3', 'eval_main.py']);
    assert.ok(job!.Properties.ContainerProperties.ResourceRequirements.some((r) => r.Type === 'GPU' && r.Value === '1'));
    const map = definitionOf(evals).States['evaluate: Items']!;
    const states = JSON.stringify(map['ItemProcessor']);
    const inner = (JSON.parse(states) as { States: Record<string, AslState> }).States;
    const branch = (inner['evaluate: Item']!['Branches'] as { States: Record<string, AslState> }[])[0]!.States;
    const inputs = branch['eval: Inputs']!.Parameters!['in'] as Record<string, unknown>;
    assert.equal(inputs['checkpoint.$'], '$.checkpoint.contentHash');
    assert.doesNotMatch(JSON.stringify(inputs), /uri/i);
    const spec = branch['eval: Job spec']!.Parameters as { checkpoint: Record<string, string> };
    assert.equal(spec.checkpoint['uri.$'], '$.checkpoint.uri');
    assert.ok(branch['eval: Cache lookup'], 'cached');
  });

  it('the producer trains on the GPU queue and writes under checkpoints/<run>/', () => {
    const [job] = Object.values(producer.findResources('AWS::Batch::JobDefinition')) as { Properties: { ContainerProperties: { Command: string[] } } }[];
    assert.deepEqual(job!.Properties.ContainerProperties.Command, ['python3', 'train_main.py']);
    const inputs = definitionOf(producer).States['train: Inputs']!.Parameters!['in'] as Record<string, string>;
    assert.match(inputs['checkpoints_uri.$']!, /^States\.Format\('s3:\/\/TOKEN\/checkpoints\/\{\}\/', \$\.config\.run\)$/);
  });
});
