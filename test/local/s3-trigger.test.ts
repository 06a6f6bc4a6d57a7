/**
 * The S3 trigger end to end on the embedded runtime: an upload to the platform bucket makes
 * s3rver emit an object event, the runtime turns it into EventBridge's "Object Created" event,
 * matches the probe stack's rule on `uploads/probe/*\/manifest.json` and invokes the
 * trigger Lambda, which records the upload in the ledger and starts the probe once per upload:
 * every PUT is an upload of record (also of bytes uploaded before), while a redelivered,
 * re-announced or crafted event of one upload starts nothing more. An upload whose run cannot
 * start (the ledger's table gone) lands in the trigger's dead-letter queue, and the replay
 * command starts its run and deletes the message, keeping any message whose replay fails.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CreateTableCommand, DeleteTableCommand, DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { type Message, ReceiveMessageCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { pipelineNamed } from '#infra/cli/config.ts';
import { replayTrigger } from '#infra/cli/triggers.ts';
import { listExecutionRecords, type ExecutionRecord, type LocalRuntime } from '#infra/local/runtime.ts';
import { PROBE_PIPELINE } from '#pipelines/probe/stack.ts';
import { TRIGGER_OUTPUTS } from '#pipelines/steps/s3-trigger.ts';
import { dynamoClient } from '#shared/clients/aws.ts';
import { eventKey } from '#shared/table.ts';
import { executionNameFor, parseObjectCreatedEvent } from '#shared/trigger.ts';
import { startTestRuntime, stopTestRuntime, within } from '../support/runtime.ts';

const MANIFEST_KEY = 'uploads/probe/run1/manifest.json';

let rt: LocalRuntime;
let bucket: string;
let s3: S3Client;

type ObjectCreated = Parameters<typeof parseObjectCreatedEvent>[0] & {
  detail: { object: { etag: string; size: number; 'version-id'?: string; sequencer: string } };
};

/**
 * Uploads as a user would (the real client, against s3rver), `times` PUTs at once, waits for
 * every event delivery, and returns the EventBridge events the uploads produced (what a
 * redelivery repeats).
 */
async function uploadAll(key: string, body: string, times: number): Promise<ObjectCreated[]> {
  const events: ObjectCreated[] = [];
  const listener = (e: ObjectCreated) => events.push(e);
  rt.on('objectCreated', listener);
  try {
    await Promise.all(
      Array.from({ length: times }, () => s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentType: 'application/json' }))),
    );
    await within(rt.eventsSettled(), 30_000, `the deliveries of ${key}'s events`);
  } finally {
    rt.off('objectCreated', listener);
  }
  assert.equal(events.length, times, `one event per PUT of ${key}`);
  return events;
}

async function upload(key: string, body: string): Promise<ObjectCreated> {
  return (await uploadAll(key, body, 1))[0]!;
}

/** Executions started by uploads (their names come from the object), oldest first. */
function triggeredRuns(): ExecutionRecord[] {
  return listExecutionRecords(rt.dataDir)
    .filter((r) => r.name.startsWith('s3-'))
    .reverse();
}

async function finished(record: ExecutionRecord): Promise<ExecutionRecord> {
  const live = rt.execution(record.executionArn);
  return live ? within(live.done, 60_000, `${record.executionArn} to finish`) : record;
}

before(async () => {
  rt = await startTestRuntime();
  assert.equal(rt.resources.buckets.length, 1, 'one bucket sends its events to EventBridge: the platform bucket');
  bucket = rt.resources.buckets[0]!;
  s3 = new S3Client({
    endpoint: process.env.AWS_ENDPOINT_URL_S3,
    forcePathStyle: true,
    region: 'us-east-1',
    credentials: { accessKeyId: process.env.AWS_ACCESS_KEY_ID!, secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY! },
  });
});

after(async () => {
  s3?.destroy();
  await stopTestRuntime(rt);
});

describe('S3 trigger on the probe pipeline', () => {
  let first: ObjectCreated;
  let firstRun: ExecutionRecord;

  it('an uploaded manifest starts exactly one run, named after the object, which succeeds', { timeout: 90_000 }, async () => {
    first = await upload(MANIFEST_KEY, JSON.stringify({ step: 100, files: ['weights.bin'] }));
    // The bucket is versioned (as on AWS): the version id names the upload; the event carries
    // S3's sequencer too, which names it on a bucket without versioning.
    assert.ok(first.detail.object['version-id'], 'a versioned bucket gives each PUT a version id');
    assert.match(first.detail.object.sequencer, /^[0-9A-F]+$/);
    const runs = triggeredRuns();
    assert.equal(runs.length, 1, `runs: ${runs.map((r) => r.name).join(', ')}`);
    firstRun = runs[0]!;
    const expectedName = executionNameFor(parseObjectCreatedEvent(first));
    assert.equal(firstRun.name, expectedName);
    assert.equal(listExecutionRecords(rt.dataDir).length, 1, 'nothing else started');

    const { Item: ledger } = await dynamoClient().send(
      new GetCommand({ TableName: rt.resources.tables[0]!, Key: eventKey(bucket, MANIFEST_KEY, first.detail.object['version-id']!), ConsistentRead: true }),
    );
    assert.equal(ledger?.executionName, expectedName, 'the ledger records the object and the run it started');

    const record = await finished(firstRun);
    assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
    const { trigger } = record.input as { trigger: { bucket: string; key: string; etag: string; size: number } };
    assert.deepEqual([trigger.bucket, trigger.key, trigger.etag, trigger.size], [bucket, MANIFEST_KEY, first.detail.object.etag, first.detail.object.size]);
    assert.equal((record.output as { total: number }).total, 14, 'the default config squares and sums [1, 2, 3]');
  });

  it('the same event delivered five more times, re-announced or crafted, starts nothing more', { timeout: 60_000 }, async () => {
    const duplicate = [{ started: false, duplicate: true, executionName: firstRun.name }];
    for (let i = 0; i < 5; i++) assert.deepEqual(await rt.deliverEvent(first), duplicate, `redelivery ${i + 1}`);
    // S3 may also announce one upload twice under another event id and time: the upload is the same.
    assert.deepEqual(await rt.deliverEvent({ ...first, id: 'a-different-event-id', time: '2030-01-01T00:00:00Z' }), duplicate);
    // A crafted event naming the same version with other bytes and another sequencer: the version id names the upload.
    const crafted = {
      ...first,
      id: 'crafted',
      detail: { ...first.detail, object: { ...first.detail.object, etag: 'f'.repeat(32), size: 1, sequencer: 'FFFFFFFFFFFFFFFFFFFF' } },
    };
    assert.deepEqual(await rt.deliverEvent(crafted), duplicate);
    // Five at once, as EventBridge may deliver them.
    const all = await Promise.all(Array.from({ length: 5 }, () => rt.deliverEvent(first)));
    for (const results of all) assert.equal((results[0] as { executionName: string }).executionName, firstRun.name);
    await rt.eventsSettled();
    assert.deepEqual(
      triggeredRuns().map((r) => r.name),
      [firstRun.name],
    );
  });

  it('content A, then B, then A again: every upload starts a run, the last one too', { timeout: 120_000 }, async () => {
    const bodyA = JSON.stringify({ step: 100, files: ['weights.bin'] });
    const second = await upload(MANIFEST_KEY, JSON.stringify({ step: 200, files: ['weights.bin'] }));
    assert.notEqual(second.detail.object.etag, first.detail.object.etag);
    const third = await upload(MANIFEST_KEY, bodyA);
    assert.equal(third.detail.object.etag, first.detail.object.etag, 'the same bytes as the first upload');
    const names = [first, second, third].map((e) => executionNameFor(parseObjectCreatedEvent(e)));
    assert.equal(new Set(names).size, 3);
    const runs = triggeredRuns();
    assert.deepEqual(
      runs.map((r) => r.name),
      names,
    );
    for (const run of runs) {
      const record = await finished(run);
      assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
    }
    assert.equal((await finished(runs[2]!)).stats.batchJobs, 0, "the probe's config comes from the trigger: the third run is all cache hits");
  });

  it('five concurrent uploads of the same bytes are five uploads: five runs, each exactly once', { timeout: 120_000 }, async () => {
    const before = triggeredRuns().length;
    const jobs = rt.counters().batchJobs;
    const events = await uploadAll(MANIFEST_KEY, JSON.stringify({ step: 100, files: ['weights.bin'] }), 5);
    assert.equal(new Set(events.map((e) => e.detail.object.etag)).size, 1);
    assert.equal(new Set(events.map((e) => e.detail.object['version-id'])).size, 5, 'each PUT a new version');
    assert.equal(new Set(events.map((e) => e.detail.object.sequencer)).size, 5, 'each PUT a new sequencer');
    // Every event delivered twice more, all at once: still one run per upload.
    await Promise.all(events.flatMap((e, i) => [rt.deliverEvent(e), rt.deliverEvent({ ...e, id: `announced-again-${i}` })]));
    await rt.eventsSettled();
    const runs = triggeredRuns().slice(before);
    assert.deepEqual(runs.map((r) => r.name).sort(), events.map((e) => executionNameFor(parseObjectCreatedEvent(e))).sort());
    for (const run of runs) {
      const record = await finished(run);
      assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
    }
    assert.equal(rt.counters().batchJobs - jobs, 0, 'content known before: every run from the cache');
  });

  it('a key the rule does not match starts nothing', { timeout: 30_000 }, async () => {
    const before = listExecutionRecords(rt.dataDir).length;
    const weights = await upload('uploads/probe/run1/weights.bin', 'not a manifest');
    // Near misses: another pipeline's upload, a copy of a manifest under another name.
    await upload('uploads/other/run1/manifest.json', '{}');
    await upload('uploads/probe/run1/extra/manifest.json.bak', '{}');
    assert.equal(listExecutionRecords(rt.dataDir).length, before);
    // The rule itself does not match: the event reaches no target.
    assert.deepEqual(await rt.deliverEvent(weights), []);
    assert.equal(listExecutionRecords(rt.dataDir).length, before);
  });
});

describe('S3 trigger dead letters and their replay', () => {
  const probe = pipelineNamed(PROBE_PIPELINE);
  const key = 'uploads/probe/dead-letter/manifest.json';
  let queueUrl: string;
  let functionName: string;
  let sqs: SQSClient;
  let lost: ObjectCreated;

  before(() => {
    const outputs = rt.stackOutputs(probe.stackId);
    queueUrl = outputs[TRIGGER_OUTPUTS.deadLetterQueueUrl]!;
    functionName = outputs[TRIGGER_OUTPUTS.functionName]!;
    sqs = new SQSClient({});
  });
  after(() => sqs?.destroy());

  /** The queue's messages, left visible (a visibility timeout of 0): what a replay would receive. */
  async function deadLetters(): Promise<Message[]> {
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 0, MessageAttributeNames: ['All'] }),
    );
    return Messages;
  }

  function capture() {
    const out: string[] = [];
    const err: string[] = [];
    return { io: { out: (l: string) => out.push(l), err: (l: string) => err.push(l) }, out, err };
  }

  const replay = (dryRun: boolean, io: ReturnType<typeof capture>['io']) => replayTrigger(probe, { target: 'local', dataDir: rt.dataDir, dryRun }, io, rt);

  it('an upload whose run cannot start lands in the dead-letter queue: the event, and why', { timeout: 60_000 }, async () => {
    assert.deepEqual(await deadLetters(), [], 'nothing dead-lettered by the tests before');
    // An outage of the ledger's table: every attempt of the trigger fails.
    const dynamodb = new DynamoDBClient({});
    const table = rt.resources.tables[0]!;
    const { Table } = await dynamodb.send(new DescribeTableCommand({ TableName: table }));
    await dynamodb.send(new DeleteTableCommand({ TableName: table }));
    const deadLettered: unknown[] = [];
    const listener = (e: unknown) => deadLettered.push(e);
    rt.on('deadLettered', listener);
    try {
      lost = await upload(key, JSON.stringify({ step: 300, files: ['weights.bin'] }));
    } finally {
      rt.off('deadLettered', listener);
      await dynamodb.send(
        new CreateTableCommand({
          TableName: table,
          KeySchema: Table!.KeySchema,
          AttributeDefinitions: Table!.AttributeDefinitions,
          BillingMode: 'PAY_PER_REQUEST',
        }),
      );
      dynamodb.destroy();
    }
    assert.equal(deadLettered.length, 1);
    assert.ok(!triggeredRuns().some((r) => r.name === executionNameFor(parseObjectCreatedEvent(lost))), 'no run started');
    const [message, ...others] = await deadLetters();
    assert.equal(others.length, 0);
    assert.deepEqual(JSON.parse(message!.Body!), lost, "the body is EventBridge's event, unchanged");
    const attribute = (name: string) => message!.MessageAttributes?.[name]?.StringValue;
    assert.equal(attribute('ERROR_CODE'), 'ERROR_FROM_TARGET');
    assert.match(attribute('ERROR_MESSAGE')!, /^ResourceNotFoundException: /);
    assert.equal(attribute('TARGET_ARN')!.split(':').pop(), functionName);
    assert.match(attribute('RULE_ARN')!, /^arn:aws:events:[^:]+:\d+:rule\//);
  });

  it('a dry run lists the message and changes nothing; the replay starts the run and deletes it', { timeout: 90_000 }, async () => {
    const dry = capture();
    const listed = await replay(true, dry.io);
    assert.deepEqual([listed.messages, listed.replayed, listed.kept], [1, 0, 1]);
    assert.match(
      dry.out.join('\n'),
      new RegExp(`s3://${bucket}/${key} \\(version \\w+\\): dead-lettered at \\S+ \\(ERROR_FROM_TARGET: ResourceNotFoundException`),
    );
    assert.equal((await deadLetters()).length, 1, 'still there after the dry run');

    const run = capture();
    const summary = await replay(false, run.io);
    assert.deepEqual(run.err, []);
    const name = executionNameFor(parseObjectCreatedEvent(lost));
    assert.deepEqual(
      { ...summary, started: summary.started.map((arn) => arn.split(':').pop()) },
      {
        messages: 1,
        replayed: 1,
        alreadyStarted: 0,
        failed: 0,
        kept: 0,
        started: [name],
      },
    );
    assert.deepEqual(await deadLetters(), [], 'deleted once its run started');
    const record = await finished(triggeredRuns().find((r) => r.name === name)!);
    assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
  });

  it('a replay that fails keeps its message; an event whose run exists counts as already started', { timeout: 60_000 }, async () => {
    // An event the trigger refuses (S3 always sends an etag): dead-lettered after its attempts...
    const { etag: _etag, ...withoutEtag } = lost.detail.object;
    const refused = { ...lost, id: 'no-etag', detail: { ...lost.detail, object: withoutEtag } };
    const [delivery] = (await rt.deliverEvent(refused)) as { deadLettered?: string }[];
    assert.ok(delivery?.deadLettered, 'the delivery says where the event went');
    // ...and the lost upload's event a second time, as when S3 announces an upload twice.
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify(lost) }));

    const c = capture();
    const summary = await replay(false, c.io);
    assert.deepEqual([summary.messages, summary.replayed, summary.alreadyStarted, summary.failed, summary.kept], [2, 0, 1, 1, 1]);
    assert.match(c.out.join('\n'), new RegExp(`already started s3://${bucket}/${key} .*: ${executionNameFor(parseObjectCreatedEvent(lost))}`));
    assert.equal(c.err.length, 1, c.err.join('\n'));
    assert.match(c.err[0]!, /failed .*: the trigger failed: ConfigError: .*etag.*; kept in the queue$/);
    const kept = await deadLetters();
    assert.deepEqual(
      kept.map((m) => (JSON.parse(m.Body!) as { id: string }).id),
      ['no-etag'],
      'the failed one is kept, visible at once for the next replay',
    );
  });
});
