/** Reward search, step 3 of a generation: the graded seeds into the search document. */
import { ENV, requireEnv } from '#shared/env.ts';
import { recordStep } from '#shared/rewards/steps.ts';

const ctx = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

export async function handler(event: unknown) {
  return recordStep(ctx, event);
}
