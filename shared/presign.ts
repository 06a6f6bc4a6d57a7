/**
 * Presigned URLs for a sandboxed job, which holds no AWS credentials: one GET for its spec and
 * one PUT per declared output, each for exactly that key under the job's own output prefix.
 *
 * The URLs travel in a staging document (staging.json, written next to the spec), and the job is
 * given one presigned GET of that document (the JOB_STAGING_URL variable). Each URL signed with a
 * Lambda's temporary credentials carries their session token (900-2,000 characters on AWS), and
 * Batch refuses container overrides over 8,192 characters: the reward trainer's spec URL and
 * three output URLs as variables came to 8,613 characters with a 1,300-character token (11,517
 * with 2,000); with the one URL they come to 3,285 with a 2,000-character token.
 *
 * Expiry: the document's GET and the spec's GET are used once, as the container starts, so they
 * last `stagingExpiresSeconds` (the queue wait); the output PUTs last `expiresSeconds` (the queue
 * wait and the job's run). A URL signed with a Lambda's temporary credentials stops working when
 * they expire, whatever its own expiry: the expiry asked for is capped at 12 hours, and a job that
 * waits in its queue longer than the URLs live fails to hand back its outputs (and is retried by
 * the step like any failure).
 */
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { z } from 'zod';
import { s3Client, s3PresignClient } from './clients/aws.ts';
import { ConfigError } from './errors.ts';
import { parseS3Uri, s3Uri } from './s3uri.ts';

export const MAX_PRESIGN_SECONDS = 12 * 3600;

/** The container variable that carries the staging document's presigned GET. */
export const STAGING_URL_VARIABLE = 'JOB_STAGING_URL';

/** The staging document's file name, next to the spec. */
export const STAGING_DOCUMENT_NAME = 'staging.json';

const OutputName = z
  .string()
  .regex(/^[\w.-]{1,100}$/)
  .refine((n) => !n.startsWith('.'), 'must not start with a dot');

export const PresignRequest = z
  .object({
    specUri: z.string(),
    /** The job's output prefix (ends with "/"). */
    outputUri: z.string().endsWith('/'),
    /** Output file names besides result.json. */
    outputs: z.array(OutputName).max(20),
    /** How long the output PUTs last: the queue wait and the job's run. */
    expiresSeconds: z.int().min(60).max(MAX_PRESIGN_SECONDS),
    /** How long the staging document's GET and the spec's GET last: until the job has started. */
    stagingExpiresSeconds: z.int().min(60).max(MAX_PRESIGN_SECONDS),
  })
  .strict()
  .refine((r) => r.stagingExpiresSeconds <= r.expiresSeconds, {
    path: ['stagingExpiresSeconds'],
    message: 'must not exceed expiresSeconds (the staging URLs are used before any output is written)',
  });

export type PresignRequest = z.infer<typeof PresignRequest>;

/** What the staging document holds: the spec's presigned GET, and each output's presigned PUT. */
export const StagingDocument = z
  .object({
    specUrl: z.url(),
    outputUrls: z.record(OutputName, z.url()).refine((urls) => 'result.json' in urls, 'must hold result.json'),
  })
  .strict();

export type StagingDocument = z.infer<typeof StagingDocument>;

/**
 * Writes the staging document for a request its handler parsed (root `presign`, which the URI
 * errors name too) and returns the document's presigned GET. The document goes to S3, never into
 * the state: only `stagingUrl` (one URL) travels in the state and the container's overrides.
 */
export async function presignJob(request: PresignRequest): Promise<{ stagingUrl: string }> {
  const spec = parseS3Uri(request.specUri, 'presign.specUri');
  const output = parseS3Uri(request.outputUri, 'presign.outputUri');
  const specName = spec.Key.slice(spec.Key.lastIndexOf('/') + 1);
  if (specName === STAGING_DOCUMENT_NAME) {
    throw new ConfigError('presign.specUri', request.specUri, `must not be named ${STAGING_DOCUMENT_NAME}: the staging document is written next to the spec`);
  }
  const staging = { Bucket: spec.Bucket, Key: `${spec.Key.slice(0, spec.Key.length - specName.length)}${STAGING_DOCUMENT_NAME}` };
  const names = [...new Set(['result.json', ...request.outputs])];
  // The job may write each output: none of them may be its own staging document.
  if (output.Bucket === staging.Bucket && names.some((name) => `${output.Key}${name}` === staging.Key)) {
    throw new ConfigError('presign.outputUri', request.outputUri, `must not hold the staging document ${s3Uri(staging)}, which the job could then overwrite`);
  }
  const startsIn = { expiresIn: request.stagingExpiresSeconds };
  const runsIn = { expiresIn: request.expiresSeconds };
  const document: StagingDocument = {
    specUrl: await getSignedUrl(s3PresignClient(), new GetObjectCommand(spec), startsIn),
    outputUrls: {},
  };
  for (const name of names) {
    document.outputUrls[name] = await getSignedUrl(s3PresignClient(), new PutObjectCommand({ Bucket: output.Bucket, Key: `${output.Key}${name}` }), runsIn);
  }
  await s3Client().send(new PutObjectCommand({ ...staging, Body: JSON.stringify(document), ContentType: 'application/json' }));
  return { stagingUrl: await getSignedUrl(s3PresignClient(), new GetObjectCommand(staging), startsIn) };
}
