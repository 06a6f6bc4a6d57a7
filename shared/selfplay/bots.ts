/**
 * The league's two built-in Connect Four players.
 *
 * - random: a uniform choice among the legal columns.
 * - tactical: a winning move if it has one, else a move that blocks one of the opponent's
 *   immediate wins, else a uniform legal move. It always samples: among several winning (or
 *   blocking) columns it picks one at random too, so its games are not all alike.
 *
 * Both take a seed (the generator of shared/random.ts) so that tests and benchmarks replay
 * exactly. Python's connect4_env.py has the same bots over numpy's Generator; the two draw
 * different numbers, and only the SETS of moves each may choose are shared
 * (test/fixtures/connect4/vectors.json).
 */
import { COLS, type GameBatch, type Player } from '#shared/selfplay/connect4.ts';
import { randomInt, seededRandom, type Random } from '#shared/random.ts';

/** A player that picks the next column of one game in a batch. */
export interface Bot {
  readonly name: string;
  /** The column to play in game i, or -1 when game i is over (which `play` then rejects). */
  chooseMove(batch: GameBatch, i: number): number;
}

/** Which rule produced the tactical bot's candidate columns. */
export type TacticalKind = 'win' | 'block' | 'any';

/**
 * The columns the tactical bot may choose in game i, as a 0/1 mask written into `out`: its own
 * winning moves if there are any, else the columns where the opponent would win next move, else
 * every legal column. All zero once the game is over.
 */
export function tacticalCandidates(batch: GameBatch, i: number, out: Uint8Array = new Uint8Array(COLS)): TacticalKind {
  const me = batch.toMove(i);
  const opponent = -me as Player;
  let found = false;
  for (let c = 0; c < COLS; c++) {
    const wins = batch.isWinningMove(i, c, me);
    out[c] = wins ? 1 : 0;
    found ||= wins;
  }
  if (found) return 'win';
  for (let c = 0; c < COLS; c++) {
    const blocks = batch.isWinningMove(i, c, opponent);
    out[c] = blocks ? 1 : 0;
    found ||= blocks;
  }
  if (found) return 'block';
  batch.legalMask(i, out);
  return 'any';
}

/** A uniform pick among the set columns of `mask`, or -1 when none is set. */
function sampleMask(mask: Uint8Array, random: Random): number {
  let count = 0;
  for (let c = 0; c < COLS; c++) count += mask[c];
  if (count === 0) return -1;
  let k = randomInt(random, count);
  for (let c = 0; c < COLS; c++) {
    if (mask[c] === 1 && k-- === 0) return c;
  }
  return -1; // unreachable: k < count
}

/** The random bot; `seed` is any safe integer (ConfigError otherwise). */
export function createRandomBot(seed: number): Bot {
  const random = seededRandom(seed);
  const mask = new Uint8Array(COLS);
  return {
    name: 'random',
    chooseMove: (batch, i) => sampleMask(batch.legalMask(i, mask), random),
  };
}

/** The tactical bot; `seed` is any safe integer (ConfigError otherwise). */
export function createTacticalBot(seed: number): Bot {
  const random = seededRandom(seed);
  const mask = new Uint8Array(COLS);
  return {
    name: 'tactical',
    chooseMove: (batch, i) => {
      tacticalCandidates(batch, i, mask);
      return sampleMask(mask, random);
    },
  };
}

/**
 * Plays every live game of `batch` to the end in lock-step, one ply of every game per round,
 * asking `botFor(i, player)` which bot moves for `player` in game i.
 */
export function playOut(batch: GameBatch, botFor: (game: number, player: Player) => Bot): void {
  while (batch.liveGames > 0) {
    for (let i = 0; i < batch.size; i++) {
      if (batch.done(i)) continue;
      batch.play(i, botFor(i, batch.toMove(i)).chooseMove(batch, i));
    }
  }
}
