/**
 * What a real account does with the pipelines' Batch jobs, read from the synthesized app:
 * - a state machine that runs jobs with submitJob.sync may also describe and cancel them (a
 *   stopped run must not leave a GPU job billing through its attempts);
 * - every state machine's timeout covers each of its jobs' worst case (every attempt to its
 *   timeout), and a stack where it does not fails the synth naming both figures;
 * - every job image is built for linux/amd64, whatever machine synthesizes it;
 * - every GPU job fits what its named instance type registers for jobs (a job asking for an
 *   xlarge's installed 16 GiB lands on a 2xlarge), and a job that would not fails the synth.
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
import { Size } from 'aws-cdk-lib';
import { GPU_INSTANCES, type GpuInstanceType, registrableMemoryMiB } from '#pipelines/steps/gpu-instances.ts';
import { META } from '#pipelines/steps/function.ts';
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

  it('sizes every GPU job to fit its instance type: a g6.xlarge job fits in what a g6.xlarge registers', () => {
    let gpuJobs = 0;
    for (const entry of PIPELINES) {
      const stack = assembly.getStackByName(entry.stackId);
      const template = stack.template as {
        Resources: Record<string, { Type: string; Properties: Record<string, unknown>; Metadata?: Record<string, unknown> }>;
      };
      for (const [logicalId, resource] of Object.entries(template.Resources)) {
        if (resource.Type !== 'AWS::Batch::JobDefinition') continue;
        const container = resource.Properties['ContainerProperties'] as { ResourceRequirements: { Type: string; Value: string }[] };
        const request = Object.fromEntries(container.ResourceRequirements.map((r) => [r.Type, Number(r.Value)]));
        if (!request['GPU']) continue;
        gpuJobs += 1;
        const type = resource.Metadata?.[META.jobInstanceType] as GpuInstanceType;
        assert.ok(Object.hasOwn(GPU_INSTANCES, type), `${entry.name} ${logicalId}: ${type}`);
        const where = `${entry.name} ${logicalId} on ${type}`;
        assert.ok(request['MEMORY']! <= registrableMemoryMiB(type), `${where}: ${request['MEMORY']} MiB > ${registrableMemoryMiB(type)} MiB registrable`);
        assert.ok(request['VCPU']! <= GPU_INSTANCES[type].vcpus, `${where}: ${request['VCPU']} vCPUs`);
        assert.ok(request['GPU']! <= GPU_INSTANCES[type].gpus, `${where}: ${request['GPU']} GPUs`);
      }
    }
    assert.ok(gpuJobs >= 3, `GPU jobs found: ${gpuJobs}`);
    // The model keeps a 16 GiB instance's job under its installed memory, with room for the kernel.
    assert.ok(registrableMemoryMiB('g6.xlarge') < 16_384 - 512 && registrableMemoryMiB('g6.xlarge') > 14_336);
  });

  it('fails the synth when a GPU job asks for more than its instance type registers, naming the field', () => {
    const { stack, resources } = minimalScope();
    assert.throws(
      () => new BatchJob(stack, 'Big', { job: 'probe-sum', resources, gpus: 1, memory: Size.gibibytes(16) }),
      (e: unknown) => e instanceof ConfigError && e.field === 'memory' && /16384 MiB/.test(e.message) && /g6\.xlarge registers about \d+ MiB/.test(e.message),
    );
    assert.throws(
      () => new BatchJob(stack, 'Wide', { job: 'probe-sum', resources, gpus: 1, vcpus: 8 }),
      (e: unknown) => e instanceof ConfigError && e.field === 'vcpus' && /4 vCPUs/.test(e.message),
    );
    // Sized for the 2xlarge on purpose, the same request fits.
    new BatchJob(stack, 'Sized', { job: 'probe-sum', resources, gpus: 1, memory: Size.gibibytes(16), vcpus: 8, instanceType: 'g6.2xlarge' });
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
