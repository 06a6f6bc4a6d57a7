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
