/**
 * Reward search bookkeeping: every candidate's per-seed results (a trained policy graded on fresh
 * seeds by the trusted grader, or the seed's failure and the sandbox's verdict), the ranking by
 * mean success over training seeds with its spread, and how noisy one candidate is across seeds,
 * which says how far apart two candidates must be before the ranking means anything.
 *
 * A failed seed is that seed's result (success 0 in the mean, its verdict recorded); the
 * generation goes on. The seed-noise estimate leaves failed seeds out (see seedNoise).
 */
import { z } from 'zod';
import { ConfigError } from '../errors.ts';

/** One point of a seed's training curve: the environment's own return and the success rate at that step. */
export const CurvePoint = z
  .object({
    step: z.int().min(0),
    envReturn: z.number(),
    success: z.number().min(0).max(1),
  })
  .strict();
export type CurvePoint = z.infer<typeof CurvePoint>;

/** At most this many curve points per seed: the curve is a summary (it is also fed back to the model), not a log. */
export const MAX_CURVE_POINTS = 50;

/** Indices of at most `n` evenly spaced rows of `length`, the first and the last included. */
export function evenlySpaced(length: number, n: number): number[] {
  const keep = Math.min(n, length);
  if (keep <= 0) return [];
  if (keep === 1) return [length - 1];
  return [...new Set(Array.from({ length: keep }, (_, k) => Math.round((k * (length - 1)) / (keep - 1))))];
}

export const SeedResult = z
  .object({
    seed: z.int().min(0),
    /** Graded success rate on fresh seeds, in [0, 1]; null when the seed failed. */
    success: z.number().min(0).max(1).nullable(),
    /** Episodes the grader ran for this seed's policy. */
    episodes: z.int().min(0),
    /** Why the seed failed: the sandbox's verdict (wall, cpu, memory, processes), the job's error, or the grader's refusal. */
    failure: z.string().optional(),
    /** Training seconds, as the job's own log says (feedback, never the score). */
    trainSeconds: z.number().min(0).optional(),
    /** A few points of the training curve from the job's own log (feedback, never the score). */
    curve: z.array(CurvePoint).max(MAX_CURVE_POINTS).optional(),
  })
  .strict();
export type SeedResult = z.infer<typeof SeedResult>;

export const CandidateResult = z
  .object({
    generation: z.int().min(0),
    name: z.string(),
    /** sha256 of the source: candidates are identified by content. */
    sourceSha256: z.string().regex(/^[0-9a-f]{64}$/),
    seeds: z.array(SeedResult).min(1),
  })
  .strict();
export type CandidateResult = z.infer<typeof CandidateResult>;

export interface Ranked {
  readonly name: string;
  readonly generation: number;
  readonly sourceSha256: string;
  /** Mean success over training seeds, failed seeds counted as 0. */
  readonly mean: number;
  /** Sample standard deviation across seeds (0 for one seed). */
  readonly std: number;
  /** Standard error of the mean. */
  readonly stderr: number;
  readonly failedSeeds: number;
  readonly seeds: number;
}

function meanOf(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

function stdOf(xs: readonly number[]): number {
  if (xs.length < 2) return 0;
  const m = meanOf(xs);
  return Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1));
}

export function summarize(candidate: CandidateResult): Ranked {
  const values = candidate.seeds.map((s) => s.success ?? 0);
  const std = stdOf(values);
  return {
    name: candidate.name,
    generation: candidate.generation,
    sourceSha256: candidate.sourceSha256,
    mean: meanOf(values),
    std,
    stderr: std / Math.sqrt(values.length),
    failedSeeds: candidate.seeds.filter((s) => s.success === null).length,
    seeds: values.length,
  };
}

/**
 * Means and spreads closer than this are a tie. Success rates are counts over at most
 * 10,000 episodes, so two different means differ by at least 1e-5 over 10 seeds; the same
 * rates summed in another order differ by an ulp or two (0.1 + 0.2 + 0.3 is not 0.3 + 0.2 + 0.1).
 */
export const RANK_TIE = 1e-9;

/** b - a, or 0 when they are within RANK_TIE: a comparison that rounding cannot decide. */
function beyondTie(a: number, b: number): number {
  return Math.abs(b - a) > RANK_TIE ? b - a : 0;
}

/**
 * Best first: mean success, then fewer failed seeds, then lower spread, then earlier generation
 * and name (a stable order, so a rerun names the same winner). Means and spreads within RANK_TIE
 * tie, so the order of a candidate's seeds never decides on rounding alone.
 */
export function rank(candidates: readonly CandidateResult[]): Ranked[] {
  if (!candidates.length) throw new ConfigError('candidates', candidates, 'must not be empty');
  return candidates
    .map(summarize)
    .sort(
      (a, b) =>
        beyondTie(a.mean, b.mean) ||
        a.failedSeeds - b.failedSeeds ||
        beyondTie(b.std, a.std) ||
        a.generation - b.generation ||
        (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
    );
}

/** How noisy one candidate's success is across training seeds (see seedNoise). */
export interface SeedNoise {
  /** Pooled within-candidate standard deviation of graded success across training seeds; null when no candidate has two graded seeds. */
  readonly pooledStd: number | null;
  /** Candidates with at least two graded seeds: those the spread is measured on. */
  readonly candidates: number;
  /** Graded seeds of those candidates. */
  readonly gradedSeeds: number;
  /** The fewest training seeds (failed ones included) of any candidate: the seeds behind a mean in the ranking. Null for no candidates. */
  readonly seedsPerCandidate: number | null;
  /** Differences in mean success below this are within seed noise; null when the noise is unknown. */
  readonly distinguishableDifference: number | null;
}

/**
 * How noisy one candidate's success is from one training seed to another, and how far apart two
 * candidates' means must be before their order in the ranking means anything.
 *
 * The spread is measured within candidates: each candidate's graded seeds against that
 * candidate's own mean, pooled over every candidate with at least two graded seeds
 * (sqrt(sum of squared deviations / sum of (graded seeds - 1))), so a candidate counts in
 * proportion to its seeds. A failed seed is left out: it is the sandbox's or the job's verdict,
 * not a draw of training noise (the ranking still counts it as 0). A candidate with fewer than
 * two graded seeds says nothing about spread. With no candidate left, the noise is unknown (null),
 * never 0, and so is the distinguishable difference.
 *
 * The distinguishable difference is twice the standard error of the difference between two means
 * of `seedsPerCandidate` seeds each: 2 * sqrt(2) * pooledStd / sqrt(seedsPerCandidate).
 */
export function seedNoise(candidates: readonly CandidateResult[]): SeedNoise {
  const graded = candidates.map((c) => c.seeds.flatMap((s) => (s.success === null ? [] : [s.success]))).filter((values) => values.length >= 2);
  const seedsPerCandidate = candidates.length ? Math.min(...candidates.map((c) => c.seeds.length)) : null;
  const gradedSeeds = graded.reduce((n, values) => n + values.length, 0);
  if (!graded.length || seedsPerCandidate === null) {
    return { pooledStd: null, candidates: 0, gradedSeeds: 0, seedsPerCandidate, distinguishableDifference: null };
  }
  const squares = graded.reduce((sum, values) => {
    const m = meanOf(values);
    return sum + values.reduce((a, x) => a + (x - m) ** 2, 0);
  }, 0);
  const pooledStd = Math.sqrt(squares / (gradedSeeds - graded.length));
  return {
    pooledStd,
    candidates: graded.length,
    gradedSeeds,
    seedsPerCandidate,
    distinguishableDifference: 2 * Math.sqrt(2) * (pooledStd / Math.sqrt(seedsPerCandidate)),
  };
}
