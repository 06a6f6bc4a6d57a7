/**
 * Augmented Random Search's parts: the update rule (top directions, the step scaled by the kept
 * returns' spread), the running normaliser, the policy's tanh of a normalised linear map, and the
 * search as a whole finding a target on a known objective.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  act,
  addObservation,
  arsUpdate,
  checkArsSettings,
  emptyStats,
  gaussian,
  mergeStats,
  normaliser,
  perturbed,
  sampleDirections,
  zeroPolicy,
} from '#shared/humanoid/ars.ts';
import { seededRandom } from '#shared/random.ts';

describe('ARS', () => {
  it('steps along the best directions, scaled by the spread of their returns', () => {
    const w = new Float64Array([0, 0]);
    const d = [new Float64Array([1, 0]), new Float64Array([0, 1]), new Float64Array([1, 1])];
    // Direction 1 is best (max 5), then 0 (max 3); direction 2 (max 1) is dropped with b = 2.
    const step = arsUpdate(
      w,
      d,
      [
        [3, 1],
        [0, 5],
        [1, 1],
      ],
      { directions: 3, topDirections: 2, stepSize: 0.1, noise: 0.05 },
    );
    assert.deepEqual(step.kept, [1, 0]);
    const values = [0, 5, 3, 1];
    const mean = values.reduce((a, b) => a + b) / 4;
    const std = Math.sqrt(values.reduce((a, v) => a + (v - mean) ** 2, 0) / 4);
    assert.ok(Math.abs(step.returnStd - std) < 1e-12);
    const scale = 0.1 / (2 * std);
    assert.ok(Math.abs(step.weights[0]! - scale * 2) < 1e-12);
    assert.ok(Math.abs(step.weights[1]! - scale * -5) < 1e-12);
    // All returns equal: no step.
    assert.deepEqual(
      Array.from(
        arsUpdate(
          w,
          d,
          [
            [1, 1],
            [1, 1],
            [1, 1],
          ],
          { directions: 3, topDirections: 3, stepSize: 0.1, noise: 0.05 },
        ).weights,
      ),
      [0, 0],
    );
    assert.throws(
      () =>
        arsUpdate(
          w,
          d,
          [
            [1, Number.NaN],
            [1, 1],
            [1, 1],
          ],
          { directions: 3, topDirections: 3, stepSize: 0.1, noise: 0.05 },
        ),
      /returns\[0\]: must be finite/,
    );
  });

  it('normalises observations by all seen so far, merged across workers', () => {
    const a = emptyStats(2);
    const b = emptyStats(2);
    addObservation(a, new Float64Array([1, 5]));
    addObservation(a, new Float64Array([3, 5]));
    addObservation(b, new Float64Array([5, 5]));
    mergeStats(a, b);
    const { mean, std } = normaliser(a);
    assert.deepEqual(Array.from(mean), [3, 5]);
    assert.ok(Math.abs(std[0]! - Math.sqrt(8 / 3)) < 1e-12);
    assert.equal(std[1], 1, 'a constant component keeps std 1');
    const policy = { ...zeroPolicy(2, 1), mean, std };
    // Weights [2, 7] and a bias of 0.5: one std above the mean, and a constant component at its mean.
    policy.weights.set([2, 7, 0.5]);
    const out = act(policy, policy.weights, new Float64Array([3 + std[0]!, 5]), new Float64Array(1));
    assert.ok(Math.abs(out[0]! - Math.tanh(2.5)) < 1e-12);
  });

  it('finds the maximum of a known objective', () => {
    // Reward -|w - target|^2 over 6 weights: ARS should close most of the distance in 60 iterations.
    const target = Float64Array.from([0.5, -0.3, 0.8, 0.1, -0.6, 0.2]);
    const reward = (w: Float64Array) => -w.reduce((s, x, i) => s + (x - target[i]!) ** 2, 0);
    const settings = checkArsSettings({ directions: 8, topDirections: 4, stepSize: 0.05, noise: 0.05 });
    const random = seededRandom(7);
    let w: Float64Array = new Float64Array(6);
    const start = -reward(w);
    for (let i = 0; i < 60; i++) {
      const directions = sampleDirections(random, settings.directions, w.length);
      const returns = directions.map((d) => [reward(perturbed(w, d, settings.noise, 1)), reward(perturbed(w, d, settings.noise, -1))] as const);
      w = arsUpdate(w, directions, returns, settings).weights;
    }
    assert.ok(-reward(w) < 0.05 * start, `distance ${-reward(w)} of ${start}`);
  });

  it('draws standard normal directions and refuses bad settings, naming them', () => {
    const random = seededRandom(1);
    const xs = Array.from({ length: 20_000 }, () => gaussian(random));
    const mean = xs.reduce((a, b) => a + b) / xs.length;
    const variance = xs.reduce((a, x) => a + (x - mean) ** 2, 0) / xs.length;
    assert.ok(Math.abs(mean) < 0.03 && Math.abs(variance - 1) < 0.05, `${mean} ${variance}`);
    assert.throws(
      () => checkArsSettings({ directions: 4, topDirections: 5, stepSize: 0.02, noise: 0.01 }),
      /ars\.topDirections: must be an integer from 1 to ars\.directions \(4\) \(got 5\)/,
    );
    assert.throws(() => checkArsSettings({ directions: 0, topDirections: 1, stepSize: 0.02, noise: 0.01 }), /ars\.directions/);
    assert.throws(() => checkArsSettings({ directions: 4, topDirections: 2, stepSize: 0, noise: 0.01 }), /ars\.stepSize/);
  });
});
