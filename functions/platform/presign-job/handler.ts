/** A sandboxed job's staging document (its spec's and outputs' presigned URLs) and its presigned GET (shared/presign.ts). */
import type { Context } from 'aws-lambda';
import { startInvocationLog } from '#shared/log.ts';
import { presignJob, PresignRequest } from '#shared/presign.ts';
import { parseOrThrow } from '#shared/schema.ts';

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'presign-job' });
  return presignJob(parseOrThrow(PresignRequest, event, 'presign'));
}
