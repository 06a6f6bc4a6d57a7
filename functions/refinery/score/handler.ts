/** Scores one filtered shard's documents with the classifier (shared/refinery/score-step.ts). */
import type { Context } from 'aws-lambda';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { scoreShardStep } from '#shared/refinery/score-step.ts';

const base = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'score' });
  const memoryMb = Number(context?.memoryLimitInMB ?? process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE ?? 0) || undefined;
  return scoreShardStep({ ...base, ...(memoryMb ? { memoryMb } : {}) }, event);
}
