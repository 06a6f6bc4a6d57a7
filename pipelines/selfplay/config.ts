/**
 * The self-play league's config and its sizes. PPO fields mirror batch-jobs/selfplay-train/ppo.py's
 * PPOConfig (snake_case, as the job reads them) and are checked here too, so a bad value is named
 * before any job starts.
 */
import { z } from 'zod';
import { MAX_TRAINING_GROUPS } from '#shared/league-doc.ts';

const even = (what: string) => (n: number) => n % 2 === 0 || `${what} must be even, so that each side moves first in exactly half of the games`;
const evenInt = (min: number, max: number, what: string) =>
  z
    .int()
    .min(min)
    .max(max)
    .refine((n) => even(what)(n) === true, { message: `must be even, so that each side moves first in exactly half of the ${what}` });

/** Games per iteration split evenly over every possible number of groups (1..MAX), both seats. */
export const GAMES_MULTIPLE = 2 * Array.from({ length: MAX_TRAINING_GROUPS }, (_, i) => i + 1).reduce((l, n) => lcm(l, n), 1);

function lcm(a: number, b: number): number {
  const gcd = (x: number, y: number): number => (y === 0 ? x : gcd(y, x % y));
  return (a * b) / gcd(a, b);
}

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

export const SelfPlayConfig = z
  .object({
    /** Generations (train, matches, Elo) in the loop. */
    generations: z.int().min(1).max(40),
    /** Games per PPO iteration, played in lock-step; a multiple of GAMES_MULTIPLE. */
    gamesPerIteration: z
      .int()
      .min(GAMES_MULTIPLE)
      .max(65_536)
      .refine((n) => n % GAMES_MULTIPLE === 0, { message: `must be a multiple of ${GAMES_MULTIPLE}, so every opponent group gets the same number of games from each seat` }),
    /** PPO iterations per generation. */
    iterations: z.int().min(1).max(10_000),
    ppo: PpoConfig.default({}),
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
    seed: z.int().min(0).max(2 ** 30).default(0),
  })
  .strict();
export type SelfPlayConfig = z.infer<typeof SelfPlayConfig>;

/** Sizes: test (CI's end-to-end run), smoke (the default demo), local (about an hour here), full (the reference, for GPUs). */
export const SELFPLAY_SIZES = {
  test: { generations: 2, gamesPerIteration: 384, iterations: 6, matchGames: 200, evaluationGames: 400, bootstrapSamples: 50 },
  smoke: { generations: 4, gamesPerIteration: 1536, iterations: 10 },
  local: { generations: 8, gamesPerIteration: 2040, iterations: 25 },
  full: { generations: 20, gamesPerIteration: 2052, iterations: 25 },
} as const satisfies Record<string, Partial<SelfPlayConfig>>;
