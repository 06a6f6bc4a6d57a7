/** Keeps the documents at or above the threshold; writes the refined shards and their manifest (shared/refinery/curate-step.ts). */
import type { Context } from 'aws-lambda';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { curateStep } from '#shared/refinery/curate-step.ts';

const base = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'curate' });
  return curateStep(base, event);
}
