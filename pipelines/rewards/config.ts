/**
 * Reward search: config and sizes. A run trains `generations x candidates x trainSeeds` policies
 * in the sandbox (each a few seconds of PPO at these step counts on one CPU), plus the final:
 * the winner and both baselines retrained from scratch on `finalTrainSeeds` (seeds the search
 * never trained on, so the luck that made the winner win does not carry over) and graded on
 * `finalSeeds`: 3 x finalTrainSeeds more policies.
 */
import { z } from 'zod';
import { HISTORY_EVENT_BUDGET, HISTORY_EVENT_LIMIT } from '#pipelines/steps/history.ts';
import { MAX_TRAIN_TIMEOUT_SECONDS, MIN_TRAIN_TIMEOUT_SECONDS } from '#shared/rewards/loop.ts';
import { DEFAULT_CLAUDE_MODEL } from '#shared/clients/anthropic.ts';

const seeds = (max: number) =>
  z
    .array(
      z
        .int()
        .min(0)
        .max(2 ** 31 - 1),
    )
    .min(1)
    .max(max);

/**
 * A reward file, named by the sha256 of its UTF-8 source, which lies at
 * data/rewards/sources/<sha256>.py in the platform bucket (at most MAX_SOURCE_CHARS characters):
 * `frontier run rewards --reward-file FILE.py` puts it there. The source never enters the
 * execution's input or state.
 */
export const RewardFile = z
  .object({
    name: z.string().regex(/^[a-z][a-z0-9_-]{0,39}$/, 'must be a lowercase slug of at most 40 characters'),
    sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be the sha256 (64 lowercase hex digits) of the source'),
  })
  .strict();

/**
 * History events of a cold reward search, as its plan counts them (pipelines/rewards/plan.ts; a
 * test checks that the two agree): the start, the final's fixed states and the report, 40 a
 * generation (its proposal, the fan-out's frame and its record), 97 a training run (train and
 * grade, each a cached step, in the fan-out), the final's runs included (3 a final seed).
 */
export const REWARDS_HISTORY = { fixed: 111, generation: 40, run: 97 } as const;

/** The history events of a cold search: generations x candidates x trainSeeds runs, then 3 x finalTrainSeeds. */
export const rewardsHistoryEvents = (generations: number, candidates: number, trainSeeds: number, finalTrainSeeds: number): number =>
  REWARDS_HISTORY.fixed + REWARDS_HISTORY.generation * generations + REWARDS_HISTORY.run * (generations * candidates * trainSeeds + 3 * finalTrainSeeds);

export const RewardsConfig = z
  .object({
    generations: z.int().min(1).max(10).default(4),
    /** Reward functions Claude writes per generation. */
    candidates: z.int().min(1).max(16).default(6),
    /** The Claude model id (default: DEFAULT_CLAUDE_MODEL, one the pinned SDK does not list as deprecated). */
    model: z.string().min(1).max(100).default(DEFAULT_CLAUDE_MODEL),
    /** Evaluate these reward functions instead of asking Claude (one generation); no API key needed. */
    rewardFiles: z.array(RewardFile).min(1).max(16).optional(),
    /** Every candidate trains once per seed. */
    trainSeeds: seeds(10).default([1, 2, 3]),
    /** Fresh seeds the search grades on. */
    gradeSeeds: seeds(100).default([1001, 1002, 1003, 1004, 1005]),
    /**
     * The final retrains the winner and both baselines on these: seeds the search never trained
     * on, the same for all three. The artifact is the reward function, so the final measures what
     * a fresh training run with it gives, not the best of the search's runs graded again.
     */
    finalTrainSeeds: seeds(10).default([101, 102, 103]),
    /** Fresh seeds the final grades on, unseen by the search too. */
    finalSeeds: seeds(100).default([2001, 2002, 2003, 2004, 2005, 2006, 2007, 2008, 2009, 2010]),
    /** Greedy episodes per grading seed. */
    episodesPerSeed: z.int().min(1).max(1000).default(100),
    train: z
      .object({
        /** Environment steps of PPO per run: 8,000 leaves room between the two baselines (see the README). */
        total_steps: z.int().min(256).max(2_000_000).default(8000),
        num_envs: z.int().min(1).max(64).default(8),
        evaluation_episodes: z.int().min(0).max(1000).default(20),
      })
      .strict()
      .default({ total_steps: 8000, num_envs: 8, evaluation_episodes: 20 }),
    /**
     * Wall-clock limit of one training job, in seconds: a candidate that never returns is stopped
     * here and recorded with the verdict "wall limit". Batch's attempt timeout on AWS (60 s at
     * least), the sandbox's wall limit locally; at most the job definition's 30 minutes.
     */
    trainTimeoutSeconds: z.int().min(MIN_TRAIN_TIMEOUT_SECONDS).max(MAX_TRAIN_TIMEOUT_SECONDS).default(MAX_TRAIN_TIMEOUT_SECONDS),
  })
  .strict()
  .superRefine((c, ctx) => {
    const train = new Set(c.trainSeeds);
    for (const field of ['gradeSeeds', 'finalSeeds'] as const) {
      c[field].forEach((s, i) => {
        if (train.has(s))
          ctx.addIssue({ code: 'custom', path: [field, i], message: 'is a training seed: grading needs seeds the candidates never trained on' });
      });
    }
    const grade = new Set(c.gradeSeeds);
    const finalTrain = new Set(c.finalTrainSeeds);
    c.finalSeeds.forEach((s, i) => {
      if (grade.has(s))
        ctx.addIssue({ code: 'custom', path: ['finalSeeds', i], message: 'is a search grading seed: the final needs seeds the search never saw' });
      if (finalTrain.has(s))
        ctx.addIssue({ code: 'custom', path: ['finalSeeds', i], message: 'is a final training seed: grading needs seeds the policies never trained on' });
    });
    c.finalTrainSeeds.forEach((s, i) => {
      if (train.has(s))
        ctx.addIssue({ code: 'custom', path: ['finalTrainSeeds', i], message: 'is a search training seed: the final retrains on seeds the search never used' });
    });
    // The search's history grows with its training runs: bounded by the budget a run plans for.
    const generations = c.rewardFiles ? 1 : c.generations;
    const candidates = c.rewardFiles?.length ?? c.candidates;
    const events = rewardsHistoryEvents(generations, candidates, c.trainSeeds.length, c.finalTrainSeeds.length);
    if (events > HISTORY_EVENT_BUDGET) {
      let fits = generations;
      while (fits > 0 && rewardsHistoryEvents(fits, candidates, c.trainSeeds.length, c.finalTrainSeeds.length) > HISTORY_EVENT_BUDGET) fits -= 1;
      ctx.addIssue({
        code: 'custom',
        path: [c.rewardFiles || fits === 0 ? 'trainSeeds' : 'generations'],
        message: `a search of ${generations} generations x ${candidates} candidates x ${c.trainSeeds.length} training seeds (and the final's 3 x ${c.finalTrainSeeds.length}) would record ${events.toLocaleString('en-US')} history events, over the ${HISTORY_EVENT_BUDGET.toLocaleString('en-US')} a run plans for (Step Functions fails an execution past ${HISTORY_EVENT_LIMIT.toLocaleString('en-US')}): ${fits > 0 && !c.rewardFiles ? `at most ${fits} generation${fits === 1 ? '' : 's'} fit${fits === 1 ? 's' : ''} with these candidates and seeds` : 'use fewer candidates or training seeds'}`,
      });
    }
    if (c.rewardFiles) {
      const names = new Set<string>();
      c.rewardFiles.forEach((f, i) => {
        if (names.has(f.name)) ctx.addIssue({ code: 'custom', path: ['rewardFiles', i, 'name'], message: 'is used by an earlier file' });
        names.add(f.name);
      });
    }
  });
export type RewardsConfig = z.infer<typeof RewardsConfig>;

export const REWARDS_SIZES = {
  test: {
    generations: 2,
    candidates: 2,
    trainSeeds: [1],
    gradeSeeds: [1001],
    finalTrainSeeds: [101],
    finalSeeds: [2001],
    episodesPerSeed: 20,
    train: { total_steps: 6000, evaluation_episodes: 5 },
  },
  smoke: {
    generations: 2,
    candidates: 3,
    trainSeeds: [1, 2],
    gradeSeeds: [1001, 1002],
    finalTrainSeeds: [101, 102],
    finalSeeds: [2001, 2002, 2003, 2004],
    episodesPerSeed: 50,
    train: { total_steps: 6000 },
  },
} as const satisfies Record<string, z.input<typeof RewardsConfig>>;
