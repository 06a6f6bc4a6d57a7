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

  it('says how noisy a single candidate is across seeds', () => {
    const noise = seedNoise([cand('a', [1, 0.5, 0.75]), cand('b', [0.2, 0.2, 0.2]), cand('c', [0.9, 0.1, 0.5])]);
    // As above: closed forms against the implementation's arithmetic, a few ulps apart.
    assertClose(noise.medianStd!, 0.25, { abs: 1e-12 }, 'median std');
    assert.equal(noise.seedsPerCandidate, 3);
    assertClose(noise.distinguishableDifference!, (2 * Math.sqrt(2) * 0.25) / Math.sqrt(3), { abs: 1e-12 }, 'distinguishable difference');
    assert.deepEqual(seedNoise([cand('a', [1])]), { medianStd: null, seedsPerCandidate: null, distinguishableDifference: null });
  });
});
