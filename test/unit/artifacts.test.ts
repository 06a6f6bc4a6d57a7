import { beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { CopyObjectCommand, GetObjectCommand, PutObjectCommand, S3Client, type GetObjectCommandOutput } from '@aws-sdk/client-s3';
import { DynamoDBDocumentClient, GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { copySource, getArtifactVersion, listArtifactVersions, publishArtifact } from '#shared/artifacts.ts';
import { ArtifactVersionExists, NotFoundError } from '#shared/errors.ts';

const s3 = mockClient(S3Client);
const ddb = mockClient(DynamoDBDocumentClient);

const where = { table: 'frontier-table', bucket: 'frontier-data' };
const BODY = Buffer.from('weights: 0.5, 0.25\n');
const BODY_SHA256 = createHash('sha256').update(BODY).digest('hex');
/** A real-looking S3 version id: they may hold `+`, `/` and `.`. */
const VERSION_ID = '3/L4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY+MTRCxf3vjVBH40Nr8X8gdRQBpUMLUo';
/** Every character that encodeURI leaves alone but S3 would misread in CopySource, plus a space. */
const AWKWARD_KEY = 'runs/train/exec?1#2/step+100&final copy.bin';

const getObject = (versionId?: string) => ({
  Body: Readable.from([BODY]) as unknown as GetObjectCommandOutput['Body'],
  ...(versionId ? { VersionId: versionId } : {}),
});

function request(overrides: Record<string, unknown> = {}) {
  return {
    name: 'policy',
    pipeline: 'rlhf',
    executionId: 'arn:aws:states:us-east-1:123456789012:execution:rlhf:run-1',
    files: [{ uri: `s3://source-bucket/${AWKWARD_KEY}`, name: 'weights.bin' }],
    metrics: { winRate: 0.62 },
    ...overrides,
  };
}

const versionItem = (version: number) => ({
  pk: 'ARTIFACT#policy',
  sk: `V#${String(version).padStart(12, '0')}`,
  name: 'policy',
  version,
  uri: `s3://frontier-data/artifacts/policy/${String(version).padStart(12, '0')}/`,
});

beforeEach(() => {
  s3.reset();
  ddb.reset();
  s3.on(GetObjectCommand).callsFake(() => getObject());
  s3.on(CopyObjectCommand).resolves({});
  s3.on(PutObjectCommand).resolves({});
  ddb.on(UpdateCommand).resolves({ Attributes: { lastVersion: 3 } });
  ddb.on(PutCommand).resolves({});
});

describe('copySource', () => {
  it('encodes each key segment and keeps the slashes', () => {
    assert.equal(copySource({ Bucket: 'source-bucket', Key: AWKWARD_KEY }), 'source-bucket/runs/train/exec%3F1%232/step%2B100%26final%20copy.bin');
  });

  it('pins a version with an encoded versionId query', () => {
    assert.equal(copySource({ Bucket: 'b', Key: 'a/b.bin' }, VERSION_ID), `b/a/b.bin?versionId=${encodeURIComponent(VERSION_ID)}`);
    assert.match(copySource({ Bucket: 'b', Key: 'a/b.bin' }, VERSION_ID), /\?versionId=3%2FL4kq.*%2BrmSp/);
  });
});

describe('publishArtifact', () => {
  it('copies a key with ? # + & and spaces under an encoded CopySource, and indexes the version', async () => {
    const artifact = await publishArtifact(request(), where);

    const get = s3.commandCalls(GetObjectCommand)[0]!.args[0].input;
    assert.deepEqual(get, { Bucket: 'source-bucket', Key: AWKWARD_KEY }, 'the GET takes the raw key: the SDK encodes its path');
    const copies = s3.commandCalls(CopyObjectCommand);
    assert.equal(copies.length, 1);
    assert.deepEqual(copies[0]!.args[0].input, {
      Bucket: 'frontier-data',
      Key: 'artifacts/policy/000000000003/weights.bin',
      // No version id from the GET (an unversioned bucket): nothing to pin.
      CopySource: 'source-bucket/runs/train/exec%3F1%232/step%2B100%26final%20copy.bin',
    });

    assert.equal(artifact.version, 3);
    assert.deepEqual(artifact.files, [
      { name: 'weights.bin', uri: 's3://frontier-data/artifacts/policy/000000000003/weights.bin', sha256: BODY_SHA256, bytes: BODY.length },
    ]);
    const manifest = s3.commandCalls(PutObjectCommand)[0]!.args[0].input;
    assert.equal(manifest.Key, 'artifacts/policy/000000000003/manifest.json');
    const [versionPut, directoryPut] = ddb.commandCalls(PutCommand).map((call) => call.args[0].input);
    assert.equal(versionPut!.Item?.sk, 'V#000000000003');
    assert.equal(versionPut!.ConditionExpression, 'attribute_not_exists(pk)');
    assert.deepEqual(directoryPut!.Item?.latestVersion, 3);
  });

  it('pins the copy to the object version that was hashed', async () => {
    s3.on(GetObjectCommand).callsFake(() => getObject(VERSION_ID));
    await publishArtifact(request({ files: [{ uri: 's3://source-bucket/checkpoints/run-7/weights.bin', name: 'weights.bin' }] }), where);
    const copy = s3.commandCalls(CopyObjectCommand)[0]!.args[0].input;
    assert.equal(copy.CopySource, `source-bucket/checkpoints/run-7/weights.bin?versionId=${encodeURIComponent(VERSION_ID)}`);
  });

  it('raises ArtifactVersionExists when the conditional put finds the version taken', async () => {
    ddb.on(PutCommand).rejects(new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} }));
    await assert.rejects(publishArtifact(request(), where), (error: unknown) => {
      assert.ok(error instanceof ArtifactVersionExists, String(error));
      assert.equal(error.name, 'ArtifactVersionExists');
      assert.match(error.message, /policy version 3/);
      return true;
    });
    assert.equal(ddb.commandCalls(PutCommand).length, 1, 'the directory is not moved to a version that was not written');
  });

  it('rethrows any other index write failure unchanged', async () => {
    const failure = new Error('ProvisionedThroughputExceeded');
    ddb.on(PutCommand).rejects(failure);
    await assert.rejects(publishArtifact(request(), where), (error: unknown) => error === failure);
  });

  it('refuses a lineage reference to a missing version before copying or writing anything', async () => {
    ddb.on(GetCommand).resolves({});
    await assert.rejects(publishArtifact(request({ lineage: [{ name: 'reward-model', version: 9 }] }), where), (error: unknown) => {
      assert.ok(error instanceof NotFoundError, String(error));
      assert.match(error.message, /"reward-model" has no version 9/);
      return true;
    });
    const get = ddb.commandCalls(GetCommand)[0]!.args[0].input;
    assert.deepEqual(get.Key, { pk: 'ARTIFACT#reward-model', sk: 'V#000000000009' });
    assert.equal(s3.calls().length, 0, 'nothing read, copied or written in S3');
    assert.equal(ddb.commandCalls(UpdateCommand).length, 0, 'no version number taken');
    assert.equal(ddb.commandCalls(PutCommand).length, 0, 'nothing indexed');
  });
});

describe('listArtifactVersions', () => {
  it('follows LastEvaluatedKey through every page, newest first, without the table keys', async () => {
    const lastKey = { pk: 'ARTIFACT#policy', sk: 'V#000000000002' };
    ddb
      .on(QueryCommand)
      .resolvesOnce({ Items: [versionItem(3), versionItem(2)], LastEvaluatedKey: lastKey })
      .resolvesOnce({ Items: [versionItem(1)] });

    const versions = await listArtifactVersions(where, 'policy');

    assert.deepEqual(
      versions.map((v) => v.version),
      [3, 2, 1],
    );
    assert.ok(versions.every((v) => !('pk' in v) && !('sk' in v)));
    const queries = ddb.commandCalls(QueryCommand).map((call) => call.args[0].input);
    assert.equal(queries.length, 2);
    assert.equal(queries[0]!.ExclusiveStartKey, undefined);
    assert.deepEqual(queries[1]!.ExclusiveStartKey, lastKey);
    for (const query of queries) {
      assert.equal(query.ScanIndexForward, false);
      assert.deepEqual(query.ExpressionAttributeValues, { ':pk': 'ARTIFACT#policy', ':v': 'V#' });
    }
  });
});

describe('getArtifactVersion', () => {
  it('reads the latest with one newest-first item, not every version', async () => {
    ddb.on(QueryCommand).resolves({ Items: [versionItem(7)], LastEvaluatedKey: { pk: 'ARTIFACT#policy', sk: 'V#000000000007' } });
    const latest = await getArtifactVersion(where, 'policy');
    assert.equal(latest.version, 7);
    const queries = ddb.commandCalls(QueryCommand);
    assert.equal(queries.length, 1, 'one query, even though more pages exist');
    const query = queries[0]!.args[0].input;
    assert.equal(query.Limit, 1);
    assert.equal(query.ScanIndexForward, false);
    assert.equal(query.KeyConditionExpression, 'pk = :pk AND begins_with(sk, :v)');
  });

  it('raises NotFoundError for an artifact with no versions', async () => {
    ddb.on(QueryCommand).resolves({ Items: [] });
    await assert.rejects(getArtifactVersion(where, 'nothing'), (error: unknown) => {
      assert.ok(error instanceof NotFoundError, String(error));
      assert.match(error.message, /"nothing" has no versions/);
      return true;
    });
  });

  it('reads a numbered version by its key', async () => {
    ddb.on(GetCommand).resolves({ Item: versionItem(2) });
    const v2 = await getArtifactVersion(where, 'policy', 2);
    assert.equal(v2.version, 2);
    assert.ok(!('pk' in v2));
    assert.deepEqual(ddb.commandCalls(GetCommand)[0]!.args[0].input, { TableName: 'frontier-table', Key: { pk: 'ARTIFACT#policy', sk: 'V#000000000002' } });
  });
});

describe('publishArtifact with a files document', () => {
  const body = (text: string) => ({
    Body: Object.assign(Readable.from([Buffer.from(text)]), { transformToString: async () => text }) as unknown as GetObjectCommandOutput['Body'],
  });
  const clips = Array.from({ length: 2_000 }, (_, i) => ({ uri: `s3://frontier-data/runs/video/clips/c${i}.mp4`, name: `c${String(i).padStart(4, '0')}.mp4` }));

  it('reads the list from S3, copies every file, and keeps a long list out of the index item', async () => {
    s3.on(GetObjectCommand, { Bucket: 'frontier-data', Key: 'data/video/files.json' }).callsFake(() => body(JSON.stringify(clips)));
    const artifact = await publishArtifact({ ...request(), files: undefined, filesUri: 's3://frontier-data/data/video/files.json' }, where);
    assert.equal(artifact.files.length, 2_000);
    assert.equal(s3.commandCalls(CopyObjectCommand).length, 2_000);
    assert.equal(artifact.files[1_999]!.uri, 's3://frontier-data/artifacts/policy/000000000003/c1999.mp4');
    const manifest = JSON.parse(String(s3.commandCalls(PutObjectCommand)[0]!.args[0].input.Body));
    assert.equal(manifest.files.length, 2_000, 'the manifest holds every file');
    const item = ddb.commandCalls(PutCommand)[0]!.args[0].input.Item!;
    assert.deepEqual(item.files, []);
    assert.equal(item.filesInManifest, true);
    assert.ok(JSON.stringify(item).length < 10_000, 'the index item stays small');
  });

  it('a read of such a version fills its files in from manifest.json', async () => {
    const files = clips.slice(0, 3).map((c) => ({ name: c.name, uri: c.uri, sha256: BODY_SHA256, bytes: 1 }));
    ddb.on(GetCommand).resolves({ Item: { ...versionItem(4), files: [], filesInManifest: true } });
    s3.on(GetObjectCommand, { Bucket: 'frontier-data', Key: 'artifacts/policy/000000000004/manifest.json' }).callsFake(() => body(JSON.stringify({ files })));
    const v4 = await getArtifactVersion(where, 'policy', 4);
    assert.deepEqual(v4.files, files);
  });

  it('names the files document and the entry when the list is bad, before copying anything', async () => {
    s3.on(GetObjectCommand, { Bucket: 'frontier-data', Key: 'data/video/dup.json' }).callsFake(() =>
      body(JSON.stringify([clips[0], { ...clips[1], name: clips[0]!.name }])),
    );
    await assert.rejects(
      publishArtifact({ ...request(), files: undefined, filesUri: 's3://frontier-data/data/video/dup.json' }, where),
      /filesUri\[1\.name\]: .*appears twice/,
    );
    s3.on(GetObjectCommand, { Bucket: 'frontier-data', Key: 'data/video/bad.json' }).callsFake(() => body('not json'));
    await assert.rejects(
      publishArtifact({ ...request(), files: undefined, filesUri: 's3://frontier-data/data/video/bad.json' }, where),
      /filesUri: is not a JSON document/,
    );
    await assert.rejects(
      publishArtifact({ ...request(), filesUri: 's3://frontier-data/data/video/bad.json' }, where),
      /give exactly one of files and filesUri/,
    );
    assert.equal(s3.commandCalls(CopyObjectCommand).length, 0);
    assert.equal(ddb.commandCalls(UpdateCommand).length, 0, 'no version number taken');
  });
});
