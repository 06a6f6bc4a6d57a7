/**
 * What `frontier run` prints when a run ends: a failed run as one line naming the state and the
 * error (a Lambda's JSON cause unwrapped, the raw cause only with --verbose), who started the
 * other runs, the approval link once; and S3 reads that name the field and the URI of a missing
 * object. S3 and Step Functions are mocked at the SDK edge.
 */
import { afterEach, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { GetObjectCommand, NoSuchBucket as S3NoSuchBucket, NoSuchKey as S3NoSuchKey, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { DescribeExecutionCommand, GetExecutionHistoryCommand, SFNClient, StartExecutionCommand } from '@aws-sdk/client-sfn';
import { mockClient } from 'aws-sdk-client-mock';
import { pipelineNamed } from '#infra/cli/config.ts';
import { runAws } from '#infra/cli/run-aws.ts';
import { failureLines, MAX_MESSAGE_CHARS, readableError, startedBy } from '#infra/cli/run-outcome.ts';
import { linksInEml } from '#infra/local/outbox.ts';
import { composeMime } from '#shared/approval.ts';
import { renderApprovalEmail } from '#shared/approval-page.ts';
import { readObjectBytes, resetClients } from '#shared/clients/aws.ts';
import { NoSuchBucket, NoSuchKey, PipelineError } from '#shared/errors.ts';

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (l: string) => out.push(l), err: (l: string) => err.push(l) }, out, err };
}

const POOL_URI = 's3://frontier-bucket/nope.smi';
/** A Lambda's error as Step Functions records it: Error is the errorType, Cause this JSON. */
const LAMBDA_CAUSE = JSON.stringify({
  errorType: 'NoSuchKey',
  errorMessage: `config.pool.uri: ${POOL_URI} does not exist`,
  trace: ['NoSuchKey: config.pool.uri: s3://frontier-bucket/nope.smi does not exist', '    at readObjectBytes (shared/clients/aws.ts:48:13)'],
});

describe('run outcome: a failed run in one line', () => {
  it("unwraps a Lambda's error to its type and message; the raw cause only with --verbose", () => {
    const end = { status: 'FAILED', error: 'NoSuchKey', cause: LAMBDA_CAUSE, state: 'prepare: Invoke' };
    assert.deepEqual(failureLines(end, false), [`run FAILED at "prepare: Invoke": NoSuchKey: config.pool.uri: ${POOL_URI} does not exist`]);
    const verbose = failureLines(end, true);
    assert.equal(verbose[0], failureLines(end, false)[0]);
    assert.equal(verbose[1], `cause: ${LAMBDA_CAUSE}`);
    assert.equal(verbose.length, 2);
  });

  it("keeps the state machine's error name and adds the Lambda's type when they differ", () => {
    assert.deepEqual(readableError('Sandbox.Timedout', JSON.stringify({ errorMessage: 'Task timed out after 3.00 seconds' })), {
      name: 'Sandbox.Timedout',
      message: 'Task timed out after 3.00 seconds',
    });
    assert.deepEqual(readableError('States.TaskFailed', LAMBDA_CAUSE), {
      name: 'States.TaskFailed',
      message: `NoSuchKey: config.pool.uri: ${POOL_URI} does not exist`,
    });
  });

  it("says a Batch job's status reason and exit code, not its description", () => {
    const cause = JSON.stringify({
      JobId: 'j-1',
      JobName: 'probe-sum-abc',
      Status: 'FAILED',
      StatusReason: 'Essential container in task exited',
      Container: { ExitCode: 3, LogStreamName: '/tmp/log' },
      StderrTail: 'Traceback (most recent call last):\n  File "main.py", line 1\nValueError: bad',
    });
    assert.deepEqual(failureLines({ status: 'FAILED', error: 'States.TaskFailed', cause, state: 'sum: Run job' }, false), [
      'run FAILED at "sum: Run job": States.TaskFailed: job probe-sum-abc: Essential container in task exited (exit code 3)',
    ]);
  });

  it('names the quota to check when the GPU queue cancelled a job it could not place', () => {
    const blocked = (reason: string) => JSON.stringify({ JobId: 'j-2', JobName: 'selfplay-train-abc', Status: 'FAILED', StatusReason: reason, Container: {} });
    const capacity = `CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - Service cannot fulfill the capacity requested for instance type [g6.xlarge] ${'x'.repeat(800)}`;
    const [line] = failureLines({ status: 'FAILED', error: 'States.TaskFailed', cause: blocked(capacity), state: 'train: Run job' }, false);
    // The reason is cut to make room; the quota, its code and the command to read it stay whole.
    assert.match(line!, /job selfplay-train-abc: CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY/);
    assert.match(line!, /"All G and VT Spot Instance Requests" \(aws service-quotas get-service-quota --service-code ec2 --quota-code L-3819A6DF;/);
    assert.match(line!, /-c frontier:gpuSpot=false when spot capacity is short$/);
    assert.ok(line!.length < MAX_MESSAGE_CHARS + 80, `${line!.length} characters`);
    assert.match(
      readableError('States.TaskFailed', blocked('MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT - no instance')).message,
      /size the job for a g6\/g5 type/,
    );
    assert.match(readableError('States.TaskFailed', blocked('MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE')).message, /raise gpuMaxvCpus/);
    assert.doesNotMatch(readableError('States.TaskFailed', blocked('Essential container in task exited')).message, /quota/);
  });

  it('prints a plain cause as one line, cut when long; a run without an error names its status', () => {
    assert.deepEqual(failureLines({ status: 'TIMED_OUT', error: 'States.Timeout', cause: 'The task timed out\nwaiting for its callback' }, false), [
      'run TIMED_OUT: States.Timeout: The task timed out / waiting for its callback',
    ]);
    const [long] = failureLines({ status: 'FAILED', error: 'States.Runtime', cause: 'x'.repeat(5000) }, false);
    assert.ok(long!.length < MAX_MESSAGE_CHARS + 50, `${long!.length} characters`);
    assert.match(long!, /x\.\.\.$/);
    assert.deepEqual(failureLines({ status: 'ABORTED', state: 'approve: Wait' }, true), ['run ABORTED at "approve: Wait"']);
  });
});

describe('run outcome: who started a run', () => {
  it("an upload's run by its object, any other start as the Step Functions API's", () => {
    const trigger = { bucket: 'b', key: 'uploads/probe/r/manifest.json', etag: 'e', versionId: null, size: 2 };
    assert.equal(startedBy({ trigger }), 'started by an upload of s3://b/uploads/probe/r/manifest.json');
    assert.equal(startedBy({ config: { items: [1] } }), 'started through the Step Functions API');
    assert.equal(startedBy({ trigger: {} }), 'started through the Step Functions API');
    assert.equal(startedBy(null), 'started through the Step Functions API');
  });
});

describe('run outcome: the approval link', () => {
  it('an approval email (text and HTML parts) gives its link once', async () => {
    const link = 'http://127.0.0.1:4000/approvals/abc123?exp=1900000000&sig=s1g';
    const email = renderApprovalEmail({
      from: 'a@example.com',
      to: ['b@example.com'],
      link,
      pipeline: 'probe',
      title: 'publish?',
      details: {},
      expiresAtIso: '2030-01-01T00:00:00.000Z',
    });
    const mime = (await composeMime(email)).toString('utf8');
    assert.match(mime, /&amp;/, 'the HTML part escapes the link');
    assert.deepEqual(linksInEml(mime), [link]);
  });
});

describe('readObjectBytes: a missing object names the field and the URI', () => {
  const s3 = mockClient(S3Client);
  beforeEach(() => {
    resetClients();
    s3.reset();
  });
  afterEach(() => resetClients());

  it("a missing key or bucket keeps S3's error name, with the field and the URI in the message", async () => {
    s3.on(GetObjectCommand).rejects(new S3NoSuchKey({ message: 'The specified key does not exist.', $metadata: {} }));
    await assert.rejects(readObjectBytes(POOL_URI, 'config.pool.uri'), (error: unknown) => {
      assert.ok(error instanceof NoSuchKey && error instanceof PipelineError, String(error));
      assert.equal(error.name, 'NoSuchKey');
      assert.equal(error.message, `config.pool.uri: ${POOL_URI} does not exist`);
      assert.equal((error.cause as Error).name, 'NoSuchKey');
      return true;
    });
    s3.on(GetObjectCommand).rejects(
      new S3ServiceException({ name: 'NotFound', $fault: 'client', $metadata: { httpStatusCode: 404 }, message: 'UnknownError' }),
    );
    await assert.rejects(readObjectBytes(POOL_URI, 'config.pool.uri'), { name: 'NoSuchKey', message: `config.pool.uri: ${POOL_URI} does not exist` });
    s3.on(GetObjectCommand).rejects(new S3NoSuchBucket({ message: 'The specified bucket does not exist', $metadata: {} }));
    await assert.rejects(readObjectBytes('s3://gone/pool.smi', 'config.pool.uri'), (error: unknown) => {
      assert.ok(error instanceof NoSuchBucket, String(error));
      assert.equal(error.message, 'config.pool.uri: the bucket of s3://gone/pool.smi does not exist');
      return true;
    });
  });

  it('other errors pass through as S3 gave them; an object is read whole', async () => {
    const denied = new S3ServiceException({ name: 'AccessDenied', $fault: 'client', $metadata: { httpStatusCode: 403 }, message: 'Access Denied' });
    s3.on(GetObjectCommand).rejects(denied);
    await assert.rejects(readObjectBytes(POOL_URI, 'config.pool.uri'), (error: unknown) => error === denied);
    s3.on(GetObjectCommand).callsFake(() => ({ Body: Readable.from([Buffer.from('CCO\n'), Buffer.from('c1ccccc1\n')]) as never }));
    assert.equal((await readObjectBytes(POOL_URI, 'config.pool.uri')).toString('utf8'), 'CCO\nc1ccccc1\n');
  });
});

describe('run outcome: --target aws', () => {
  const cfn = mockClient(CloudFormationClient);
  const sfn = mockClient(SFNClient);
  const arn = 'arn:aws:states:eu-west-1:123456789012:stateMachine:molecules';
  beforeEach(() => {
    cfn.reset();
    sfn.reset();
    cfn.on(DescribeStacksCommand).resolves({
      Stacks: [
        {
          StackName: 'MolecularDiscovery',
          CreationTime: new Date(),
          StackStatus: 'CREATE_COMPLETE',
          Outputs: [{ OutputKey: 'StateMachineArn', OutputValue: arn }],
        },
      ],
    });
    sfn.on(StartExecutionCommand).resolves({ executionArn: `${arn}:exec`, startDate: new Date() });
    sfn.on(GetExecutionHistoryCommand).resolves({
      events: [
        { id: 1, timestamp: new Date(), type: 'TaskStateEntered', stateEnteredEventDetails: { name: 'config: Check' } },
        { id: 2, timestamp: new Date(), type: 'TaskStateEntered', stateEnteredEventDetails: { name: 'prepare: Invoke' } },
        { id: 3, timestamp: new Date(), type: 'LambdaFunctionFailed' },
        { id: 4, timestamp: new Date(), type: 'ExecutionFailed' },
      ],
    });
    sfn.on(DescribeExecutionCommand).resolves({
      status: 'FAILED',
      executionArn: `${arn}:exec`,
      stateMachineArn: arn,
      startDate: new Date(),
      error: 'NoSuchKey',
      cause: LAMBDA_CAUSE,
    });
  });
  afterEach(() => {
    cfn.reset();
    sfn.reset();
  });

  const clients = () => ({ cfn: new CloudFormationClient({ region: 'eu-west-1' }), sfn: new SFNClient({ region: 'eu-west-1' }) });

  it('a failed execution is one line naming the state it failed at; --verbose adds the raw cause', async () => {
    const plain = capture();
    const result = await runAws(pipelineNamed('molecules'), {}, { pollMs: 1 }, plain.io, clients());
    assert.equal(result.status, 'FAILED');
    assert.deepEqual(plain.err, [`run FAILED at "prepare: Invoke": NoSuchKey: config.pool.uri: ${POOL_URI} does not exist`]);
    const verbose = capture();
    await runAws(pipelineNamed('molecules'), {}, { pollMs: 1, verbose: true }, verbose.io, clients());
    assert.deepEqual(verbose.err, [plain.err[0], `cause: ${LAMBDA_CAUSE}`]);
  });
});
