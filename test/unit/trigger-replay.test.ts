/**
 * `frontier triggers replay --target aws` against mocked SQS, Lambda and CloudFormation: each
 * dead letter is invoked through the trigger function, deleted only after its invocation
 * succeeded, and every message that stays is made visible again; a dry run invokes and deletes
 * nothing; the deployed stack's outputs name the queue and the function.
 */
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { ChangeMessageVisibilityCommand, DeleteMessageCommand, type Message, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { main } from '#infra/cli.ts';
import { deployedTrigger, REPLAY_VISIBILITY_SECONDS, replayDeadLetters } from '#infra/cli/triggers.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { MissingDeploymentError } from '#shared/errors.ts';

const QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/FrontierProbe-TriggerDeadLetters50E2EFBF';
const FUNCTION = 'FrontierProbe-TriggerHandler8D3B869A';
const where = { queueUrl: QUEUE_URL, functionName: FUNCTION };

/** A dead-lettered "Object Created" event, as EventBridge leaves it in the queue. */
function deadLetter(n: number, attributes: Record<string, string> = {}): Message {
  const event = {
    id: `event-${n}`,
    time: '2030-01-01T00:00:00Z',
    source: 'aws.s3',
    'detail-type': 'Object Created',
    detail: { bucket: { name: 'pipelines' }, object: { key: `uploads/probe/run${n}/manifest.json`, etag: 'e'.repeat(32), 'version-id': `v${n}`, size: 10 } },
  };
  return {
    MessageId: `message-${n}`,
    ReceiptHandle: `receipt-${n}`,
    Body: JSON.stringify(event),
    Attributes: { ApproximateReceiveCount: '1', SentTimestamp: '1893456000000' },
    MessageAttributes: Object.fromEntries(
      Object.entries({
        ERROR_CODE: 'THROTTLING',
        ERROR_MESSAGE: 'Rate exceeded',
        TARGET_ARN: `arn:aws:lambda:eu-west-1:123456789012:function:${FUNCTION}`,
        ...attributes,
      }).map(([name, value]) => [name, { DataType: 'String', StringValue: value }]),
    ),
  };
}

const reply = (value: unknown, functionError?: string) => ({
  StatusCode: 200,
  FunctionError: functionError,
  Payload: Buffer.from(JSON.stringify(value)) as never,
});

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (l: string) => out.push(l), err: (l: string) => err.push(l) }, out, err };
}

describe('replaying dead letters on AWS', () => {
  const sqsMock = mockClient(SQSClient);
  const lambdaMock = mockClient(LambdaClient);
  const clients = () => ({ sqs: new SQSClient({ region: 'eu-west-1' }), lambda: new LambdaClient({ region: 'eu-west-1' }) });
  beforeEach(() => {
    sqsMock.reset();
    lambdaMock.reset();
    sqsMock.on(DeleteMessageCommand).resolves({});
    sqsMock.on(ChangeMessageVisibilityCommand).resolves({});
  });
  after(() => {
    sqsMock.restore();
    lambdaMock.restore();
  });

  /** The queue answers `batches`, one per receive, then nothing. */
  function queueHolds(...batches: Message[][]) {
    let receive = sqsMock.on(ReceiveMessageCommand);
    for (const batch of batches) receive = receive.resolvesOnce({ Messages: batch });
    receive.resolves({});
  }

  const payloadOf = (n: number) => JSON.parse(Buffer.from(lambdaMock.commandCalls(InvokeCommand)[n]!.args[0].input.Payload as Uint8Array).toString('utf8'));
  const deleted = () => sqsMock.commandCalls(DeleteMessageCommand).map((c) => c.args[0].input.ReceiptHandle);
  const released = () => sqsMock.commandCalls(ChangeMessageVisibilityCommand).map((c) => [c.args[0].input.ReceiptHandle, c.args[0].input.VisibilityTimeout]);

  it('invokes the trigger with each event, deletes what it replayed, and keeps what failed', async () => {
    queueHolds([deadLetter(1), deadLetter(2)], [deadLetter(3)]);
    lambdaMock
      .on(InvokeCommand)
      .resolvesOnce(reply({ started: true, executionName: 's3-one', executionArn: 'arn:aws:states:eu-west-1:123456789012:execution:FrontierProbe:s3-one' }))
      .resolvesOnce(reply({ started: false, duplicate: true, executionName: 's3-two' }))
      .resolvesOnce(reply({ errorType: 'ThrottlingException', errorMessage: 'Rate exceeded' }, 'Unhandled'));
    const c = capture();
    const summary = await replayDeadLetters(where, clients(), {}, c.io);

    assert.deepEqual(summary, {
      messages: 3,
      replayed: 1,
      alreadyStarted: 1,
      failed: 1,
      kept: 1,
      started: ['arn:aws:states:eu-west-1:123456789012:execution:FrontierProbe:s3-one'],
    });
    const invokes = lambdaMock.commandCalls(InvokeCommand).map((call) => call.args[0].input);
    assert.deepEqual(
      invokes.map((i) => [i.FunctionName, i.InvocationType]),
      Array(3).fill([FUNCTION, 'RequestResponse']),
    );
    assert.deepEqual(payloadOf(0), JSON.parse(deadLetter(1).Body!), 'the event as EventBridge sent it');
    assert.deepEqual(deleted(), ['receipt-1', 'receipt-2'], 'deleted only after its invocation succeeded');
    assert.deepEqual(released(), [['receipt-3', 0]], 'the failed one shows again at once');
    const receive = sqsMock.commandCalls(ReceiveMessageCommand)[0]!.args[0].input;
    assert.equal(receive.QueueUrl, QUEUE_URL);
    assert.equal(receive.VisibilityTimeout, REPLAY_VISIBILITY_SECONDS);
    assert.deepEqual(receive.MessageAttributeNames, ['All']);
    assert.ok(receive.WaitTimeSeconds! > 0, 'long polling: a short poll may miss messages');
    assert.deepEqual(c.err, [
      '  failed          message-3 s3://pipelines/uploads/probe/run3/manifest.json (version v3): the trigger failed: ThrottlingException: Rate exceeded; kept in the queue',
    ]);
    assert.equal(c.out.at(-1), '3 dead letter(s): 1 replayed, 1 already started, 1 failed (1 kept in the queue)');
  });

  it('a dry run lists each message and why, and invokes and deletes nothing', async () => {
    queueHolds([deadLetter(1), deadLetter(2, { ERROR_CODE: 'NO_PERMISSIONS', ERROR_MESSAGE: 'not authorized' })]);
    const c = capture();
    const summary = await replayDeadLetters(where, clients(), { dryRun: true }, c.io);
    assert.deepEqual([summary.messages, summary.replayed, summary.kept], [2, 0, 2]);
    assert.equal(lambdaMock.commandCalls(InvokeCommand).length, 0);
    assert.deepEqual(deleted(), []);
    assert.deepEqual(released(), [
      ['receipt-1', 0],
      ['receipt-2', 0],
    ]);
    assert.match(
      c.out.join('\n'),
      /message-2 s3:\/\/pipelines\/uploads\/probe\/run2\/manifest.json \(version v2\): dead-lettered at 2030-01-01T00:00:00.000Z \(NO_PERMISSIONS: not authorized\)/,
    );
  });

  it('a message that cannot be invoked, or is not an event, or came from another target, is kept with its reason', async () => {
    const foreign = deadLetter(3, { TARGET_ARN: 'arn:aws:lambda:eu-west-1:123456789012:function:SomethingElse' });
    queueHolds([deadLetter(1), { ...deadLetter(2), Body: 'not json' }, foreign]);
    lambdaMock
      .on(InvokeCommand)
      .rejects(Object.assign(new Error('User is not authorized to perform: lambda:InvokeFunction'), { name: 'AccessDeniedException' }));
    const c = capture();
    const summary = await replayDeadLetters(where, clients(), {}, c.io);
    assert.deepEqual([summary.failed, summary.kept, summary.replayed], [3, 3, 0]);
    assert.equal(lambdaMock.commandCalls(InvokeCommand).length, 1, 'only the event from this trigger is invoked');
    assert.deepEqual(deleted(), []);
    assert.match(c.err[0]!, /invoking FrontierProbe-TriggerHandler8D3B869A failed: AccessDeniedException: User is not authorized/);
    assert.match(c.err[1]!, /message-2 \(not an S3 object event\): the message body is not JSON/);
    assert.match(c.err[2]!, /dead-lettered by the target arn:aws:lambda:.*:function:SomethingElse, not by this trigger/);
  });

  it('a message received again (its visibility ran out) is not replayed twice; a failed delete keeps it, and says its run started', async () => {
    queueHolds([deadLetter(1)], [{ ...deadLetter(1), ReceiptHandle: 'receipt-1-again' }]);
    lambdaMock.on(InvokeCommand).resolves(reply({ started: true, executionName: 's3-one', executionArn: 'arn:one' }));
    sqsMock.on(DeleteMessageCommand).rejects(Object.assign(new Error('throttled'), { name: 'RequestThrottled' }));
    const c = capture();
    const summary = await replayDeadLetters(where, clients(), {}, c.io);
    assert.deepEqual([summary.messages, summary.replayed, summary.kept], [1, 1, 1]);
    assert.equal(lambdaMock.commandCalls(InvokeCommand).length, 1);
    assert.deepEqual(released(), [['receipt-1-again', 0]], 'released with its newest handle');
    assert.match(c.err[0]!, /could not delete message-1 \(RequestThrottled: throttled\); its run is started/);
  });

  it('an answer that is not a trigger result fails and keeps the message', async () => {
    queueHolds([deadLetter(1)]);
    lambdaMock.on(InvokeCommand).resolves(reply({ hello: 'world' }));
    const summary = await replayDeadLetters(where, clients(), {}, capture().io);
    assert.deepEqual([summary.failed, summary.kept], [1, 1]);
    assert.deepEqual(deleted(), []);
  });
});

describe('the deployed trigger', () => {
  const cfn = mockClient(CloudFormationClient);
  const saved = { AWS_REGION: process.env.AWS_REGION, AWS_CONFIG_FILE: process.env.AWS_CONFIG_FILE };
  before(() => {
    process.env.AWS_REGION = 'eu-west-1';
    process.env.AWS_CONFIG_FILE = join(tmpdir(), 'fp-no-aws-config');
  });
  after(() => {
    cfn.restore();
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  });
  const stackWith = (outputs: Record<string, string>) => ({
    Stacks: [
      {
        StackName: 'FrontierProbe',
        CreationTime: new Date(),
        StackStatus: 'CREATE_COMPLETE' as const,
        Outputs: Object.entries({ StateMachineArn: 'arn:aws:states:eu-west-1:123456789012:stateMachine:probe', ...outputs }).map(
          ([OutputKey, OutputValue]) => ({
            OutputKey,
            OutputValue,
          }),
        ),
      },
    ],
  });

  it("is named by the stack's outputs", async () => {
    cfn.reset();
    cfn.on(DescribeStacksCommand).resolves(stackWith({ TriggerDeadLetterQueueUrl: QUEUE_URL, TriggerFunctionName: FUNCTION }));
    assert.deepEqual(await deployedTrigger(pipelineNamed('probe'), new CloudFormationClient({})), where);
  });

  it('a stack without the outputs says to redeploy it', async () => {
    cfn.reset();
    cfn.on(DescribeStacksCommand).resolves(stackWith({}));
    await assert.rejects(deployedTrigger(pipelineNamed('probe'), new CloudFormationClient({})), (error: Error) => {
      assert.ok(error instanceof MissingDeploymentError);
      assert.match(error.message, /stack FrontierProbe has no TriggerDeadLetterQueueUrl output.*redeploy it: npx cdk deploy FrontierProbe/);
      return true;
    });
  });
});

describe('cli: triggers', () => {
  it('a wrong subcommand or a missing pipeline is an error naming it, exit 1', async () => {
    for (const [args, expected] of [
      [['triggers', 'list'], /^error: triggers: the only subcommand is replay: frontier triggers replay PIPELINE \[--dry-run\] \(got "list"\)$/],
      [['triggers', 'replay'], /^error: triggers replay: needs the PIPELINE whose dead-lettered upload events to replay/],
      [['triggers', 'replay', 'nope'], /^error: .*nope/],
    ] as const) {
      const c = capture();
      assert.equal(await main([...args], c.io), 1, args.join(' '));
      assert.match(c.err.join('\n'), expected);
    }
  });
});
