import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { expectedScore, fitElo, fitEloPoint, type EloMatch } from '#shared/selfplay/elo.ts';
import { ConfigError } from '#shared/errors.ts';
import { randomInt, sampleBinomial, seededRandom, type Random } from '#shared/random.ts';
import { assertClose } from '../support/floats.ts';

/** 400 * log10(3): a 75 % score is worth this many Elo points (closed form, two players). */
const ELO_75_PERCENT = 190.84850188786498;

const match = (a: string, b: string, winsA: number, winsB: number, draws = 0): EloMatch => ({ a, b, winsA, winsB, draws });

// Tolerances here are of two kinds. Against a closed form or the naive MM fit (another
// computation of the same number): the Newton solver stops once no rating moves by 1e-7 Elo and
// converges quadratically, so it ends within ~1e-12 of the exact maximum; what is left is rounding
// in log10, pow and the sums (relative ~1e-15), so 1e-9 to 1e-6 Elo holds with orders of
// magnitude to spare (measured: 1e-13 to 1e-11). Against the truth of a simulated league: sampling
// error, sized from the standard errors stated beside each. Everything here is TypeScript on V8.

/**
 * A simulated match: each game is a draw with probability 4 %, otherwise a win or a loss, with
 * the win probability chosen so that a's expected score (draws as half) is the model's
 * expectedScore(ra, rb). Exactly the model the fit assumes.
 */
function simulateMatch(random: Random, a: string, ra: number, b: string, rb: number, games: number): EloMatch {
  const drawShare = 0.04;
  const winShare = expectedScore(ra, rb) - drawShare / 2;
  const draws = sampleBinomial(random, games, drawShare);
  const winsA = sampleBinomial(random, games - draws, winShare / (1 - drawShare));
  return match(a, b, winsA, games - draws - winsA, draws);
}

function roundRobin(random: Random, truth: Record<string, number>, games: number): EloMatch[] {
  const ids = Object.keys(truth);
  const matches: EloMatch[] = [];
  for (let i = 0; i < ids.length; i++) {
    for (let j = i + 1; j < ids.length; j++) matches.push(simulateMatch(random, ids[i]!, truth[ids[i]!]!, ids[j]!, truth[ids[j]!]!, games));
  }
  return matches;
}

/**
 * An independent, naive fit to check the Newton solver against: Hunter's (2004) MM algorithm for
 * Bradley-Terry strengths, gamma_i <- S_i / sum_j n_ij / (gamma_i + gamma_j), where S_i is i's
 * total score (draws as half). Slow (linear convergence) but simple; Elo = 400 log10(gamma / gamma_anchor).
 */
function naiveMmFit(players: string[], matches: EloMatch[], anchor: string): Record<string, number> {
  let gamma = Object.fromEntries(players.map((id) => [id, 1]));
  for (let round = 0; round < 20_000; round++) {
    const next: Record<string, number> = {};
    for (const id of players) {
      let score = 0;
      let denominator = 0;
      for (const m of matches) {
        const n = m.winsA + m.winsB + m.draws;
        if (m.a === id) {
          score += m.winsA + m.draws / 2;
          denominator += n / (gamma[id]! + gamma[m.b]!);
        } else if (m.b === id) {
          score += m.winsB + m.draws / 2;
          denominator += n / (gamma[id]! + gamma[m.a]!);
        }
      }
      next[id] = score / denominator;
    }
    gamma = next;
  }
  return Object.fromEntries(players.map((id) => [id, 400 * Math.log10(gamma[id]! / gamma[anchor]!)]));
}

function shuffled<T>(items: readonly T[], random: Random): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

describe('expectedScore', () => {
  it('is 3/4 at a gap of 400 log10(3) and 1/2 at no gap', () => {
    // 1 / (1 + 10^(-log10 3)) = 1 / (1 + 1/3) = 3/4. pow and the rounded log10 are each within
    // an ulp or so, so E is a few ulps (each 1.1e-16 here) from 3/4 at most: 1e-15.
    assertClose(expectedScore(ELO_75_PERCENT, 0), 0.75, { abs: 1e-15 }, 'E(190.85, 0)');
    // Exact: 10^0 is exactly 1 in every pow, and 1 / (1 + 1) is an exact division.
    assert.equal(expectedScore(123, 123), 0.5);
    // 400 points: 1 / (1 + 10^-1) = 10/11, pow within an ulp of 0.1, as above.
    assertClose(expectedScore(400, 0), 10 / 11, { abs: 1e-15 }, 'E(400, 0)');
  });
});

describe('fitEloPoint: closed forms', () => {
  it('two players, 300 wins of 400 against the anchor: 400 log10(300/100) = 190.85', () => {
    const fit = fitEloPoint({ players: ['A', 'B'], anchor: 'B', matches: [match('A', 'B', 300, 100)] });
    assertClose(fit.elo.A!, ELO_75_PERCENT, { abs: 1e-9 }, 'A');
    assert.ok(Object.is(fit.elo.B, 0));
    assert.equal(fit.converged, true);
    assert.deepEqual(fit.regularised, []);
    // ln L = 300 ln(3/4) + 100 ln(1/4) = 300 * -0.287682 + 100 * -1.386294 = -224.934.
    assertClose(fit.logLikelihood, 300 * Math.log(0.75) + 100 * Math.log(0.25), { abs: 1e-9 }, 'logLikelihood');
  });

  it('draws count as half a win: 200 wins + 200 draws of 400 is a 0.75 score, the same 190.85', () => {
    const fit = fitEloPoint({ players: ['A', 'B'], anchor: 'B', matches: [match('A', 'B', 200, 0, 200)] });
    assertClose(fit.elo.A!, ELO_75_PERCENT, { abs: 1e-9 }, 'A');
    assert.deepEqual(fit.regularised, [], 'B drew, so B scored: the estimate exists without a prior');
  });

  it('rates players connected only through others: a chain decouples into one closed form per link', () => {
    // random -- tactical -- gen-1, no other games: in a tree each link is fitted on its own.
    // tactical scores 300/400 against random: 400 log10(3)   = 190.8485
    // gen-1 scores 240/400 against tactical:  400 log10(1.5) =  70.4365  -> gen-1 = 261.2850
    const fit = fitEloPoint({
      players: ['random', 'tactical', 'gen-1'],
      anchor: 'random',
      matches: [match('random', 'tactical', 100, 300), match('gen-1', 'tactical', 240, 160)],
    });
    assertClose(fit.elo.tactical!, ELO_75_PERCENT, { abs: 1e-9 }, 'tactical');
    assertClose(fit.elo['gen-1']!, ELO_75_PERCENT + 400 * Math.log10(1.5), { abs: 1e-9 }, 'gen-1');
    assertClose(fit.elo['gen-1']!, 261.28500551, { abs: 1e-6 }, 'gen-1 by hand'); // the literal's 8 decimals
  });

  it('agrees with a naive MM fit and satisfies the score equations on a full round robin', () => {
    const truth = { random: 0, tactical: 470, 'gen-1': 150, 'gen-2': 380, 'gen-3': 620 };
    const players = Object.keys(truth);
    const matches = roundRobin(seededRandom(11), truth, 400);
    const fit = fitEloPoint({ players, anchor: 'random', matches });
    const naive = naiveMmFit(players, matches, 'random');
    // Two algorithms: MM converges only linearly, but 20,000 rounds leave it ~1e-13 off.
    for (const id of players) assertClose(fit.elo[id]!, naive[id]!, { abs: 1e-6 }, id);
    // At the maximum, every player's expected total score equals its actual total score.
    for (const id of players.filter((p) => p !== 'random')) {
      let actual = 0;
      let expected = 0;
      for (const m of matches) {
        const n = m.winsA + m.winsB + m.draws;
        if (m.a === id) {
          actual += m.winsA + m.draws / 2;
          expected += n * expectedScore(fit.elo[id]!, fit.elo[m.b]!);
        } else if (m.b === id) {
          actual += m.winsB + m.draws / 2;
          expected += n * expectedScore(fit.elo[id]!, fit.elo[m.a]!);
        }
      }
      // Sums of up to 1,600 games' expected scores: rounding ~1e-13, and the fit's own error
      // moves them by ~0.6 points per Elo: 1e-7 is far above both.
      assertClose(expected, actual, { abs: 1e-7 }, `score equation for ${id}`);
    }
  });
});

describe('fitElo: recovering known ratings', () => {
  const truth = { r0: 0, r200: 200, r400: 400, r600: 600 };
  const players = Object.keys(truth);

  it('recovers a transitive chain 0 / 200 / 400 / 600 from 4,000 games per pair, intervals containing the truth', () => {
    // One simulated league is a fixed fixture (seed 1). Each of its 95 % intervals would miss the
    // truth in 5 % of leagues; with this seed none does, and the coverage test below checks, over
    // many leagues, that this is calibration rather than luck.
    const matches = roundRobin(seededRandom(1), truth, 4000);
    const fit = fitElo({ players, anchor: 'r0', matches });
    assert.deepEqual(
      fit.ratings.map((r) => r.id),
      ['r600', 'r400', 'r200', 'r0'],
    );
    assert.equal(fit.converged, true);
    for (const rating of fit.ratings) {
      const expected = truth[rating.id as keyof typeof truth];
      // The standard error here is about 5 points (three matches of 4,000 games each).
      assertClose(rating.elo, expected, { abs: 20 }, rating.id);
      assert.ok(rating.low <= expected && expected <= rating.high, `${rating.id}: ${expected} outside [${rating.low}, ${rating.high}]`);
      assert.ok(rating.low <= rating.elo && rating.elo <= rating.high, `${rating.id}: estimate outside its interval`);
      assert.equal(rating.games, 12_000);
    }
  });

  it('has 95 % intervals that cover the truth about 95 % of the time over many simulated leagues', () => {
    // 40 leagues x 3 rated players = 120 intervals. At a true 95 % coverage, fewer than 102
    // hits is 3.5 standard deviations away; a bootstrap that is too narrow fails this.
    const random = seededRandom(99);
    let covered = 0;
    let intervals = 0;
    for (let league = 0; league < 40; league++) {
      const fit = fitElo({ players, anchor: 'r0', matches: roundRobin(random, truth, 400) }, { seed: league });
      for (const rating of fit.ratings.filter((r) => r.id !== 'r0')) {
        intervals++;
        const expected = truth[rating.id as keyof typeof truth];
        if (rating.low <= expected && expected <= rating.high) covered++;
      }
    }
    assert.ok(covered >= 102, `coverage ${covered}/${intervals}`);
  });

  it('has an interval as wide as the Fisher information says for one 400-game match', () => {
    // p = 3/4 over n = 400: the standard error of the logit is 1 / sqrt(n p (1 - p)) = 1 / sqrt(75)
    // = 0.11547, times 400 / ln 10 = 173.72 gives 20.06 Elo, so a 95 % interval spans about
    // 2 * 1.96 * 20.06 = 78.6 points.
    const fit = fitElo({ players: ['A', 'B'], anchor: 'B', matches: [match('A', 'B', 300, 100)] }, { bootstrapSamples: 2000 });
    const a = fit.ratings[0]!;
    assertClose(a.high - a.low, 78.6, { abs: 6 }, 'interval width');
    assert.ok(a.low < ELO_75_PERCENT && ELO_75_PERCENT < a.high);
  });
});

describe('fitElo: anchor and invariances', () => {
  const players = ['random', 'tactical', 'gen-1', 'gen-2'];
  const matches = roundRobin(seededRandom(5), { random: 0, tactical: 470, 'gen-1': 250, 'gen-2': 560 }, 400);

  it('holds the anchor at exactly 0, with a zero-width interval', () => {
    const fit = fitElo({ players, anchor: 'random', matches });
    const anchor = fit.ratings.find((r) => r.id === 'random')!;
    assert.ok(Object.is(anchor.elo, 0) && Object.is(anchor.low, 0) && Object.is(anchor.high, 0));
  });

  it('moves every rating by the same constant when the anchor changes', () => {
    const byRandom = fitEloPoint({ players, anchor: 'random', matches }).elo;
    const byTactical = fitEloPoint({ players, anchor: 'tactical', matches }).elo;
    assert.equal(byTactical.tactical, 0); // the anchor is set to 0, not computed
    // Two fits, each within ~1e-12 of its maximum: their differences agree to 1e-8.
    for (const id of players) assertClose(byRandom[id]! - byTactical[id]!, byRandom.tactical!, { abs: 1e-8 }, id);
  });

  it('gives the identical result, intervals included, whatever the order of matches, of players and of a/b', () => {
    // Bit for bit: fitElo puts players and matches in one canonical order first, so both calls
    // run the same arithmetic in the same order (one code path).
    const random = seededRandom(8);
    const reordered = shuffled(matches, random).map((m, i) => (i % 2 === 0 ? match(m.b, m.a, m.winsB, m.winsA, m.draws) : m));
    assert.deepEqual(fitElo({ players: shuffled(players, random), anchor: 'random', matches: reordered }), fitElo({ players, anchor: 'random', matches }));
  });

  it('pools several matches between the same pair, and ignores zero-game matches', () => {
    const split = [match('A', 'B', 100, 50), match('B', 'A', 50, 200), match('A', 'B', 0, 0, 0)];
    assertClose(fitEloPoint({ players: ['A', 'B'], anchor: 'B', matches: split }).elo.A!, ELO_75_PERCENT, { abs: 1e-9 }, 'A');
    const fit = fitElo({ players: ['A', 'B'], anchor: 'B', matches: split });
    assert.deepEqual(
      fit.ratings.map((r) => r.games),
      [400, 400],
    );
  });
});

describe('fitElo: perfect records', () => {
  it('rates a player who won every game with one virtual draw against the anchor: 400 log10(801)', () => {
    // 400 wins + one virtual drawn game: 400.5 of 401, odds 400.5 / 0.5 = 801 -> 1161.45 Elo.
    const fit = fitElo({ players: ['A', 'B'], anchor: 'B', matches: [match('A', 'B', 400, 0)] });
    assertClose(fit.ratings[0]!.elo, 400 * Math.log10(801), { abs: 1e-8 }, 'A');
    assert.deepEqual(fit.regularised, ['A']);
    assert.equal(fit.converged, true);
    assert.ok(Number.isFinite(fit.ratings[0]!.low) && Number.isFinite(fit.ratings[0]!.high));
    // Every resample is also 400 of 400, so the interval collapses onto the estimate (the same
    // fit every time; the tolerance only spares the test from relying on that).
    assertClose(fit.ratings[0]!.high - fit.ratings[0]!.low, 0, { abs: 1e-8 }, 'interval width');
    // The virtual game is not a game played.
    assert.equal(fit.ratings[0]!.games, 400);
  });

  it('rates a player who lost every game symmetrically below the anchor, and honours virtualDraws', () => {
    const lost = fitEloPoint({ players: ['A', 'B'], anchor: 'B', matches: [match('A', 'B', 0, 400)] });
    assertClose(lost.elo.A!, -400 * Math.log10(801), { abs: 1e-8 }, 'A');
    // Two virtual draws: 401 of 402, odds 401 -> 400 log10(401) = 1041.3.
    const two = fitEloPoint({ players: ['A', 'B'], anchor: 'B', matches: [match('A', 'B', 400, 0)] }, { virtualDraws: 2 });
    assertClose(two.elo.A!, 400 * Math.log10(401), { abs: 1e-8 }, 'A with two virtual draws');
  });

  it('keeps a league finite when a champion beats everyone, and barely moves the others', () => {
    const base = [match('random', 'tactical', 40, 350, 10)];
    const withoutChampion = fitEloPoint({ players: ['random', 'tactical'], anchor: 'random', matches: base });
    const fit = fitElo({
      players: ['random', 'tactical', 'champion'],
      anchor: 'random',
      matches: [...base, match('champion', 'random', 400, 0), match('champion', 'tactical', 400, 0)],
    });
    assert.deepEqual(fit.regularised, ['champion']);
    assert.deepEqual(
      fit.ratings.map((r) => r.id),
      ['champion', 'tactical', 'random'],
    );
    for (const r of fit.ratings) assert.ok([r.elo, r.low, r.high].every(Number.isFinite), r.id);
    // The prior is not free: the champion lands near 1539, where tactical's model score against it
    // is about 0.4 of its 400 games, not the 0 it got, so tactical drops about 2 points. Its
    // standard error here is 173.7 / sqrt(400 * 0.8875 * 0.1125) = 27.5 points.
    const tactical = fit.ratings.find((r) => r.id === 'tactical')!;
    assert.ok(tactical.elo < withoutChampion.elo.tactical!);
    assertClose(tactical.elo, withoutChampion.elo.tactical!, { abs: 3 }, 'tactical, with and without the champion');
  });

  it('needs no prior when the anchor lost every game but the league is linked through a player who did not', () => {
    // random never scores against gen-1, but gen-1 scores against tactical and tactical against
    // random: the scored-against graph is strongly connected, so plain maximum likelihood applies.
    const fit = fitEloPoint({
      players: ['random', 'tactical', 'gen-1'],
      anchor: 'random',
      matches: [match('random', 'tactical', 100, 300), match('gen-1', 'tactical', 240, 160), match('gen-1', 'random', 400, 0)],
    });
    assert.deepEqual(fit.regularised, []);
    assert.ok(Number.isFinite(fit.elo['gen-1']!) && fit.elo['gen-1']! > fit.elo.tactical!);
  });
});

describe('fitElo: robustness', () => {
  /**
   * A random sparse league: a random spanning tree (so it is connected) with 1-400 games per link,
   * a third of them perfect records either way, plus random extra matches with draws, some with
   * zero games. Lopsided enough that a plain Newton step from a warm start can overshoot.
   */
  function sparseLeague(seed: number): { players: string[]; matches: EloMatch[] } {
    const random = seededRandom(seed);
    const count = 2 + randomInt(random, 10);
    const players = Array.from({ length: count }, (_, i) => `p${i}`);
    const matches: EloMatch[] = [];
    for (let i = 1; i < count; i++) {
      const j = randomInt(random, i);
      const n = 1 + randomInt(random, 400);
      const wins = random() < 0.3 ? (random() < 0.5 ? 0 : n) : randomInt(random, n + 1);
      matches.push(match(players[i]!, players[j]!, wins, n - wins));
    }
    for (let extra = randomInt(random, 2 * count); extra > 0; extra--) {
      const i = randomInt(random, count);
      const j = randomInt(random, count);
      if (i === j) continue;
      const n = randomInt(random, 400);
      const draws = randomInt(random, n + 1);
      const wins = random() < 0.5 ? n - draws : randomInt(random, n - draws + 1);
      matches.push(match(players[i]!, players[j]!, wins, n - draws - wins, draws));
    }
    return { players, matches };
  }

  it('converges to finite ratings and intervals on 400 random sparse, lopsided leagues', () => {
    // Without the line search, a bootstrap refit of league 301 diverges (an upper bound of 1e14).
    for (let seed = 0; seed < 400; seed++) {
      const fit = fitElo({ ...sparseLeague(seed), anchor: 'p0' }, { bootstrapSamples: 20, seed });
      assert.equal(fit.converged, true, `league ${seed}`);
      for (const r of fit.ratings) {
        assert.ok([r.elo, r.low, r.high].every(Number.isFinite) && r.low <= r.high, `league ${seed}, ${r.id}`);
        assert.ok(Math.abs(r.elo) < 20_000 && Math.abs(r.low) < 20_000 && Math.abs(r.high) < 20_000, `league ${seed}, ${r.id}`);
      }
    }
  });

  it('recovers a long lopsided chain in closed form: 11 links of 399 wins of 400 each', () => {
    // Each link of a chain is fitted on its own: 400 log10(399 / 1) = 1040.39 per link.
    const players = Array.from({ length: 12 }, (_, i) => `p${String(i).padStart(2, '0')}`);
    const matches = players.slice(1).map((p, i) => match(p, players[i]!, 399, 1));
    const fit = fitEloPoint({ players, anchor: 'p00', matches });
    assertClose(fit.elo.p11!, 11 * 400 * Math.log10(399), { abs: 1e-7 }, 'p11');
    assert.equal(fit.converged, true);
  });
});

describe('fitElo: bad input', () => {
  const players = ['random', 'tactical', 'gen-1', 'gen-2'];

  it('names the players not connected to the anchor', () => {
    assert.throws(
      () =>
        fitElo({
          players,
          anchor: 'random',
          // gen-1 and gen-2 only played each other, and a zero-game match links nobody.
          matches: [match('random', 'tactical', 100, 300), match('gen-1', 'gen-2', 200, 200), match('gen-1', 'random', 0, 0)],
        }),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.name === 'ConfigError' &&
        error.field === 'matches' &&
        JSON.stringify(error.value) === '["gen-1","gen-2"]' &&
        error.message.includes('"random"'),
    );
  });

  it('names the field and value of an unknown player id', () => {
    assert.throws(
      () => fitElo({ players, anchor: 'random', matches: [match('random', 'tactical', 1, 1), match('tactical', 'ghost', 1, 1)] }),
      (error: unknown) => error instanceof ConfigError && error.field === 'matches[1].b' && error.value === 'ghost',
    );
    assert.throws(
      () => fitElo({ players, anchor: 'nobody', matches: [] }),
      (error: unknown) => error instanceof ConfigError && error.field === 'anchor' && error.value === 'nobody',
    );
  });

  it('rejects counts that are not non-negative integers, self-play and duplicate players', () => {
    const cases: [() => unknown, string, unknown][] = [
      [() => fitElo({ players, anchor: 'random', matches: [match('random', 'tactical', -1, 5)] }), 'matches[0].winsA', -1],
      [() => fitElo({ players, anchor: 'random', matches: [match('random', 'tactical', 1, 2.5)] }), 'matches[0].winsB', 2.5],
      [() => fitElo({ players, anchor: 'random', matches: [match('tactical', 'tactical', 1, 1)] }), 'matches[0].b', 'tactical'],
      [() => fitElo({ players: ['a', 'b', 'a'], anchor: 'a', matches: [] }), 'players[2]', 'a'],
      [() => fitElo({ players, anchor: 'random', matches: [] }, { bootstrapSamples: 0 }), 'bootstrapSamples', 0],
    ];
    for (const [call, field, value] of cases) {
      assert.throws(call, (error: unknown) => error instanceof ConfigError && error.field === field && error.value === value, field);
    }
  });
});

describe('fitElo: bootstrap determinism', () => {
  const players = ['random', 'tactical', 'gen-1'];
  const matches = roundRobin(seededRandom(3), { random: 0, tactical: 470, 'gen-1': 300 }, 400);

  it('gives identical intervals for the same seed, and different ones for another seed', () => {
    // Exact: the same code path on the same input and seed.
    const first = fitElo({ players, anchor: 'random', matches }, { seed: 42 });
    const again = fitElo({ players, anchor: 'random', matches }, { seed: 42 });
    const other = fitElo({ players, anchor: 'random', matches }, { seed: 43 });
    assert.deepEqual(again, first);
    assert.deepEqual(
      other.ratings.map((r) => r.elo),
      first.ratings.map((r) => r.elo),
      'the point fit does not depend on the seed',
    );
    assert.notDeepEqual(
      other.ratings.map((r) => r.low),
      first.ratings.map((r) => r.low),
    );
  });

  it('matches the point fit of fitEloPoint', () => {
    const point = fitEloPoint({ players, anchor: 'random', matches });
    const full = fitElo({ players, anchor: 'random', matches }, { bootstrapSamples: 10 });
    for (const r of full.ratings) assert.equal(r.elo, point.elo[r.id]); // fitElo's point fit is fitEloPoint: one code path
    assert.equal(full.logLikelihood, point.logLikelihood);
    assert.equal(full.iterations, point.iterations);
  });
});

describe('seededRandom and sampleBinomial (the bootstrap relies on them)', () => {
  it('repeats a stream for a seed, differs across seeds, and stays in [0, 1)', () => {
    const take = (random: Random) => Array.from({ length: 1000 }, () => random());
    const stream = take(seededRandom(1));
    assert.deepEqual(take(seededRandom(1)), stream);
    assert.notDeepEqual(take(seededRandom(2)), stream);
    assert.ok(stream.every((u) => u >= 0 && u < 1));
    // Mean of 1,000 uniforms: 0.5 with a standard error of 0.0091.
    assertClose(stream.reduce((x, y) => x + y, 0) / stream.length, 0.5, { abs: 0.04 }, 'mean');
  });

  it('draws binomials with the right mean and variance, and the exact edge cases', () => {
    // Binomial(400, 0.3): mean 120, variance 400 * 0.3 * 0.7 = 84. Over 20,000 draws the mean's
    // standard error is 0.065 and the variance's about 0.84.
    const random = seededRandom(17);
    const draws = Array.from({ length: 20_000 }, () => sampleBinomial(random, 400, 0.3));
    const mean = draws.reduce((x, y) => x + y, 0) / draws.length;
    const variance = draws.reduce((x, y) => x + (y - mean) ** 2, 0) / (draws.length - 1);
    assertClose(mean, 120, { abs: 0.3 }, 'mean');
    assertClose(variance, 84, { abs: 4 }, 'variance');
    assert.ok(draws.every((k) => Number.isInteger(k) && k >= 0 && k <= 400));
    assert.equal(sampleBinomial(random, 400, 0), 0);
    assert.equal(sampleBinomial(random, 400, 1), 400);
    assert.equal(sampleBinomial(random, 0, 0.5), 0);
    // A large n goes through the Stirling branch of ln k!: Binomial(100,000, 0.9), mean 90,000, sd 94.9.
    const large = Array.from({ length: 2000 }, () => sampleBinomial(random, 100_000, 0.9));
    assertClose(large.reduce((x, y) => x + y, 0) / large.length, 90_000, { abs: 10 }, 'large-n mean');
  });
});
