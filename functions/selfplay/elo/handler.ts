/**
 * League Elo (steps 2c and 2d). Without a league yet it starts one (the two bots); otherwise it
 * records generation `generation`'s match results, fits every match so far jointly (random bot =
 * 0, bootstrap intervals with a fixed seed, so a rerun gives the same table), picks the champion
 * and the next opponents, and writes the new league document. It also hands on the next
 * generation's PPO settings, its learning rate scheduled.
 */
import { z } from 'zod';
import { ENV, requireEnv } from '#shared/env.ts';
import { LEARNING_RATE_SCHEDULES, leagueSummary, newLeague, recordMatches } from '#shared/selfplay/league-doc.ts';
import { readLeague, writeLeague } from '#shared/selfplay/league-store.ts';
import { parseOrThrow } from '#shared/schema.ts';

const bucket = requireEnv(ENV.bucket);
const pipeline = requireEnv(ENV.pipeline);

const Plan = {
  ppo: z.record(z.string(), z.unknown()),
  generations: z.int().min(1),
  lrSchedule: z.enum(LEARNING_RATE_SCHEDULES),
};

const Event = z.union([
  z.object({ start: z.literal(true), ...Plan }).strict(),
  z
    .object({
      ...Plan,
      leagueUri: z.string(),
      generation: z.int().min(1),
      results: z.array(z.unknown()),
      bootstrapSamples: z.int().min(1).max(10_000).default(200),
      seed: z.int().default(1),
      opponents: z.int().min(0).max(50).default(3),
    })
    .strict(),
]);

export async function handler(event: unknown) {
  const request = parseOrThrow(Event, event);
  const plan = { ppo: request.ppo, generations: request.generations, schedule: request.lrSchedule };
  if ('start' in request) {
    const doc = newLeague();
    const written = await writeLeague(bucket, pipeline, doc);
    return leagueSummary(doc, written.uri, plan);
  }
  const league = await readLeague(request.leagueUri);
  const { doc } = recordMatches(league, request.generation, request.results, request);
  const written = await writeLeague(bucket, pipeline, doc);
  return leagueSummary(doc, written.uri, plan);
}
