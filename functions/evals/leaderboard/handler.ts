/**
 * Evaluation, last step: the run's leaderboard and the guard's decision over every result of the
 * run published so far, written as leaderboard.html and leaderboard.json for the publish step
 * (shared/evals/leaderboard.ts).
 */
import type { Context } from 'aws-lambda';
import { ENV, requireEnv } from '#shared/env.ts';
import { LeaderboardRequest, writeLeaderboard } from '#shared/evals/leaderboard.ts';
import { startInvocationLog } from '#shared/log.ts';
import { parseOrThrow } from '#shared/schema.ts';

const ctx = { table: requireEnv(ENV.table), bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'leaderboard' });
  const request = parseOrThrow(LeaderboardRequest, event);
  return writeLeaderboard(ctx, request);
}
