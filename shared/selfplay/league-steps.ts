/**
 * The league's Lambda steps over its document in S3 (league-store.ts): each reads the document,
 * applies one step of league-doc.ts and writes the new document.
 *
 * - startLeague (elo, before generation 1): a league of the two bots.
 * - planMatches (plan, after step 2a): generation `generation`'s snapshot joins the league, and
 *   the match requests pair it with every player already in it; returns the requests (the match
 *   fan-out's items) with the count of failed matches tolerated.
 * - rateGeneration (elo, steps 2c and 2d): records the generation's match results, fits every
 *   match so far jointly (random bot = 0, bootstrap intervals with a fixed seed, so a rerun gives
 *   the same table), picks the champion and the next opponents.
 *
 * Both elo steps hand on the next generation's PPO settings, its learning rate scheduled.
 */
import { z } from 'zod';
import { addSnapshot, LEARNING_RATE_SCHEDULES, leagueSummary, newLeague, recordMatches, TrainCurves, TrainResult } from './league-doc.ts';
import { readLeague, writeLeague } from './league-store.ts';
import { readOutcomes } from '../fan-out.ts';
import { readContentAddressed } from '../documents.ts';
import { parseOrThrow } from '../schema.ts';

/** Where the league documents go: `data/<pipeline>/league/` in the bucket. */
export interface LeagueStore {
  readonly bucket: string;
  readonly pipeline: string;
}

export const PlanRequest = z
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
export type PlanRequest = z.infer<typeof PlanRequest>;

export async function planMatches(store: LeagueStore, request: PlanRequest) {
  const { leagueUri, generation, train, games, seed, mode, maxFailedPercent } = request;
  const league = await readLeague(leagueUri);
  // The job's result names its curves.json (their size grows with the iterations, so they never
  // travel through the state).
  const result = parseOrThrow(TrainResult, train, 'train');
  const curves = parseOrThrow(TrainCurves, await readContentAddressed(result.curvesUri, 'train.curvesUri', 'training curves'), 'train.curves');
  const { curvesUri: _, ...rest } = result;
  const output = {
    ...rest,
    curves: { groups: curves.groups, iteration: curves.iteration, scoreByGroup: curves.score_by_group, scoreByOpponent: curves.score_by_opponent },
  };
  const added = addSnapshot(league, generation, output, { games, seed, mode, maxFailedPercent });
  const written = await writeLeague(store.bucket, store.pipeline, added.doc);
  return { leagueUri: written.uri, player: added.player.id, requests: added.requests, maxFailures: added.maxFailures };
}

const Plan = {
  ppo: z.record(z.string(), z.unknown()),
  generations: z.int().min(1),
  lrSchedule: z.enum(LEARNING_RATE_SCHEDULES),
};

const StartRequest = z.object({ start: z.literal(true), ...Plan }).strict();
const RateRequest = z
  .object({
    ...Plan,
    leagueUri: z.string(),
    generation: z.int().min(1),
    results: z.array(z.unknown()),
    bootstrapSamples: z.int().min(1).max(10_000).default(200),
    seed: z.int().default(1),
    opponents: z.int().min(0).max(50).default(3),
  })
  .strict();

/** The elo step's event: start the league, or rate a generation's matches. */
export const EloRequest = z.union([StartRequest, RateRequest]);

const trainingPlan = (request: z.infer<typeof StartRequest> | z.infer<typeof RateRequest>) => ({
  ppo: request.ppo,
  generations: request.generations,
  schedule: request.lrSchedule,
});

export async function startLeague(store: LeagueStore, request: z.infer<typeof StartRequest>) {
  const doc = newLeague();
  const written = await writeLeague(store.bucket, store.pipeline, doc);
  return leagueSummary(doc, written.uri, trainingPlan(request));
}

export async function rateGeneration(store: LeagueStore, request: z.infer<typeof RateRequest>) {
  const league = await readLeague(request.leagueUri);
  const { doc } = recordMatches(league, request.generation, await readOutcomes(request.results, 'results'), request);
  const written = await writeLeague(store.bucket, store.pipeline, doc);
  return leagueSummary(doc, written.uri, trainingPlan(request));
}
