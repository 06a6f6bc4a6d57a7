/**
 * Comparing floats that two different computations produced (Python and TypeScript, numpy's SIMD
 * kernels and a scalar loop, onnxruntime and PyTorch, float32 and float64). Such pairs agree to a
 * stated tolerance, never bit for bit: the kernels a library picks depend on the CPU it runs on,
 * and CI's CPU is not a user's. Each call states its tolerance and, in a comment beside it, why
 * that tolerance is enough. Exact comparison stays where one code path computes both sides.
 */
import assert from 'node:assert/strict';

const bits = new BigInt64Array(1);
const float = new Float64Array(bits.buffer);

/** A float64's position on the line of all float64s (monotone in value; -0 and +0 both 0). */
function ordinal(x: number): bigint {
  float[0] = x;
  const b = bits[0];
  return b < 0n ? -(b & 0x7fffffffffffffffn) : b;
}

/** How many float64s lie between a and b (0 when equal, 1 for neighbours); Infinity if either is NaN. */
export function ulpsApart(a: number, b: number): number {
  if (Number.isNaN(a) || Number.isNaN(b)) return Infinity;
  const d = ordinal(a) - ordinal(b);
  return Number(d < 0n ? -d : d);
}

/** a and b at most `maxUlps` float64s apart, with a message naming what was compared. */
export function assertWithinUlps(actual: number, expected: number, maxUlps: number, what: string): void {
  const apart = ulpsApart(actual, expected);
  assert.ok(apart <= maxUlps, `${what}: ${actual} vs ${expected} are ${apart} ulps apart (at most ${maxUlps})`);
}

/** |actual - expected| <= abs + rel * |expected|, with a message naming what was compared. */
export function assertClose(actual: number, expected: number, tolerance: { abs?: number; rel?: number }, what: string): void {
  const bound = (tolerance.abs ?? 0) + (tolerance.rel ?? 0) * Math.abs(expected);
  const ok = Number.isFinite(actual) && Number.isFinite(expected) ? Math.abs(actual - expected) <= bound : Object.is(actual, expected);
  assert.ok(ok, `${what}: ${actual} vs ${expected} differ by ${Math.abs(actual - expected)} (at most ${bound})`);
}

/** assertClose over two equally long lists, element by element. */
export function assertAllClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tolerance: { abs?: number; rel?: number }, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: lengths ${actual.length} vs ${expected.length}`);
  for (let i = 0; i < expected.length; i++) assertClose(actual[i], expected[i], tolerance, `${what}[${i}]`);
}
