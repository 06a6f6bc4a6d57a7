/**
 * The surrogate model of the closed-loop molecular discovery pipeline: a Gaussian process on
 * molecular fingerprints that, each round, is fitted on every molecule measured so far (target:
 * the xTB HOMO-LUMO gap in eV, where LOWER is better), predicts the unmeasured pool, and proposes
 * the next batch to measure.
 *
 * Steps of one round:
 *   1. `fitTanimotoGp(fingerprints, gaps)`: a GP with the Tanimoto kernel
 *      k(x, y) = signalVariance * T(x, y), Gaussian noise and a constant mean (the training
 *      mean). Signal variance and noise variance are chosen by maximising the log marginal
 *      likelihood over a fixed grid (deterministic, no optimiser).
 *   2. `proposeBatch(...)`: predicts the pool, scores it with an acquisition function for
 *      minimisation (expected improvement by default, or a lower confidence bound), and picks an
 *      exploit arm (best scores) and a seeded explore arm (random among the most uncertain).
 *   3. `mae`, `spearman`, `hitEnrichment`: how well last round's predictions matched the
 *      measurements, for the round report.
 *
 * Fingerprints are bitsets packed 8 bits per byte (bit i is byte i >> 3, bit i & 7), the layout
 * the RDKit side produces. All linear algebra (Cholesky with jitter, triangular solves) is here:
 * it is a few dozen lines and avoids a numeric dependency in the Lambda bundle.
 */
import { z } from 'zod';
import { CholeskyError } from './errors.ts';
import { ConfigError } from '#shared/errors.ts';
import { seededRandom } from '#shared/random.ts';

// ---------------------------------------------------------------------------------------------
// Fingerprints
// ---------------------------------------------------------------------------------------------

/** A fingerprint: nBits bits packed 8 per byte, bit i in byte i >> 3 at position i & 7. */
export type Fingerprint = Uint8Array;

/** Bits set in each byte value, for popcounts over packed fingerprints. */
const BYTE_POPCOUNT = (() => {
  const table = new Uint8Array(256);
  for (let value = 1; value < 256; value++) table[value] = (value & 1) + table[value >> 1]!;
  return table;
})();

/** A packed fingerprint of nBits bits with the given bits on (repeats are harmless). */
export function fingerprintFromOnBits(onBits: readonly number[], nBits: number): Fingerprint {
  if (!Number.isSafeInteger(nBits) || nBits < 1) throw new ConfigError('nBits', nBits, 'must be an integer >= 1');
  const fingerprint = new Uint8Array(Math.ceil(nBits / 8));
  for (const bit of onBits) {
    if (!Number.isSafeInteger(bit) || bit < 0 || bit >= nBits) {
      throw new ConfigError('onBits', bit, `must be integers in [0, ${nBits - 1}]`);
    }
    fingerprint[bit >> 3]! |= 1 << (bit & 7);
  }
  return fingerprint;
}

/** A packed fingerprint from an unpacked one: one byte per bit, each 0 or 1. */
export function fingerprintFromUnpacked(bits: Uint8Array): Fingerprint {
  if (bits.length < 1) throw new ConfigError('bits.length', bits.length, 'must be >= 1');
  const fingerprint = new Uint8Array(Math.ceil(bits.length / 8));
  for (let bit = 0; bit < bits.length; bit++) {
    const value = bits[bit]!;
    if (value === 1) fingerprint[bit >> 3]! |= 1 << (bit & 7);
    else if (value !== 0) throw new ConfigError(`bits[${bit}]`, value, 'must be 0 or 1');
  }
  return fingerprint;
}

/** The indices of the bits that are on, ascending. */
export function fingerprintOnBits(fingerprint: Fingerprint): number[] {
  const onBits: number[] = [];
  for (let byte = 0; byte < fingerprint.length; byte++) {
    const value = fingerprint[byte]!;
    if (value === 0) continue;
    for (let bit = 0; bit < 8; bit++) if (value & (1 << bit)) onBits.push(byte * 8 + bit);
  }
  return onBits;
}

/** The number of bits that are on. */
export function popcount(fingerprint: Fingerprint): number {
  let count = 0;
  for (let byte = 0; byte < fingerprint.length; byte++) count += BYTE_POPCOUNT[fingerprint[byte]!]!;
  return count;
}

/**
 * Tanimoto similarity |a & b| / |a | b|. Two empty fingerprints score 1 (0/0 := 1): they are
 * identical, and it keeps k(x, x) = signalVariance for every x, so the GP never claims certainty
 * about an empty fingerprint. An empty and a non-empty fingerprint score 0.
 */
export function tanimoto(a: Fingerprint, b: Fingerprint): number {
  if (a.length !== b.length) throw new ConfigError('fingerprint.length', b.length, `must equal the other fingerprint's ${a.length} bytes`);
  let both = 0;
  let either = 0;
  for (let byte = 0; byte < a.length; byte++) {
    both += BYTE_POPCOUNT[a[byte]! & b[byte]!]!;
    either += BYTE_POPCOUNT[a[byte]! | b[byte]!]!;
  }
  return either === 0 ? 1 : both / either;
}

/**
 * Tanimoto rows of many queries against one fixed set, through an inverted index (bit -> the set
 * members that have it). Chemical fingerprints are sparse (Morgan 2048: tens of bits on), so
 * counting shared bits through the index costs about (bits on) x (members per bit) instead of
 * n x (bytes per fingerprint) for a dense popcount.
 */
class TanimotoIndex {
  private readonly offsets: Int32Array;
  private readonly members: Int32Array;
  private readonly sizes: Float64Array;
  private readonly counts: Int32Array;

  constructor(
    readonly fingerprints: readonly Fingerprint[],
    readonly nBytes: number,
  ) {
    const nBits = nBytes * 8;
    const n = fingerprints.length;
    this.sizes = new Float64Array(n);
    this.counts = new Int32Array(n);
    const perBit = new Int32Array(nBits + 1);
    const onBits = fingerprints.map((fingerprint) => fingerprintOnBits(fingerprint));
    onBits.forEach((bits, member) => {
      this.sizes[member] = bits.length;
      for (const bit of bits) perBit[bit + 1]!++;
    });
    for (let bit = 0; bit < nBits; bit++) perBit[bit + 1]! += perBit[bit]!;
    this.offsets = perBit.slice();
    this.members = new Int32Array(perBit[nBits]!);
    onBits.forEach((bits, member) => {
      for (const bit of bits) this.members[perBit[bit]!++] = member;
    });
  }

  /** Writes T(query, member) for every member into `row`. */
  row(query: Fingerprint, row: Float64Array): void {
    const counts = this.counts;
    counts.fill(0);
    let querySize = 0;
    for (let byte = 0; byte < query.length; byte++) {
      const value = query[byte]!;
      if (value === 0) continue;
      for (let bit = 0; bit < 8; bit++) {
        if ((value & (1 << bit)) === 0) continue;
        querySize++;
        const index = byte * 8 + bit;
        const end = this.offsets[index + 1]!;
        for (let at = this.offsets[index]!; at < end; at++) counts[this.members[at]!]!++;
      }
    }
    for (let member = 0; member < counts.length; member++) {
      const both = counts[member]!;
      const either = querySize + this.sizes[member]! - both;
      row[member] = either === 0 ? 1 : both / either;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Linear algebra (dense, row-major n x n Float64Array)
// ---------------------------------------------------------------------------------------------

export interface CholeskyResult {
  /** Lower-triangular L, row-major n x n (upper triangle zero), with L L^T = A + jitter I. */
  readonly factor: Float64Array;
  /** What was added to the diagonal to make A positive definite (0 when nothing was needed). */
  readonly jitter: number;
}

export interface CholeskyOptions {
  /** First jitter tried after a failure, relative to the mean diagonal. Default 1e-10. */
  readonly initialRelativeJitter?: number;
  /** Largest jitter tried, relative to the mean diagonal; beyond it, CholeskyError. Default 1e-2. */
  readonly maxRelativeJitter?: number;
}

/**
 * Cholesky factor of a symmetric matrix (only the lower triangle of `a` is read), adding jitter to
 * the diagonal when a pivot is not positive: first none, then 1e-10 x the mean diagonal, growing
 * 10x per try. Kernel matrices of duplicate or near-duplicate molecules are singular up to
 * rounding, and a tiny diagonal shift is the standard fix that barely changes the fit.
 */
export function cholesky(a: Float64Array, n: number, options: CholeskyOptions = {}): CholeskyResult {
  if (a.length !== n * n) throw new ConfigError('a.length', a.length, `must be n * n = ${n * n}`);
  let meanDiagonal = 0;
  for (let i = 0; i < n; i++) meanDiagonal += a[i * n + i]! / n;
  if (!(meanDiagonal > 0)) meanDiagonal = 1;
  const first = (options.initialRelativeJitter ?? 1e-10) * meanDiagonal;
  const last = (options.maxRelativeJitter ?? 1e-2) * meanDiagonal;
  const factor = new Float64Array(n * n);
  for (let jitter = 0; jitter <= last * (1 + 1e-9); jitter = jitter === 0 ? first : jitter * 10) {
    if (choleskyInPlace(a, n, jitter, factor)) return { factor, jitter };
  }
  throw new CholeskyError(`matrix of size ${n} is not positive definite even with jitter ${last} on the diagonal`);
}

/**
 * One attempt: row-oriented Cholesky-Crout (contiguous inner products), four rows below the pivot
 * at a time so that row j is read once per four dot products (about 2-3x faster in V8 than one
 * row at a time). False on a pivot that is not positive.
 */
function choleskyInPlace(a: Float64Array, n: number, jitter: number, factor: Float64Array): boolean {
  factor.fill(0);
  for (let j = 0; j < n; j++) {
    const rowJ = j * n;
    let pivot = a[rowJ + j]! + jitter;
    for (let k = 0; k < j; k++) pivot -= factor[rowJ + k]! * factor[rowJ + k]!;
    if (!(pivot > 0) || !Number.isFinite(pivot)) return false;
    const diagonal = Math.sqrt(pivot);
    factor[rowJ + j] = diagonal;
    let i = j + 1;
    for (; i + 3 < n; i += 4) {
      const r0 = i * n;
      const r1 = r0 + n;
      const r2 = r1 + n;
      const r3 = r2 + n;
      let s0 = a[r0 + j]!;
      let s1 = a[r1 + j]!;
      let s2 = a[r2 + j]!;
      let s3 = a[r3 + j]!;
      for (let k = 0; k < j; k++) {
        const l = factor[rowJ + k]!;
        s0 -= factor[r0 + k]! * l;
        s1 -= factor[r1 + k]! * l;
        s2 -= factor[r2 + k]! * l;
        s3 -= factor[r3 + k]! * l;
      }
      factor[r0 + j] = s0 / diagonal;
      factor[r1 + j] = s1 / diagonal;
      factor[r2 + j] = s2 / diagonal;
      factor[r3 + j] = s3 / diagonal;
    }
    for (; i < n; i++) {
      const rowI = i * n;
      let sum = a[rowI + j]!;
      for (let k = 0; k < j; k++) sum -= factor[rowI + k]! * factor[rowJ + k]!;
      factor[rowI + j] = sum / diagonal;
    }
  }
  return true;
}

/** Solves L x = b (L lower-triangular, row-major); writes x into `out` (may alias b). */
export function solveLower(factor: Float64Array, n: number, b: ArrayLike<number>, out: Float64Array = new Float64Array(n)): Float64Array {
  for (let i = 0; i < n; i++) {
    const row = i * n;
    let sum = b[i]!;
    for (let k = 0; k < i; k++) sum -= factor[row + k]! * out[k]!;
    out[i] = sum / factor[row + i]!;
  }
  return out;
}

/** Solves L^T x = b for the same L; writes x into `out` (may alias b). */
export function solveUpper(factor: Float64Array, n: number, b: ArrayLike<number>, out: Float64Array = new Float64Array(n)): Float64Array {
  for (let i = 0; i < n; i++) out[i] = b[i]!;
  for (let i = n - 1; i >= 0; i--) {
    out[i] = out[i]! / factor[i * n + i]!;
    const xi = out[i]!;
    // Column i of L^T is row i of L: subtract its contribution from every earlier unknown.
    for (let k = 0; k < i; k++) out[k] = out[k]! - factor[i * n + k]! * xi;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Gaussian process
// ---------------------------------------------------------------------------------------------

export interface GpHyperparameters {
  /** Prior variance of the latent function (eV^2): k(x, x) = signalVariance. */
  readonly signalVariance: number;
  /** Observation noise variance (eV^2), including the jitter Cholesky needed, if any. */
  readonly noiseVariance: number;
  /** The constant prior mean: the mean of the training targets. */
  readonly mean: number;
}

export interface GpFitOptions {
  /** Signal-variance grid as multiples of the training targets' variance. Default 2^-3 .. 2^3. */
  readonly signalScales?: readonly number[];
  /** Noise grid as noise / signal variance ratios. Default 1e-4 .. 3 (see DEFAULT_NOISE_RATIOS). */
  readonly noiseRatios?: readonly number[];
}

/** One predicted molecule: the posterior mean and the latent function's standard deviation. */
export interface Prediction {
  readonly mean: number;
  /** Std of the latent function (no observation noise): what the acquisition functions use. */
  readonly std: number;
}

/** What `toJSON` writes: the training set and the chosen hyperparameters, no matrices. */
export const SerializedTanimotoGpSchema = z.object({
  format: z.literal('tanimoto-gp/v1'),
  nBytes: z.number().int().positive(),
  /** Training fingerprints, base64 of the packed bytes. */
  fingerprints: z.array(z.string()).min(1),
  targets: z.array(z.number()).min(1),
  signalVariance: z.number().positive(),
  /** Noise / signal variance ratio the factor was built with, jitter included. */
  noiseRatio: z.number().nonnegative(),
  mean: z.number(),
  logMarginalLikelihood: z.number(),
});
export type SerializedTanimotoGp = z.infer<typeof SerializedTanimotoGpSchema>;

export const DEFAULT_SIGNAL_SCALES: readonly number[] = [0.125, 0.25, 0.5, 1, 2, 4, 8];
/**
 * From near-interpolation (1e-4) to noise three times the signal. xTB gaps are deterministic for
 * a given conformer, but conformer choice and the kernel's misfit act as noise of 1-30 %.
 */
export const DEFAULT_NOISE_RATIOS: readonly number[] = [1e-4, 1e-3, 1e-2, 0.03, 0.1, 0.3, 1, 3];

/**
 * A fitted GP. Internally the factor is that of the unit-scale matrix A = T + r I (T the Tanimoto
 * matrix, r = noise / signal), so K = signalVariance * A and one factor serves every signal
 * variance on the grid.
 */
export class TanimotoGp {
  readonly hyperparameters: GpHyperparameters;
  /** The lowest training target: the incumbent of expected improvement by default. */
  readonly bestObserved: number;
  readonly trainingSize: number;
  private readonly index: TanimotoIndex;
  /** A^-1 (y - mean): the posterior mean is mean + t^T alphaUnit. */
  private readonly alphaUnit: Float64Array;

  private constructor(
    private readonly fingerprints: readonly Fingerprint[],
    private readonly targets: readonly number[],
    readonly nBytes: number,
    private readonly signalVariance: number,
    private readonly noiseRatio: number,
    private readonly mean: number,
    private readonly factor: Float64Array,
    readonly logMarginalLikelihood: number,
  ) {
    const n = targets.length;
    this.trainingSize = n;
    this.hyperparameters = { signalVariance, noiseVariance: noiseRatio * signalVariance, mean };
    this.bestObserved = Math.min(...targets);
    this.index = new TanimotoIndex(fingerprints, nBytes);
    const centred = Float64Array.from(targets, (y) => y - mean);
    this.alphaUnit = solveUpper(factor, n, solveLower(factor, n, centred));
  }

  /** Fits on every measured molecule, choosing hyperparameters on the grid. */
  static fit(fingerprints: readonly Fingerprint[], targets: readonly number[], options: GpFitOptions = {}): TanimotoGp {
    const n = targets.length;
    if (n < 1) throw new ConfigError('targets.length', n, 'must be >= 1');
    if (fingerprints.length !== n) throw new ConfigError('fingerprints.length', fingerprints.length, `must equal targets.length ${n}`);
    targets.forEach((y, i) => {
      if (!Number.isFinite(y)) throw new ConfigError(`targets[${i}]`, y, 'must be a finite number');
    });
    const nBytes = commonByteLength(fingerprints, 'fingerprints');
    const signalScales = options.signalScales ?? DEFAULT_SIGNAL_SCALES;
    const noiseRatios = options.noiseRatios ?? DEFAULT_NOISE_RATIOS;
    requirePositiveList('signalScales', signalScales);
    requirePositiveList('noiseRatios', noiseRatios);

    const mean = targets.reduce((sum, y) => sum + y, 0) / n;
    const centred = Float64Array.from(targets, (y) => y - mean);
    const variance = centred.reduce((sum, d) => sum + d * d, 0) / n;
    // All targets equal (or one point): any positive scale works; 1 eV^2 keeps std meaningful.
    const scale = variance > 0 ? variance : 1;
    const tanimotoMatrix = kernelMatrix(fingerprints, nBytes);

    // LML(s, r) = -1/2 y^T A^-1 y / s - n/2 ln s - 1/2 ln|A| - n/2 ln 2 pi, with A = T + r I:
    // one Cholesky per noise ratio, then every signal variance on the grid is O(1).
    let best: { lml: number; signalVariance: number; noiseRatio: number; factor: Float64Array } | undefined;
    const shifted = new Float64Array(n * n);
    for (const ratio of noiseRatios) {
      shifted.set(tanimotoMatrix);
      for (let i = 0; i < n; i++) shifted[i * n + i]! += ratio;
      const { factor, jitter } = cholesky(shifted, n);
      let logDet = 0;
      for (let i = 0; i < n; i++) logDet += 2 * Math.log(factor[i * n + i]!);
      const whitened = solveLower(factor, n, centred);
      let quadratic = 0;
      for (let i = 0; i < n; i++) quadratic += whitened[i]! * whitened[i]!;
      for (const signalScale of signalScales) {
        const s = signalScale * scale;
        const lml = (-0.5 * quadratic) / s - 0.5 * n * Math.log(s) - 0.5 * logDet - 0.5 * n * Math.log(2 * Math.PI);
        // Strictly greater: on a tie the earlier (smaller-noise, smaller-signal) grid point wins.
        if (best === undefined || lml > best.lml) best = { lml, signalVariance: s, noiseRatio: ratio + jitter, factor };
      }
    }
    const chosen = best!;
    return new TanimotoGp(fingerprints, [...targets], nBytes, chosen.signalVariance, chosen.noiseRatio, mean, chosen.factor, chosen.lml);
  }

  /** Rebuilds a model from `toJSON` output: one Cholesky, no grid search. */
  static fromJSON(json: unknown): TanimotoGp {
    const parsed = SerializedTanimotoGpSchema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const received = issue.path.reduce<unknown>(
        (at, key) => (at !== null && typeof at === 'object' ? (at as Record<PropertyKey, unknown>)[key] : undefined),
        json,
      );
      throw new ConfigError(['model', ...issue.path].join('.'), received, issue.message);
    }
    const data = parsed.data;
    if (data.fingerprints.length !== data.targets.length) {
      throw new ConfigError('model.fingerprints.length', data.fingerprints.length, `must equal model.targets.length ${data.targets.length}`);
    }
    const fingerprints = data.fingerprints.map((text, i) => {
      const bytes = new Uint8Array(Buffer.from(text, 'base64'));
      if (bytes.length !== data.nBytes) throw new ConfigError(`model.fingerprints[${i}]`, text, `must decode to ${data.nBytes} bytes`);
      return bytes;
    });
    const n = data.targets.length;
    const shifted = kernelMatrix(fingerprints, data.nBytes);
    for (let i = 0; i < n; i++) shifted[i * n + i]! += data.noiseRatio;
    const { factor, jitter } = cholesky(shifted, n);
    return new TanimotoGp(
      fingerprints,
      data.targets,
      data.nBytes,
      data.signalVariance,
      data.noiseRatio + jitter,
      data.mean,
      factor,
      data.logMarginalLikelihood,
    );
  }

  toJSON(): SerializedTanimotoGp {
    return {
      format: 'tanimoto-gp/v1',
      nBytes: this.nBytes,
      fingerprints: this.fingerprints.map((fingerprint) => Buffer.from(fingerprint.buffer, fingerprint.byteOffset, fingerprint.byteLength).toString('base64')),
      targets: [...this.targets],
      signalVariance: this.signalVariance,
      noiseRatio: this.noiseRatio,
      mean: this.mean,
      logMarginalLikelihood: this.logMarginalLikelihood,
    };
  }

  /** Posterior mean and latent std for each fingerprint. */
  predict(fingerprints: readonly Fingerprint[]): Prediction[] {
    const { means, stds } = this.predictArrays(fingerprints);
    return Array.from(means, (mean, i) => ({ mean, std: stds[i]! }));
  }

  /**
   * The same as `predict`, as two typed arrays (no object per molecule, for large pools). Cost per
   * query: the Tanimoto row through the index, O(n), then one triangular solve, O(n^2), which
   * dominates for n in the hundreds. Queries go through the solve four at a time: each row of L is
   * then read once per four queries, which measured about 3x faster than one at a time.
   */
  predictArrays(fingerprints: readonly Fingerprint[]): { means: Float64Array; stds: Float64Array } {
    const n = this.trainingSize;
    const count = fingerprints.length;
    const means = new Float64Array(count);
    const stds = new Float64Array(count);
    const rows = [0, 1, 2, 3].map(() => new Float64Array(n));
    const [w0, w1, w2, w3] = [0, 1, 2, 3].map(() => new Float64Array(n)) as [Float64Array, Float64Array, Float64Array, Float64Array];
    const [t0, t1, t2, t3] = rows as [Float64Array, Float64Array, Float64Array, Float64Array];
    const factor = this.factor;
    const explained = new Float64Array(4);
    for (let start = 0; start < count; start += 4) {
      const size = Math.min(4, count - start);
      for (let b = 0; b < 4; b++) {
        if (b >= size) {
          rows[b]!.fill(0); // padding for the last group; its results are discarded
          continue;
        }
        const fingerprint = fingerprints[start + b]!;
        if (fingerprint.length !== this.nBytes) {
          throw new ConfigError(`fingerprints[${start + b}].length`, fingerprint.length, `must be the model's ${this.nBytes} bytes`);
        }
        this.index.row(fingerprint, rows[b]!);
        let mean = this.mean;
        for (let i = 0; i < n; i++) mean += rows[b]![i]! * this.alphaUnit[i]!;
        means[start + b] = mean;
      }
      // Latent variance s (1 - t^T A^-1 t) = s (1 - |L^-1 t|^2): forward substitution, inlined.
      let e0 = 0;
      let e1 = 0;
      let e2 = 0;
      let e3 = 0;
      for (let i = 0; i < n; i++) {
        const offset = i * n;
        let s0 = t0[i]!;
        let s1 = t1[i]!;
        let s2 = t2[i]!;
        let s3 = t3[i]!;
        for (let k = 0; k < i; k++) {
          const l = factor[offset + k]!;
          s0 -= l * w0[k]!;
          s1 -= l * w1[k]!;
          s2 -= l * w2[k]!;
          s3 -= l * w3[k]!;
        }
        const diagonal = factor[offset + i]!;
        const v0 = s0 / diagonal;
        const v1 = s1 / diagonal;
        const v2 = s2 / diagonal;
        const v3 = s3 / diagonal;
        w0[i] = v0;
        w1[i] = v1;
        w2[i] = v2;
        w3[i] = v3;
        e0 += v0 * v0;
        e1 += v1 * v1;
        e2 += v2 * v2;
        e3 += v3 * v3;
      }
      explained[0] = e0;
      explained[1] = e1;
      explained[2] = e2;
      explained[3] = e3;
      for (let b = 0; b < size; b++) stds[start + b] = Math.sqrt(Math.max(0, this.signalVariance * (1 - explained[b]!)));
    }
    return { means, stds };
  }
}

/** `TanimotoGp.fit` as a function: fits on every measured molecule. */
export function fitTanimotoGp(fingerprints: readonly Fingerprint[], targets: readonly number[], options?: GpFitOptions): TanimotoGp {
  return TanimotoGp.fit(fingerprints, targets, options);
}

function kernelMatrix(fingerprints: readonly Fingerprint[], nBytes: number): Float64Array {
  const n = fingerprints.length;
  const index = new TanimotoIndex(fingerprints, nBytes);
  const matrix = new Float64Array(n * n);
  const row = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    index.row(fingerprints[i]!, row);
    matrix.set(row, i * n);
  }
  return matrix;
}

function commonByteLength(fingerprints: readonly Fingerprint[], field: string): number {
  if (fingerprints.length === 0) throw new ConfigError(`${field}.length`, 0, 'must be >= 1');
  const nBytes = fingerprints[0]!.length;
  if (nBytes < 1) throw new ConfigError(`${field}[0].length`, nBytes, 'must be >= 1 byte');
  fingerprints.forEach((fingerprint, i) => {
    if (fingerprint.length !== nBytes) throw new ConfigError(`${field}[${i}].length`, fingerprint.length, `must equal ${field}[0].length ${nBytes}`);
  });
  return nBytes;
}

function requirePositiveList(field: string, values: readonly number[]): void {
  if (values.length === 0) throw new ConfigError(field, values, 'must not be empty');
  values.forEach((value, i) => {
    if (!(value > 0) || !Number.isFinite(value)) throw new ConfigError(`${field}[${i}]`, value, 'must be a finite number > 0');
  });
}

// ---------------------------------------------------------------------------------------------
// Acquisition (minimisation: lower gap is better)
// ---------------------------------------------------------------------------------------------

/** Lower confidence bound mean - beta * std: optimistic value of a minimisation target. */
export function lowerConfidenceBound(mean: number, std: number, beta: number): number {
  return mean - beta * std;
}

/**
 * Expected improvement below `incumbent` for minimisation: E[max(incumbent - xi - f, 0)] with
 * f ~ N(mean, std^2), = std (z Phi(z) + phi(z)), z = (incumbent - xi - mean) / std.
 */
export function expectedImprovement(mean: number, std: number, incumbent: number, xi = 0): number {
  const gain = incumbent - xi - mean;
  if (!(std > 0)) return Math.max(gain, 0);
  const z = gain / std;
  return Math.max(0, std * (z * normalCdf(z) + normalPdf(z)));
}

export function normalPdf(z: number): number {
  return Math.exp(-0.5 * z * z) / Math.sqrt(2 * Math.PI);
}

export function normalCdf(z: number): number {
  return 0.5 * erfc(-z / Math.SQRT2);
}

/**
 * Complementary error function, Chebyshev fit with fractional error below 1.2e-7 everywhere
 * (Numerical Recipes' erfcc), so tail probabilities keep their relative accuracy.
 */
function erfc(x: number): number {
  const z = Math.abs(x);
  const t = 1 / (1 + 0.5 * z);
  const r =
    t *
    Math.exp(
      -z * z -
        1.26551223 +
        t *
          (1.00002368 +
            t *
              (0.37409196 +
                t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x >= 0 ? r : 2 - r;
}

/**
 * How candidates are scored; the batch item's `score` is always "higher is better":
 * - `ei`: expected improvement below `incumbent` (default: the model's best observed target, so
 *   the search keeps pushing past the best molecule so far; pass the hit threshold instead to ask
 *   "how far below the threshold do we expect to get"), minus `xi` (default 0).
 * - `lcb`: score = -(mean - beta * std) (default beta 2), the negated lower confidence bound.
 */
export type Acquisition = { readonly kind: 'ei'; readonly incumbent?: number; readonly xi?: number } | { readonly kind: 'lcb'; readonly beta?: number };

// ---------------------------------------------------------------------------------------------
// Batch proposal
// ---------------------------------------------------------------------------------------------

export interface ProposeBatchInput {
  readonly model: TanimotoGp;
  /** The candidate pool: parallel arrays of ids and fingerprints. Ids must be unique. */
  readonly pool: { readonly ids: readonly string[]; readonly fingerprints: readonly Fingerprint[] };
  /** Ids already measured (or in flight); never proposed again. */
  readonly measuredIds: Iterable<string>;
  readonly batchSize: number;
  /** Share of the batch given to the explore arm, rounded to the nearest molecule. E.g. 0.2. */
  readonly explorationFraction: number;
  /** Seed of the explore arm's random draw; the same inputs and seed give the same batch. */
  readonly seed: number;
  /** Default `{ kind: 'ei' }` (incumbent = best observed). */
  readonly acquisition?: Acquisition;
  /**
   * Skip a candidate whose Tanimoto to an already chosen one is above this, so a batch is not ten
   * near-copies of one scaffold. Default 0.9; 1 disables it. When the filter leaves the batch
   * short, the skipped candidates fill it in their arm's order.
   */
  readonly diversityThreshold?: number;
  /**
   * The explore arm draws uniformly (seeded) from this top share of the remaining candidates by
   * predicted std (at least as many candidates as the arm needs). Default 0.1. Drawing among the
   * most uncertain, not taking the single most uncertain, keeps the arm from spending the whole
   * arm on outliers that all sit at the prior std.
   */
  readonly exploreTopFraction?: number;
}

export interface BatchItem {
  readonly id: string;
  readonly arm: 'exploit' | 'explore';
  readonly predictedMean: number;
  readonly predictedStd: number;
  /** The acquisition score (higher is better), for both arms, so rows are comparable. */
  readonly score: number;
}

/**
 * The next batch to measure: the exploit arm takes the best acquisition scores (ties: lower
 * predicted mean, then pool order), the explore arm draws at random (seeded) among the most
 * uncertain of the rest. Greedy, with the diversity filter above. Returns fewer items only when
 * the pool has fewer unmeasured molecules than `batchSize`.
 */
export function proposeBatch(input: ProposeBatchInput): BatchItem[] {
  const { model, pool, batchSize, explorationFraction, seed } = input;
  const acquisition = input.acquisition ?? { kind: 'ei' };
  const diversityThreshold = input.diversityThreshold ?? 0.9;
  const exploreTopFraction = input.exploreTopFraction ?? 0.1;
  if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new ConfigError('batchSize', batchSize, 'must be an integer >= 1');
  if (!(explorationFraction >= 0 && explorationFraction <= 1)) throw new ConfigError('explorationFraction', explorationFraction, 'must be in [0, 1]');
  if (!(diversityThreshold >= 0 && diversityThreshold <= 1)) throw new ConfigError('diversityThreshold', diversityThreshold, 'must be in [0, 1]');
  if (!(exploreTopFraction > 0 && exploreTopFraction <= 1)) throw new ConfigError('exploreTopFraction', exploreTopFraction, 'must be in (0, 1]');
  if (pool.ids.length !== pool.fingerprints.length) {
    throw new ConfigError('pool.fingerprints.length', pool.fingerprints.length, `must equal pool.ids.length ${pool.ids.length}`);
  }
  const random = seededRandom(seed);

  const measured = new Set(input.measuredIds);
  const seen = new Set<string>();
  const candidates: number[] = [];
  pool.ids.forEach((id, i) => {
    if (seen.has(id)) throw new ConfigError(`pool.ids[${i}]`, id, 'must be unique');
    seen.add(id);
    if (!measured.has(id)) candidates.push(i);
  });
  const { means, stds } = model.predictArrays(candidates.map((i) => pool.fingerprints[i]!));
  const scores = Float64Array.from(means, (mean, c) => scoreOf(acquisition, model, mean, stds[c]!));

  const total = Math.min(batchSize, candidates.length);
  const exploreCount = Math.min(Math.round(batchSize * explorationFraction), total);
  const exploitCount = total - exploreCount;
  const chosen: number[] = []; // positions in `candidates`
  const arms: ('exploit' | 'explore')[] = [];
  const taken = new Uint8Array(candidates.length);
  const pick = (order: readonly number[], count: number, arm: 'exploit' | 'explore'): void => {
    const skipped: number[] = [];
    let added = 0;
    for (const c of order) {
      if (added === count) break;
      if (taken[c]) continue;
      const fingerprint = pool.fingerprints[candidates[c]!]!;
      if (diversityThreshold < 1 && chosen.some((other) => tanimoto(fingerprint, pool.fingerprints[candidates[other]!]!) > diversityThreshold)) {
        skipped.push(c);
        continue;
      }
      taken[c] = 1;
      chosen.push(c);
      arms.push(arm);
      added++;
    }
    for (const c of skipped) {
      if (added === count) break;
      taken[c] = 1;
      chosen.push(c);
      arms.push(arm);
      added++;
    }
  };

  const byScore = candidates.map((_, c) => c).sort((a, b) => scores[b]! - scores[a]! || means[a]! - means[b]! || a - b);
  pick(byScore, exploitCount, 'exploit');

  if (exploreCount > 0) {
    const remaining = byScore.filter((c) => !taken[c]).sort((a, b) => stds[b]! - stds[a]! || a - b);
    const shortlist = remaining.slice(0, Math.max(exploreCount, Math.ceil(exploreTopFraction * remaining.length)));
    // Fisher-Yates with the seeded stream: a uniformly random order of the shortlist.
    for (let i = shortlist.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [shortlist[i], shortlist[j]] = [shortlist[j]!, shortlist[i]!];
    }
    pick(shortlist, exploreCount, 'explore');
  }

  return chosen.map((c, i) => ({
    id: pool.ids[candidates[c]!]!,
    arm: arms[i]!,
    predictedMean: means[c]!,
    predictedStd: stds[c]!,
    score: scores[c]!,
  }));
}

function scoreOf(acquisition: Acquisition, model: TanimotoGp, mean: number, std: number): number {
  if (acquisition.kind === 'lcb') return -lowerConfidenceBound(mean, std, acquisition.beta ?? 2);
  return expectedImprovement(mean, std, acquisition.incumbent ?? model.bestObserved, acquisition.xi ?? 0);
}

// ---------------------------------------------------------------------------------------------
// Metrics for the round report
// ---------------------------------------------------------------------------------------------

/** Mean absolute error. */
export function mae(predicted: readonly number[], actual: readonly number[]): number {
  requirePairs(predicted, actual);
  let sum = 0;
  for (let i = 0; i < actual.length; i++) sum += Math.abs(predicted[i]! - actual[i]!);
  return sum / actual.length;
}

/** Ranks 1..n, ties sharing the average of the ranks they span. */
export function averageRanks(values: readonly number[]): number[] {
  const order = values.map((_, i) => i).sort((a, b) => values[a]! - values[b]! || a - b);
  const ranks = new Array<number>(values.length);
  for (let start = 0; start < order.length; ) {
    let end = start + 1;
    while (end < order.length && values[order[end]!] === values[order[start]!]) end++;
    const rank = (start + 1 + end) / 2; // mean of ranks start+1 .. end
    for (let k = start; k < end; k++) ranks[order[k]!] = rank;
    start = end;
  }
  return ranks;
}

/**
 * Spearman rank correlation: Pearson correlation of average ranks (the tie-correct form). NaN
 * when either side is constant, where no correlation is defined.
 */
export function spearman(predicted: readonly number[], actual: readonly number[]): number {
  requirePairs(predicted, actual);
  const x = averageRanks(predicted);
  const y = averageRanks(actual);
  const n = x.length;
  const meanRank = (n + 1) / 2;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    const dx = x[i]! - meanRank;
    const dy = y[i]! - meanRank;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  return sxx === 0 || syy === 0 ? Number.NaN : sxy / Math.sqrt(sxx * syy);
}

export interface HitEnrichment {
  /** How many molecules with the lowest predicted values were taken. */
  readonly k: number;
  readonly hitsInTopK: number;
  /** hitsInTopK / k. */
  readonly topKHitRate: number;
  readonly hits: number;
  /** hits / n: the hit rate of picking at random. */
  readonly baseRate: number;
  /** topKHitRate / baseRate; NaN when there are no hits at all. */
  readonly enrichment: number;
}

/**
 * Hit enrichment for minimisation: a hit is an actual value below `threshold`; the top k are the k
 * lowest predictions (ties by input order). Enrichment 1 is no better than random.
 */
export function hitEnrichment(
  predicted: readonly number[],
  actual: readonly number[],
  options: { readonly threshold: number; readonly k: number },
): HitEnrichment {
  requirePairs(predicted, actual);
  const { threshold, k } = options;
  const n = actual.length;
  if (!Number.isSafeInteger(k) || k < 1 || k > n) throw new ConfigError('k', k, `must be an integer in [1, ${n}]`);
  const isHit = actual.map((value) => value < threshold);
  const hits = isHit.filter(Boolean).length;
  const top = predicted
    .map((_, i) => i)
    .sort((a, b) => predicted[a]! - predicted[b]! || a - b)
    .slice(0, k);
  const hitsInTopK = top.filter((i) => isHit[i]).length;
  const baseRate = hits / n;
  const topKHitRate = hitsInTopK / k;
  return { k, hitsInTopK, topKHitRate, hits, baseRate, enrichment: hits === 0 ? Number.NaN : topKHitRate / baseRate };
}

function requirePairs(predicted: readonly number[], actual: readonly number[]): void {
  if (actual.length < 1) throw new ConfigError('actual.length', actual.length, 'must be >= 1');
  if (predicted.length !== actual.length) throw new ConfigError('predicted.length', predicted.length, `must equal actual.length ${actual.length}`);
}
