/**
 * League Elo (steps 2c and 2d). Without a league yet it starts one (the two bots); otherwise it
 * records generation `generation`'s match results, fits every match so far jointly, picks the
 * champion and the next opponents, and writes the new league document
 * (shared/selfplay/league-steps.ts). It also hands on the next generation's PPO settings.
 */
import type { Context } from 'aws-lambda';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { parseOrThrow } from '#shared/schema.ts';
import { EloRequest, rateGeneration, startLeague } from '#shared/selfplay/league-steps.ts';

const store = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'elo' });
  const request = parseOrThrow(EloRequest, event);
  return 'start' in request ? startLeague(store, request) : rateGeneration(store, request);
}
