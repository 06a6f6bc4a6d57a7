/**
 * The self-play league's named errors: what its Lambdas and jobs throw, and what its state machine
 * and tests match on by name (Step Functions' ErrorEquals and the fan-out's recorded `error` are
 * `error.name`). One place per pipeline; test/unit/error-names.test.ts checks that every name a
 * state machine matches is one of these classes, or one of the platform's in shared/errors.ts.
 */
import { ConfigError, PipelineError } from '../errors.ts';

/** A move that the rules forbid: off the board, into a full column, or after the game ended. */
export class IllegalMoveError extends PipelineError {
  constructor(
    readonly game: number,
    readonly column: unknown,
    readonly reason: string,
  ) {
    super(`game ${game}: column ${String(column)} is illegal: ${reason}`);
  }
}

/**
 * A model that cannot serve as a policy: unreadable, or not [batch, 126] float32 in and
 * [batch, 7] logits out. Names the file (or the label of the bytes) and what is wrong. Retrying
 * cannot fix it, so state machines leave it out of Retry.
 */
export class InvalidPolicyModel extends PipelineError {
  constructor(
    readonly source: string,
    readonly problem: string,
    options?: { cause?: unknown },
  ) {
    super(`${source}: not a usable Connect Four policy: ${problem}`, options);
  }
}

/** A move the rules forbid: not a column 0..6, or into a full column. HTTP 400. */
export class ArenaMoveError extends ConfigError {}

/** A move after the game ended, or a finished game sent again. HTTP 409: start a new game. */
export class ArenaGameOverError extends ConfigError {}

/**
 * A league with no rated snapshot to publish: every match of every generation failed (tolerated
 * by maxFailedMatchPercent). Names how many failed, the first one's reason and the league
 * document that records them all.
 */
export class NoRatedSnapshot extends PipelineError {}

/** No champion to play: none published yet, or the latest cannot be loaded. HTTP 503. */
export class ChampionUnavailable extends PipelineError {}
