/**
 * The match runner: two policies play N games of Connect Four, all games advanced in lock-step so
 * that each side makes ONE batched decision per ply (for a network, one inference over every game
 * in which it is to move). Pure: no I/O; an ONNX network becomes a `Policy` through
 * shared/selfplay/onnx.ts, a built-in bot through `botPolicy`.
 *
 * Steps of `playMatch`:
 *   1. Seat the players with `seatPlan(games, 1)`: A moves first in exactly half of the games
 *      (within one when the count is odd), so neither side gets the first-move advantage.
 *   2. Each round, split the live games by the policy to move (all of them at once when A and B
 *      are the same object), encode their observations and legal masks into reused buffers, and
 *      call each policy once.
 *   3. Check every column a policy returns. An illegal one is replaced and counted against that
 *      side (see "Illegal moves" below); then every chosen move is played.
 *   4. When no game is live, tally wins, draws and scores overall and by A's seat.
 *
 * Illegal moves. A policy that writes columns (a bot, or anything hand-written) and writes an
 * illegal one gets it replaced by a uniform legal column from the match's generator. A policy
 * that produces logits (a network) masks for itself with `selectFromLogits`: it always plays a
 * legal column, chosen among legal logits only, and flags the row when its top logit over ALL
 * seven columns was illegal; the runner counts those flags too. Both kinds count as that side's
 * illegal moves in the result, which is how a network that keeps aiming at full columns shows up.
 *
 * Determinism: the same seed, mode and policies (bots created with the same seeds) give the same
 * result, move for move. Each side samples from its own generator, derived from the seed, so one
 * side's draws do not depend on how many the other side made.
 */
import { COLS, GameBatch, OBSERVATION_SIZE, seatPlan } from '#shared/selfplay/connect4.ts';
import type { Bot } from '#shared/selfplay/bots.ts';
import { ConfigError } from '#shared/errors.ts';
import { randomInt, seededRandom, type Random } from '#shared/random.ts';

/** How a logits policy turns logits into a move: the best legal logit, or a softmax draw over legal logits. */
export type SelectionMode = 'greedy' | 'sample';
export const SELECTION_MODES: readonly SelectionMode[] = ['greedy', 'sample'];

/**
 * What a policy may look at besides the encoded observations, for one call. Row k of the call
 * (observations[k * 126 ..], legal[k * 7 ..], out[k]) is game `games[k]` of `batch`.
 */
export interface MoveContext {
  /** The live boards, for policies that read positions directly (the bots). Read only. */
  readonly batch: GameBatch;
  /** Row k of this call is game games[k] of `batch`; only the first `count` entries are meaningful. */
  readonly games: Int32Array;
  /** The match's selection mode; a logits policy passes it to `selectFromLogits`. */
  readonly mode: SelectionMode;
  /** The calling side's seeded generator: draw from it (never Math.random) to stay reproducible. */
  readonly random: Random;
  /**
   * Zeroed by the caller. A policy that replaces its own illegal first choice by a legal move
   * sets masked[k] = 1 for that row, and the runner counts it as an illegal move of that side.
   */
  readonly masked: Uint8Array;
}

/**
 * A Connect Four player, batched: one call decides `count` games at once.
 *
 * - observations: count x 126 float32, row k at [k * 126, k * 126 + 126), seen by the player to
 *   move (the layout of `encodeObservation` in shared/selfplay/connect4.ts). The arrays may be longer than
 *   the count: read only the first `count` rows.
 * - legal: count x 7, 1 where the column is legal.
 * - out: write one column (0..6) per row.
 * - context: the boards and game indices behind the rows, the mode and the generator.
 *
 * The runner awaits one call before it makes the next, and reuses the arrays between calls, so a
 * policy must not keep references to them.
 */
export interface Policy {
  readonly name: string;
  act(observations: Float32Array, legal: Uint8Array, count: number, out: Int32Array, context: MoveContext): Promise<void> | void;
}

/** A built-in bot (shared/selfplay/bots.ts) as a Policy: it reads the boards from the context, not the observations. */
export function botPolicy(bot: Bot): Policy {
  return {
    name: bot.name,
    act(_observations, _legal, count, out, context) {
      for (let k = 0; k < count; k++) out[k] = bot.chooseMove(context.batch, context.games[k]);
    },
  };
}

/**
 * Chooses one legal column per row from `count` rows of 7 logits (row k at [k * 7, k * 7 + 7)).
 * greedy: the highest legal logit (ties go to the lowest column). sample: a draw from the softmax
 * over the legal logits only, using `random`. Sets masked[k] = 1 where the highest logit over all
 * seven columns sits on an illegal one, 0 elsewhere. A row with no legal column gets -1, which
 * the board then rejects. Non-finite logits: NaN counts as the lowest value; a row whose legal
 * weights do not sum to a positive finite number is drawn uniformly among its legal columns.
 */
export function selectFromLogits(
  logits: ArrayLike<number>,
  legal: Uint8Array,
  count: number,
  out: Int32Array,
  mode: SelectionMode,
  random: Random,
  masked: Uint8Array,
): void {
  const weights = SAMPLE_WEIGHTS;
  for (let k = 0; k < count; k++) {
    const base = k * COLS;
    let top = -1;
    let best = -1;
    let legalCount = 0;
    for (let c = 0; c < COLS; c++) {
      const value = logits[base + c];
      if (top < 0 || value > logits[base + top]) top = c;
      if (legal[base + c] !== 1) continue;
      legalCount++;
      if (best < 0 || value > logits[base + best]) best = c;
    }
    masked[k] = top >= 0 && legal[base + top] !== 1 && legalCount > 0 ? 1 : 0;
    if (legalCount === 0) {
      out[k] = -1;
    } else if (mode === 'greedy') {
      out[k] = best;
    } else {
      out[k] = sampleLegal(logits, legal, base, best, legalCount, weights, random);
    }
  }
}

// Scratch for sampleLegal, shared: selectFromLogits is synchronous, so no two calls overlap.
const SAMPLE_WEIGHTS = new Float64Array(COLS);

/** One softmax draw over the legal columns of one row; `best` is the highest legal logit's column. */
function sampleLegal(
  logits: ArrayLike<number>,
  legal: Uint8Array,
  base: number,
  best: number,
  legalCount: number,
  weights: Float64Array,
  random: Random,
): number {
  // Subtracting the largest legal logit keeps exp() in range; every weight is then in (0, 1].
  const shift = logits[base + best];
  let total = 0;
  for (let c = 0; c < COLS; c++) {
    weights[c] = legal[base + c] === 1 ? Math.exp(logits[base + c] - shift) : 0;
    total += weights[c];
  }
  if (!(total > 0 && Number.isFinite(total))) {
    let k = randomInt(random, legalCount);
    for (let c = 0; c < COLS; c++) if (legal[base + c] === 1 && k-- === 0) return c;
  }
  let u = random() * total;
  let last = best;
  for (let c = 0; c < COLS; c++) {
    if (weights[c] === 0) continue;
    last = c;
    u -= weights[c];
    if (u < 0) return c;
  }
  // Only rounding leaves u >= 0 after every column: the last legal column takes that sliver.
  return last;
}

/** The input of `playMatch`. */
export interface MatchOptions {
  readonly a: Policy;
  readonly b: Policy;
  /** Number of games, a positive integer; A moves first in exactly half of them when it is even. */
  readonly games: number;
  /** Any safe integer; the same seed replays the same match. */
  readonly seed: number;
  readonly mode: SelectionMode;
  /** Keep every game's moves in the result (columns in order). Off by default: 400 games x 42 numbers. */
  readonly recordMoves?: boolean;
}

/** A match's outcome, every count from A's side. */
export interface MatchResult {
  readonly a: string;
  readonly b: string;
  readonly games: number;
  readonly winsA: number;
  readonly winsB: number;
  readonly draws: number;
  /** Games in which A moved first / second: equal when `games` is even. */
  readonly gamesAFirst: number;
  readonly gamesASecond: number;
  /** A's wins and the draws in the games where A moved first. */
  readonly firstMoverWinsA: number;
  readonly firstMoverDraws: number;
  /** A's wins and the draws in the games where A moved second. */
  readonly secondMoverWinsA: number;
  readonly secondMoverDraws: number;
  /** A's score, a draw counting half: overall, and by A's seat (null where A never had that seat). */
  readonly scoreA: number;
  readonly scoreAFirst: number | null;
  readonly scoreASecond: number | null;
  /** Moves each side proposed that were illegal (replaced, as the module comment says). */
  readonly illegalA: number;
  readonly illegalB: number;
  /** Moves played in all games together. */
  readonly plies: number;
  /** Lock-step rounds: the length of the longest game. */
  readonly rounds: number;
  /** Policy calls made, both sides together (at most two per round, one when A and B are the same object). */
  readonly policyCalls: number;
  /** Each game's columns in order, game i as played by seat i of the plan; only with recordMoves. */
  readonly moves?: number[][];
}

/** Arrays for one policy call, sized for the whole match and reused every round. */
class TurnBuffers {
  readonly observations: Float32Array;
  readonly legal: Uint8Array;
  readonly out: Int32Array;
  readonly games: Int32Array;
  readonly masked: Uint8Array;

  constructor(capacity: number) {
    this.observations = new Float32Array(capacity * OBSERVATION_SIZE);
    this.legal = new Uint8Array(capacity * COLS);
    this.out = new Int32Array(capacity);
    this.games = new Int32Array(capacity);
    this.masked = new Uint8Array(capacity);
  }
}

function isThenable(value: unknown): value is PromiseLike<void> {
  return typeof (value as PromiseLike<void> | undefined)?.then === 'function';
}

/** A uniform legal column of game i (the game is live, so there is one). */
function randomLegalColumn(batch: GameBatch, i: number, random: Random): number {
  let count = 0;
  for (let c = 0; c < COLS; c++) if (batch.isLegal(i, c)) count++;
  let k = randomInt(random, count);
  for (let c = 0; c < COLS; c++) if (batch.isLegal(i, c) && k-- === 0) return c;
  return -1; // unreachable: k < count
}

/**
 * Asks `policy` for a move in each of `count` games (their indices in buffers.games), then makes
 * every answer legal (module comment). Leaves the columns to play in buffers.out and, per row,
 * whether the policy's proposal was illegal in buffers.masked (1 = illegal, replaced).
 */
async function decide(policy: Policy, batch: GameBatch, buffers: TurnBuffers, count: number, context: MoveContext): Promise<void> {
  for (let k = 0; k < count; k++) {
    const i = buffers.games[k];
    batch.encodeObservation(i, buffers.observations, k * OBSERVATION_SIZE);
    batch.legalMask(i, buffers.legal, k * COLS);
    buffers.masked[k] = 0;
    buffers.out[k] = -1;
  }
  const pending = policy.act(buffers.observations, buffers.legal, count, buffers.out, context);
  if (isThenable(pending)) await pending;
  for (let k = 0; k < count; k++) {
    const i = buffers.games[k];
    if (!batch.isLegal(i, buffers.out[k])) {
      buffers.out[k] = randomLegalColumn(batch, i, context.random);
      buffers.masked[k] = 1;
    } else if (buffers.masked[k] !== 0) {
      buffers.masked[k] = 1;
    }
  }
}

function validatePolicy(field: string, policy: Policy): void {
  if (typeof policy !== 'object' || policy === null || typeof policy.act !== 'function' || typeof policy.name !== 'string') {
    throw new ConfigError(field, policy, 'must be a policy: an object with a string name and an act function');
  }
}

/** A fresh 32-bit seed from a generator, for a sub-stream. */
function childSeed(random: Random): number {
  return Math.floor(random() * 2 ** 32);
}

/**
 * One decision of `policy` for some games of `batch` (a game it is to move in, each live), with
 * the match runner's masking: for callers that move one side at a time, such as the arena.
 * Returns the legal columns to play, in the order of `games`, and how many proposals were illegal.
 */
export async function chooseMoves(
  policy: Policy,
  batch: GameBatch,
  games: readonly number[],
  options: { readonly mode: SelectionMode; readonly random: Random },
): Promise<{ columns: number[]; illegal: number }> {
  validatePolicy('policy', policy);
  if (!SELECTION_MODES.includes(options.mode)) {
    throw new ConfigError('mode', options.mode, `must be one of ${SELECTION_MODES.join(', ')}`);
  }
  if (games.length === 0) return { columns: [], illegal: 0 };
  const buffers = new TurnBuffers(games.length);
  games.forEach((i, k) => {
    if (!Number.isInteger(i) || i < 0 || i >= batch.size || batch.done(i)) {
      throw new ConfigError('games', i, `must list live games of the batch, indices 0..${batch.size - 1}`);
    }
    buffers.games[k] = i;
  });
  const context: MoveContext = { batch, games: buffers.games, mode: options.mode, random: options.random, masked: buffers.masked };
  await decide(policy, batch, buffers, games.length, context);
  let illegal = 0;
  for (let k = 0; k < games.length; k++) illegal += buffers.masked[k];
  return { columns: Array.from(buffers.out), illegal };
}

/** Plays a whole match (module comment) and returns its tally. */
export async function playMatch(options: MatchOptions): Promise<MatchResult> {
  const { a, b, games, seed, mode } = options;
  validatePolicy('a', a);
  validatePolicy('b', b);
  if (!Number.isSafeInteger(games) || games < 1) throw new ConfigError('games', games, 'must be a positive integer');
  if (!Number.isSafeInteger(seed)) throw new ConfigError('seed', seed, 'must be a safe integer');
  if (!SELECTION_MODES.includes(mode)) throw new ConfigError('mode', mode, `must be one of ${SELECTION_MODES.join(', ')}`);

  const batch = new GameBatch(games);
  const aFirst = new Uint8Array(games);
  seatPlan(games, 1).forEach((seat, i) => {
    aFirst[i] = seat.learnerFirst ? 1 : 0;
  });
  const master = seededRandom(seed);
  const randomA = seededRandom(childSeed(master));
  const randomB = seededRandom(childSeed(master));
  const moves: number[][] | undefined = options.recordMoves ? Array.from({ length: games }, () => []) : undefined;

  // Self-play against the same object: one call per round covers both sides' games.
  const shared = a === b;
  const buffersA = new TurnBuffers(games);
  const buffersB = shared ? buffersA : new TurnBuffers(games);
  const contextA: MoveContext = { batch, games: buffersA.games, mode, random: randomA, masked: buffersA.masked };
  const contextB: MoveContext = { batch, games: buffersB.games, mode, random: randomB, masked: buffersB.masked };
  // Per row of the shared call: 1 when A is the mover, for charging illegal moves to the right side.
  const rowIsA = new Uint8Array(games);

  let illegalA = 0;
  let illegalB = 0;
  let plies = 0;
  let rounds = 0;
  let policyCalls = 0;
  while (batch.liveGames > 0) {
    // Split every live game by its mover BEFORE any move of this round is played: a played move
    // flips the mover, and a game must not be asked twice in one round.
    let countA = 0;
    let countB = 0;
    for (let i = 0; i < games; i++) {
      if (batch.done(i)) continue;
      const aToMove = (batch.toMove(i) === 1) === (aFirst[i] === 1);
      if (shared) {
        rowIsA[countA] = aToMove ? 1 : 0;
        buffersA.games[countA++] = i;
      } else if (aToMove) {
        buffersA.games[countA++] = i;
      } else {
        buffersB.games[countB++] = i;
      }
    }
    const turns: Array<[Policy, TurnBuffers, number, MoveContext, boolean]> = [];
    if (countA > 0) turns.push([a, buffersA, countA, contextA, true]);
    if (countB > 0) turns.push([b, buffersB, countB, contextB, false]);
    // Both sides decide before either plays, so B's call sees the boards as they were at the
    // start of the round (its games are disjoint from A's anyway).
    for (const [policy, buffers, count, context] of turns) {
      await decide(policy, batch, buffers, count, context);
      policyCalls++;
    }
    for (const [, buffers, count, , isA] of turns) {
      for (let k = 0; k < count; k++) {
        const i = buffers.games[k];
        const column = buffers.out[k];
        if (buffers.masked[k] === 1) {
          if (shared ? rowIsA[k] === 1 : isA) illegalA++;
          else illegalB++;
        }
        batch.play(i, column);
        moves?.[i].push(column);
      }
      plies += count;
    }
    rounds++;
  }

  let winsA = 0;
  let winsB = 0;
  let draws = 0;
  let gamesAFirst = 0;
  let firstMoverWinsA = 0;
  let firstMoverDraws = 0;
  let secondMoverWinsA = 0;
  let secondMoverDraws = 0;
  for (let i = 0; i < games; i++) {
    const winner = batch.winner(i);
    const first = aFirst[i] === 1;
    if (first) gamesAFirst++;
    if (winner === 0) {
      draws++;
      if (first) firstMoverDraws++;
      else secondMoverDraws++;
    } else if ((winner === 1) === first) {
      winsA++;
      if (first) firstMoverWinsA++;
      else secondMoverWinsA++;
    } else {
      winsB++;
    }
  }
  const gamesASecond = games - gamesAFirst;
  const score = (wins: number, drawn: number, n: number): number | null => (n === 0 ? null : (wins + drawn / 2) / n);
  return {
    a: a.name,
    b: b.name,
    games,
    winsA,
    winsB,
    draws,
    gamesAFirst,
    gamesASecond,
    firstMoverWinsA,
    firstMoverDraws,
    secondMoverWinsA,
    secondMoverDraws,
    scoreA: (winsA + draws / 2) / games,
    scoreAFirst: score(firstMoverWinsA, firstMoverDraws, gamesAFirst),
    scoreASecond: score(secondMoverWinsA, secondMoverDraws, gamesASecond),
    illegalA,
    illegalB,
    plies,
    rounds,
    policyCalls,
    ...(moves ? { moves } : {}),
  };
}
