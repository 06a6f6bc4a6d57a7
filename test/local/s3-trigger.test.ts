/**
 * The S3 trigger end to end on the embedded runtime: an upload to the platform bucket makes
 * s3rver emit an object event, the runtime turns it into EventBridge's "Object Created" event,
 * matches the probe stack's rule on `checkpoints/probe/*\/manifest.json` and invokes the
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

const MANIFEST_KEY = 'checkpoints/probe/run1/manifest.json';

let rt: LocalRuntime;
let bucket: string;
let s3: S3Client;

/** Uploads as a user would (the real client, against s3rver), then waits for every event delivery. */
async function upload(key: string, body: string): Promise<{ etag: string; size: number }> {
  const put = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentType: 'application/json' }));
  // s3rver emits the object event before it answers the PUT, so the delivery is already under way.
  await within(rt.eventsSettled(), 30_000, `the deliveries of ${key}'s event`);
  return { etag: String(put.ETag).replace(/"/g, ''), size: Buffer.byteLength(body) };
}

/** The event EventBridge delivers for an object (a redelivery carries the same id). */
function objectCreatedEvent(key: string, object: { etag: string; size: number }, id = '6e6b3a3e-2b1f-4e5a-9c61-0d6f2f5e9a01') {
  return {
    version: '0',
    id,
    'detail-type': 'Object Created',
    source: 'aws.s3',
    account: '000000000000',
    time: new Date().toISOString(),
    region: 'us-east-1',
    resources: [`arn:aws:s3:::${bucket}`],
    detail: {
      version: '0',
      bucket: { name: bucket },
      object: { key, size: object.size, etag: object.etag, sequencer: '0000000000000000' },
      'request-id': 'LOCALTEST',
      requester: '000000000000',
      reason: 'PutObject',
    },
  };
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
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
  });
});

after(async () => {
  s3?.destroy();
  await stopTestRuntime(rt);
});

describe('S3 trigger on the probe pipeline', () => {
  let first: { etag: string; size: number };
  let firstRun: ExecutionRecord;

  it('an uploaded manifest starts exactly one run, named after the object, which succeeds', { timeout: 90_000 }, async () => {
    first = await upload(MANIFEST_KEY, JSON.stringify({ step: 100, files: ['weights.bin'] }));
    const runs = triggeredRuns();
    assert.equal(runs.length, 1, `runs: ${runs.map((r) => r.name).join(', ')}`);
    firstRun = runs[0]!;
    const expectedName = executionNameFor(parseObjectCreatedEvent(objectCreatedEvent(MANIFEST_KEY, first)));
    assert.equal(firstRun.name, expectedName);
    assert.equal(listExecutionRecords(rt.dataDir).length, 1, 'nothing else started');

    const { Item: ledger } = await dynamoClient().send(
      new GetCommand({ TableName: rt.resources.tables[0]!, Key: eventKey(bucket, MANIFEST_KEY, first.etag), ConsistentRead: true }),
    );
    assert.equal(ledger?.executionName, expectedName, 'the ledger records the object and the run it started');

    const record = await finished(firstRun);
    assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
    assert.deepEqual((record.input as { trigger: unknown }).trigger, {
      bucket, key: MANIFEST_KEY, etag: first.etag, versionId: null, size: first.size, eventTime: (record.input as { trigger: { eventTime: string } }).trigger.eventTime,
    });
    assert.equal((record.output as { total: number }).total, 14, 'the default config squares and sums [1, 2, 3]');
  });

  it('the same event delivered three more times starts nothing more', { timeout: 60_000 }, async () => {
    const event = objectCreatedEvent(MANIFEST_KEY, first);
    for (let i = 0; i < 3; i++) {
      const results = await rt.deliverEvent(event);
      assert.deepEqual(results, [{ started: false, duplicate: true, executionName: firstRun.name }], `redelivery ${i + 1}`);
    }
    // S3 may also announce one object twice under different event ids: the identity is the object's.
    const results = await rt.deliverEvent(objectCreatedEvent(MANIFEST_KEY, first, 'a-different-event-id'));
    assert.deepEqual(results, [{ started: false, duplicate: true, executionName: firstRun.name }]);
    await rt.eventsSettled();
    assert.deepEqual(triggeredRuns().map((r) => r.name), [firstRun.name]);
  });

  it('new content under the same key is a new object and starts a second run', { timeout: 90_000 }, async () => {
    // The design names a run after key + version id (versioned bucket) or etag: new bytes, new identity.
    const second = await upload(MANIFEST_KEY, JSON.stringify({ step: 200, files: ['weights.bin'] }));
    assert.notEqual(second.etag, first.etag);
    const runs = triggeredRuns();
    assert.equal(runs.length, 2, `runs: ${runs.map((r) => r.name).join(', ')}`);
    const secondRun = runs.find((r) => r.name !== firstRun.name)!;
    assert.equal(secondRun.name, executionNameFor(parseObjectCreatedEvent(objectCreatedEvent(MANIFEST_KEY, second))));
    const record = await finished(secondRun);
    assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
  });

  it('a key the rule does not match starts nothing', { timeout: 30_000 }, async () => {
    const before = listExecutionRecords(rt.dataDir).length;
    const weights = await upload('checkpoints/probe/run1/weights.bin', 'not a manifest');
    // Near misses: another pipeline's checkpoint manifest, a copy of a manifest under another name.
    await upload('checkpoints/other/run1/manifest.json', '{}');
    await upload('checkpoints/probe/run1/extra/manifest.json.bak', '{}');
    assert.equal(listExecutionRecords(rt.dataDir).length, before);
    // The rule itself does not match: the event reaches no target.
    assert.deepEqual(await rt.deliverEvent(objectCreatedEvent('checkpoints/probe/run1/weights.bin', weights)), []);
    assert.equal(listExecutionRecords(rt.dataDir).length, before);
  });
});
