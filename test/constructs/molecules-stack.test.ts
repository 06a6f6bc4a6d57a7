/**
 * The MolecularDiscovery stack as synthesized: the oracle as a Node job on the CPU queue, the
 * round loop with its approval gate (timeout from the config, Reject and timeout ending the loop),
 * the oracle cache keyed by the job's code version, and the config's checks.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Template } from 'aws-cdk-lib/assertions';
import { buildApp } from '#infra/build-app.ts';
import { pipelineNamed, resolveConfig } from '#infra/cli/config.ts';
import { BatchJob } from '#pipelines/steps/batch-job.ts';
import { PipelineFunction } from '#pipelines/steps/function.ts';
import { MOLECULES_PIPELINE, type MolecularDiscoveryStack } from '#pipelines/molecules/stack.ts';
import { MOLECULES_SIZES, MoleculesConfig } from '#pipelines/molecules/config.ts';
import { definitionOf, type AslState } from '../support/stacks.ts';

describe('MolecularDiscovery stack', () => {
  const { app } = buildApp({ skipBundling: true, fastSynth: true, nag: false, pipelines: [pipelineNamed(MOLECULES_PIPELINE)] });
  const stack = app.node.findChild('MolecularDiscovery') as MolecularDiscoveryStack;
  const template = Template.fromStack(stack);
  const definition = definitionOf(template);
  const states = definition.States as Record<
    string,
    AslState & { Next?: string; Choices?: Record<string, unknown>[]; Catch?: { ErrorEquals: string[]; Next: string; ResultPath?: string }[] }
  >;

  it('runs the oracle as a Node job on the CPU queue, its code version covering the xtb code', () => {
    const job = stack.node.findAll().find((c): c is BatchJob => c instanceof BatchJob)!;
    assert.equal(job, stack.oracleJob);
    assert.equal(job.queue, (app.node.findChild('FrontierPlatform') as unknown as { resources: { cpuQueue: unknown } }).resources.cpuQueue);
    for (const file of [
      'shared/molecules/xtb.ts',
      'shared/molecules/rdkit.ts',
      'batch-jobs/molecules-oracle/main.ts',
      'batch-jobs/molecules-oracle/Dockerfile',
    ]) {
      assert.ok(job.codeVersion.components[file], `oracle code version covers ${file}`);
    }
    const [definitionResource] = Object.values(template.findResources('AWS::Batch::JobDefinition')) as {
      Properties: { ContainerProperties: { Command: string[] } };
    }[];
    assert.deepEqual(definitionResource!.Properties.ContainerProperties.Command, ['node', 'main.mjs']);
  });

  it('keys the oracle cache by the job code version: the propose and record Lambdas get it', () => {
    const fns = stack.node.findAll().filter((c): c is PipelineFunction => c instanceof PipelineFunction);
    const env = (id: string) => {
      const fn = fns.find((f) => f.node.id === id)!;
      const resource = template.findResources('AWS::Lambda::Function', {})[stack.getLogicalId(fn.node.defaultChild as never)] as {
        Properties: { Environment: { Variables: Record<string, string> } };
      };
      return resource.Properties.Environment.Variables;
    };
    assert.equal(env('Propose').ORACLE_CODE_VERSION, stack.oracleJob.codeVersion.hash);
    assert.equal(env('Record').ORACLE_CODE_VERSION, stack.oracleJob.codeVersion.hash);
    // The surrogate's code is part of the propose step's version.
    const propose = fns.find((f) => f.node.id === 'Propose')!;
    assert.ok(propose.codeVersion.components['shared/molecules/surrogate.ts']);
    assert.ok(propose.codeVersion.components['npm:@rdkit/rdkit'], 'RDKit ships beside the bundle, counted by version');
  });

  it('waits for approval with the timeout from the config; Reject and timeout continue to record', () => {
    const gate = states['approve: Wait for approval']!;
    assert.equal(gate['TimeoutSecondsPath'], '$.config.approvalTimeoutSeconds');
    assert.equal(gate['TimeoutSeconds'], undefined);
    const payload = gate.Parameters!['Payload'] as Record<string, unknown>;
    assert.equal(payload['itemsUri.$'], '$.proposal.itemsUri');
    assert.equal(payload['timeoutSeconds.$'], '$.config.approvalTimeoutSeconds');
    const catches = gate.Catch!;
    assert.deepEqual(
      catches.map((c) => c.ErrorEquals),
      [['States.Timeout'], ['ApprovalRejected']],
    );
    assert.equal(states['approve: Rejected']!.Parameters!['decision.$'], 'States.StringToJson($.approval.Cause)');
    const decided = states['Approved?']!;
    const next = (decided.Choices as { Next: string }[]).map((c) => c.Next);
    assert.deepEqual(next, ['Timed out: end the loop', 'oracle: Items']);
    assert.equal(decided['Default'], 'Rejected: end the loop');
    for (const name of ['Timed out: end the loop', 'Rejected: end the loop', 'Nothing to measure', 'Measured']) {
      assert.equal(states[name]!.Next, 'record: Inputs', `${name} goes to record`);
    }
  });

  it('loops: record, then back to propose until the campaign is done; then report and publish', () => {
    const more = states['More rounds?']!;
    assert.equal((more.Choices as { Next: string }[])[0]!.Next, 'report: Inputs');
    assert.equal(more['Default'], 'propose: Inputs');
    const anything = states['Anything to measure?']!;
    assert.deepEqual(
      (anything.Choices as { Next: string }[]).map((c) => c.Next),
      ['Pool exhausted', 'approve: Wait for approval'],
    );
    assert.equal(anything['Default'], 'Nothing to measure');
    assert.ok(states['report: Cache lookup'], 'the report is cached');
    assert.ok(states['publish: Inputs']);
  });

  it('checks the config: every size parses, bad values are named', () => {
    for (const size of Object.keys(MOLECULES_SIZES)) {
      const config = resolveConfig(pipelineNamed(MOLECULES_PIPELINE), { size });
      assert.ok(MoleculesConfig.parse(config));
    }
    assert.equal(MoleculesConfig.parse(MOLECULES_SIZES.smoke).approvalTimeoutSeconds, 60);
    const entry = pipelineNamed(MOLECULES_PIPELINE);
    assert.throws(() => resolveConfig(entry, { config: '{"approvalTimeoutSeconds": 30}' }), /approvalTimeoutSeconds/);
    assert.throws(() => resolveConfig(entry, { config: '{"pool": {"uri": "https://example.com/pool.smi"}}' }), /pool\.uri.*s3:\/\/bucket\/key/);
    assert.throws(() => resolveConfig(entry, { config: '{"pool": {"maxSubstituents": 3}}' }), /pool\.maxSubstituents/);
    assert.throws(() => resolveConfig(entry, { config: '{"batchSize": 0}' }), /batchSize/);
  });
});
