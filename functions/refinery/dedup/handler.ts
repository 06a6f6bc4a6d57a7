/** The global dedup over every shard's signatures, reading no text (shared/refinery/dedup-step.ts). */
import type { Context } from 'aws-lambda';
import { ENV, optionalEnv, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { dedupStep } from '#shared/refinery/steps.ts';

const ctx = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline), table: optionalEnv(ENV.table) };

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'dedup' });
  return dedupStep(ctx, event);
}
