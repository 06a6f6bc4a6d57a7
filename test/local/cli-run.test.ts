/**
 * `frontier run` on the embedded runtime, as a person reads it: a successful run writes nothing
 * to stderr; the other runs that end meanwhile say who started them (an upload, or a
 * StartExecution through the runtime's loopback Step Functions API); an approval link is printed
 * once; and a molecules run whose pool file does not exist fails in one line naming the field
 * and the URI, the Lambda's stack trace only with --verbose.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { StartExecutionCommand } from '@aws-sdk/client-sfn';
import { pipelineNamed, resolveConfig } from '#infra/cli/config.ts';
import { followLocalRun } from '#infra/cli/run-local.ts';
import type { LocalRuntime } from '#infra/local/runtime.ts';
import { MOLECULES_PIPELINE } from '#pipelines/molecules/stack.ts';
import { PROBE_PIPELINE } from '#pipelines/probe/stack.ts';
import { s3Client, sfnClient } from '#shared/clients/aws.ts';
import { probeInput, startTestRuntime, stopTestRuntime, waitFor } from '../support/runtime.ts';

function capture(onOut: (line: string) => void = () => {}) {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: {
      out: (l: string) => {
        out.push(l);
        onOut(l);
      },
      err: (l: string) => err.push(l),
    },
    out,
    err,
  };
}

/** The execution ARN in the CLI's `started <arn>` line. */
const startedArn = (line: string) => /^started (arn:\S+)$/.exec(line)?.[1];

describe('cli: a local run as printed', () => {
  let runtime: LocalRuntime;
  let bucket: string;
  before(async () => {
    runtime = await startTestRuntime({ pipelines: [pipelineNamed(PROBE_PIPELINE), pipelineNamed(MOLECULES_PIPELINE)] });
    bucket = runtime.resources.buckets[0]!;
  });
  after(() => stopTestRuntime(runtime));

  it('a successful run writes nothing to stderr; the runs others start say who started them', async () => {
    const probe = pipelineNamed(PROBE_PIPELINE);
    const manifestKey = 'uploads/probe/cli/manifest.json';
    let apiStart: Promise<unknown> | undefined;
    // As someone pointing an SDK at the runtime's loopback API while the CLI's run goes on.
    const c = capture((line) => {
      const arn = startedArn(line);
      if (!arn || apiStart) return;
      const stateMachineArn = arn.replace(':execution:', ':stateMachine:').replace(/:[^:]+$/, '');
      apiStart = sfnClient().send(new StartExecutionCommand({ stateMachineArn, name: 'through-the-api', input: JSON.stringify(probeInput()) }));
    });
    const record = await followLocalRun(
      runtime,
      probe,
      resolveConfig(probe, { config: '{"items":[5,6]}' }),
      { beforeStart: async () => void (await s3Client().send(new PutObjectCommand({ Bucket: bucket, Key: manifestKey, Body: '{}' }))) },
      c.io,
    );
    await apiStart;
    const text = c.out.join('\n');
    assert.equal(record.status, 'SUCCEEDED', text);
    assert.deepEqual(c.err, []);
    assert.match(text, /^ {2}started through the Step Functions API: probe through-the-api SUCCEEDED$/m);
    assert.match(text, new RegExp(`^ {2}started by an upload of s3://${bucket}/${manifestKey}: probe s3-[0-9a-f]{40} SUCCEEDED$`, 'm'));
    assert.doesNotMatch(text, /started by an upload: probe through-the-api/);
  });

  it('an approval link is printed once', async () => {
    const probe = pipelineNamed(PROBE_PIPELINE);
    const c = capture();
    const running = followLocalRun(runtime, probe, resolveConfig(probe, { config: '{"items":[7],"approve":true}' }), {}, c.io);
    await waitFor('the email line', () => c.out.some((l) => l.startsWith('  (email saved to ')), 60_000);
    const arn = c.out.map(startedArn).find(Boolean)!;
    runtime.execution(arn)!.abort();
    const record = await running;
    assert.equal(record.status, 'ABORTED');
    const links = c.out.filter((l) => l.startsWith('  approval needed: open '));
    assert.equal(links.length, 1, links.join('\n'));
    assert.match(links[0]!, /open http:\/\/127\.0\.0\.1:\d+\/approvals\/[A-Za-z0-9_-]+\?exp=\d+&sig=[A-Za-z0-9_-]+$/);
  });

  it('a pool file that does not exist fails the run in one line naming the field and the URI; --verbose adds the trace', async () => {
    const molecules = pipelineNamed(MOLECULES_PIPELINE);
    const uri = `s3://${bucket}/nope.smi`;
    const config = resolveConfig(molecules, { config: JSON.stringify({ pool: { uri } }) });
    const plain = capture();
    const record = await followLocalRun(runtime, molecules, config, {}, plain.io);
    assert.equal(record.status, 'FAILED');
    assert.equal(plain.err.length, 1, plain.err.join('\n'));
    assert.match(plain.err[0]!, new RegExp(`^run FAILED at "prepare: Invoke": NoSuchKey: config\\.pool\\.uri: ${uri.replaceAll('.', '\\.')} does not exist$`));

    const verbose = capture();
    await followLocalRun(runtime, molecules, config, { verbose: true }, verbose.io);
    assert.equal(verbose.err[0], plain.err[0]);
    const cause = JSON.parse(verbose.err[1]!.replace(/^cause: /, '')) as { errorType: string; errorMessage: string; trace: string[] };
    assert.equal(cause.errorType, 'NoSuchKey');
    assert.equal(cause.errorMessage, `config.pool.uri: ${uri} does not exist`);
    assert.ok(
      cause.trace.some((line) => /readObjectBytes/.test(line)),
      cause.trace.join('\n'),
    );
  });
});
