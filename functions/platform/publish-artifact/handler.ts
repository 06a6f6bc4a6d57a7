/** Publish artifact: copy the files under artifacts/<name>/<version>/ and index the version (shared/artifacts.ts). */
import type { Context } from 'aws-lambda';
import { z } from 'zod';
import { publishArtifact } from '#shared/artifacts.ts';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { parseOrThrow } from '#shared/schema.ts';

const where = { table: requireEnv(ENV.table), bucket: requireEnv(ENV.bucket) };
const Event = z.object({ request: z.record(z.string(), z.unknown()), executionId: z.string().min(1) });

export async function handler(event: unknown, context?: Context) {
  const { request, executionId } = parseOrThrow(Event, event);
  startInvocationLog(context, { step: 'publish-artifact', executionId });
  const artifact = await publishArtifact({ ...request, executionId }, where);
  const prefix = new URL(artifact.uri).pathname.slice(1);
  return {
    name: artifact.name,
    version: artifact.version,
    uri: artifact.uri,
    sha256: artifact.sha256,
    // The cache checks that these still exist before it hands this result back.
    s3Outputs: [{ Bucket: where.bucket, Key: `${prefix}manifest.json` }],
  };
}
