/**
 * League plan (after step 2a): generation `generation`'s snapshot joins the league, and the match
 * requests pair it with every player already in it (planMatches in shared/selfplay/league-steps.ts).
 */
import type { Context } from 'aws-lambda';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { parseOrThrow } from '#shared/schema.ts';
import { planMatches, PlanRequest } from '#shared/selfplay/league-steps.ts';

const store = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'plan' });
  return planMatches(store, parseOrThrow(PlanRequest, event));
}
