/** The float comparison helpers of test/support/floats.ts, which the cross-code-path tests rely on. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { assertAllClose, assertClose, assertWithinUlps, ulpsApart } from '../support/floats.ts';

/** The next float64 above x (x finite, not the largest). */
function nextUp(x: number): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  if (x === 0) return Number.MIN_VALUE;
  const bits = view.getBigUint64(0);
  view.setBigUint64(0, x > 0 ? bits + 1n : bits - 1n);
  return view.getFloat64(0);
}

/** Runs `call`, expects an AssertionError, and returns its message. */
function failureOf(call: () => void): string {
  try {
    call();
  } catch (error) {
    assert.ok(error instanceof assert.AssertionError, `expected an AssertionError, got ${String(error)}`);
    return error.message;
  }
  assert.fail('expected the assertion to fail');
}

describe('ulpsApart', () => {
  it('is 0 for equal floats and 1 for neighbours, at every scale and sign', () => {
    for (const x of [1, 0.1, 1e-300, 123456.789, 2 ** 52, Number.MIN_VALUE, -1, -0.5, -1e-300, 1.7976931348623155e308]) {
      assert.equal(ulpsApart(x, x), 0, `${x}`);
      assert.equal(ulpsApart(x, nextUp(x)), 1, `${x} and the float above it`);
      assert.equal(ulpsApart(nextUp(x), x), 1, 'symmetric');
    }
    // 1 + 2^-52 is the float after 1; the one before 1 is 1 - 2^-53 (the spacing halves below 1).
    assert.equal(ulpsApart(1, 1 + 2 ** -52), 1);
    assert.equal(ulpsApart(1, 1 - 2 ** -53), 1);
    assert.equal(ulpsApart(1, 1 + 2 * 2 ** -52), 2);
    assert.equal(ulpsApart(0.1 + 0.2, 0.3), 1);
  });

  it('counts -0 and +0 as the same float', () => {
    assert.equal(ulpsApart(-0, 0), 0);
    assert.equal(ulpsApart(0, -0), 0);
    assert.equal(ulpsApart(-0, Number.MIN_VALUE), 1);
  });

  it('counts across zero: the smallest subnormals either side are 2 apart', () => {
    assert.equal(ulpsApart(-Number.MIN_VALUE, Number.MIN_VALUE), 2);
    assert.equal(ulpsApart(-Number.MIN_VALUE, 0), 1);
    assert.equal(ulpsApart(-2 * Number.MIN_VALUE, 3 * Number.MIN_VALUE), 5);
  });

  it('is Infinity when either side is NaN, and finite up to the infinities', () => {
    assert.equal(ulpsApart(NaN, 1), Infinity);
    assert.equal(ulpsApart(1, NaN), Infinity);
    assert.equal(ulpsApart(NaN, NaN), Infinity);
    assert.equal(ulpsApart(Number.MAX_VALUE, Infinity), 1);
    assert.equal(ulpsApart(Infinity, Infinity), 0);
  });
});

describe('assertWithinUlps', () => {
  it('passes within the bound and fails beyond it, naming the field and the distance', () => {
    assertWithinUlps(1 + 2 ** -52, 1, 1, 'x');
    assertWithinUlps(-0, 0, 0, 'zero');
    const message = failureOf(() => assertWithinUlps(1 + 2 * 2 ** -52, 1, 1, 'logit 2 at observation 7'));
    assert.match(message, /^logit 2 at observation 7: /);
    assert.match(message, /2 ulps apart \(at most 1\)/);
  });

  it('fails on NaN, whatever the bound', () => {
    assert.match(
      failureOf(() => assertWithinUlps(NaN, NaN, 1e9, 'nan')),
      /^nan: NaN vs NaN are Infinity ulps apart/,
    );
  });
});

describe('assertClose', () => {
  it('takes an absolute, a relative or a combined bound', () => {
    assertClose(1.0000001, 1, { abs: 1e-6 }, 'abs');
    assertClose(1000.001, 1000, { rel: 1e-6 }, 'rel');
    assertClose(1e-20, 0, { abs: 1e-15, rel: 1e-9 }, 'abs near 0');
    assertClose(5, 5, {}, 'no tolerance: equal only');
    assert.throws(() => assertClose(5 + 2 ** -50, 5, {}, 'no tolerance'), assert.AssertionError);
    assert.throws(() => assertClose(1000.01, 1000, { rel: 1e-6 }, 'rel'), assert.AssertionError);
  });

  it('fails with a message naming the field, both values and the bound', () => {
    const message = failureOf(() => assertClose(0.5011, 0.5, { abs: 1e-3 }, 'position after step 3'));
    assert.match(message, /^position after step 3: 0\.5011 vs 0\.5 differ by /);
    assert.match(message, /\(at most 0\.001\)$/);
  });

  it('fails on NaN against a number; a non-finite value passes only against the same one', () => {
    assert.match(
      failureOf(() => assertClose(NaN, 0, { abs: 1 }, 'nan')),
      /^nan: NaN vs 0/,
    );
    assert.throws(() => assertClose(0, NaN, { abs: 1 }, 'nan'), assert.AssertionError);
    assert.throws(() => assertClose(Infinity, 1e308, { rel: 1 }, 'inf'), assert.AssertionError);
    assert.throws(() => assertClose(-Infinity, Infinity, { abs: 1 }, 'inf'), assert.AssertionError);
    // Non-finite values are compared with Object.is: an expected NaN or infinity is met by itself.
    assertClose(Infinity, Infinity, { abs: 0 }, 'inf');
    assertClose(NaN, NaN, { abs: 0 }, 'nan');
  });
});

describe('assertAllClose', () => {
  it('compares element by element and names the failing index', () => {
    assertAllClose(Float64Array.from([1, 2, 3]), [1, 2 + 1e-13, 3], { abs: 1e-12 }, 'logits');
    assert.match(
      failureOf(() => assertAllClose([1, 2, 3], [1, 2, 3.1], { abs: 1e-12 }, 'logits')),
      /^logits\[2\]: 3 vs 3\.1/,
    );
  });

  it('fails on lists of different lengths', () => {
    assert.match(
      failureOf(() => assertAllClose([1, 2], [1, 2, 3], { abs: 1 }, 'states')),
      /^states: lengths 2 vs 3/,
    );
  });
});
