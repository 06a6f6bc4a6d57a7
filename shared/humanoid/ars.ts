/**
 * Augmented Random Search (Mania, Guy and Recht 2018, "Simple random search provides a
 * competitive approach to reinforcement learning", V2-t): a linear policy on normalised
 * observations, trained by random search over its weights. ARS reached MuJoCo's Humanoid with
 * linear policies; here it trains the G1 on CPU cores where no GPU is.
 *
 * An iteration: N directions delta_k with standard normal entries; two rollouts per direction, of
 * the weights M + nu delta_k and M - nu delta_k, each returning r+ and r-; the b directions with
 * the largest max(r+, r-); the step M += alpha / (b sigma_R) sum_k (r+_k - r-_k) delta_k, sigma_R
 * the standard deviation of those 2b returns. Observations are normalised by the running mean and
 * standard deviation of every state seen so far (the paper's V2), updated after each iteration.
 *
 * The policy: action = tanh(M [(obs - mean) / std; 1]), in (-1, 1) as upstream's tanh-normal
 * policy's mean action, so the ONNX export is a MatMul, an Add and a Tanh behind the
 * normalisation. The constant input (a bias per action) is not the paper's: position targets
 * around the keyframe sag under the robot's weight (the knees' kp 75 against some 17 N m each),
 * and without a bias no linear map of normalised observations (mean 0) can hold a steady offset,
 * so every policy near zero crouches and falls within 1.5 s.
 *
 * Defaults follow the ARS paper's Humanoid-v1 settings where a small machine allows (step size
 * 0.02, noise 0.0075; N = b = 230 there, on 48 cores), with N set by the config.
 */
import { ConfigError } from '../errors.ts';
import type { Random } from '../random.ts';

/** A standard normal draw (Box-Muller). */
export function gaussian(random: Random): number {
  let u = 0;
  while (u === 0) u = random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}

/**
 * The policy's parameters: weights (actions x (observations + 1), row-major, each row's last
 * entry the action's bias) and the normaliser.
 */
export interface LinearPolicy {
  readonly observationSize: number;
  readonly actionSize: number;
  readonly weights: Float64Array;
  readonly mean: Float64Array;
  readonly std: Float64Array;
}

/** Weights of a policy: a row of observations plus a bias per action. */
export function weightCount(observationSize: number, actionSize: number): number {
  return (observationSize + 1) * actionSize;
}

export function zeroPolicy(observationSize: number, actionSize: number): LinearPolicy {
  return {
    observationSize,
    actionSize,
    weights: new Float64Array(weightCount(observationSize, actionSize)),
    mean: new Float64Array(observationSize),
    std: new Float64Array(observationSize).fill(1),
  };
}

/** action = tanh(weights [(obs - mean) / std; 1]), written into `out`. */
export function act(policy: LinearPolicy, weights: Float64Array, observation: Float64Array, out: Float64Array): Float64Array {
  const { observationSize: n, actionSize: m, mean, std } = policy;
  for (let i = 0; i < m; i++) {
    const row = i * (n + 1);
    let sum = weights[row + n]!;
    for (let j = 0; j < n; j++) sum += weights[row + j]! * ((observation[j]! - mean[j]!) / std[j]!);
    out[i] = Math.tanh(sum);
  }
  return out;
}

/** Running sums of observations, merged across rollouts and workers. */
export interface ObservationStats {
  count: number;
  readonly sum: Float64Array;
  readonly sumSquares: Float64Array;
}

export function emptyStats(size: number): ObservationStats {
  return { count: 0, sum: new Float64Array(size), sumSquares: new Float64Array(size) };
}

export function addObservation(stats: ObservationStats, observation: Float64Array): void {
  stats.count += 1;
  for (let j = 0; j < observation.length; j++) {
    stats.sum[j] += observation[j]!;
    stats.sumSquares[j] += observation[j]! ** 2;
  }
}

export function mergeStats(into: ObservationStats, from: ObservationStats): void {
  into.count += from.count;
  for (let j = 0; j < into.sum.length; j++) {
    into.sum[j] += from.sum[j]!;
    into.sumSquares[j] += from.sumSquares[j]!;
  }
}

/** The normaliser from all observations so far; a component that has not varied keeps std 1. */
export function normaliser(stats: ObservationStats): { mean: Float64Array; std: Float64Array } {
  const size = stats.sum.length;
  const mean = new Float64Array(size);
  const std = new Float64Array(size).fill(1);
  if (stats.count === 0) return { mean, std };
  for (let j = 0; j < size; j++) {
    mean[j] = stats.sum[j]! / stats.count;
    const variance = stats.sumSquares[j]! / stats.count - mean[j]! ** 2;
    if (variance > 1e-8) std[j] = Math.sqrt(variance);
  }
  return { mean, std };
}

export interface ArsSettings {
  /** Directions per iteration (N). */
  readonly directions: number;
  /** The best directions kept (b <= N). */
  readonly topDirections: number;
  /** alpha. */
  readonly stepSize: number;
  /** nu. */
  readonly noise: number;
}

export function checkArsSettings(s: ArsSettings): ArsSettings {
  if (!Number.isInteger(s.directions) || s.directions < 1) throw new ConfigError('ars.directions', s.directions, 'must be a positive integer');
  if (!Number.isInteger(s.topDirections) || s.topDirections < 1 || s.topDirections > s.directions) {
    throw new ConfigError('ars.topDirections', s.topDirections, `must be an integer from 1 to ars.directions (${s.directions})`);
  }
  if (!(s.stepSize > 0)) throw new ConfigError('ars.stepSize', s.stepSize, 'must be positive');
  if (!(s.noise > 0)) throw new ConfigError('ars.noise', s.noise, 'must be positive');
  return s;
}

/** The N directions of an iteration, each observations x actions standard normal numbers. */
export function sampleDirections(random: Random, count: number, size: number): Float64Array[] {
  return Array.from({ length: count }, () => Float64Array.from({ length: size }, () => gaussian(random)));
}

/** The perturbed weights of one rollout: weights + sign nu delta. */
export function perturbed(weights: Float64Array, direction: Float64Array, noise: number, sign: 1 | -1): Float64Array {
  const out = new Float64Array(weights.length);
  for (let i = 0; i < out.length; i++) out[i] = weights[i]! + sign * noise * direction[i]!;
  return out;
}

export interface ArsStep {
  readonly weights: Float64Array;
  /** sigma_R of the kept returns (0 when they were all equal: then no step). */
  readonly returnStd: number;
  /** The kept directions' indices, best first. */
  readonly kept: readonly number[];
}

/** One ARS update from each direction's pair of returns. */
export function arsUpdate(
  weights: Float64Array,
  directions: readonly Float64Array[],
  returns: readonly (readonly [number, number])[],
  s: ArsSettings,
): ArsStep {
  if (returns.length !== directions.length) throw new ConfigError('returns', returns.length, `must have one pair per direction (${directions.length})`);
  for (const [k, [plus, minus]] of returns.entries()) {
    if (!Number.isFinite(plus) || !Number.isFinite(minus)) throw new ConfigError(`returns[${k}]`, [plus, minus], 'must be finite numbers');
  }
  const order = returns.map((r, k) => ({ k, best: Math.max(r[0], r[1]) })).sort((a, b) => b.best - a.best || a.k - b.k);
  const kept = order.slice(0, s.topDirections).map((o) => o.k);
  const values = kept.flatMap((k) => [returns[k]![0], returns[k]![1]]);
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const returnStd = Math.sqrt(values.reduce((a, v) => a + (v - mean) ** 2, 0) / values.length);
  const next = Float64Array.from(weights);
  if (returnStd === 0) return { weights: next, returnStd, kept };
  const scale = s.stepSize / (kept.length * returnStd);
  for (const k of kept) {
    const difference = returns[k]![0] - returns[k]![1];
    const direction = directions[k]!;
    for (let i = 0; i < next.length; i++) next[i] += scale * difference * direction[i]!;
  }
  return { weights: next, returnStd, kept };
}
