/**
 * Presigned URLs for a sandboxed job, used over plain HTTP (as the job's stager does) against
 * the S3 emulator: the staging document is read by its one URL, the spec through it, and each
 * declared output written at exactly its key. (What the container's overrides come to with a
 * realistic session token: test/constructs/rewards-stack.test.ts.)
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
import { presignJob, StagingDocument } from '#shared/presign.ts';
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

  it('reads the staging document and the spec, and writes result.json and each declared output at its own key, by URL alone', async () => {
    const { stagingUrl } = await presignJob({
      specUri: 's3://jobs/runs/p/e/train/j1/spec.json',
      outputUri: 's3://jobs/runs/p/e/train/j1/output/',
      outputs: ['policy.json'],
      expiresSeconds: 3600,
      stagingExpiresSeconds: 600,
    });
    // The document lies next to the spec, and its own URL lasts only until the job starts.
    assert.match(stagingUrl, /\/jobs\/runs\/p\/e\/train\/j1\/staging\.json\?/);
    assert.match(stagingUrl, /X-Amz-Expires=600&/);
    const document = StagingDocument.parse(await (await fetch(stagingUrl)).json());
    assert.match(document.specUrl, /X-Amz-Expires=600&/);
    assert.equal(await (await fetch(document.specUrl)).text(), '{"seed":1}');
    assert.deepEqual(Object.keys(document.outputUrls).sort(), ['policy.json', 'result.json']);
    for (const [name, url] of Object.entries(document.outputUrls)) {
      assert.match(url, new RegExp(`/jobs/runs/p/e/train/j1/output/${name.replace('.', '\\.')}\\?`));
      assert.match(url, /X-Amz-Expires=3600/);
      // No checksum of the empty body the URL was signed with: S3 would compare it with the upload.
      assert.doesNotMatch(url, /x-amz-checksum|x-amz-sdk-checksum-algorithm/i);
      const put = await fetch(url, { method: 'PUT', body: `{"name":"${name}"}` });
      assert.equal(put.status, 200, await put.text());
      const stored = await s3Client().send(new GetObjectCommand({ Bucket: 'jobs', Key: `runs/p/e/train/j1/output/${name}` }));
      assert.equal(await stored.Body!.transformToString(), `{"name":"${name}"}`);
    }
    assert.ok(!stagingUrl.includes(`${LOCAL_KEY}:`), 'no secret in the URL');
  });

  it('names a bad request field (the handler parses the request)', async () => {
    const request = { specUri: 's3://jobs/a', outputUri: 's3://jobs/out/', outputs: [], expiresSeconds: 3600, stagingExpiresSeconds: 600 };
    await assert.rejects(presignHandler({ ...request, outputUri: 's3://jobs/out' }), /presign\.outputUri/);
    await assert.rejects(presignHandler({ ...request, outputs: ['../x'] }), /presign\.outputs\.0/);
    await assert.rejects(presignHandler({ ...request, expiresSeconds: 13 * 3600 }), /presign\.expiresSeconds/);
    await assert.rejects(presignHandler({ ...request, stagingExpiresSeconds: 7200 }), /presign\.stagingExpiresSeconds: must not exceed expiresSeconds/);
    await assert.rejects(presignHandler({ ...request, specUri: 's3://jobs/runs/j1/staging.json' }), /presign\.specUri: must not be named staging\.json/);
    await assert.rejects(
      presignHandler({ ...request, specUri: 's3://jobs/runs/j1/spec.json', outputUri: 's3://jobs/runs/j1/', outputs: ['staging.json'] }),
      /presign\.outputUri: must not hold the staging document/,
    );
  });
});
