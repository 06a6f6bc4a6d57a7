/**
 * The league's state between generations, as one JSON document: every player, every match, every
 * failed pair, each generation's training summary and ratings, the current champion and opponents.
 *
 * The document lives in S3, named by the sha256 of its content, and only its URI travels through
 * the state machine: the state stays small (256 KiB limit) however many generations run, a step
 * whose input is a league URI is cached by the league's content, and a rerun that reproduces the
 * same league writes the same key.
 *
 * Transitions are pure: `newLeague` (the two bots), `addSnapshot` (after a generation's training:
 * the new player and its match requests), `recordMatches` (after the matches: the results, the
 * joint Elo fit, the champion and the next opponents).
 */
import { z } from 'zod';
import { ConfigError } from '../errors.ts';
import { BOT_PLAYERS, LeaguePlayer, type MatchRequest, MatchResult, matchRequests, rateLeague, type LeagueRating } from './league.ts';
import type { SELECTION_MODES } from './match.ts';
import { parseOrThrow } from '../schema.ts';

export const LEAGUE_FORMAT = 1;

/** The prefix of snapshot ids: generation k's snapshot is `gen-k`. */
export const SNAPSHOT_PREFIX = 'gen-';

const s3UriString = z.string().regex(/^s3:\/\/[^/]+\/.+$/, 'must be s3://bucket/key');

/** A greedy evaluation by seat, as the training job reports it. */
export const SeatScore = z.object({
  first: z.number().min(0).max(1),
  second: z.number().min(0).max(1),
  overall: z.number().min(0).max(1),
  games: z.int().min(2),
});
export type SeatScore = z.infer<typeof SeatScore>;

/**
 * What the league reads of the training job's result.json (other fields are ignored): URIs and
 * summary figures, whatever the iterations. The per-iteration curves are in curves.json.
 */
export const TrainResult = z.object({
  snapshotOnnx: s3UriString,
  stateDict: s3UriString,
  curvesUri: s3UriString,
  evaluation: z.object({ vsTactical: SeatScore, vsRandom: SeatScore }),
  envStepsPerSecond: z.number().min(0),
  seconds: z.number().min(0),
  resumedFromIteration: z.int().min(0).default(0),
});
export type TrainResult = z.infer<typeof TrainResult>;

/** What the league reads of the training job's curves.json (snake_case, as the trainer writes it). */
export const TrainCurves = z.object({
  groups: z.array(z.string()).min(1),
  iteration: z.array(z.int()),
  score_by_group: z.array(z.array(z.number())),
  score_by_opponent: z.record(z.string(), z.array(z.number())).optional(),
});
export type TrainCurves = z.infer<typeof TrainCurves>;

/** A generation's training as the league records it: the job's result with its curves read in. */
export const TrainOutput = TrainResult.omit({ curvesUri: true }).extend({
  curves: z.object({
    groups: z.array(z.string()).min(1),
    iteration: z.array(z.int()),
    scoreByGroup: z.array(z.array(z.number())),
    scoreByOpponent: z.record(z.string(), z.array(z.number())).optional(),
  }),
});
export type TrainOutput = z.infer<typeof TrainOutput>;

const CompactRating = z.object({ id: z.string(), elo: z.number(), low: z.number(), high: z.number(), games: z.int().min(0) });
export type CompactRating = z.infer<typeof CompactRating>;

/** One generation: what it trained against, how training went, and the ratings after its matches. */
export const GenerationRecord = z.object({
  generation: z.int().min(1),
  player: z.string(),
  train: z.object({
    groups: z.array(z.string()),
    iteration: z.array(z.int()),
    scoreByGroup: z.array(z.array(z.number())),
    /** The training score against the tactical bot per iteration (null where it was not an opponent). */
    scoreVsTactical: z.array(z.number().nullable()),
    evaluation: z.object({ vsTactical: SeatScore, vsRandom: SeatScore }),
    seconds: z.number(),
    envStepsPerSecond: z.number(),
    resumedFromIteration: z.int().min(0),
  }),
  /** Filled by recordMatches: every rated player's Elo after this generation's matches. */
  ratings: z.array(CompactRating).optional(),
  champion: z.string().nullable().optional(),
});
export type GenerationRecord = z.infer<typeof GenerationRecord>;

export const MatchFailure = z.object({
  generation: z.int().min(1),
  pairId: z.string(),
  error: z.string(),
  cause: z.string(),
});
export type MatchFailure = z.infer<typeof MatchFailure>;

export const LeagueDoc = z.object({
  format: z.literal(LEAGUE_FORMAT),
  players: z.array(LeaguePlayer).min(2),
  matches: z.array(MatchResult),
  failures: z.array(MatchFailure),
  generations: z.array(GenerationRecord),
  ratings: z.array(CompactRating),
  champion: z.string().nullable(),
  /** The next generation's opponents (the bots plus the top snapshots by Elo). */
  opponents: z.array(LeaguePlayer),
});
export type LeagueDoc = z.infer<typeof LeagueDoc>;

/** The league before any generation: the random and tactical bots, no matches, no ratings. */
export function newLeague(): LeagueDoc {
  return {
    format: LEAGUE_FORMAT,
    players: BOT_PLAYERS.map((p) => ({ ...p })),
    matches: [],
    failures: [],
    generations: [],
    ratings: [],
    champion: null,
    opponents: BOT_PLAYERS.map((p) => ({ ...p })),
  };
}

export function snapshotId(generation: number): string {
  return `${SNAPSHOT_PREFIX}${generation}`;
}

/** The generation the league expects next: one more than the last recorded. */
export function nextGeneration(doc: LeagueDoc): number {
  return (doc.generations.at(-1)?.generation ?? 0) + 1;
}

/**
 * The trainer's opponent groups for the next generation (trainer.py's `opponent_groups`): both
 * bots together, the tactical bot alone twice, and the chosen snapshots (their `state_dict` URIs
 * are downloaded by the job). Before the first snapshot, the learner's own current weights
 * ('self') take the snapshots' place. Groups share the games equally, so the learner meets the
 * random bot in 12.5 % of them, the tactical bot in 62.5 % and the snapshots in 25 %; in every
 * group it moves first in exactly half.
 *
 * Measured here: without the bots pure self-play collapses; with bots only, the tactical score
 * climbs fastest but the last generation lost to the first head to head (0.354): it overfits the
 * bot, so the snapshots stay in the mix.
 */
export function trainingGroups(opponents: readonly LeaguePlayer[]): Array<Array<string | { name: string; state_dict: string }>> {
  const snapshots = opponents.filter((p) => p.kind === 'snapshot');
  snapshots.forEach((p, i) => {
    if (!p.stateDictUri) throw new ConfigError(`opponents[${i}].stateDictUri`, p.stateDictUri, `snapshot ${p.id} has no weights to train against`);
  });
  const snapshotGroup = snapshots.length ? snapshots.map((p) => ({ name: p.id, state_dict: p.stateDictUri! })) : ['self'];
  return [['random', 'tactical'], ['tactical'], ['tactical'], snapshotGroup];
}

/** Groups trainingGroups always returns: games per iteration must split evenly between them, both seats. */
export const TRAINING_GROUPS = 4;

/**
 * The learning rate of generation `generation` of `generations`: constant, or stepped down
 * (the base rate for the first 40 % of generations, half until 70 %, a quarter after).
 */
export function scheduledLearningRate(base: number, generation: number, generations: number, schedule: LearningRateSchedule): number {
  if (schedule === 'constant') return base;
  const done = generation / generations;
  return done <= 0.4 ? base : done <= 0.7 ? base / 2 : base / 4;
}
export const LEARNING_RATE_SCHEDULES = ['constant', 'step'] as const;
export type LearningRateSchedule = (typeof LEARNING_RATE_SCHEDULES)[number];

/** How the league trains: the PPO settings, and the schedule applied to their learning rate. */
export interface TrainingPlan {
  readonly ppo: Record<string, unknown>;
  readonly generations: number;
  readonly schedule: LearningRateSchedule;
}

/** The PPO settings of generation `generation` (the learning rate scheduled; none given: the trainer's default). */
export function ppoFor(plan: TrainingPlan, generation: number): Record<string, unknown> {
  const base = plan.ppo.learning_rate;
  if (plan.schedule === 'constant' || typeof base !== 'number') return { ...plan.ppo };
  return { ...plan.ppo, learning_rate: scheduledLearningRate(base, generation, plan.generations, plan.schedule) };
}

export interface MatchSettings {
  readonly games: number;
  readonly seed: number;
  readonly mode: (typeof SELECTION_MODES)[number];
  /** Failed pairs tolerated, in percent of this generation's pairs (rounded down). */
  readonly maxFailedPercent: number;
}

export interface SnapshotAdded {
  readonly doc: LeagueDoc;
  readonly player: LeaguePlayer;
  readonly requests: Array<MatchRequest & { pairId: string }>;
  /** Failed matches this generation tolerates (the fan-out's count). */
  readonly maxFailures: number;
}

/** Training score against the tactical bot per iteration: its own group's score, or its member score. */
function tacticalCurve(train: TrainOutput): (number | null)[] {
  const alone = train.curves.groups.indexOf('tactical');
  if (alone >= 0) return train.curves.scoreByGroup.map((row) => row[alone] ?? null);
  const member = train.curves.scoreByOpponent?.tactical;
  return member ? [...member] : train.curves.iteration.map(() => null);
}

/**
 * Step 2b's plan: generation `generation`'s snapshot joins the league and is paired with every
 * player already in it.
 */
export function addSnapshot(doc: LeagueDoc, generation: number, trainOutput: unknown, settings: MatchSettings): SnapshotAdded {
  const expected = nextGeneration(doc);
  if (generation !== expected) throw new ConfigError('generation', generation, `the league's next generation is ${expected}`);
  const train = parseOrThrow(TrainOutput, trainOutput, 'train');
  if (!Number.isFinite(settings.maxFailedPercent) || settings.maxFailedPercent < 0 || settings.maxFailedPercent > 100) {
    throw new ConfigError('maxFailedPercent', settings.maxFailedPercent, 'must be from 0 to 100');
  }
  const player = parseOrThrow(
    LeaguePlayer,
    { id: snapshotId(generation), kind: 'snapshot', generation, onnxUri: train.snapshotOnnx, stateDictUri: train.stateDict },
    'player',
  );
  const requests = matchRequests(player, doc.players, { games: settings.games, seed: settings.seed, mode: settings.mode });
  const record: GenerationRecord = {
    generation,
    player: player.id,
    train: {
      groups: train.curves.groups,
      iteration: train.curves.iteration,
      scoreByGroup: train.curves.scoreByGroup,
      scoreVsTactical: tacticalCurve(train),
      evaluation: train.evaluation,
      seconds: train.seconds,
      envStepsPerSecond: train.envStepsPerSecond,
      resumedFromIteration: train.resumedFromIteration,
    },
  };
  return {
    doc: { ...doc, players: [...doc.players, player], generations: [...doc.generations, record] },
    player,
    requests,
    maxFailures: Math.floor((requests.length * settings.maxFailedPercent) / 100),
  };
}

/**
 * One outcome of the match fan-out, as shared/fan-out.ts reads it back: `{ok: true, value}` or
 * `{ok: false, item: {pairId}, error, cause}` (the fan-out keeps the pair's id of a failed item).
 */
export const FanOutResult = z.union([
  z.object({ ok: z.literal(true), value: z.unknown() }),
  z.object({ ok: z.literal(false), item: z.unknown(), error: z.string().default('Error'), cause: z.string().default('') }),
]);

const FailedItem = z.object({ pairId: z.string() });

export interface MatchesRecorded {
  readonly doc: LeagueDoc;
  readonly rating: LeagueRating;
  readonly failed: MatchFailure[];
}

export interface RateSettings {
  readonly bootstrapSamples: number;
  readonly seed: number;
  readonly opponents: number;
}

/**
 * Steps 2c and 2d: the generation's match results join the league (a failed pair is recorded with
 * its error and the league goes on without it), every match so far is fitted jointly, and the
 * champion and next opponents are chosen.
 */
export function recordMatches(doc: LeagueDoc, generation: number, results: readonly unknown[], settings: RateSettings): MatchesRecorded {
  const record = doc.generations.at(-1);
  if (!record || record.generation !== generation) {
    throw new ConfigError('generation', generation, `the league's last planned generation is ${record?.generation ?? 'none'}`);
  }
  if (record.ratings) throw new ConfigError('generation', generation, 'its matches are already recorded');
  const newPlayer = record.player;
  const matches: MatchResult[] = [];
  const failed: MatchFailure[] = [];
  results.forEach((raw, i) => {
    const result = parseOrThrow(FanOutResult, raw, `results.${i}`);
    if (result.ok) {
      const match = parseOrThrow(MatchResult, result.value, `results.${i}.value`);
      if (match.a !== newPlayer) throw new ConfigError(`results.${i}.value.a`, match.a, `generation ${generation}'s matches are played by ${newPlayer}`);
      matches.push(match);
    } else {
      const item = parseOrThrow(FailedItem, result.item, `results.${i}.item`);
      failed.push({ generation, pairId: item.pairId, error: result.error, cause: result.cause.slice(0, 2000) });
    }
  });
  const seen = new Set<string>();
  for (const [i, id] of [...matches.map((m) => m.pairId), ...failed.map((f) => f.pairId)].entries()) {
    if (seen.has(id)) throw new ConfigError(`results.${i}`, id, 'the same pair appears twice');
    seen.add(id);
  }
  const allMatches = [...doc.matches, ...matches];
  const rating = rateLeague(doc.players, allMatches, settings);
  const ratings = rating.ratings.map(({ id, elo, low, high, games }) => ({ id, elo, low, high, games }));
  const generations = doc.generations.map((g) => (g.generation === generation ? { ...g, ratings, champion: rating.champion } : g));
  return {
    doc: {
      ...doc,
      matches: allMatches,
      failures: [...doc.failures, ...failed],
      generations,
      ratings,
      champion: rating.champion,
      opponents: rating.opponents,
    },
    rating,
    failed,
  };
}

/** The newest snapshot (the next generation trains from it), or null before the first. */
export function latestSnapshot(doc: LeagueDoc): LeaguePlayer | null {
  const snapshots = doc.players.filter((p) => p.kind === 'snapshot');
  return snapshots.reduce<LeaguePlayer | null>((best, p) => (best === null || (p.generation ?? 0) > (best.generation ?? 0) ? p : best), null);
}

/** The small summary the state machine carries between generations (with the next generation's PPO settings when a plan is given). */
export function leagueSummary(doc: LeagueDoc, leagueUri: string, plan?: TrainingPlan) {
  const latest = latestSnapshot(doc);
  return {
    ...(plan ? { trainPpo: ppoFor(plan, nextGeneration(doc)) } : {}),
    leagueUri,
    generations: doc.generations.length,
    players: doc.players.length,
    matches: doc.matches.length,
    failedMatches: doc.failures.length,
    champion: doc.champion,
    ratings: doc.ratings,
    trainGroups: trainingGroups(doc.opponents),
    /** The next generation starts from the newest snapshot's weights (null: a fresh network). */
    initialStateDict: latest?.stateDictUri ?? null,
  };
}
