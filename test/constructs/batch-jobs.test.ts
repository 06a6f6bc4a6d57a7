/**
 * What a real account does with the pipelines' Batch jobs, read from the synthesized app:
 * - a state machine that runs jobs with submitJob.sync may also describe and cancel them (a
 *   stopped run must not leave a GPU job billing through its attempts);
 * - every state machine's timeout covers each of its jobs' worst case (every attempt to its
 *   timeout), and a stack where it does not fails the synth naming both figures;
 * - every job image is built for linux/amd64, whatever machine synthesizes it.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Duration } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AssetManifestArtifact } from 'aws-cdk-lib/cx-api';
import { buildApp } from '#infra/build-app.ts';
import { PIPELINES } from '#infra/registry.ts';
import { BatchJob, runJob, step } from '#pipelines/steps/index.ts';
import { PipelineStateMachine } from '#pipelines/steps/pipeline.ts';
import { ConfigError } from '#shared/errors.ts';
import { definitionOf, minimalScope } from '../support/stacks.ts';

type Statement = { Action: string | string[]; Resource: unknown; Effect: string };
const actions = (s: Statement) => (Array.isArray(s.Action) ? s.Action : [s.Action]);

describe('Batch jobs against a real account', () => {
  const { app } = buildApp({ skipBundling: true, fastSynth: true, nag: false });
  const assembly = app.synth();

  for (const entry of PIPELINES) {
    it(`${entry.name}: its state machine may describe and cancel the jobs it runs, and outlives their worst case`, () => {
      const template = Template.fromJSON(assembly.getStackByName(entry.stackId).template);
      const policies = Object.values(template.findResources('AWS::IAM::Policy')) as {
        Properties: { PolicyDocument: { Statement: Statement[] }; Roles: unknown[] };
      }[];
      const statements = policies.flatMap((p) => p.Properties.PolicyDocument.Statement);
      const jobs = Object.values(template.findResources('AWS::Batch::JobDefinition')) as {
        Properties: { Timeout?: { AttemptDurationSeconds: number }; RetryStrategy?: { Attempts: number } };
      }[];
      const submits = statements.some((s) => actions(s).includes('batch:SubmitJob'));
      assert.equal(submits, jobs.length > 0, 'a stack with jobs submits them');
      if (submits) {
        const describe = statements.find((s) => actions(s).includes('batch:DescribeJobs'));
        const terminate = statements.find((s) => actions(s).includes('batch:TerminateJob'));
        assert.ok(describe, 'batch:DescribeJobs granted');
        assert.ok(terminate, 'batch:TerminateJob granted');
        assert.notEqual(terminate.Resource, '*', 'TerminateJob scoped to jobs, not every resource');
        assert.match(JSON.stringify(terminate.Resource), /:job\/\*/);
      }
      const { TimeoutSeconds } = definitionOf(template) as unknown as { TimeoutSeconds: number };
      assert.ok(TimeoutSeconds > 0, 'the state machine has a timeout');
      for (const job of jobs) {
        const worst = (job.Properties.Timeout?.AttemptDurationSeconds ?? Number.POSITIVE_INFINITY) * (job.Properties.RetryStrategy?.Attempts ?? 1);
        assert.ok(worst <= TimeoutSeconds, `a job's worst case ${worst} s is over the run's ${TimeoutSeconds} s`);
      }
    });
  }

  it('builds every job image for linux/amd64', () => {
    const images = assembly.artifacts
      .filter((a): a is AssetManifestArtifact => a instanceof AssetManifestArtifact)
      .flatMap((manifest) =>
        Object.entries(manifest.contents.dockerImages ?? {}).map(([id, image]) => ({
          stack: manifest.id,
          asset: { path: id, platform: image.source.platform },
        })),
      );
    assert.ok(images.length >= 5, `job images found: ${images.length}`);
    for (const { stack, asset } of images) assert.equal(asset.platform, 'linux/amd64', `${stack}: ${asset.path}`);
  });

  it('fails the synth when a job can outlast its state machine, naming both figures', () => {
    const { stack, resources, steps } = minimalScope();
    const job = new BatchJob(stack, 'Long', { job: 'probe-sum', resources, timeout: Duration.hours(2), attempts: 3 });
    const run = step(stack, 'sum', { run: runJob(job, steps), inputs: { values: [1] }, resultPath: '$.sum' });
    assert.throws(
      () => new PipelineStateMachine(stack, 'Pipeline', { pipeline: 'minimal', definition: run, resources, timeout: Duration.hours(5) }),
      (e: unknown) =>
        e instanceof ConfigError && e.field === 'minimal.timeout' && /18000 s/.test(e.message) && /3 attempts of 7200 s = 21600 s/.test(e.message),
    );
  });
});
