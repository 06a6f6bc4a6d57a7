/**
 * Connect Four: the rules, the network's input encoding and the seat plan, shared by the
 * match runner, the arena and (through test/fixtures/connect4/vectors.json) the Python trainer.
 *
 * Board layout, the same everywhere (TypeScript, Python, the vectors file):
 * - 6 rows x 7 columns, cell index = row * 7 + col, row 0 = the BOTTOM row.
 * - A cell holds 0 (empty), 1 (the player who moved first) or -1 (the player who moved second).
 * - The player to move is 1 after an even number of plies, -1 after an odd number.
 *
 * Observation layout (`encodeObservation`), 126 float32 values, seen by the player to move:
 *   obs[plane * 42 + row * 7 + col], plane 0 = the mover's own pieces, plane 1 = the opponent's,
 *   plane 2 = empty cells; each value is exactly 0 or 1. Python's `encode_observation` writes
 *   the same values in the same order.
 *
 * Speed: the match runner advances hundreds of games in lock-step with one batched inference per
 * ply, so `GameBatch` keeps all games in flat typed arrays, allocates nothing per move, and looks
 * for a win only on the four lines through the last piece.
 */
import { ConfigError } from '#shared/errors.ts';
import { IllegalMoveError } from './errors.ts';

export const ROWS = 6;
export const COLS = 7;
export const CELLS = ROWS * COLS;
/** Length of one encoded observation: 3 planes x 6 rows x 7 columns. */
export const OBSERVATION_SIZE = 3 * CELLS;

/** 1 = the player who moves first, -1 = the player who moves second. */
export type Player = 1 | -1;
/** 1 or -1 = that player won, 0 = draw (full board), null = not over. */
export type Outcome = Player | 0 | null;

// Stored in the outcome array while a game goes on; any other value is the Outcome itself.
const ONGOING = 2;
// The three line directions that need both halves counted (vertical only ever looks down,
// because nothing sits above the newest piece of a column).
const LINE_DR = [0, 1, 1] as const;
const LINE_DC = [1, 1, -1] as const;

/** Pieces of `piece` in a straight run from (row, col), exclusive, stepping (dr, dc). */
function runLength(cells: Int8Array, base: number, row: number, col: number, dr: number, dc: number, piece: number): number {
  let count = 0;
  let r = row + dr;
  let c = col + dc;
  while (r >= 0 && r < ROWS && c >= 0 && c < COLS && cells[base + r * COLS + c] === piece) {
    count++;
    r += dr;
    c += dc;
  }
  return count;
}

/**
 * True when a piece of `piece` at (row, col) completes four in a line. The cell itself is not
 * read, so this answers both "did the last move win" and "would a move here win".
 */
function connectsFour(cells: Int8Array, base: number, row: number, col: number, piece: number): boolean {
  if (runLength(cells, base, row, col, -1, 0, piece) >= 3) return true;
  for (let d = 0; d < 3; d++) {
    const dr = LINE_DR[d];
    const dc = LINE_DC[d];
    if (runLength(cells, base, row, col, dr, dc, piece) + runLength(cells, base, row, col, -dr, -dc, piece) >= 3) {
      return true;
    }
  }
  return false;
}

/**
 * Writes the 126-value observation of a board for `toMove` into `out` at `offset` (layout in the
 * module comment). `cells` holds 42 cells starting at `cellBase`. Every value is written, so `out`
 * may be reused between plies without clearing.
 */
export function encodeObservation(
  cells: ArrayLike<number>,
  toMove: Player,
  out: Float32Array = new Float32Array(OBSERVATION_SIZE),
  offset = 0,
  cellBase = 0,
): Float32Array {
  for (let k = 0; k < CELLS; k++) {
    const v = cells[cellBase + k];
    out[offset + k] = v === toMove ? 1 : 0;
    out[offset + CELLS + k] = v === -toMove ? 1 : 0;
    out[offset + 2 * CELLS + k] = v === 0 ? 1 : 0;
  }
  return out;
}

/**
 * N games advanced independently but stored together, for lock-step play: at each ply the caller
 * encodes every live game, runs one batched inference and plays one move per live game.
 */
export class GameBatch {
  readonly size: number;
  /** size x 42 cells, game i at [i * 42, i * 42 + 42), layout in the module comment. */
  readonly cells: Int8Array;
  /** size x 7 column heights (pieces in each column). */
  readonly heights: Uint8Array;
  private readonly pliesPlayed: Uint8Array;
  private readonly outcomes: Int8Array;
  private live: number;

  constructor(size: number) {
    if (!Number.isInteger(size) || size < 1) throw new ConfigError('size', size, 'must be a positive integer');
    this.size = size;
    this.cells = new Int8Array(size * CELLS);
    this.heights = new Uint8Array(size * COLS);
    this.pliesPlayed = new Uint8Array(size);
    this.outcomes = new Int8Array(size).fill(ONGOING);
    this.live = size;
  }

  /** Empties every board. */
  reset(): void {
    this.cells.fill(0);
    this.heights.fill(0);
    this.pliesPlayed.fill(0);
    this.outcomes.fill(ONGOING);
    this.live = this.size;
  }

  /** Number of games not yet over. */
  get liveGames(): number {
    return this.live;
  }

  plies(i: number): number {
    return this.pliesPlayed[i];
  }

  toMove(i: number): Player {
    return (this.pliesPlayed[i] & 1) === 0 ? 1 : -1;
  }

  done(i: number): boolean {
    return this.outcomes[i] !== ONGOING;
  }

  /** 1 or -1 = that player won, 0 = draw, null = still going. */
  winner(i: number): Outcome {
    const o = this.outcomes[i];
    return o === ONGOING ? null : (o as Player | 0);
  }

  /** The piece at (row, col) of game i; row 0 is the bottom. */
  cell(i: number, row: number, col: number): number {
    return this.cells[i * CELLS + row * COLS + col];
  }

  isLegal(i: number, col: number): boolean {
    return this.outcomes[i] === ONGOING && col >= 0 && col < COLS && this.heights[i * COLS + col] < ROWS;
  }

  /** Writes 1 for each legal column of game i (all 0 once it is over) into `out` at `offset`. */
  legalMask(i: number, out: Uint8Array = new Uint8Array(COLS), offset = 0): Uint8Array {
    const over = this.outcomes[i] !== ONGOING;
    const h = i * COLS;
    for (let c = 0; c < COLS; c++) out[offset + c] = !over && this.heights[h + c] < ROWS ? 1 : 0;
    return out;
  }

  /** True when `player` dropping a piece into `col` of game i would complete four now. */
  isWinningMove(i: number, col: number, player: Player): boolean {
    if (!this.isLegal(i, col)) return false;
    return connectsFour(this.cells, i * CELLS, this.heights[i * COLS + col], col, player);
  }

  /** Drops the mover's piece into `col` of game i; returns the game's outcome after the move. */
  play(i: number, col: number): Outcome {
    if (!Number.isInteger(i) || i < 0 || i >= this.size) {
      throw new ConfigError('game', i, `must be an integer in [0, ${this.size - 1}]`);
    }
    if (this.outcomes[i] !== ONGOING) throw new IllegalMoveError(i, col, 'the game is over');
    if (!Number.isInteger(col) || col < 0 || col >= COLS) {
      throw new IllegalMoveError(i, col, `columns are integers 0..${COLS - 1}`);
    }
    const h = i * COLS + col;
    const row = this.heights[h];
    if (row >= ROWS) throw new IllegalMoveError(i, col, 'the column is full');
    const base = i * CELLS;
    const piece = (this.pliesPlayed[i] & 1) === 0 ? 1 : -1;
    this.cells[base + row * COLS + col] = piece;
    this.heights[h] = row + 1;
    const plies = ++this.pliesPlayed[i];
    if (connectsFour(this.cells, base, row, col, piece)) {
      this.outcomes[i] = piece;
      this.live--;
    } else if (plies === CELLS) {
      this.outcomes[i] = 0;
      this.live--;
    }
    return this.winner(i);
  }

  /** Game i's observation for its player to move, written into `out` at `offset`. */
  encodeObservation(i: number, out: Float32Array = new Float32Array(OBSERVATION_SIZE), offset = 0): Float32Array {
    return encodeObservation(this.cells, this.toMove(i), out, offset, i * CELLS);
  }

  /** Every game's observation, game i at [i * 126, i * 126 + 126): the batched inference input. */
  encodeObservations(out: Float32Array = new Float32Array(this.size * OBSERVATION_SIZE)): Float32Array {
    for (let i = 0; i < this.size; i++) this.encodeObservation(i, out, i * OBSERVATION_SIZE);
    return out;
  }
}

/** One game with its move history: a view of a batch of one, so both share one rule set. */
export class Game {
  readonly batch = new GameBatch(1);
  private readonly history: number[] = [];

  /** Replays a move list (columns) from the empty board; throws IllegalMoveError on a bad move. */
  static fromMoves(moves: readonly number[]): Game {
    const game = new Game();
    for (const col of moves) game.play(col);
    return game;
  }

  get moves(): readonly number[] {
    return this.history;
  }
  get toMove(): Player {
    return this.batch.toMove(0);
  }
  get done(): boolean {
    return this.batch.done(0);
  }
  get winner(): Outcome {
    return this.batch.winner(0);
  }

  cell(row: number, col: number): number {
    return this.batch.cell(0, row, col);
  }

  isLegal(col: number): boolean {
    return this.batch.isLegal(0, col);
  }

  legalMask(): Uint8Array {
    return this.batch.legalMask(0);
  }

  legalMoves(): number[] {
    const moves: number[] = [];
    for (let c = 0; c < COLS; c++) if (this.batch.isLegal(0, c)) moves.push(c);
    return moves;
  }

  play(col: number): Outcome {
    const outcome = this.batch.play(0, col);
    this.history.push(col);
    return outcome;
  }

  observation(out?: Float32Array): Float32Array {
    return this.batch.encodeObservation(0, out);
  }

  /** Rows top to bottom, 'X' = first player, 'O' = second, '.' = empty. */
  render(): string[] {
    const lines: string[] = [];
    for (let r = ROWS - 1; r >= 0; r--) {
      let line = '';
      for (let c = 0; c < COLS; c++) {
        const v = this.cell(r, c);
        line += v === 1 ? 'X' : v === -1 ? 'O' : '.';
      }
      lines.push(line);
    }
    return lines;
  }
}

/** Where game i of a match or a training batch sits: its opponent group and the learner's seat. */
export interface Seat {
  readonly group: number;
  readonly learnerFirst: boolean;
}

/**
 * Assigns `games` games to `groups` opponent groups so that every group gets the same number of
 * games (within one) and, within every group, the learner moves first in exactly half of them
 * (within one when the group's count is odd).
 *
 * Game i goes to group i % groups, and it is that group's k-th game with k = floor(i / groups);
 * the learner moves first when k + group is even. The seat alternates along each group's own
 * games, which is what makes every group balanced for any number of groups. (Alternating on i
 * instead, first = i % 2 === 0, gives every game of a group the same seat when the number of
 * groups is even.) Adding the group to k makes odd-sized groups take turns at the extra first
 * move, so the whole plan is balanced within one as well. Python's `seat_plan` is identical.
 */
export function seatPlan(games: number, groups: number): Seat[] {
  if (!Number.isInteger(games) || games < 0) throw new ConfigError('games', games, 'must be a non-negative integer');
  if (!Number.isInteger(groups) || groups < 1) throw new ConfigError('groups', groups, 'must be a positive integer');
  const plan: Seat[] = new Array(games);
  for (let i = 0; i < games; i++) {
    const group = i % groups;
    const k = Math.floor(i / groups);
    plan[i] = { group, learnerFirst: (k + group) % 2 === 0 };
  }
  return plan;
}
