/**
 * The self-play league's config and its sizes. PPO fields mirror batch-jobs/selfplay-train/ppo.py's
 * PPOConfig (snake_case, as the job reads them) and are checked here too, so a bad value is named
 * before any job starts.
 */
import { z } from 'zod';
import { LEARNING_RATE_SCHEDULES, TRAINING_GROUPS } from '#shared/selfplay/league-doc.ts';
import { HISTORY_EVENT_BUDGET, HISTORY_EVENT_LIMIT } from '#pipelines/steps/history.ts';

const even = (what: string) => (n: number) => n % 2 === 0 || `${what} must be even, so that each side moves first in exactly half of the games`;
const evenInt = (min: number, max: number, what: string) =>
  z
    .int()
    .min(min)
    .max(max)
    .refine((n) => even(what)(n) === true, { message: `must be even, so that each side moves first in exactly half of the ${what}` });

/** Games per iteration split evenly over the training groups, both seats. */
export const GAMES_MULTIPLE = 2 * TRAINING_GROUPS;

export const PpoConfig = z
  .object({
    learning_rate: z.number().gt(0).max(1).optional(),
    gamma: z.number().gt(0).max(1).optional(),
    gae_lambda: z.number().min(0).max(1).optional(),
    clip: z.number().gt(0).lt(1).optional(),
    vf_coef: z.number().min(0).optional(),
    ent_coef: z.number().min(0).optional(),
    max_grad_norm: z.number().gt(0).optional(),
    update_epochs: z.int().min(1).max(100).optional(),
    minibatches: z.int().min(1).max(4096).optional(),
    normalize_advantages: z.boolean().optional(),
  })
  .strict();

/**
 * What one league run records in its execution's history, in events, read from the state
 * machine's definition (pipelines/steps/history.ts; test/constructs/selfplay-stack.test.ts
 * reads it again from the synthesized template and fails when these drift): the steps before the
 * first generation, one generation's train, plan, Elo and loop states, one match of the fan-out,
 * and the report and publish steps at the end. Each is the longest path, a cache hit whose outputs
 * are gone included; the step outputs a hit checks are the training job's 3 files, the report's 6
 * and the published manifest.
 */
export const LEAGUE_HISTORY = { start: 25, generation: 126, match: 54, end: 131 } as const;

/** Matches a league of `generations` plays: generation g pairs its snapshot with the g + 1 players before it. */
export const leagueMatches = (generations: number): number => (generations * (generations + 3)) / 2;

/** The most history events a league of `generations` records, retries aside. */
export const leagueHistoryEvents = (generations: number): number =>
  LEAGUE_HISTORY.start + LEAGUE_HISTORY.end + generations * LEAGUE_HISTORY.generation + leagueMatches(generations) * LEAGUE_HISTORY.match;

/** The events a league may plan for: every run's budget (a tenth of the 25,000 is left for retries). */
export const LEAGUE_HISTORY_BUDGET = HISTORY_EVENT_BUDGET;

/** The most generations whose league fits the budget (25: 22,206 events; 26 would record 23,790). */
export const MAX_GENERATIONS = (() => {
  let g = 1;
  while (leagueHistoryEvents(g + 1) <= LEAGUE_HISTORY_BUDGET) g += 1;
  return g;
})();

export const SelfPlayConfig = z
  .object({
    /**
     * Generations (train, matches, Elo) in the loop. Bounded by the execution's history: the
     * matches grow with the square of the generations (MAX_GENERATIONS above).
     */
    generations: z
      .int()
      .min(1)
      .max(MAX_GENERATIONS, {
        message: `must be at most ${MAX_GENERATIONS}: a league of ${MAX_GENERATIONS + 1} generations plays ${leagueMatches(MAX_GENERATIONS + 1)} matches and would record up to ${leagueHistoryEvents(MAX_GENERATIONS + 1).toLocaleString('en-US')} history events, over the ${LEAGUE_HISTORY_BUDGET.toLocaleString('en-US')} a run plans for (Step Functions fails an execution past ${HISTORY_EVENT_LIMIT.toLocaleString('en-US')})`,
      }),
    /** Games per PPO iteration, played in lock-step; a multiple of GAMES_MULTIPLE. */
    gamesPerIteration: z
      .int()
      .min(GAMES_MULTIPLE)
      .max(65_536)
      .refine((n) => n % GAMES_MULTIPLE === 0, {
        message: `must be a multiple of ${GAMES_MULTIPLE}, so every opponent group gets the same number of games from each seat`,
      }),
    /** PPO iterations per generation. */
    iterations: z.int().min(1).max(10_000),
    ppo: PpoConfig.default({}),
    /** 'step': the learning rate for the first 40 % of generations, half until 70 %, a quarter after (needs ppo.learning_rate). */
    learningRateSchedule: z.enum(LEARNING_RATE_SCHEDULES).default('constant'),
    /** Hidden layer widths of the policy network (trainer's PolicyConfig). */
    hiddenSizes: z.array(z.int().min(1).max(4096)).min(1).max(8).default([256, 256]),
    /** Games per league match (the new snapshot against each existing player). */
    matchGames: evenInt(2, 10_000, 'games').default(400),
    /** How policies pick moves in league matches: sampling gives varied games; two greedy networks replay two games. */
    matchMode: z.enum(['sample', 'greedy']).default('sample'),
    /** Past snapshots among the next generation's opponents (top by Elo), besides the two bots. */
    opponents: z.int().min(0).max(10).default(3),
    /** Greedy games against each bot in the training job's evaluation, half from each seat. */
    evaluationGames: evenInt(2, 100_000, 'games').default(1000),
    /** Bootstrap resamples of the Elo fit's intervals. */
    bootstrapSamples: z.int().min(1).max(10_000).default(200),
    /** Failed matches tolerated per generation, in percent of its pairs; past it the run fails. */
    maxFailedMatchPercent: z.number().min(0).max(100).default(50),
    /** Iterations between training checkpoints (a retried job resumes from the last). */
    checkpointEvery: z.int().min(1).max(10_000).default(5),
    seed: z
      .int()
      .min(0)
      .max(2 ** 30)
      .default(0),
  })
  .strict()
  .refine((c) => c.learningRateSchedule === 'constant' || c.ppo.learning_rate !== undefined, {
    path: ['ppo', 'learning_rate'],
    message: 'is required with learningRateSchedule "step" (the rate the schedule steps down from)',
  });
export type SelfPlayConfig = z.infer<typeof SelfPlayConfig>;

/**
 * Sizes, measured on one core here (greedy vs the tactical bot, 1,000 games): test ~25 s of
 * training, 0.97 vs random; smoke ~3.5 min; local ~35 min, 0.988 (first 0.996, second 0.981);
 * full is the reference's generation (2,048 games x 25 iterations) for the GPU queue, 4 epochs
 * per update because a GPU makes them cheap.
 */
export const SELFPLAY_SIZES = {
  test: {
    generations: 3,
    gamesPerIteration: 1024,
    iterations: 20,
    ppo: { learning_rate: 1e-3, update_epochs: 2, minibatches: 4 },
    matchGames: 200,
    evaluationGames: 400,
    bootstrapSamples: 50,
  },
  smoke: { generations: 4, gamesPerIteration: 2048, iterations: 60, ppo: { learning_rate: 1e-3, update_epochs: 2, minibatches: 8 } },
  local: {
    generations: 10,
    gamesPerIteration: 2048,
    iterations: 220,
    ppo: { learning_rate: 1e-3, update_epochs: 2, minibatches: 8 },
    learningRateSchedule: 'step',
  },
  full: {
    generations: 20,
    gamesPerIteration: 2048,
    iterations: 25,
    ppo: { learning_rate: 1e-3, update_epochs: 4, minibatches: 8 },
    learningRateSchedule: 'step',
  },
} as const satisfies Record<string, z.input<typeof SelfPlayConfig>>;
