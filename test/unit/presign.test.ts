/**
 * Presigned URLs for a sandboxed job, used over plain HTTP (as the job's stager does) against
 * the S3 emulator: the spec can be read and each declared output written, at exactly its key.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { startS3rver, type S3Emulator } from '#infra/local/emulators.ts';
import { LOCAL_KEY } from '#infra/local/resolve.ts';
import { resetClients, s3Client } from '#shared/clients/aws.ts';
import { presignJob } from '#shared/presign.ts';
import { handler as presignHandler } from '#functions/platform/presign-job/handler.ts';

describe('presigned URLs for a sandboxed job', () => {
  let work: string;
  let s3rver: S3Emulator;
  const saved = { ...process.env };
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'fp-presign-'));
    s3rver = await startS3rver(join(work, 's3'), 0);
    Object.assign(process.env, { AWS_ENDPOINT_URL_S3: s3rver.url, AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: LOCAL_KEY, AWS_SECRET_ACCESS_KEY: LOCAL_KEY });
    resetClients();
    await s3Client().send(new CreateBucketCommand({ Bucket: 'jobs' }));
    await s3Client().send(new PutObjectCommand({ Bucket: 'jobs', Key: 'runs/p/e/train/j1/spec.json', Body: '{"seed":1}' }));
  });
  after(async () => {
    await s3rver.close();
    process.env = saved;
    resetClients();
    rmSync(work, { recursive: true, force: true });
  });

  it('reads the spec and writes result.json and each declared output at its own key, by URL alone', async () => {
    const urls = await presignJob({
      specUri: 's3://jobs/runs/p/e/train/j1/spec.json',
      outputUri: 's3://jobs/runs/p/e/train/j1/output/',
      outputs: ['policy.json'],
      expiresSeconds: 3600,
    });
    assert.equal(await (await fetch(urls.specUrl)).text(), '{"seed":1}');
    const outputs = JSON.parse(urls.outputUrls) as Record<string, string>;
    assert.deepEqual(Object.keys(outputs).sort(), ['policy.json', 'result.json']);
    for (const [name, url] of Object.entries(outputs)) {
      assert.match(url, new RegExp(`/jobs/runs/p/e/train/j1/output/${name.replace('.', '\\.')}\\?`));
      assert.match(url, /X-Amz-Expires=3600/);
      // No checksum of the empty body the URL was signed with: S3 would compare it with the upload.
      assert.doesNotMatch(url, /x-amz-checksum|x-amz-sdk-checksum-algorithm/i);
      const put = await fetch(url, { method: 'PUT', body: `{"name":"${name}"}` });
      assert.equal(put.status, 200, await put.text());
      const stored = await s3Client().send(new GetObjectCommand({ Bucket: 'jobs', Key: `runs/p/e/train/j1/output/${name}` }));
      assert.equal(await stored.Body!.transformToString(), `{"name":"${name}"}`);
    }
    assert.ok(!urls.specUrl.includes(`${LOCAL_KEY}:`), 'no secret in the URL');
  });

  it('names a bad request field (the handler parses the request)', async () => {
    await assert.rejects(presignHandler({ specUri: 's3://jobs/a', outputUri: 's3://jobs/out', outputs: [], expiresSeconds: 3600 }), /presign\.outputUri/);
    await assert.rejects(
      presignHandler({ specUri: 's3://jobs/a', outputUri: 's3://jobs/out/', outputs: ['../x'], expiresSeconds: 3600 }),
      /presign\.outputs\.0/,
    );
    await assert.rejects(
      presignHandler({ specUri: 's3://jobs/a', outputUri: 's3://jobs/out/', outputs: [], expiresSeconds: 13 * 3600 }),
      /presign\.expiresSeconds/,
    );
  });
});
