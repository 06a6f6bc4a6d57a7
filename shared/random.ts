/**
 * A small seedable pseudo-random generator, so that anything random in the library (bootstrap
 * resampling, bot moves, simulated matches in tests) is reproducible from a seed. Math.random
 * cannot be seeded, and a cached step must give the same output for the same inputs.
 *
 * The generator is sfc32 (Chris Doty-Humphrey's "small fast counting" generator: 128 bits of
 * state, passes PractRand, a counter guarantees a period of at least 2^32), with its state filled
 * from the seed by splitmix32 so that nearby seeds (1, 2, 3) give unrelated streams.
 * Not for anything security-related.
 */
import { ConfigError } from './errors.ts';

/** A uniform draw in [0, 1). */
export type Random = () => number;

/** A generator seeded by any safe integer (negative too); the same seed gives the same stream. */
export function seededRandom(seed: number): Random {
  if (!Number.isSafeInteger(seed)) throw new ConfigError('seed', seed, 'must be a safe integer');
  // Fold the high part in too, so seeds that differ only above bit 32 give different streams.
  let mix = (seed | 0) ^ Math.imul(Math.floor(seed / 2 ** 32) | 0, 0x9e3779b1);
  const splitmix32 = (): number => {
    mix = (mix + 0x9e3779b9) | 0;
    let z = mix;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
  let a = splitmix32();
  let b = splitmix32();
  let c = splitmix32();
  let counter = splitmix32();
  const random: Random = () => {
    const t = (((a + b) | 0) + counter) | 0;
    counter = (counter + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
  // The first outputs still carry traces of the seeding; discard a few as sfc32's author does.
  for (let i = 0; i < 12; i++) random();
  return random;
}

/** A uniform integer in [0, n), for n a positive safe integer up to 2^32. */
export function randomInt(random: Random, n: number): number {
  if (!Number.isSafeInteger(n) || n < 1 || n > 2 ** 32) throw new ConfigError('n', n, 'must be an integer in [1, 2^32]');
  return Math.floor(random() * n);
}

/**
 * A draw from Binomial(n, p), exact up to rounding: inversion that starts at the mode and walks
 * outward (largest probabilities first), so it takes about sqrt(n p (1 - p)) steps rather than the
 * n uniforms of counting successes one trial at a time. Uses one uniform per draw.
 */
export function sampleBinomial(random: Random, n: number, p: number): number {
  if (!Number.isSafeInteger(n) || n < 0) throw new ConfigError('n', n, 'must be an integer >= 0');
  if (!(p >= 0 && p <= 1)) throw new ConfigError('p', p, 'must be a probability in [0, 1]');
  if (n === 0 || p === 0) return 0;
  if (p === 1) return n;
  const q = 1 - p;
  const mode = Math.min(n, Math.floor((n + 1) * p));
  const atMode = Math.exp(logFactorial(n) - logFactorial(mode) - logFactorial(n - mode) + mode * Math.log(p) + (n - mode) * Math.log(q));
  let u = random() - atMode;
  if (u < 0) return mode;
  // Probabilities one step below and above the mode, by the ratio P(k+1) / P(k) = (n-k) p / ((k+1) q).
  let below = mode;
  let belowMass = atMode;
  let above = mode;
  let aboveMass = atMode;
  while (below > 0 || above < n) {
    if (below > 0) {
      belowMass *= (below * q) / ((n - below + 1) * p);
      below--;
      u -= belowMass;
      if (u < 0) return below;
    }
    if (above < n) {
      aboveMass *= ((n - above) * p) / ((above + 1) * q);
      above++;
      u -= aboveMass;
      if (u < 0) return above;
    }
  }
  // Only rounding can leave u >= 0 after the whole support: the mode is the likeliest answer.
  return mode;
}

const SMALL_LOG_FACTORIALS = (() => {
  const table = new Float64Array(256);
  for (let k = 2; k < table.length; k++) table[k] = table[k - 1] + Math.log(k);
  return table;
})();

/** ln(k!): a table below 256, Stirling's series above (relative error below 1e-15 there). */
function logFactorial(k: number): number {
  if (k < SMALL_LOG_FACTORIALS.length) return SMALL_LOG_FACTORIALS[k];
  const inverse = 1 / k;
  const inverseSquared = inverse * inverse;
  return (k + 0.5) * Math.log(k) - k + 0.5 * Math.log(2 * Math.PI) + inverse * (1 / 12 - inverseSquared * (1 / 360 - inverseSquared / 1260));
}
