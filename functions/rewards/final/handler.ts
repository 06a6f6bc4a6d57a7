/** Reward search, the final: plan (the winner and both baselines) or record (their graded seeds). */
import { z } from 'zod';
import { ENV, requireEnv } from '#shared/env.ts';
import { finalPlanStep, finalRecordStep } from '#shared/rewards/steps.ts';
import { parseOrThrow } from '#shared/schema.ts';

const ctx = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

export async function handler(event: unknown) {
  const { action, ...rest } = parseOrThrow(z.object({ action: z.enum(['plan', 'record']) }).loose(), event);
  return action === 'plan' ? finalPlanStep(rest) : finalRecordStep(ctx, rest);
}
