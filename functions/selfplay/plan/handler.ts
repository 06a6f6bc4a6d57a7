/**
 * League plan (after step 2a): generation `generation`'s snapshot joins the league, and the match
 * requests pair it with every player already in it. Returns the new league document's URI and the
 * requests (the match fan-out's items), with the count of failed matches tolerated.
 */
import { z } from 'zod';
import { ENV, requireEnv } from '#shared/env.ts';
import { addSnapshot } from '#shared/selfplay/league-doc.ts';
import { readLeague, writeLeague } from '#shared/selfplay/league-store.ts';
import { parseOrThrow } from '#shared/schema.ts';

const bucket = requireEnv(ENV.bucket);
const pipeline = requireEnv(ENV.pipeline);

const Event = z
  .object({
    leagueUri: z.string(),
    generation: z.int().min(1),
    train: z.unknown(),
    games: z.int(),
    seed: z.int(),
    mode: z.enum(['greedy', 'sample']),
    maxFailedPercent: z.number().min(0).max(100),
  })
  .strict();

export async function handler(event: unknown) {
  const { leagueUri, generation, train, games, seed, mode, maxFailedPercent } = parseOrThrow(Event, event);
  const league = await readLeague(leagueUri);
  const added = addSnapshot(league, generation, train, { games, seed, mode, maxFailedPercent });
  const written = await writeLeague(bucket, pipeline, added.doc);
  return { leagueUri: written.uri, player: added.player.id, requests: added.requests, maxFailures: added.maxFailures };
}
