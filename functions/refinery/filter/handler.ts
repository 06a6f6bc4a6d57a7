/** One shard's filters, decontamination and MinHash signatures (shared/refinery/steps.ts). */
import type { Context } from 'aws-lambda';
import { ENV, optionalEnv, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { filterShardStep } from '#shared/refinery/steps.ts';

const ctx = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline), table: optionalEnv(ENV.table) };

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'filter' });
  return filterShardStep(ctx, event);
}
