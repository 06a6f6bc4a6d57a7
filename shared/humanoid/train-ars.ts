/**
 * The CPU trainer: ARS (ars.ts) over the CPU twin, rollouts spread over a RolloutPool. Each
 * iteration's two rollouts per direction share one seed (the same resets, commands, noise and
 * pushes: common random numbers, so their difference is the direction's); every rollout's
 * observations feed the normaliser, updated after the step. After each iteration the new policy
 * runs `evaluations` rollouts on held-out seeds for the curves: mean return, steps upright,
 * forward speed. Two choices beside the paper's: the directions may be drawn in a basis of the
 * weights rather than over every weight (the gait start's, gait.ts), and rollouts may be ranked
 * by staying up and moving forward rather than by the task's return (TRAIN_OBJECTIVES).
 */
import { ConfigError } from '../errors.ts';
import { seededRandom } from '../random.ts';
import { type ArsSettings, arsUpdate, checkArsSettings, emptyStats, type LinearPolicy, mergeStats, normaliser, perturbed, sampleDirections } from './ars.ts';
import type { EnvOptions } from './env.ts';
import type { RolloutPool, RolloutResult } from './rollouts.ts';

export interface TrainSettings extends ArsSettings {
  readonly iterations: number;
  /** Control steps per training rollout (at most; episodes end earlier when the robot falls). */
  readonly rolloutSteps: number;
  /** Rollouts of each iteration's policy on held-out seeds, for the curves. */
  readonly evaluations: number;
  readonly seed: number;
  readonly env?: EnvOptions;
  /**
   * Iterations whose states update the normaliser; after them it holds. Default: every iteration
   * (the paper's V2). Measured here: with 32 directions the normaliser's shift after each update
   * moved the policy more than the update did, and the policy's steps upright drifted down (from
   * 90-110 to 60-80 over 170 iterations); held after the first iteration, the same settings climbed.
   */
  readonly normaliserIterations?: number;
  /**
   * Search only along these directions of the weights (each a full weight vector): the directions
   * drawn are standard normal in their coordinates, and every step stays in their span (the gait
   * start's basis, gait.ts). Absent: every weight, as the paper.
   */
  readonly basis?: readonly Float64Array[];
  /** What a rollout is scored by (TRAIN_OBJECTIVES); default `return`. */
  readonly objective?: TrainObjective;
}

/**
 * What ARS ranks rollouts by. `return`: the task's reward summed, upstream's objective. `progress`:
 * a rollout that lasted all its steps scores 1 + PROGRESS_WEIGHT x its forward speed (m/s in its
 * starting heading), one that fell scores the share of its steps it lasted, less 1: any rollout
 * that stays up beats any that falls, and among those that stay up the faster wins. Not the task's
 * reward: upstream's posture and pose penalties make a march in place score below standing still
 * (measured: about -20 against +17 over 500 steps), so a search on it walks back to standing.
 */
export const TRAIN_OBJECTIVES = ['return', 'progress'] as const;
export type TrainObjective = (typeof TRAIN_OBJECTIVES)[number];
export const PROGRESS_WEIGHT = 10;

export function rolloutScore(r: RolloutResult, rolloutSteps: number, objective: TrainObjective = 'return'): number {
  if (objective === 'return') return r.return;
  return r.steps === rolloutSteps && r.ended === null ? 1 + PROGRESS_WEIGHT * r.forwardSpeed : r.steps / rolloutSteps - 1;
}

export interface IterationFigures {
  readonly iteration: number;
  /** Environment (control) steps taken so far, training rollouts only. */
  readonly steps: number;
  readonly meanReturn: number;
  readonly meanStepsUpright: number;
  readonly meanForwardSpeed: number;
  /** The share of the evaluation rollouts that lasted all rolloutSteps. */
  readonly survived: number;
  readonly returnStd: number;
  readonly seconds: number;
}

export interface TrainState {
  readonly policy: LinearPolicy;
  readonly stats: ReturnType<typeof emptyStats>;
  readonly iteration: number;
  readonly steps: number;
}

export async function trainArs(
  pool: RolloutPool,
  start: TrainState,
  s: TrainSettings,
  onIteration?: (state: TrainState, figures: IterationFigures) => Promise<void> | void,
): Promise<{ state: TrainState; history: IterationFigures[] }> {
  checkArsSettings(s);
  for (const field of ['iterations', 'rolloutSteps', 'evaluations'] as const) {
    if (!Number.isInteger(s[field]) || s[field] < 1) throw new ConfigError(`train.${field}`, s[field], 'must be a positive integer');
  }
  let state = start;
  const history: IterationFigures[] = [];
  const size = state.policy.weights.length;
  while (state.iteration < s.iterations) {
    const started = performance.now();
    const iteration = state.iteration;
    // Each iteration's draws come from (seed, iteration), so a resumed run continues the same way.
    const random = seededRandom(s.seed * 100_003 + iteration);
    const drawn = sampleDirections(random, s.directions, s.basis?.length ?? size);
    const directions = s.basis ? drawn.map((d) => inSpan(s.basis!, d, size)) : drawn;
    const { policy } = state;
    // The normaliser learns from the first `normaliserIterations` iterations' states, then holds.
    const updating = iteration < (s.normaliserIterations ?? Number.POSITIVE_INFINITY);
    const run = (weights: Float64Array, seed: number, collectStats: boolean) =>
      pool.run({ weights, mean: policy.mean, std: policy.std, seed, steps: s.rolloutSteps, env: s.env, collectStats });
    const seeds = directions.map(() => Math.floor(random() * 2 ** 31));
    const results = await Promise.all(
      directions.flatMap((d, k) => [
        run(perturbed(policy.weights, d, s.noise, 1), seeds[k]!, updating),
        run(perturbed(policy.weights, d, s.noise, -1), seeds[k]!, updating),
      ]),
    );
    const score = (r: RolloutResult) => rolloutScore(r, s.rolloutSteps, s.objective);
    const returns = directions.map((_, k) => [score(results[2 * k]!), score(results[2 * k + 1]!)] as const);
    const step = arsUpdate(policy.weights, directions, returns, s);
    const stats = emptyStats(policy.observationSize);
    mergeStats(stats, state.stats);
    if (updating) for (const r of results) if (r.stats) mergeStats(stats, r.stats);
    const { mean, std } = updating ? normaliser(stats) : policy;
    const next: LinearPolicy = { ...policy, weights: step.weights, mean, std };
    const steps = state.steps + results.reduce((sum, r) => sum + r.steps, 0);
    const evaluations: RolloutResult[] = await Promise.all(
      Array.from({ length: s.evaluations }, (_, e) => pool.run({ weights: next.weights, mean, std, seed: 2 ** 31 + e, steps: s.rolloutSteps, env: s.env })),
    );
    const average = (f: (r: RolloutResult) => number) => evaluations.reduce((sum, r) => sum + f(r), 0) / evaluations.length;
    const figures: IterationFigures = {
      iteration: iteration + 1,
      steps,
      meanReturn: average((r) => r.return),
      meanStepsUpright: average((r) => r.steps),
      meanForwardSpeed: average((r) => r.forwardSpeed),
      survived: average((r) => (r.steps === s.rolloutSteps && r.ended === null ? 1 : 0)),
      returnStd: step.returnStd,
      seconds: (performance.now() - started) / 1000,
    };
    state = { policy: next, stats, iteration: iteration + 1, steps };
    history.push(figures);
    await onIteration?.(state, figures);
  }
  return { state, history };
}

/** The weight vector sum_i coordinates_i basis_i. */
function inSpan(basis: readonly Float64Array[], coordinates: Float64Array, size: number): Float64Array {
  const out = new Float64Array(size);
  basis.forEach((b, i) => {
    if (b.length !== size) throw new ConfigError(`basis[${i}]`, b.length, `must have one number per weight (${size})`);
    const c = coordinates[i]!;
    for (let j = 0; j < size; j++) out[j] += c * b[j]!;
  });
  return out;
}
