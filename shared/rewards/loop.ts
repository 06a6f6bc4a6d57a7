/**
 * Reward search, the loop's bookkeeping between the Lambdas: the task as Claude sees it, the
 * training items of a generation (candidates x training seeds), each item's outcome turned into a
 * seed result (the trusted grade, or the failure with the sandbox's verdict), the generation added
 * to the search document, the feedback for the next proposal, and the final comparison's entries:
 * the winner and both baselines, trained on the same seeds and graded on the same fresh seeds.
 */
import { ConfigError } from '../errors.ts';
import { sha256Hex } from '../json.ts';
import { GOAL_POSITION, MAX_POSITION, MAX_SPEED, MIN_POSITION, TIME_LIMIT } from './mountaincar.ts';
import { failureReason } from './grade.ts';
import type { CandidateFeedback, RewardTask } from './propose.ts';
import { RewardSearchDoc, type FinalEntry, type FinalRole, type SearchCandidate } from './report.ts';
import { evenlySpaced, rank, SeedResult } from './search.ts';

export const MOUNTAINCAR_TASK: RewardTask = {
  name: 'MountainCar',
  description: [
    `An underpowered car in a valley must reach the flag on the right hill (position >= ${GOAL_POSITION}) within ${TIME_LIMIT} steps.`,
    `Observation: (position, velocity); position in [${MIN_POSITION}, ${MAX_POSITION}], velocity in [-${MAX_SPEED}, ${MAX_SPEED}].`,
    'Actions: 0 = push left, 1 = no push, 2 = push right.',
    'Dynamics per step: velocity += (action - 1) * 0.001 - 0.0025 * cos(3 * position), clipped; position += velocity, clipped;',
    'at the left wall the velocity is set to 0. Episodes start at a position uniform in [-0.6, -0.4] with velocity 0.',
    'The engine alone cannot climb the hill: the car must swing back and forth to build energy.',
    "The environment's own reward is -1 per step, which gives no signal until the goal is first reached.",
    `Success (what is graded): reaching position >= ${GOAL_POSITION} within ${TIME_LIMIT} steps, with the greedy policy, on fresh start seeds.`,
  ].join('\n'),
  rewardInterface: [
    'def reward(obs, action, next_obs, done, info) -> float',
    '  obs, next_obs: (position, velocity) tuples of floats; when the step ended the episode, next_obs is the final state.',
    '  action: int (0, 1, 2). done: bool, true when this step ended the episode (goal or step 200).',
    '  info: {"step": 1..200, "goal_reached": bool, "time_limit": bool}.',
    '  Return an int or float of magnitude at most 1e6. Optionally also define reward_batch(...) taking numpy arrays',
    '  (obs [N,2], action [N], next_obs [N,2], done [N], info with arrays) and returning [N]; it is used when present.',
  ].join('\n'),
  functionName: 'reward',
};

export type Origin = 'claude' | 'file' | 'baseline';

export interface ProposedCandidate {
  readonly name: string;
  readonly rationale: string;
  readonly source: string;
  readonly origin: Origin;
}

export interface TrainSettings {
  readonly total_steps: number;
  readonly num_envs: number;
  readonly evaluation_episodes: number;
}

/** One training run (a candidate on a training seed) and how its policy is graded. */
/**
 * The longest a training job may run: the job definition's timeout. A run's `trainTimeoutSeconds`
 * (Batch's attempt timeout at submit on AWS, at least 60 s there; the sandbox's wall limit
 * locally) may only shorten it.
 */
export const MAX_TRAIN_TIMEOUT_SECONDS = 1800;
export const MIN_TRAIN_TIMEOUT_SECONDS = 60;

export interface TrainItem {
  /** Index of the candidate in its proposal (names may repeat across roles in the final). */
  readonly candidate: number;
  readonly name: string;
  readonly sourceSha256: string;
  readonly seed: number;
  readonly gradeSeeds: readonly number[];
  readonly episodesPerSeed: number;
  readonly train: TrainSettings;
  /** The job's wall-clock limit; not in the cache key (a finished run is the same whatever its limit was). */
  readonly timeoutSeconds: number;
}

export function trainItems(
  candidates: readonly ProposedCandidate[],
  options: { trainSeeds: readonly number[]; gradeSeeds: readonly number[]; episodesPerSeed: number; train: TrainSettings; timeoutSeconds: number },
): TrainItem[] {
  const t = options.timeoutSeconds;
  if (!Number.isInteger(t) || t < MIN_TRAIN_TIMEOUT_SECONDS || t > MAX_TRAIN_TIMEOUT_SECONDS) {
    throw new ConfigError(
      'trainTimeoutSeconds',
      t,
      `must be an integer from ${MIN_TRAIN_TIMEOUT_SECONDS} (the Batch minimum) to ${MAX_TRAIN_TIMEOUT_SECONDS} (the job definition's timeout)`,
    );
  }
  const fresh = new Set(options.trainSeeds);
  options.gradeSeeds.forEach((s, i) => {
    if (fresh.has(s)) throw new ConfigError(`gradeSeeds[${i}]`, s, 'is a training seed: grading needs seeds the candidates never trained on');
  });
  return candidates.flatMap((c, candidate) =>
    options.trainSeeds.map((seed) => ({
      candidate,
      name: c.name,
      sourceSha256: sha256Hex(c.source),
      seed,
      gradeSeeds: [...options.gradeSeeds],
      episodesPerSeed: options.episodesPerSeed,
      train: options.train,
      timeoutSeconds: t,
    })),
  );
}

/** A fan-out item's outcome (read back by shared/fan-out.ts): `{ok: true, value: <the grade's seed result>}` or `{ok: false, error, cause}`. */
function seedResultOf(item: TrainItem, outcome: unknown): SeedResult {
  const o = (outcome ?? {}) as { ok?: boolean; value?: unknown; error?: string; cause?: string };
  if (o.ok === true) return SeedResult.parse(o.value);
  return { seed: item.seed, success: null, episodes: 0, failure: failureReason(o.error, o.cause) };
}

/** The sandbox's verdict on a candidate: the first limit it hit on any seed. */
function verdictOf(seeds: readonly SeedResult[]): string | undefined {
  return seeds.find((s) => s.failure?.startsWith('the sandbox stopped the job'))?.failure;
}

/** Per candidate, in proposal order, its seed results from the fan-out's outcomes (one per item, same order). */
export function candidateResults(candidates: readonly ProposedCandidate[], items: readonly TrainItem[], outcomes: readonly unknown[]): SearchCandidate[] {
  if (outcomes.length !== items.length) throw new ConfigError('results.length', outcomes.length, `must equal the ${items.length} training items`);
  return candidates.map((c, k) => {
    const results = items.flatMap((item, i) => (item.candidate === k ? [seedResultOf(item, outcomes[i])] : []));
    // Each seed's curve moves to the candidate's curves: the seeds keep the grade.
    const seeds = results.map(({ curve: _curve, ...seed }) => seed);
    const curves = results.flatMap((r) => (r.curve?.length ? [{ seed: r.seed, points: r.curve }] : []));
    const verdict = verdictOf(seeds);
    return {
      name: c.name,
      rationale: c.rationale,
      source: c.source,
      sourceSha256: sha256Hex(c.source),
      origin: c.origin,
      seeds,
      ...(verdict ? { verdict } : {}),
      ...(curves.length ? { curves } : {}),
    };
  });
}

/** The search document with a generation added. */
export function recordGeneration(doc: RewardSearchDoc | undefined, generation: number, candidates: SearchCandidate[]): RewardSearchDoc {
  const next = { task: MOUNTAINCAR_TASK.name, generations: [...(doc?.generations ?? []), { generation, candidates }] };
  return RewardSearchDoc.parse(doc?.usage ? { ...next, usage: doc.usage } : next);
}

/**
 * What Claude sees next: the last generation's candidates and the best candidate so far (when it
 * is older), each with its graded per-seed success, never what a candidate reported about itself.
 */
export function feedbackFrom(doc: RewardSearchDoc): CandidateFeedback[] {
  const all = doc.generations.flatMap((g) => g.candidates.map((c) => ({ g: g.generation, c })));
  const last = doc.generations.at(-1)!;
  const best = rank(all.map(({ g, c }) => ({ generation: g, name: c.name, sourceSha256: c.sourceSha256, seeds: c.seeds })))[0]!;
  const chosen = all.filter(({ g, c }) => g === last.generation || (g === best.generation && c.name === best.name));
  return chosen.map(({ g, c }) => {
    const successes = c.seeds.map((s) => s.success ?? 0);
    return {
      generation: g,
      name: c.name,
      source: c.source,
      perSeedSuccess: c.seeds.map((s) => ({ seed: s.seed, success: s.success, ...(s.failure ? { error: s.failure } : {}) })),
      meanSuccess: successes.reduce((a, b) => a + b, 0) / successes.length,
      ...(c.verdict ? { verdict: c.verdict } : {}),
      ...(c.curves?.length ? { curve: curveText(c.curves) } : {}),
    };
  });
}

/** Points of each seed's curve shown to the proposer. */
const FEEDBACK_CURVE_POINTS = 5;

/**
 * A candidate's training curves in a line per seed, from the job's own log (numbers only, so a
 * candidate cannot write text into the next prompt this way): e.g.
 * "seed 1: step 1024 return -200 success 0%; step 8192 return -141 success 62%".
 */
export function curveText(curves: NonNullable<SearchCandidate['curves']>): string {
  return curves
    .map(({ seed, points }) => {
      return `seed ${seed}: ${evenlySpaced(points.length, FEEDBACK_CURVE_POINTS)
        .map((i) => points[i]!)
        .map((p) => `step ${p.step} return ${p.envReturn.toFixed(0)} success ${(p.success * 100).toFixed(0)}%`)
        .join('; ')}`;
    })
    .join(' | ');
}

/** The search's winner: the best-ranked candidate that is not a baseline. */
export function winnerOf(doc: RewardSearchDoc): SearchCandidate {
  const all = doc.generations.flatMap((g) => g.candidates.filter((c) => c.origin !== 'baseline').map((c) => ({ g: g.generation, c })));
  if (!all.length) throw new ConfigError('generations', doc.generations.length, 'hold no candidate to choose a winner from');
  const best = rank(all.map(({ g, c }) => ({ generation: g, name: c.name, sourceSha256: c.sourceSha256, seeds: c.seeds })))[0]!;
  return all.find(({ g, c }) => g === best.generation && c.name === best.name)!.c;
}

/** The final's candidates, in role order: the winner, the environment's reward, the shaped reward. */
export function finalCandidates(
  doc: RewardSearchDoc,
  baselines: { env: ProposedCandidate; shaped: ProposedCandidate },
): { role: FinalRole; candidate: ProposedCandidate }[] {
  const winner = winnerOf(doc);
  return [
    { role: 'winner', candidate: { name: winner.name, rationale: winner.rationale, source: winner.source, origin: winner.origin } },
    { role: 'env-reward', candidate: baselines.env },
    { role: 'shaped-reward', candidate: baselines.shaped },
  ];
}

/** The search document with the final comparison: every entry on the same training and grading seeds. */
export function recordFinal(
  doc: RewardSearchDoc,
  roles: readonly { role: FinalRole; candidate: ProposedCandidate }[],
  items: readonly TrainItem[],
  outcomes: readonly unknown[],
): RewardSearchDoc {
  const results = candidateResults(
    roles.map((r) => r.candidate),
    items,
    outcomes,
  );
  const entries: FinalEntry[] = roles.map((r, i) => ({
    role: r.role,
    name: r.candidate.name,
    sourceSha256: results[i]!.sourceSha256,
    seeds: results[i]!.seeds,
  }));
  const first = items[0];
  if (!first) throw new ConfigError('items', items, 'must not be empty');
  return RewardSearchDoc.parse({ ...doc, final: { gradeSeeds: [...first.gradeSeeds], episodesPerSeed: first.episodesPerSeed, entries } });
}
