/** Reward search ranking: failed seeds count as 0, spread and noise across seeds, a stable order. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { rank, seedNoise, summarize, type CandidateResult } from '#shared/rewards/search.ts';
import { assertClose } from '../support/floats.ts';

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
    assert.equal(r.mean, 0.5); // exact: 1.5 / 3, sums and a division of exactly representable values
    assert.equal(r.failedSeeds, 1);
    // The implementation's sums and sqrt against closed forms: basic operations in another
    // order, a few ulps of numbers <= 1 apart; 1e-12 is headroom, far below a wrong formula.
    assertClose(r.std, 0.5, { abs: 1e-12 }, 'std');
    assertClose(r.stderr, 0.5 / Math.sqrt(3), { abs: 1e-12 }, 'stderr');
    const ranked = rank([cand('a', [1, 0.5, null]), cand('b', [0.6, 0.6, 0.6]), cand('c', [0.6, 0.5, 0.7])]);
    // b and c tie on mean (0.6), so spread decides.
    assert.deepEqual(
      ranked.map((x) => x.name),
      ['b', 'c', 'a'],
    );
  });

  it('means equal on paper but summed in another order tie, so the tie-breakers decide, not rounding', () => {
    // 0.1 + 0.2 + 0.3 and 0.3 + 0.2 + 0.1 are an ulp apart; compared exactly, the first would
    // rank below the second whatever its failed seeds or spread.
    const up = summarize(cand('up', [0.1, 0.2, 0.3]));
    const down = summarize(cand('down', [0.3, 0.2, 0.1]));
    assert.notEqual(up.mean, down.mean, 'the premise: the two sums round differently');
    assert.deepEqual(
      rank([cand('up', [0.1, 0.2, 0.3]), cand('down', [0.3, 0.2, 0.1])]).map((x) => x.name),
      ['down', 'up'],
      'a tie: the name decides',
    );
    assert.deepEqual(
      rank([cand('up', [0.1, 0.2, 0.3]), cand('down', [0.3, 0.2, 0.1], 2)]).map((x) => x.name),
      ['up', 'down'],
      'a tie: the generation decides',
    );
    // A real difference, one episode in 10,000 over 10 seeds, still ranks.
    const one = Array.from({ length: 10 }, () => 0.5);
    const better = [...one.slice(1), 0.5001];
    assert.deepEqual(
      rank([cand('a', one), cand('z', better)]).map((x) => x.name),
      ['z', 'a'],
    );
  });

  it('breaks ties by failed seeds, spread, generation, then name', () => {
    const ranked = rank([cand('d', [0.5, 0.5], 2), cand('c', [0.5, 0.5], 1), cand('b', [1, 0]), cand('a', [1, 0, null].slice(0, 2))]);
    assert.deepEqual(
      ranked.map((x) => x.name),
      ['c', 'd', 'a', 'b'],
    );
    assert.throws(() => rank([]), /candidates: must not be empty/);
  });

  it('says how noisy a single candidate is across seeds: the within-candidate spread, pooled', () => {
    const noise = seedNoise([cand('a', [1, 0.5, 0.75]), cand('b', [0.2, 0.2, 0.2]), cand('c', [0.9, 0.1, 0.5])]);
    // By hand: a's squared deviations from its mean 0.75 are 0.0625 + 0.0625 + 0, b's 0, c's from 0.5 are 0.16 + 0.16 + 0;
    // 0.445 over 9 - 3 = 6 degrees of freedom. As above: closed forms against the implementation's arithmetic, a few ulps apart.
    const std = Math.sqrt(0.445 / 6);
    assertClose(noise.pooledStd!, std, { abs: 1e-12 }, 'pooled std');
    assert.equal(noise.candidates, 3);
    assert.equal(noise.gradedSeeds, 9);
    assert.equal(noise.seedsPerCandidate, 3);
    assertClose(noise.distinguishableDifference!, (2 * Math.sqrt(2) * std) / Math.sqrt(3), { abs: 1e-12 }, 'distinguishable difference');
  });

  it('leaves failed seeds out of the spread and candidates with fewer than two graded seeds out of the pool', () => {
    // a: graded [0.8, 0.4] (its failed seed is a verdict, not noise); b: one graded seed; c: none; d: [0, 0, 0], a real 0 spread.
    const noise = seedNoise([cand('a', [0.8, null, 0.4]), cand('b', [0.6, null, null]), cand('c', [null, null, null]), cand('d', [0, 0, 0])]);
    // By hand: a's squared deviations from 0.6 are 0.04 + 0.04, d's 0; 0.08 over (2 - 1) + (3 - 1) = 3 degrees of freedom.
    const std = Math.sqrt(0.08 / 3);
    assertClose(noise.pooledStd!, std, { abs: 1e-12 }, 'pooled std');
    assert.deepEqual([noise.candidates, noise.gradedSeeds, noise.seedsPerCandidate], [2, 5, 3]);
    // The ranking's means are over all 3 training seeds of each candidate, so the margin uses 3.
    assertClose(noise.distinguishableDifference!, (2 * Math.sqrt(2) * std) / Math.sqrt(3), { abs: 1e-12 }, 'distinguishable difference');
  });

  it('is unknown (null), never 0, when no candidate has two graded seeds', () => {
    const unknown = { pooledStd: null, candidates: 0, gradedSeeds: 0, distinguishableDifference: null };
    assert.deepEqual(seedNoise([cand('a', [1])]), { ...unknown, seedsPerCandidate: 1 });
    // Two seeds each, but a failed seed is not graded: a std with failed seeds as 0 would read 0 for b.
    assert.deepEqual(seedNoise([cand('a', [0.5, null]), cand('b', [null, null])]), { ...unknown, seedsPerCandidate: 2 });
    assert.deepEqual(seedNoise([]), { ...unknown, seedsPerCandidate: null });
  });
});
