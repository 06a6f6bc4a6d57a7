/**
 * League Elo (steps 2c and 2d): fits every match so far jointly (random bot = 0, bootstrap
 * intervals with a fixed seed, so a rerun gives the same table), then picks the next generation's
 * opponents and the champion.
 */
import { z } from 'zod';
import { LeaguePlayer, MatchResult, rateLeague } from '#shared/league.ts';
import { parseOrThrow } from '#shared/schema.ts';

const Event = z.object({
  players: z.array(LeaguePlayer).min(1),
  matches: z.array(MatchResult),
  bootstrapSamples: z.int().min(1).max(10_000).default(200),
  seed: z.int().default(1),
  opponents: z.int().min(0).max(50).default(3),
});

export async function handler(event: unknown) {
  const { players, matches, bootstrapSamples, seed, opponents } = parseOrThrow(Event, event);
  return rateLeague(players, matches, { bootstrapSamples, seed, opponents });
}
