/** Reward search ranking: failed seeds count as 0, spread and noise across seeds, a stable order. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { rank, seedNoise, summarize, type CandidateResult } from '#shared/reward/search.ts';

const sha = (c: string) => c.repeat(64);
const cand = (name: string, successes: (number | null)[], generation = 1): CandidateResult => ({
  generation,
  name,
  sourceSha256: sha(name[0]!.replace(/[^0-9a-f]/, 'a')),
  seeds: successes.map((s, i) => ({ seed: i, success: s, episodes: s === null ? 0 : 20, ...(s === null ? { failure: 'killed at the memory limit' } : {}) })),
});

describe('reward search ranking', () => {
  it('ranks by mean success over seeds, a failed seed counting as 0, with spread and standard error', () => {
    const r = summarize(cand('a', [1, 0.5, null]));
    assert.equal(r.mean, 0.5);
    assert.equal(r.failedSeeds, 1);
    assert.ok(Math.abs(r.std - 0.5) < 1e-12);
    assert.ok(Math.abs(r.stderr - 0.5 / Math.sqrt(3)) < 1e-12);
    const ranked = rank([cand('a', [1, 0.5, null]), cand('b', [0.6, 0.6, 0.6]), cand('c', [0.6, 0.5, 0.7])]);
    assert.deepEqual(ranked.map((x) => x.name), ['b', 'c', 'a']);
  });

  it('breaks ties by failed seeds, spread, generation, then name', () => {
    const ranked = rank([cand('d', [0.5, 0.5], 2), cand('c', [0.5, 0.5], 1), cand('b', [1, 0]), cand('a', [1, 0, null].slice(0, 2))]);
    assert.deepEqual(ranked.map((x) => x.name), ['c', 'd', 'a', 'b']);
    assert.throws(() => rank([]), /candidates: must not be empty/);
  });

  it('says how noisy a single candidate is across seeds', () => {
    const noise = seedNoise([cand('a', [1, 0.5, 0.75]), cand('b', [0.2, 0.2, 0.2]), cand('c', [0.9, 0.1, 0.5])]);
    assert.ok(Math.abs(noise.medianStd! - 0.25) < 1e-12);
    assert.equal(noise.seedsPerCandidate, 3);
    assert.ok(Math.abs(noise.distinguishableDifference! - 2 * Math.sqrt(2) * 0.25 / Math.sqrt(3)) < 1e-12);
    assert.deepEqual(seedNoise([cand('a', [1])]), { medianStd: null, seedsPerCandidate: null, distinguishableDifference: null });
  });
});
