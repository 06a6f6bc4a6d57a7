/**
 * The video package step's file limit: an artifact holds MAX_ARTIFACT_FILES files, one per kept
 * clip plus the manifest and the attribution. More kept clips are refused before anything is
 * written, naming curate and the count (S3 through aws-sdk-client-mock).
 */
import { afterEach, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { mockClient } from 'aws-sdk-client-mock';
import { resetClients } from '#shared/clients/aws.ts';
import { MAX_ARTIFACT_FILES } from '#shared/artifacts.ts';
import { MAX_PUBLISHED_CLIPS, packageStep } from '#shared/video/steps.ts';

const s3 = mockClient(S3Client);
const CURATED = 's3://bucket/runs/video/curated/doc.json';
const SOURCES = 's3://bucket/runs/video/sources/doc.json';

function curated(kept: number) {
  const clips = Array.from({ length: kept + 3 }, (_, i) => ({
    id: `c${i}`,
    sourceId: 's0',
    kept: i < kept,
    uri: `s3://bucket/clips/c${i}.mp4`,
    sha256: 'a'.repeat(64),
  }));
  return { format: 'video-curated-v1', sourcesUri: SOURCES, clips, funnel: { keptSeconds: kept * 5 } };
}

function serve(doc: unknown) {
  s3.on(GetObjectCommand).callsFake((input: { Key: string }) => {
    if (`s3://bucket/${input.Key}` === CURATED) return { Body: Readable.from([Buffer.from(JSON.stringify(doc))]) as never };
    throw Object.assign(new Error('The specified key does not exist.'), { name: 'NoSuchKey' });
  });
  s3.on(PutObjectCommand).resolves({});
}

const ctx = { bucket: 'bucket', pipeline: 'video' };
const request = { curatedUri: CURATED, captioner: 'none', model: 'none', height: 360 };

describe('video package step', () => {
  beforeEach(() => {
    resetClients();
    s3.reset();
  });
  afterEach(() => resetClients());

  it('refuses more kept clips than an artifact holds, naming curate and the count, writing nothing', async () => {
    assert.equal(MAX_PUBLISHED_CLIPS, MAX_ARTIFACT_FILES - 2);
    serve(curated(MAX_PUBLISHED_CLIPS + 1));
    await assert.rejects(packageStep(ctx, request), (error: Error) => {
      assert.match(error.message, /^curate: keeps more clips than an artifact holds: 9998 .*\(got 9999\)$/);
      return true;
    });
    assert.equal(s3.commandCalls(PutObjectCommand).length, 0);
  });

  it('takes exactly as many as it holds past the check', async () => {
    serve(curated(MAX_PUBLISHED_CLIPS));
    // Past the check the sources document is read; here it is missing, so that is the error.
    await assert.rejects(packageStep(ctx, request), /curated\.sourcesUri/);
    assert.equal(s3.commandCalls(PutObjectCommand).length, 0);
  });
});
