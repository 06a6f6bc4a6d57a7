/**
 * Joint Elo fit for a league: one maximum-likelihood Bradley-Terry fit over every match played so
 * far, on the Elo scale (base 10, 400 points), anchored so that one player (the random bot) is
 * exactly 0, with percentile bootstrap intervals.
 *
 * Model: a player rated Ra scores against Rb with expectation
 *   E = 1 / (1 + 10^((Rb - Ra) / 400)),
 * and a draw counts as half a win for each side, so a match of n games in which a won w and drew d
 * contributes s = w + d/2 "wins" to a. The log-likelihood (natural log) is
 *   sum over matches of  s * ln E + (n - s) * ln(1 - E).
 * Fitting all matches jointly (rather than updating Elo game by game) makes the result independent
 * of the order in which matches were played, which is what a league that keeps adding players
 * needs: rerating everyone from scratch each generation.
 *
 * Steps:
 *   1. Validate the input; put players and matches in a canonical order (so the result, including
 *      the bootstrap's random stream, does not depend on how the caller ordered or oriented them).
 *   2. Check that every player is linked to the anchor by a chain of played matches; the ratings
 *      of a separate group have no common scale with the anchor's, so that is an error.
 *   3. Where the maximum-likelihood estimate does not exist (a player or group that won, or lost,
 *      every game against the rest), add one virtual drawn game against the anchor for each player
 *      involved. See `regularisedPlayers` for the exact rule.
 *   4. Newton-Raphson on the log-likelihood, with the anchor held at 0 and a backtracking line
 *      search (the log-likelihood is concave, so each accepted step goes uphill).
 *   5. Bootstrap: resample every match's games B times, refit, take the 2.5 % and 97.5 %
 *      percentiles of each player's rating.
 */
import { ConfigError } from '../errors.ts';
import { sampleBinomial, seededRandom, type Random } from '../random.ts';
import { quantile } from '../stats.ts';

/** One match between two players: game counts from a's point of view. */
export interface EloMatch {
  readonly a: string;
  readonly b: string;
  readonly winsA: number;
  readonly winsB: number;
  readonly draws: number;
}

export interface EloInput {
  /** Every player to rate; each must have played, through some chain of matches, the anchor. */
  readonly players: readonly string[];
  /** All matches so far. Several matches between the same pair are simply pooled. */
  readonly matches: readonly EloMatch[];
  /** The player whose rating is fixed at exactly 0 (the league's random bot). */
  readonly anchor: string;
}

export interface EloOptions {
  /** Bootstrap resamples (B). Default 200: enough for stable 2.5/97.5 % percentiles to about a point. */
  readonly bootstrapSamples?: number;
  /** Seed of the bootstrap's random stream. Default 1: the same input always gives the same output. */
  readonly seed?: number;
  /** Newton iterations allowed per fit. Default 100; a league fit normally needs fewer than 10. */
  readonly maxIterations?: number;
  /** A fit has converged when no rating moved by more than this many Elo points. Default 1e-7. */
  readonly tolerance?: number;
  /**
   * Virtual drawn games against the anchor given to each player whose estimate would otherwise be
   * infinite (see `regularisedPlayers`). Default 1. A player who won all 400 of its games against
   * the anchor alone is then rated 400 * log10(400.5 / 0.5) = 1161.7.
   */
  readonly virtualDraws?: number;
}

export interface PointFit {
  /** Elo by player id; the anchor is exactly 0. */
  readonly elo: Readonly<Record<string, number>>;
  readonly iterations: number;
  readonly converged: boolean;
  /** Of the real games only (virtual draws excluded), natural log, draws as half a win. */
  readonly logLikelihood: number;
  /** Players that were given virtual draws against the anchor, sorted; usually none. */
  readonly regularised: readonly string[];
}

export interface PlayerRating {
  readonly id: string;
  readonly elo: number;
  /** 2.5 % bootstrap percentile. */
  readonly low: number;
  /** 97.5 % bootstrap percentile. */
  readonly high: number;
  /** Real games played (zero-game matches and virtual draws not counted). */
  readonly games: number;
}

export interface EloFit {
  /** Sorted by Elo, highest first; ties by id. */
  readonly ratings: PlayerRating[];
  /** Newton iterations of the point fit. */
  readonly iterations: number;
  /** True when the point fit and every bootstrap refit converged. */
  readonly converged: boolean;
  readonly logLikelihood: number;
  /** As in PointFit: players given virtual draws in the point fit. */
  readonly regularised: readonly string[];
}

const ELO_PER_NATURAL_UNIT = 400 / Math.LN10;

/** Expected score of a player rated `ra` against one rated `rb` (draws as half a win). */
export function expectedScore(ra: number, rb: number): number {
  return 1 / (1 + 10 ** ((rb - ra) / 400));
}

/** The point fit: maximum-likelihood ratings, no intervals (what a benchmark of the fit times). */
export function fitEloPoint(input: EloInput, options: EloOptions = {}): PointFit {
  const settings = readOptions(options);
  const league = prepareLeague(input);
  const fit = fitScores(league, league.scores, settings, undefined);
  return {
    elo: Object.fromEntries(league.ids.map((id, i) => [id, fit.theta[i] * ELO_PER_NATURAL_UNIT])),
    iterations: fit.iterations,
    converged: fit.converged,
    logLikelihood: logLikelihood(league, league.scores, fit.theta),
    regularised: fit.regularised.map((i) => league.ids[i]),
  };
}

/** The point fit plus percentile bootstrap intervals; deterministic for a given seed. */
export function fitElo(input: EloInput, options: EloOptions = {}): EloFit {
  const settings = readOptions(options);
  const league = prepareLeague(input);
  const point = fitScores(league, league.scores, settings, undefined);
  const players = league.ids.length;
  const samples = settings.bootstrapSamples;

  // Resampling a match's n games with replacement is a multinomial draw of n games with the
  // observed win / draw / loss shares: wins ~ Binomial(n, wins / n), then draws among the other
  // games ~ Binomial(n - wins, draws / (n - wins observed)). The number of games per match is
  // kept, so a resampled league is connected exactly as the real one is.
  const random: Random = seededRandom(settings.seed);
  const replicates = new Float64Array(players * samples);
  const resampled = new Float64Array(league.scores.length);
  let allConverged = point.converged;
  for (let r = 0; r < samples; r++) {
    for (let m = 0; m < league.matchCount; m++) {
      const n = league.games[m];
      const wins = sampleBinomial(random, n, league.winsA[m] / n);
      const notWon = n - league.winsA[m];
      const draws = notWon === 0 ? 0 : sampleBinomial(random, n - wins, league.draws[m] / notWon);
      resampled[m] = wins + draws / 2;
    }
    // Warm start from the point fit: the refit then takes a few Newton steps, not ten.
    const refit = fitScores(league, resampled, settings, point.theta);
    allConverged &&= refit.converged;
    for (let i = 0; i < players; i++) replicates[i * samples + r] = refit.theta[i] * ELO_PER_NATURAL_UNIT;
  }

  const ratings: PlayerRating[] = league.ids.map((id, i) => {
    const own = replicates.subarray(i * samples, (i + 1) * samples).sort();
    return {
      id,
      elo: point.theta[i] * ELO_PER_NATURAL_UNIT,
      low: quantile(own, 0.025),
      high: quantile(own, 0.975),
      games: league.gamesPerPlayer[i],
    };
  });
  ratings.sort((x, y) => y.elo - x.elo || (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
  return {
    ratings,
    iterations: point.iterations,
    converged: allConverged,
    logLikelihood: logLikelihood(league, league.scores, point.theta),
    regularised: point.regularised.map((i) => league.ids[i]),
  };
}

interface Settings {
  bootstrapSamples: number;
  seed: number;
  maxIterations: number;
  tolerance: number;
  virtualDraws: number;
}

function readOptions(options: EloOptions): Settings {
  const settings: Settings = {
    bootstrapSamples: options.bootstrapSamples ?? 200,
    seed: options.seed ?? 1,
    maxIterations: options.maxIterations ?? 100,
    tolerance: options.tolerance ?? 1e-7,
    virtualDraws: options.virtualDraws ?? 1,
  };
  if (!Number.isSafeInteger(settings.bootstrapSamples) || settings.bootstrapSamples < 1) {
    throw new ConfigError('bootstrapSamples', options.bootstrapSamples, 'must be an integer >= 1');
  }
  if (!Number.isSafeInteger(settings.seed)) throw new ConfigError('seed', options.seed, 'must be a safe integer');
  if (!Number.isSafeInteger(settings.maxIterations) || settings.maxIterations < 1) {
    throw new ConfigError('maxIterations', options.maxIterations, 'must be an integer >= 1');
  }
  if (!(settings.tolerance > 0 && Number.isFinite(settings.tolerance))) {
    throw new ConfigError('tolerance', options.tolerance, 'must be a finite number > 0');
  }
  if (!(settings.virtualDraws > 0 && Number.isFinite(settings.virtualDraws))) {
    throw new ConfigError('virtualDraws', options.virtualDraws, 'must be a finite number > 0');
  }
  return settings;
}

/**
 * The validated league in canonical order and flat arrays. Players are sorted by id; each match is
 * oriented so that a < b and matches are sorted; zero-game matches are dropped (they carry no
 * information and link nobody, so ignoring them is the same as the likelihood would do).
 */
interface League {
  readonly ids: string[];
  readonly anchor: number;
  readonly matchCount: number;
  readonly a: Int32Array;
  readonly b: Int32Array;
  readonly games: Float64Array;
  readonly winsA: Float64Array;
  readonly draws: Float64Array;
  /** Observed score of a per match (wins + draws / 2). */
  readonly scores: Float64Array;
  readonly gamesPerPlayer: Float64Array;
}

function prepareLeague(input: EloInput): League {
  if (!input || typeof input !== 'object') throw new ConfigError('(root)', input, 'must be an object');
  if (!Array.isArray(input.players) || input.players.length === 0) {
    throw new ConfigError('players', input.players, 'must be a non-empty array of player ids');
  }
  const seen = new Set<string>();
  input.players.forEach((id, i) => {
    if (typeof id !== 'string' || id.length === 0) throw new ConfigError(`players[${i}]`, id, 'must be a non-empty string');
    if (seen.has(id)) throw new ConfigError(`players[${i}]`, id, 'duplicate player id');
    seen.add(id);
  });
  if (!seen.has(input.anchor)) throw new ConfigError('anchor', input.anchor, 'must be one of players');
  if (!Array.isArray(input.matches)) throw new ConfigError('matches', input.matches, 'must be an array');

  const ids = [...seen].sort();
  const index = new Map(ids.map((id, i) => [id, i]));
  const oriented: { a: number; b: number; winsA: number; winsB: number; draws: number }[] = [];
  input.matches.forEach((match, m) => {
    const field = `matches[${m}]`;
    if (!match || typeof match !== 'object') throw new ConfigError(field, match, 'must be an object');
    const a = index.get(match.a);
    const b = index.get(match.b);
    if (a === undefined) throw new ConfigError(`${field}.a`, match.a, 'unknown player id (not in players)');
    if (b === undefined) throw new ConfigError(`${field}.b`, match.b, 'unknown player id (not in players)');
    if (a === b) throw new ConfigError(`${field}.b`, match.b, 'a player cannot play itself');
    for (const key of ['winsA', 'winsB', 'draws'] as const) {
      const count = match[key];
      if (!Number.isSafeInteger(count) || count < 0) throw new ConfigError(`${field}.${key}`, count, 'must be an integer >= 0');
    }
    if (match.winsA + match.winsB + match.draws === 0) return;
    oriented.push(
      a < b ? { a, b, winsA: match.winsA, winsB: match.winsB, draws: match.draws } : { a: b, b: a, winsA: match.winsB, winsB: match.winsA, draws: match.draws },
    );
  });
  oriented.sort((x, y) => x.a - y.a || x.b - y.b || x.winsA - y.winsA || x.winsB - y.winsB || x.draws - y.draws);

  const count = oriented.length;
  const league: League = {
    ids,
    anchor: index.get(input.anchor)!,
    matchCount: count,
    a: Int32Array.from(oriented, (m) => m.a),
    b: Int32Array.from(oriented, (m) => m.b),
    games: Float64Array.from(oriented, (m) => m.winsA + m.winsB + m.draws),
    winsA: Float64Array.from(oriented, (m) => m.winsA),
    draws: Float64Array.from(oriented, (m) => m.draws),
    scores: Float64Array.from(oriented, (m) => m.winsA + m.draws / 2),
    gamesPerPlayer: new Float64Array(ids.length),
  };
  for (let m = 0; m < count; m++) {
    league.gamesPerPlayer[league.a[m]] += league.games[m];
    league.gamesPerPlayer[league.b[m]] += league.games[m];
  }

  const unlinked = unreachable(ids.length, league.anchor, league.a, league.b, () => true);
  if (unlinked.length > 0) {
    throw new ConfigError(
      'matches',
      unlinked.map((i) => ids[i]),
      `these players have no chain of played matches to the anchor "${input.anchor}", so they cannot be rated on its scale`,
    );
  }
  return league;
}

/** Players not reachable from `start` along the edges a -> b (and b -> a) that `usable` allows. */
function unreachable(players: number, start: number, a: Int32Array, b: Int32Array, usable: (match: number, fromA: boolean) => boolean): number[] {
  const adjacency: { to: number; match: number; fromA: boolean }[][] = Array.from({ length: players }, () => []);
  for (let m = 0; m < a.length; m++) {
    adjacency[a[m]].push({ to: b[m], match: m, fromA: true });
    adjacency[b[m]].push({ to: a[m], match: m, fromA: false });
  }
  const reached = new Uint8Array(players);
  reached[start] = 1;
  const queue = [start];
  while (queue.length > 0) {
    const from = queue.pop()!;
    for (const edge of adjacency[from]) {
      if (!reached[edge.to] && usable(edge.match, edge.fromA)) {
        reached[edge.to] = 1;
        queue.push(edge.to);
      }
    }
  }
  const missing: number[] = [];
  for (let i = 0; i < players; i++) if (!reached[i]) missing.push(i);
  return missing;
}

/**
 * The players whose maximum-likelihood rating is infinite relative to the anchor.
 *
 * The Bradley-Terry estimate exists exactly when the "scored against" graph (an edge u -> v when u
 * scored anything, a win or a draw, against v) is strongly connected (Zermelo 1929; Ford 1957).
 * Otherwise some group won, or lost, every game against the rest, and its ratings run off to
 * infinity. The players outside the anchor's strongly connected component are those; each of them
 * gets `virtualDraws` drawn games against the anchor, which makes the graph strongly connected and
 * every rating finite. This prior is applied only where it is needed, so a league in which the
 * estimate exists is fitted by pure maximum likelihood (300 wins of 400 give exactly
 * 400 * log10(3)); where it is applied, it also nudges the other ratings slightly, and the fit
 * reports the players concerned in `regularised`.
 */
function regularisedPlayers(league: League, scores: Float64Array): number[] {
  // u -> v when u scored against v: for a match oriented (a, b), a -> b if a's score > 0 and
  // b -> a if b's score (games - score) > 0.
  const scoredForward = (m: number, fromA: boolean) => (fromA ? scores[m] > 0 : league.games[m] - scores[m] > 0);
  const scoredBackward = (m: number, fromA: boolean) => scoredForward(m, !fromA);
  const players = league.ids.length;
  const notFrom = unreachable(players, league.anchor, league.a, league.b, scoredForward);
  const notTo = unreachable(players, league.anchor, league.a, league.b, scoredBackward);
  return [...new Set([...notFrom, ...notTo])].sort((x, y) => x - y);
}

interface ScoreFit {
  /** Ratings in natural units (Elo / (400 / ln 10)); the anchor's is 0. */
  theta: Float64Array;
  iterations: number;
  converged: boolean;
  regularised: number[];
}

/**
 * Newton-Raphson on the log-likelihood of `scores` (one per league match), anchor fixed at 0.
 *
 * In natural units the expected score is p = 1 / (1 + exp(theta_b - theta_a)); per match the
 * gradient is s - n p for a (and its negative for b), and the negative Hessian adds
 * w = n p (1 - p) to the (a, a) and (b, b) entries and -w to (a, b): a weighted graph Laplacian,
 * positive definite once the anchor's row and column are removed, because the league is connected.
 */
function fitScores(league: League, observed: Float64Array, settings: Settings, start: Float64Array | undefined): ScoreFit {
  const players = league.ids.length;
  const regularised = regularisedPlayers(league, observed);

  // The matches the fit sees: the real ones plus any virtual draws against the anchor.
  const total = league.matchCount + regularised.length;
  const a = new Int32Array(total);
  const b = new Int32Array(total);
  const n = new Float64Array(total);
  const s = new Float64Array(total);
  a.set(league.a);
  b.set(league.b);
  n.set(league.games);
  s.set(observed);
  regularised.forEach((player, k) => {
    const m = league.matchCount + k;
    a[m] = player;
    b[m] = league.anchor;
    n[m] = settings.virtualDraws;
    s[m] = settings.virtualDraws / 2;
  });

  // Free parameters: every player but the anchor, packed into 0..free-1.
  const slot = new Int32Array(players);
  let free = 0;
  for (let i = 0; i < players; i++) slot[i] = i === league.anchor ? -1 : free++;

  const theta = start ? Float64Array.from(start) : new Float64Array(players);
  const trial = new Float64Array(players);
  const gradient = new Float64Array(free);
  const hessian = new Float64Array(free * free);
  const step = new Float64Array(free);
  const tolerance = settings.tolerance / ELO_PER_NATURAL_UNIT;
  let current = objective(a, b, n, s, theta);

  for (let iteration = 1; iteration <= settings.maxIterations; iteration++) {
    gradient.fill(0);
    hessian.fill(0);
    for (let m = 0; m < total; m++) {
      const p = logistic(theta[a[m]] - theta[b[m]]);
      const g = s[m] - n[m] * p;
      const w = n[m] * p * (1 - p);
      const i = slot[a[m]];
      const j = slot[b[m]];
      if (i >= 0) {
        gradient[i] += g;
        hessian[i * free + i] += w;
      }
      if (j >= 0) {
        gradient[j] -= g;
        hessian[j * free + j] += w;
      }
      if (i >= 0 && j >= 0) {
        hessian[i * free + j] -= w;
        hessian[j * free + i] -= w;
      }
    }
    solveSymmetricPositive(hessian, gradient, step, free);

    // Backtracking line search: halve the step until the log-likelihood rises (Armijo rule), with
    // a rounding allowance so that a step at the optimum is still accepted.
    let slope = 0;
    for (let k = 0; k < free; k++) slope += gradient[k] * step[k];
    let scale = 1;
    let next = current;
    for (let halvings = 0; halvings < 60; halvings++) {
      for (let i = 0; i < players; i++) trial[i] = slot[i] >= 0 ? theta[i] + scale * step[slot[i]] : 0;
      next = objective(a, b, n, s, trial);
      if (next >= current + 1e-4 * scale * slope - 1e-12 * (1 + Math.abs(current))) break;
      scale /= 2;
    }
    let largestMove = 0;
    for (let k = 0; k < free; k++) largestMove = Math.max(largestMove, Math.abs(scale * step[k]));
    theta.set(trial);
    current = next;
    if (largestMove < tolerance) return { theta, iterations: iteration, converged: true, regularised };
  }
  return { theta, iterations: settings.maxIterations, converged: false, regularised };
}

/** Sum over matches of s ln p + (n - s) ln(1 - p), computed without overflow for large gaps. */
function objective(a: Int32Array, b: Int32Array, n: Float64Array, s: Float64Array, theta: Float64Array): number {
  let total = 0;
  for (let m = 0; m < a.length; m++) {
    const d = theta[a[m]] - theta[b[m]];
    total += s[m] * logLogistic(d) + (n[m] - s[m]) * logLogistic(-d);
  }
  return total;
}

function logLikelihood(league: League, scores: Float64Array, theta: Float64Array): number {
  return objective(league.a, league.b, league.games, scores, theta);
}

function logistic(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

/** ln(1 / (1 + e^-x)), stable for large |x|. */
function logLogistic(x: number): number {
  return x >= 0 ? -Math.log1p(Math.exp(-x)) : x - Math.log1p(Math.exp(x));
}

/**
 * Solve H x = g for a symmetric positive definite H (row-major, size k) by Cholesky, in place in H.
 * A pivot that rounding has made tiny or negative (a player whose every game is already predicted
 * with certainty) is raised to a small floor, so the step for that player is just small.
 */
function solveSymmetricPositive(h: Float64Array, g: Float64Array, x: Float64Array, k: number): void {
  let largestDiagonal = 0;
  for (let i = 0; i < k; i++) largestDiagonal = Math.max(largestDiagonal, h[i * k + i]);
  const floor = Math.max(largestDiagonal, 1) * 1e-12;
  for (let j = 0; j < k; j++) {
    let diagonal = h[j * k + j];
    for (let q = 0; q < j; q++) diagonal -= h[j * k + q] ** 2;
    const pivot = Math.sqrt(Math.max(diagonal, floor));
    h[j * k + j] = pivot;
    for (let i = j + 1; i < k; i++) {
      let value = h[i * k + j];
      for (let q = 0; q < j; q++) value -= h[i * k + q] * h[j * k + q];
      h[i * k + j] = value / pivot;
    }
  }
  // Forward substitution L y = g, then back substitution L^T x = y.
  for (let i = 0; i < k; i++) {
    let value = g[i];
    for (let q = 0; q < i; q++) value -= h[i * k + q] * x[q];
    x[i] = value / h[i * k + i];
  }
  for (let i = k - 1; i >= 0; i--) {
    let value = x[i];
    for (let q = i + 1; q < k; q++) value -= h[q * k + i] * x[q];
    x[i] = value / h[i * k + i];
  }
}
