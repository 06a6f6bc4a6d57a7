/**
 * The S3 trigger end to end on the embedded runtime: an upload to the platform bucket makes
 * s3rver emit an object event, the runtime turns it into EventBridge's "Object Created" event,
 * matches the probe stack's rule on `uploads/probe/*\/manifest.json` and invokes the
 * trigger Lambda, which records the object in the ledger and starts the probe once per object.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { listExecutionRecords, type ExecutionRecord, type LocalRuntime } from '#infra/local/runtime.ts';
import { dynamoClient } from '#shared/clients/aws.ts';
import { eventKey } from '#shared/table.ts';
import { executionNameFor, parseObjectCreatedEvent } from '#shared/trigger.ts';
import { startTestRuntime, stopTestRuntime, within } from '../support/runtime.ts';

const MANIFEST_KEY = 'uploads/probe/run1/manifest.json';

let rt: LocalRuntime;
let bucket: string;
let s3: S3Client;

type ObjectCreated = Parameters<typeof parseObjectCreatedEvent>[0] & { detail: { object: { etag: string; size: number; 'version-id'?: string } } };

/**
 * Uploads as a user would (the real client, against s3rver), waits for every event delivery,
 * and returns the EventBridge event the upload produced (what a redelivery repeats).
 */
async function upload(key: string, body: string): Promise<ObjectCreated> {
  const events: ObjectCreated[] = [];
  const listener = (e: ObjectCreated) => events.push(e);
  rt.on('objectCreated', listener);
  try {
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentType: 'application/json' }));
    await within(rt.eventsSettled(), 30_000, `the deliveries of ${key}'s event`);
  } finally {
    rt.off('objectCreated', listener);
  }
  assert.equal(events.length, 1, `one event for ${key}`);
  return events[0]!;
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
    // The bucket is versioned (as on AWS): the object's identity carries its version id.
    assert.ok(first.detail.object['version-id'], 'a versioned bucket gives each PUT a version id');
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

  it('the same event delivered three more times starts nothing more', { timeout: 60_000 }, async () => {
    for (let i = 0; i < 3; i++) {
      const results = await rt.deliverEvent(first);
      assert.deepEqual(results, [{ started: false, duplicate: true, executionName: firstRun.name }], `redelivery ${i + 1}`);
    }
    // S3 may also announce one object twice under different event ids: the identity is the object's.
    const results = await rt.deliverEvent({ ...first, id: 'a-different-event-id' });
    assert.deepEqual(results, [{ started: false, duplicate: true, executionName: firstRun.name }]);
    await rt.eventsSettled();
    assert.deepEqual(
      triggeredRuns().map((r) => r.name),
      [firstRun.name],
    );
  });

  it('new content under the same key is a new object version and starts a second run', { timeout: 90_000 }, async () => {
    // The design names a run after key + version id (versioned bucket) or etag: a new PUT, a new identity.
    const second = await upload(MANIFEST_KEY, JSON.stringify({ step: 200, files: ['weights.bin'] }));
    assert.notEqual(second.detail.object.etag, first.detail.object.etag);
    const runs = triggeredRuns();
    assert.equal(runs.length, 2, `runs: ${runs.map((r) => r.name).join(', ')}`);
    const secondRun = runs.find((r) => r.name !== firstRun.name)!;
    assert.equal(secondRun.name, executionNameFor(parseObjectCreatedEvent(second)));
    const record = await finished(secondRun);
    assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
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
