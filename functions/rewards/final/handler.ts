/** Reward search, the final: plan (the winner and both baselines) or record (their graded seeds). */
import type { Context } from 'aws-lambda';
import { z } from 'zod';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { FinalPlanRequest, finalPlanStep, FinalRecordRequest, finalRecordStep, LoopConfig } from '#shared/rewards/steps.ts';
import { parseOrThrow } from '#shared/schema.ts';

const ctx = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

const Event = z.object({ action: z.enum(['plan', 'record']) }).loose();

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'final' });
  const { action, ...rest } = parseOrThrow(Event, event);
  if (action === 'record') return finalRecordStep(ctx, parseOrThrow(FinalRecordRequest, rest, 'final'));
  const request = parseOrThrow(FinalPlanRequest, rest, 'final');
  return finalPlanStep(ctx, request, parseOrThrow(LoopConfig, request.config, 'config'));
}
