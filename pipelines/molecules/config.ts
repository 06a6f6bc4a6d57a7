/**
 * Closed-loop molecular discovery: config and sizes. One oracle call is one GFN2-xTB geometry
 * optimisation (a median 0.5-0.6 s of CPU here); a run spends `sampleSize + 2 x rounds x batchSize`
 * calls at most (the random baseline gets the surrogate's budget), fewer when molecules are known
 * from earlier runs.
 */
import { z } from 'zod';
import { HISTORY_EVENT_BUDGET, HISTORY_EVENT_LIMIT } from '#pipelines/steps/history.ts';
import { MAX_S3_URI_CHARS } from '#shared/schema.ts';
import { DEFAULT_MAX_HEAVY_ATOMS } from '#shared/molecules/pool.ts';

/** Oracle jobs in one round (sampleSize, or twice batchSize, in chunks of oracle.chunkSize). */
export const MAX_ORACLE_JOBS_PER_ROUND = 100;

/**
 * History events of a cold campaign with every batch approved, as its plan counts them
 * (pipelines/molecules/plan.ts; a test checks that the two agree): the start, the report and
 * publication, 49 a round (propose, the approval, record), 43 an oracle job (a cached step of
 * the fan-out).
 */
export const MOLECULES_HISTORY = { fixed: 129, round: 49, job: 43 } as const;

/** The history events of a cold campaign: round 0 measures the sample, each later round twice batchSize. */
export const moleculesHistoryEvents = (c: { rounds: number; sampleSize: number; batchSize: number; oracle: { chunkSize: number } }): number =>
  MOLECULES_HISTORY.fixed +
  MOLECULES_HISTORY.round * c.rounds +
  MOLECULES_HISTORY.job * (Math.ceil(c.sampleSize / c.oracle.chunkSize) + c.rounds * Math.ceil((2 * c.batchSize) / c.oracle.chunkSize));

export const MoleculesConfig = z
  .object({
    pool: z
      .object({
        /** A pool file in S3 (one SMILES per line, optional id after whitespace). Default: the pool built in code. */
        uri: z
          .string()
          .regex(/^s3:\/\/[^/]+\/.+/, 'must be an s3://bucket/key URI')
          .max(MAX_S3_URI_CHARS)
          .optional(),
        /** Default pool: substituents per molecule (1: about 2,200 molecules; 2: about 79,000). */
        maxSubstituents: z.union([z.literal(1), z.literal(2)]).default(2),
        maxHeavyAtoms: z.int().min(1).max(100).default(DEFAULT_MAX_HEAVY_ATOMS),
      })
      .strict()
      .default({ maxSubstituents: 2, maxHeavyAtoms: DEFAULT_MAX_HEAVY_ATOMS }),
    /** Round 0: a random sample, measured to set the hit threshold and train the first surrogate. */
    sampleSize: z.int().min(2).max(10_000).default(100),
    /** The gap threshold makes this share of the sample hits, in percent. */
    hitPercent: z.number().gt(0).max(50).default(2),
    /** Surrogate rounds after the sample. */
    rounds: z.int().min(0).max(100).default(5),
    /** Molecules the surrogate picks per round; the random baseline measures as many. */
    batchSize: z.int().min(1).max(500).default(30),
    /** Share of the surrogate's batch drawn among its most uncertain predictions. */
    explorationFraction: z.number().min(0).max(1).default(0.2),
    /** `ei`: expected improvement below the hit threshold; `lcb`: lower confidence bound (beta 2). */
    acquisition: z.enum(['ei', 'lcb']).default('ei'),
    oracle: z
      .object({
        /** Per optimisation attempt (a molecule gets at most two). */
        timeoutSeconds: z.int().min(1).max(3600).default(120),
        /** Molecules per oracle job. */
        chunkSize: z.int().min(1).max(500).default(25),
        /** Molecules measured at once inside a job (its vCPUs). */
        parallel: z.int().min(1).max(16).default(1),
        /** Seed of the starting geometries' out-of-plane offsets. */
        seed: z
          .int()
          .min(0)
          .max(2 ** 30)
          .default(0),
      })
      .strict()
      .default({ timeoutSeconds: 120, chunkSize: 25, parallel: 1, seed: 0 }),
    /**
     * How long each approval waits; on timeout the loop ends, keeping everything measured.
     * Default 3 days, under the state machine's 7-day execution limit... per round: keep
     * rounds x timeout under it, or approve promptly.
     */
    approvalTimeoutSeconds: z
      .int()
      .min(60)
      .max(2_000_000)
      .default(3 * 24 * 3600),
    seed: z
      .int()
      .min(0)
      .max(2 ** 30)
      .default(0),
  })
  .strict()
  .superRefine((c, ctx) => {
    // Each oracle job of a round is a fan-out item: their number is bounded, so that a round's
    // records and history stay bounded whatever the sizes.
    const measured = Math.max(c.sampleSize, 2 * c.batchSize);
    const jobs = Math.ceil(measured / c.oracle.chunkSize);
    if (jobs > MAX_ORACLE_JOBS_PER_ROUND) {
      ctx.addIssue({
        code: 'custom',
        path: ['oracle', 'chunkSize'],
        message: `makes ${jobs} oracle jobs for a round of ${measured} molecules, over ${MAX_ORACLE_JOBS_PER_ROUND}: use a chunkSize of at least ${Math.ceil(measured / MAX_ORACLE_JOBS_PER_ROUND)}`,
      });
    }
    // The campaign's history grows with its rounds and their jobs: bounded by the budget a run plans for.
    const events = moleculesHistoryEvents(c);
    if (events > HISTORY_EVENT_BUDGET) {
      let fits = c.rounds;
      while (fits > 0 && moleculesHistoryEvents({ ...c, rounds: fits }) > HISTORY_EVENT_BUDGET) fits -= 1;
      ctx.addIssue({
        code: 'custom',
        path: ['rounds'],
        message: `a campaign of ${c.rounds} rounds in oracle jobs of ${c.oracle.chunkSize} molecules would record ${events.toLocaleString('en-US')} history events, over the ${HISTORY_EVENT_BUDGET.toLocaleString('en-US')} a run plans for (Step Functions fails an execution past ${HISTORY_EVENT_LIMIT.toLocaleString('en-US')}): at most ${fits} rounds fit, or use a larger oracle.chunkSize`,
      });
    }
  });
export type MoleculesConfig = z.infer<typeof MoleculesConfig>;

/**
 * Sizes. test: the 1-substituent pool (about 2,200 molecules), 12 sampled and 2 rounds of 4 + 4,
 * 28 oracle calls. smoke: the default pool, 40 sampled and 3 rounds of 6 + 6, 60 s approvals.
 * local: the default pool, a few hundred oracle calls.
 */
export const MOLECULES_SIZES = {
  test: {
    pool: { maxSubstituents: 1 },
    sampleSize: 12,
    rounds: 2,
    batchSize: 4,
    hitPercent: 10,
    oracle: { timeoutSeconds: 60, chunkSize: 8 },
    approvalTimeoutSeconds: 120,
  },
  smoke: {
    sampleSize: 40,
    rounds: 3,
    batchSize: 6,
    hitPercent: 5,
    oracle: { timeoutSeconds: 60, chunkSize: 12 },
    approvalTimeoutSeconds: 60,
  },
  local: { sampleSize: 100, rounds: 5, batchSize: 30, hitPercent: 2, oracle: { chunkSize: 20 } },
} as const satisfies Record<string, z.input<typeof MoleculesConfig>>;
