import { beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { ExecutionAlreadyExists, SFNClient, SFNServiceException, StartExecutionCommand } from '@aws-sdk/client-sfn';
import { DeleteCommand, DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { ConfigError } from '#shared/errors.ts';
import { executionNameFor, LEDGER_RETENTION_SECONDS, ledgerKeyFor, parseObjectCreatedEvent, uploadIdOf } from '#shared/trigger.ts';

// The handler reads its environment at import time.
const STATE_MACHINE_ARN = 'arn:aws:states:us-east-1:123456789012:stateMachine:eval';
Object.assign(process.env, { TABLE_NAME: 'frontier-table', STATE_MACHINE_ARN, PIPELINE_NAME: 'eval' });

const ddb = mockClient(DynamoDBDocumentClient);
const sfn = mockClient(SFNClient);
const { handler } = await import('#functions/platform/trigger/handler.ts');

/** An S3 "Object Created" event as EventBridge delivers it (bucket with EventBridge enabled). */
const event = {
  version: '0',
  id: '17793124-05d4-b198-2fde-7ededc63b103',
  'detail-type': 'Object Created',
  source: 'aws.s3',
  account: '123456789012',
  time: '2027-01-15T12:00:00Z',
  region: 'us-east-1',
  resources: ['arn:aws:s3:::frontier-data'],
  detail: {
    version: '0',
    bucket: { name: 'frontier-data' },
    object: {
      key: 'checkpoints/run-7/train/step-000100/manifest.json',
      size: 5,
      etag: 'b1946ac92492d2347c6235b4d2611184',
      'version-id': 'IYV3p45BT0ac8hjHg1houSdS1a.Mro8e',
      sequencer: '00617F08299329D189',
    },
    'request-id': 'N4N7GDK58NMKJ12R',
    requester: '123456789012',
    'source-ip-address': '1.2.3.4',
    reason: 'PutObject',
  },
};

const EXECUTION_ARN = `arn:aws:states:us-east-1:123456789012:execution:eval:${executionNameFor(parseObjectCreatedEvent(event))}`;

beforeEach(() => {
  ddb.reset();
  sfn.reset();
  ddb.on(PutCommand).resolves({});
  ddb.on(DeleteCommand).resolves({});
  sfn.on(StartExecutionCommand).resolves({ executionArn: EXECUTION_ARN, startDate: new Date() });
});

/** The same event from a bucket without versioning: no version id, the sequencer names the upload. */
function unversioned(sequencer: string | undefined) {
  const { 'version-id': _version, ...object } = event.detail.object;
  return { ...event, detail: { ...event.detail, object: { ...object, sequencer } } };
}

describe('executionNameFor', () => {
  it('is a legal Step Functions name fixed by bucket, key and version', () => {
    const object = parseObjectCreatedEvent(event);
    const name = executionNameFor(object);
    assert.match(name, /^s3-[0-9a-f]{40}$/);
    assert.ok(name.length <= 80);
    assert.equal(executionNameFor(parseObjectCreatedEvent({ ...event, id: 'another-delivery', time: '2027-01-16T00:00:00Z' })), name);
    assert.notEqual(executionNameFor({ ...object, versionId: 'other-version' }), name);
    assert.notEqual(executionNameFor({ ...object, key: `${object.key}x` }), name);
    assert.notEqual(executionNameFor({ ...object, bucket: 'other-bucket' }), name);
  });

  it('keeps bucket/key boundaries apart', () => {
    const object = parseObjectCreatedEvent(event);
    assert.notEqual(executionNameFor({ ...object, bucket: 'a', key: 'b/c' }), executionNameFor({ ...object, bucket: 'a/b', key: 'c' }));
  });

  it('names every upload apart, never by content: a re-upload of the same bytes is another upload', () => {
    const object = parseObjectCreatedEvent(event);
    // A versioned bucket: each PUT a new version id, the same etag.
    const reupload = { ...object, versionId: 'another-version-same-bytes', sequencer: '00617F0829932A0000', eventId: 'e2' };
    assert.notEqual(executionNameFor(reupload), executionNameFor(object));
    assert.notDeepEqual(ledgerKeyFor(reupload), ledgerKeyFor(object));
    // An unversioned bucket: the same bytes again, another PUT, another sequencer.
    const first = parseObjectCreatedEvent(unversioned('00617F08299329D189'));
    const again = parseObjectCreatedEvent(unversioned('00617F0829932A0000'));
    assert.equal(first.etag, again.etag);
    assert.notEqual(executionNameFor(again), executionNameFor(first));
    assert.deepEqual(ledgerKeyFor(first), { pk: `EVENT#frontier-data#${first.key}#00617F08299329D189`, sk: 'EVENT' });
  });

  it('names an upload by its version id, whatever else a repeated or crafted event of it says', () => {
    const object = parseObjectCreatedEvent(event);
    const name = executionNameFor(object);
    const crafted = parseObjectCreatedEvent({
      ...event,
      id: 'crafted',
      time: '2030-01-01T00:00:00Z',
      detail: { ...event.detail, object: { ...event.detail.object, sequencer: '00FFFFFFFFFFFFFFFF', etag: 'ffff', size: 6 } },
    });
    assert.equal(uploadIdOf(object), event.detail.object['version-id']);
    assert.equal(executionNameFor(crafted), name);
    assert.deepEqual(ledgerKeyFor(crafted), ledgerKeyFor(object));
  });

  it('names an upload by its sequencer on an unversioned bucket and while versioning is suspended', () => {
    const plain = parseObjectCreatedEvent(unversioned('00617F08299329D189'));
    assert.equal(plain.versionId, null);
    assert.equal(uploadIdOf(plain), '00617F08299329D189');
    assert.equal(executionNameFor(parseObjectCreatedEvent({ ...unversioned('00617F08299329D189'), id: 'redelivered' })), executionNameFor(plain));
    // Suspended versioning writes every PUT as version "null": only the sequencer tells them apart.
    const suspended = (sequencer: string) =>
      parseObjectCreatedEvent({ ...event, detail: { ...event.detail, object: { ...event.detail.object, 'version-id': 'null', sequencer } } });
    assert.equal(uploadIdOf(suspended('00617F08299329D189')), '00617F08299329D189');
    assert.notEqual(executionNameFor(suspended('00617F08299329D189')), executionNameFor(suspended('00617F0829932A0000')));
  });
});

describe('trigger handler', () => {
  it('records the event and starts one execution under the derived name', async () => {
    const before = Math.floor(Date.now() / 1000);
    const result = await handler(event);
    const name = executionNameFor(parseObjectCreatedEvent(event));
    assert.deepEqual(result, { started: true, executionName: name, executionArn: EXECUTION_ARN });

    const put = ddb.commandCalls(PutCommand)[0]!.args[0].input;
    assert.equal(put.TableName, 'frontier-table');
    assert.equal(put.ConditionExpression, 'attribute_not_exists(pk)');
    assert.equal(put.Item?.pk, `EVENT#frontier-data#${event.detail.object.key}#${event.detail.object['version-id']}`);
    assert.equal(put.Item?.sk, 'EVENT');
    assert.equal(put.Item?.executionName, name);
    assert.equal(put.Item?.eventId, event.id);
    assert.ok(!Number.isNaN(Date.parse(put.Item?.receivedAt)));
    assert.ok(put.Item?.expiresAt >= before + LEDGER_RETENTION_SECONDS && put.Item?.expiresAt <= before + LEDGER_RETENTION_SECONDS + 1);
    assert.equal(LEDGER_RETENTION_SECONDS, 100 * 86400);

    const starts = sfn.commandCalls(StartExecutionCommand);
    assert.equal(starts.length, 1);
    const start = starts[0]!.args[0].input;
    assert.equal(start.stateMachineArn, STATE_MACHINE_ARN);
    assert.equal(start.name, name);
    assert.deepEqual(JSON.parse(start.input!), {
      trigger: {
        bucket: 'frontier-data',
        key: event.detail.object.key,
        etag: event.detail.object.etag,
        versionId: event.detail.object['version-id'],
        size: 5,
      },
    });
    assert.equal(ddb.commandCalls(DeleteCommand).length, 0);
  });

  it('keys the ledger by the sequencer and passes a null version id on an unversioned bucket', async () => {
    await handler(unversioned('00617F08299329D189'));
    const put = ddb.commandCalls(PutCommand)[0]!.args[0].input;
    assert.equal(put.Item?.pk, `EVENT#frontier-data#${event.detail.object.key}#00617F08299329D189`);
    assert.equal(put.Item?.sequencer, '00617F08299329D189');
    assert.equal(put.Item?.etag, event.detail.object.etag);
    const start = sfn.commandCalls(StartExecutionCommand)[0]!.args[0].input;
    assert.equal(JSON.parse(start.input!).trigger.versionId, null);
  });

  it('gives every delivery of one object the same execution input', async () => {
    // S3 may announce one object twice under different event ids and times; Step Functions
    // returns the running execution for a repeated start only when the input is identical.
    await handler(event);
    await handler({ ...event, id: 'a-different-event-id', time: '2027-01-15T12:00:07Z' });
    const [first, second] = sfn.commandCalls(StartExecutionCommand).map((call) => call.args[0].input);
    assert.equal(second!.name, first!.name);
    assert.equal(second!.input, first!.input);
  });

  it('starts the run on a redelivery after the first delivery recorded the object but lost its start', async () => {
    ddb.on(PutCommand).rejects(new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} }));
    const result = await handler(event);
    const name = executionNameFor(parseObjectCreatedEvent(event));
    assert.deepEqual(result, { started: true, duplicate: true, executionName: name, executionArn: EXECUTION_ARN });
    const starts = sfn.commandCalls(StartExecutionCommand);
    assert.equal(starts.length, 1);
    assert.equal(starts[0]!.args[0].input.name, name);
    assert.equal(ddb.commandCalls(DeleteCommand).length, 0);
  });

  it('returns the running execution on a redelivery while the run is still running, without a second run', async () => {
    // First delivery: recorded and started.
    const first = await handler(event);
    assert.equal(first.started, true);
    // Redelivery: the ledger refuses, and Step Functions answers the same name and input for a
    // RUNNING execution with that execution (the mock answers as AWS does: success, same ARN).
    ddb.on(PutCommand).rejects(new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} }));
    const again = await handler({ ...event, id: 'redelivered' });
    assert.deepEqual(again, { started: true, duplicate: true, executionName: first.executionName, executionArn: EXECUTION_ARN });
    const starts = sfn.commandCalls(StartExecutionCommand).map((call) => call.args[0].input);
    assert.equal(starts.length, 2);
    assert.deepEqual(starts[1], starts[0], 'the same name and the same input, so AWS cannot start a second run');
    assert.equal(ddb.commandCalls(DeleteCommand).length, 0);
  });

  it('reports a duplicate on a redelivery after the run has finished', async () => {
    ddb.on(PutCommand).rejects(new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} }));
    sfn.on(StartExecutionCommand).rejects(new ExecutionAlreadyExists({ message: 'Execution Already Exists', $metadata: {} }));
    const result = await handler(event);
    assert.deepEqual(result, { started: false, duplicate: true, executionName: executionNameFor(parseObjectCreatedEvent(event)) });
    assert.equal(sfn.commandCalls(StartExecutionCommand).length, 1);
    assert.equal(ddb.commandCalls(DeleteCommand).length, 0);
  });

  it("rethrows a start failure on a redelivery and keeps the earlier delivery's ledger entry", async () => {
    ddb.on(PutCommand).rejects(new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} }));
    const failure = new SFNServiceException({ name: 'ServiceUnavailable', $fault: 'server', message: 'try later', $metadata: {} });
    sfn.on(StartExecutionCommand).rejects(failure);
    await assert.rejects(handler(event), (error: unknown) => error === failure);
    assert.equal(ddb.commandCalls(DeleteCommand).length, 0);
  });

  it('treats ExecutionAlreadyExists as a duplicate and keeps the ledger entry', async () => {
    sfn.on(StartExecutionCommand).rejects(new ExecutionAlreadyExists({ message: 'Execution Already Exists', $metadata: {} }));
    const result = await handler(event);
    assert.deepEqual(result, { started: false, duplicate: true, executionName: executionNameFor(parseObjectCreatedEvent(event)) });
    assert.equal(ddb.commandCalls(DeleteCommand).length, 0);
  });

  it('removes the ledger entry and rethrows when the start fails otherwise', async () => {
    const failure = new SFNServiceException({ name: 'ServiceUnavailable', $fault: 'server', message: 'try later', $metadata: {} });
    sfn.on(StartExecutionCommand).rejects(failure);
    await assert.rejects(handler(event), (error: unknown) => error === failure);
    const deletes = ddb.commandCalls(DeleteCommand);
    assert.equal(deletes.length, 1);
    assert.deepEqual(deletes[0]!.args[0].input, {
      TableName: 'frontier-table',
      Key: { pk: `EVENT#frontier-data#${event.detail.object.key}#${event.detail.object['version-id']}`, sk: 'EVENT' },
    });
  });

  it('rethrows the start error even when removing the ledger entry fails too', async () => {
    const failure = new SFNServiceException({ name: 'ServiceUnavailable', $fault: 'server', message: 'try later', $metadata: {} });
    sfn.on(StartExecutionCommand).rejects(failure);
    ddb.on(DeleteCommand).rejects(new Error('table unavailable'));
    await assert.rejects(handler(event), (error: unknown) => error === failure);
  });

  it('rethrows a ledger write failure other than a duplicate, without starting', async () => {
    ddb.on(PutCommand).rejects(new Error('ProvisionedThroughputExceeded'));
    await assert.rejects(handler(event), /ProvisionedThroughputExceeded/);
    assert.equal(sfn.commandCalls(StartExecutionCommand).length, 0);
  });

  it('rejects malformed events with an error naming the field, before any call', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ ...event, detail: { ...event.detail, object: { ...event.detail.object, key: undefined } } }, /event\.detail\.object\.key/],
      [{ ...event, detail: { ...event.detail, object: { ...event.detail.object, size: '5' } } }, /event\.detail\.object\.size.*"5"/],
      [{ ...event, detail: { ...event.detail, bucket: {} } }, /event\.detail\.bucket\.name/],
      [{ ...event, 'detail-type': 'Object Deleted' }, /event\.detail-type.*"Object Deleted"/],
      [{ ...event, id: undefined }, /event\.id/],
      // Nothing tells this upload from another of the same key: no version id, no sequencer.
      [unversioned(undefined), /event\.detail\.object\.sequencer: is required/],
      [
        { ...event, detail: { ...event.detail, object: { ...event.detail.object, 'version-id': 'null', sequencer: undefined } } },
        /event\.detail\.object\.sequencer/,
      ],
      [unversioned('not-hex'), /event\.detail\.object\.sequencer: must be hexadecimal.*"not-hex"/],
      [{ Records: [] }, /event\.(id|time|detail)/],
    ];
    for (const [bad, message] of cases) {
      await assert.rejects(handler(bad), (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.match(error.message, message);
        return true;
      });
    }
    assert.equal(ddb.calls().length, 0);
    assert.equal(sfn.calls().length, 0);
  });
});
