/**
 * The arena's game protocol: a signed-in person plays Connect Four against the league's champion.
 *
 * Stateless on the server. Each request carries the whole game so far (the columns played, in
 * order, from the empty board) and the person's seat; the server replays it with the rules of
 * shared/selfplay/connect4.ts, and when the champion is to move it plays the champion's greedy reply (the
 * highest legal logit, masked as the match runner masks) and returns the new state. Nothing is
 * stored, so no request, however malformed, can lose or corrupt a game: the page holds the game,
 * and a reload starts a new one. A client can send any history it likes, champion moves included;
 * that only cheats the sender, and every move is still checked against the rules.
 *
 * Steps of a request:
 *   1. `parseArenaRequest`: the body as JSON, `moves` a list and `human` "first" or "second"
 *      (400, ConfigError, naming the field).
 *   2. `replayArenaGame`: every move legal (400, ArenaMoveError naming `moves[i]` and its value),
 *      none after the end (409, ArenaGameOverError), and a finished game only when the person's
 *      own last move finished it (409 otherwise: there is nothing left to answer).
 *   3. `playArenaTurn`: the champion's reply when it is to move; the state either way.
 */
import { z } from 'zod';
import { ArenaGameOverError, ArenaMoveError, ChampionUnavailable } from './errors.ts';
import { COLS, ROWS, CELLS, Game, type Player } from './connect4.ts';
import { ConfigError } from '../errors.ts';
import { type CognitoPageSignIn, cognitoSignInFromEnv } from '../sign-in.ts';
import { chooseMoves, type Policy } from './match.ts';
import { seededRandom } from '../random.ts';
import { parseOrThrow } from '../schema.ts';

/** The artifact whose latest version is the champion the arena plays. */
export const CHAMPION_ARTIFACT = 'selfplay-champion';
/** The champion's ONNX policy among the artifact version's files. */
export const CHAMPION_FILE = 'champion.onnx';
/** How long a container keeps playing a champion before it asks the index for a newer one. */
export const CHAMPION_RECHECK_MS = 60_000;

/** Environment variables the Arena construct sets on its function. */
export const ARENA_ENV = {
  /** 'cognito' (sign in through the user pool's managed login) or 'none' (a public arena). */
  signIn: 'ARENA_SIGN_IN',
  /** Base URL of the Cognito domain, https://<prefix>.auth.<region>.amazoncognito.com. */
  authDomain: 'ARENA_AUTH_DOMAIN',
  /** The user pool app client the page signs in with (public: no secret, PKCE). */
  clientId: 'ARENA_CLIENT_ID',
  /** The page's own URL: the OAuth redirect URI, registered as the client's callback. */
  pageUrl: 'ARENA_URL',
} as const;

/** The person's seat: "first" moves first. */
export type Side = 'first' | 'second';
export const SIDES: readonly Side[] = ['first', 'second'];
/** From the person's side: won, lost or drawn, or still playing. */
export type ArenaStatus = 'playing' | 'won' | 'lost' | 'draw';

/**
 * The request body. Moves are checked one by one by `replayArenaGame` rather than by the schema,
 * so that an error names the move's index and says which rule it breaks. A list longer than the
 * board plus one is refused outright (the extra one lets "a move after a full board" be reported
 * as such), which also bounds the work a request can ask for.
 */
export const ArenaRequestSchema = z.object({
  moves: z.array(z.unknown()).max(CELLS + 1, `at most ${CELLS} moves fit on the board`),
  human: z.enum(['first', 'second']),
});
export interface ArenaRequest {
  readonly moves: readonly unknown[];
  readonly human: Side;
}

/** The body of `POST /arena/move` (base64 when API Gateway says so), parsed and checked. */
export function parseArenaRequest(body: string | undefined, isBase64Encoded = false): ArenaRequest {
  const text = body === undefined ? '' : isBase64Encoded ? Buffer.from(body, 'base64').toString('utf8') : body;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ConfigError('body', text, 'must be JSON: {"moves": [columns 0-6 played so far], "human": "first" | "second"}');
  }
  return parseOrThrow(ArenaRequestSchema, json);
}

/** A replayed game with the person's seat. */
export interface ArenaGame {
  readonly game: Game;
  readonly human: Side;
  readonly humanPlayer: Player;
}

const playerOf = (side: Side): Player => (side === 'first' ? 1 : -1);

/** "the first player won at move 7", "the board filled up (draw)". */
function describeEnd(game: Game): string {
  const winner = game.winner;
  const at = `move ${game.moves.length - 1}`;
  if (winner === 0) return `the board filled up at ${at} (draw)`;
  return `the ${winner === 1 ? 'first' : 'second'} player won at ${at}`;
}

/**
 * Replays the request's moves from the empty board (steps 2 of the module comment). Throws
 * ArenaMoveError for a move that is not a legal column, ArenaGameOverError for a move after the
 * end or a game that ended with the champion's move.
 */
export function replayArenaGame(request: ArenaRequest): ArenaGame {
  const game = new Game();
  request.moves.forEach((column, i) => {
    const field = `moves[${i}]`;
    if (game.done) throw new ArenaGameOverError(field, column, `the game was already over (${describeEnd(game)}); start a new game`);
    if (typeof column !== 'number' || !Number.isInteger(column) || column < 0 || column >= COLS) {
      throw new ArenaMoveError(field, column, `must be a column: an integer from 0 to ${COLS - 1}`);
    }
    if (!game.isLegal(column)) throw new ArenaMoveError(field, column, `column ${column} is full`);
    game.play(column);
  });
  const humanPlayer = playerOf(request.human);
  if (game.done) {
    // The person's own move may end the game (the answer is the result); a game that the
    // champion's move ended has already been answered.
    const lastMover: Player = game.moves.length % 2 === 1 ? 1 : -1;
    if (lastMover !== humanPlayer) {
      throw new ArenaGameOverError('moves', request.moves, `the game is already over (${describeEnd(game)}); start a new game`);
    }
  }
  return { game, human: request.human, humanPlayer };
}

/** What the page shows after a request. */
export interface ArenaState {
  readonly human: Side;
  /** Every move from the empty board, the champion's reply included. */
  readonly moves: number[];
  /** The champion's column this turn; null when it was not its turn (or the game was over). */
  readonly reply: number | null;
  /** board[row][col], row 0 = the BOTTOM row; 1 = the first player's piece, -1 = the second's, 0 = empty. */
  readonly board: number[][];
  readonly status: ArenaStatus;
  readonly winner: 'human' | 'champion' | null;
  /** Who moves next; null once the game is over. */
  readonly toMove: 'human' | 'champion' | null;
  /** Columns the next move may take; empty once the game is over. */
  readonly legalMoves: number[];
}

export function arenaState(arena: ArenaGame, reply: number | null): ArenaState {
  const { game, humanPlayer } = arena;
  const board = Array.from({ length: ROWS }, (_, row) => Array.from({ length: COLS }, (_, col) => game.cell(row, col)));
  const winner = game.winner;
  let status: ArenaStatus = 'playing';
  if (winner === 0) status = 'draw';
  else if (winner !== null) status = winner === humanPlayer ? 'won' : 'lost';
  return {
    human: arena.human,
    moves: [...game.moves],
    reply,
    board,
    status,
    winner: status === 'won' ? 'human' : status === 'lost' ? 'champion' : null,
    toMove: game.done ? null : game.toMove === humanPlayer ? 'human' : 'champion',
    legalMoves: game.legalMoves(),
  };
}

/** True when the champion is to move in a game still going. */
export function championToMove(arena: ArenaGame): boolean {
  return !arena.game.done && arena.game.toMove !== arena.humanPlayer;
}

/**
 * Step 3: plays the champion's greedy reply when it is to move, and returns the state. Greedy
 * selection never draws from the generator; it is there because the policy interface takes one.
 */
export async function playArenaTurn(arena: ArenaGame, champion: Policy): Promise<ArenaState> {
  if (!championToMove(arena)) return arenaState(arena, null);
  const { columns } = await chooseMoves(champion, arena.game.batch, [0], { mode: 'greedy', random: seededRandom(0) });
  const reply = columns[0]!;
  arena.game.play(reply);
  return arenaState(arena, reply);
}

/** HTTP status and JSON body for the errors a request can cause; undefined for anything else (a 500). */
export function arenaErrorResponse(error: unknown): { statusCode: number; body: { error: string; message: string; field?: string } } | undefined {
  if (error instanceof ArenaGameOverError) return { statusCode: 409, body: { error: error.name, message: error.message, field: error.field } };
  if (error instanceof ConfigError) return { statusCode: 400, body: { error: error.name, message: error.message, field: error.field } };
  if (error instanceof ChampionUnavailable) return { statusCode: 503, body: { error: error.name, message: error.message } };
  return undefined;
}

/** How the page signs people in: none (a public arena), or Cognito returning to the page's URL. */
export type ArenaSignIn = { readonly mode: 'none' } | CognitoPageSignIn;

/** Scopes the page asks for: enough for an ID token with the person's name. */
export const ARENA_SCOPES: readonly string[] = ['openid', 'email', 'profile'];

/** The sign-in settings from the function's environment (ARENA_ENV); throws naming a bad or missing variable. */
export function arenaSignInFromEnv(env: Record<string, string | undefined>): ArenaSignIn {
  const settings = cognitoSignInFromEnv(
    env,
    { mode: ARENA_ENV.signIn, off: 'none', authDomain: ARENA_ENV.authDomain, clientId: ARENA_ENV.clientId, more: { redirectUri: ARENA_ENV.pageUrl } },
    'the Arena construct',
  );
  if (!settings) return { mode: 'none' };
  return { mode: 'cognito', domain: settings.domain, clientId: settings.clientId, redirectUri: settings.redirectUri, scopes: ARENA_SCOPES };
}
