/**
 * Presigned URLs for a sandboxed job, which holds no AWS credentials: one GET for its spec and
 * one PUT per declared output, each for exactly that key under the job's own output prefix.
 * A URL signed with a Lambda's temporary credentials stops working when they expire, whatever its
 * own expiry: the expiry asked for is capped at 12 hours, and a job that waits in its queue longer
 * than the URLs live fails to hand back its outputs (and is retried by the step like any failure).
 */
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { z } from 'zod';
import { s3PresignClient } from './clients/aws.ts';
import { parseS3Uri } from './s3uri.ts';

export const MAX_PRESIGN_SECONDS = 12 * 3600;

export const PresignRequest = z
  .object({
    specUri: z.string(),
    /** The job's output prefix (ends with "/"). */
    outputUri: z.string().endsWith('/'),
    /** Output file names besides result.json. */
    outputs: z
      .array(
        z
          .string()
          .regex(/^[\w.-]{1,100}$/)
          .refine((n) => !n.startsWith('.'), 'must not start with a dot'),
      )
      .max(20),
    expiresSeconds: z.int().min(60).max(MAX_PRESIGN_SECONDS),
  })
  .strict();

export type PresignRequest = z.infer<typeof PresignRequest>;

/** The URLs for a request its handler parsed (root `presign`, which the URI errors name too). */
export async function presignJob(request: PresignRequest): Promise<{ specUrl: string; outputUrls: string }> {
  const spec = parseS3Uri(request.specUri, 'presign.specUri');
  const output = parseS3Uri(request.outputUri, 'presign.outputUri');
  const expiresIn = request.expiresSeconds;
  const specUrl = await getSignedUrl(s3PresignClient(), new GetObjectCommand(spec), { expiresIn });
  const urls: Record<string, string> = {};
  for (const name of [...new Set(['result.json', ...request.outputs])]) {
    urls[name] = await getSignedUrl(s3PresignClient(), new PutObjectCommand({ Bucket: output.Bucket, Key: `${output.Key}${name}` }), { expiresIn });
  }
  // A string: the container override's environment takes text, and the stager parses it.
  return { specUrl, outputUrls: JSON.stringify(urls) };
}
