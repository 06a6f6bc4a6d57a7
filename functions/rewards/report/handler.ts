/** Reward search report: the HTML report, the winning reward function and the search document. */
import { ENV, requireEnv } from '#shared/env.ts';
import { reportStep } from '#shared/rewards/steps.ts';

const ctx = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

export async function handler(event: unknown) {
  return reportStep(ctx, event);
}
