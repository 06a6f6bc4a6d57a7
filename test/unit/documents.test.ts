/**
 * Content-addressed documents in S3 (league, campaign, reward search): the key is the sha256 of
 * the canonical JSON, and a read refuses bytes that do not hash to their name.
 */
import { afterEach, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { mockClient } from 'aws-sdk-client-mock';
import { resetClients } from '#shared/clients/aws.ts';
import { readContentAddressed, writeContentAddressed } from '#shared/documents.ts';
import { canonicalJson, sha256Hex } from '#shared/json.ts';

const s3 = mockClient(S3Client);
const body = (bytes: string) => ({ Body: Readable.from([Buffer.from(bytes)]) as never });

describe('content-addressed documents', () => {
  beforeEach(() => {
    resetClients();
    s3.reset();
  });
  afterEach(() => resetClients());

  it('writes canonical JSON under its own hash, the same key for the same document', async () => {
    s3.on(PutObjectCommand).resolves({});
    const a = await writeContentAddressed('bucket', 'data/x/', { b: 1, a: [2, 3] });
    const b = await writeContentAddressed('bucket', 'data/x/', { a: [2, 3], b: 1 });
    const text = canonicalJson({ a: [2, 3], b: 1 });
    assert.equal(a.uri, `s3://bucket/data/x/${sha256Hex(text)}.json`);
    assert.equal(b.uri, a.uri);
    assert.equal(s3.commandCalls(PutObjectCommand)[0]!.args[0].input.Body, text);
  });

  it('reads a document that matches its name, and refuses one that does not or is not JSON', async () => {
    const text = canonicalJson({ generations: [] });
    const uri = `s3://bucket/data/rewards/search/${sha256Hex(text)}.json`;
    s3.on(GetObjectCommand).callsFake(() => body(text));
    assert.deepEqual(await readContentAddressed(uri, 'searchUri', 'search document'), { generations: [] });
    s3.on(GetObjectCommand).callsFake(() => body(canonicalJson({ generations: [], winner: 'forged' })));
    await assert.rejects(
      readContentAddressed(uri, 'searchUri', 'search document'),
      /^ConfigError: searchUri: the search document does not match the hash in its name \(got "s3:\/\/bucket/,
    );
    const broken = '{"generations": [';
    s3.on(GetObjectCommand).callsFake(() => body(broken));
    await assert.rejects(
      readContentAddressed(`s3://bucket/data/rewards/search/${sha256Hex(broken)}.json`, 'searchUri', 'search document'),
      /searchUri: is not JSON/,
    );
    // A name that is no hash (a document someone wrote by hand) is read as it is.
    s3.on(GetObjectCommand).callsFake(() => body('{"ok": true}'));
    assert.deepEqual(await readContentAddressed('s3://bucket/uploads/doc.json', 'docUri', 'document'), { ok: true });
  });
});
