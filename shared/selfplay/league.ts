/**
 * The Connect Four self-play league's bookkeeping, pure: who plays whom, what a match request and
 * a match result look like on the wire (zod schemas, shared by the match and Elo Lambdas), how
 * results become the joint Elo fit's input, who the next generation trains against, and the
 * head-to-head matrix of the report.
 *
 * The league starts with the two built-in bots (random, tactical). Each generation adds one
 * snapshot, which then plays every player already in the league (`matchPairs`); all matches so
 * far are fitted jointly with the random bot anchored at 0 (`rateLeague`); the next generation
 * trains against the bots plus the top k snapshots by Elo (`chooseOpponents`).
 *
 * Player ids travel into pair ids, cache keys and S3 keys, so they are restricted to letters,
 * digits, '.', '_' and '-'. A bot's id is its kind ('random', 'tactical'): the Elo anchor is the
 * player with id 'random'.
 */
import { z } from 'zod';
import { fitElo, type EloFit, type EloInput, type EloMatch, type PlayerRating } from './elo.ts';
import { ConfigError } from '../errors.ts';
import { sha256Hex } from '../json.ts';
import { parseOrThrow } from '../schema.ts';
import type { MatchResult as PlayedMatch, SelectionMode } from './match.ts';

export const PLAYER_KINDS = ['random', 'tactical', 'snapshot'] as const;
export type PlayerKind = (typeof PLAYER_KINDS)[number];
export const BOT_KINDS = ['random', 'tactical'] as const;

/** The Elo anchor: the random bot is rated exactly 0. */
export const ANCHOR_ID = 'random';

/** Separates the two ids of a pair id; ids cannot contain it. */
const PAIR_SEPARATOR = '~';
const PLAYER_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/**
 * A league member. A snapshot names its ONNX policy (s3://bucket/key) and the generation that
 * produced it; a bot has neither.
 */
export const LeaguePlayer = z
  .object({
    id: z.string().regex(PLAYER_ID, 'must be 1-64 characters: letters, digits, ".", "_" or "-", starting with a letter or digit'),
    kind: z.enum(PLAYER_KINDS),
    generation: z.int().min(0).optional(),
    onnxUri: z
      .string()
      .regex(/^s3:\/\/[^/]+\/.+$/, 'must be s3://bucket/key')
      .optional(),
    /** A snapshot's weights for the trainer (policy.save_checkpoint's format), when it can be trained against. */
    stateDictUri: z
      .string()
      .regex(/^s3:\/\/[^/]+\/.+$/, 'must be s3://bucket/key')
      .optional(),
  })
  .superRefine((player, ctx) => {
    if (player.kind === 'snapshot') {
      if (player.onnxUri === undefined)
        ctx.addIssue({ code: 'custom', path: ['onnxUri'], message: 'a snapshot needs onnxUri (s3://bucket/key of its ONNX policy)' });
      if (player.generation === undefined) ctx.addIssue({ code: 'custom', path: ['generation'], message: 'a snapshot needs its generation (an integer >= 0)' });
      if ((BOT_KINDS as readonly string[]).includes(player.id)) {
        ctx.addIssue({ code: 'custom', path: ['id'], message: 'is reserved for a built-in bot' });
      }
    } else {
      if (player.id !== player.kind) ctx.addIssue({ code: 'custom', path: ['id'], message: `a ${player.kind} bot's id must be "${player.kind}"` });
      if (player.onnxUri !== undefined) ctx.addIssue({ code: 'custom', path: ['onnxUri'], message: 'only a snapshot has an ONNX policy' });
      if (player.stateDictUri !== undefined) ctx.addIssue({ code: 'custom', path: ['stateDictUri'], message: 'only a snapshot has weights' });
    }
  });
export type LeaguePlayer = z.infer<typeof LeaguePlayer>;

/** The two built-in bots the league starts with, in the league's canonical order. */
export const BOT_PLAYERS: readonly LeaguePlayer[] = Object.freeze([
  Object.freeze({ id: 'random', kind: 'random' as const }),
  Object.freeze({ id: 'tactical', kind: 'tactical' as const }),
]);

/** The input of the match Lambda: one pair, `games` games (A first in exactly half of them). */
export const MatchRequest = z
  .object({
    a: LeaguePlayer,
    b: LeaguePlayer,
    games: z
      .int()
      .min(2)
      .max(10_000)
      .refine((n) => n % 2 === 0, 'must be even, so that each side moves first in exactly half of the games'),
    seed: z.int(),
    mode: z.enum(['greedy', 'sample']),
  })
  .refine((request) => request.a.id !== request.b.id, { path: ['b', 'id'], message: 'a player cannot play itself' });
export type MatchRequest = z.infer<typeof MatchRequest>;

const count = z.int().min(0);
const score = z.number().min(0).max(1);

/**
 * What the match Lambda returns and the Elo Lambda reads: the counts the Elo fit needs, the seat
 * split (first-mover parity is checked on it) and each side's illegal moves. Every count is from
 * A's side. Small on purpose: no per-game moves.
 */
export const MatchResult = z
  .object({
    pairId: z.string().min(1),
    a: z.string().regex(PLAYER_ID),
    b: z.string().regex(PLAYER_ID),
    games: z.int().min(1),
    winsA: count,
    winsB: count,
    draws: count,
    gamesAFirst: count,
    gamesASecond: count,
    firstMoverWinsA: count,
    firstMoverDraws: count,
    secondMoverWinsA: count,
    secondMoverDraws: count,
    scoreA: score,
    scoreAFirst: score.nullable(),
    scoreASecond: score.nullable(),
    illegalA: count,
    illegalB: count,
    plies: count,
  })
  .superRefine((result, ctx) => {
    if (result.winsA + result.winsB + result.draws !== result.games) {
      ctx.addIssue({ code: 'custom', path: ['games'], message: `must equal winsA + winsB + draws (${result.winsA + result.winsB + result.draws})` });
    }
    if (result.gamesAFirst + result.gamesASecond !== result.games) {
      ctx.addIssue({ code: 'custom', path: ['gamesAFirst'], message: `gamesAFirst + gamesASecond must equal games (${result.games})` });
    }
    if (result.pairId !== pairIdOf(result.a, result.b)) {
      ctx.addIssue({ code: 'custom', path: ['pairId'], message: `must be "${pairIdOf(result.a, result.b)}" for players a and b` });
    }
  });
export type MatchResult = z.infer<typeof MatchResult>;

/** One pairing of the league: A is the new snapshot, B an existing player. */
export interface MatchPair {
  readonly pairId: string;
  readonly a: LeaguePlayer;
  readonly b: LeaguePlayer;
}

/** The pair id of A against B: readable, deterministic, and a cache-key input. */
export function pairIdOf(a: string, b: string): string {
  return `${a}${PAIR_SEPARATOR}${b}`;
}

/**
 * The league's canonical order: the random bot, the tactical bot, then snapshots by generation
 * and id. Used wherever an order must not depend on how the caller listed the players.
 */
export function compareLeaguePlayers(x: LeaguePlayer, y: LeaguePlayer): number {
  const rank = (p: LeaguePlayer) => PLAYER_KINDS.indexOf(p.kind);
  return rank(x) - rank(y) || (x.generation ?? 0) - (y.generation ?? 0) || compareIds(x.id, y.id);
}

function compareIds(x: string, y: string): number {
  return x < y ? -1 : x > y ? 1 : 0;
}

function checkUniqueIds(players: readonly LeaguePlayer[], field: string): void {
  const seen = new Set<string>();
  players.forEach((player, i) => {
    if (seen.has(player.id)) throw new ConfigError(`${field}[${i}].id`, player.id, 'duplicate player id');
    seen.add(player.id);
  });
}

/**
 * The new snapshot against every existing player, one pair each, in the league's canonical
 * order (so the pairs, and the Map items built from them, do not depend on the input's order).
 */
export function matchPairs(newPlayer: LeaguePlayer, existingPlayers: readonly LeaguePlayer[]): MatchPair[] {
  if (newPlayer.kind !== 'snapshot') throw new ConfigError('newPlayer.kind', newPlayer.kind, 'the league only adds snapshots');
  checkUniqueIds(existingPlayers, 'existingPlayers');
  const clash = existingPlayers.findIndex((p) => p.id === newPlayer.id);
  if (clash >= 0) throw new ConfigError(`existingPlayers[${clash}].id`, newPlayer.id, 'the new player is already in the league');
  return [...existingPlayers].sort(compareLeaguePlayers).map((b) => ({ pairId: pairIdOf(newPlayer.id, b.id), a: newPlayer, b }));
}

/**
 * The match requests of one generation: `matchPairs` with the game count and mode, and a seed per
 * pair derived from the league seed and the pair id, so each pair's result (and cache key) stays
 * the same when other players join.
 */
export function matchRequests(
  newPlayer: LeaguePlayer,
  existingPlayers: readonly LeaguePlayer[],
  options: { readonly games: number; readonly seed: number; readonly mode: SelectionMode },
): Array<MatchRequest & { pairId: string }> {
  return matchPairs(newPlayer, existingPlayers).map(({ pairId, a, b }) => ({
    pairId,
    ...parseOrThrow(MatchRequest, { a, b, games: options.games, seed: pairSeed(options.seed, pairId), mode: options.mode }),
  }));
}

/** A 31-bit seed from the league seed and a pair id (sha256: any change of either gives an unrelated seed). */
export function pairSeed(seed: number, pairId: string): number {
  if (!Number.isSafeInteger(seed)) throw new ConfigError('seed', seed, 'must be a safe integer');
  return Number.parseInt(sha256Hex(`${seed}\n${pairId}`).slice(0, 8), 16) & 0x7fffffff;
}

/**
 * The seed of a bot playing on side A or B of a match: distinct for the two sides (a bot against
 * itself must not mirror its own draws), fixed for a given match seed.
 */
export function botSeed(matchSeed: number, side: 'a' | 'b'): number {
  return pairSeed(matchSeed, `bot-${side}`);
}

/** The wire form of a played match (shared/selfplay/match.ts's result, moves left out). */
export function toMatchResult(played: PlayedMatch, a: string, b: string): MatchResult {
  return parseOrThrow(MatchResult, {
    pairId: pairIdOf(a, b),
    a,
    b,
    games: played.games,
    winsA: played.winsA,
    winsB: played.winsB,
    draws: played.draws,
    gamesAFirst: played.gamesAFirst,
    gamesASecond: played.gamesASecond,
    firstMoverWinsA: played.firstMoverWinsA,
    firstMoverDraws: played.firstMoverDraws,
    secondMoverWinsA: played.secondMoverWinsA,
    secondMoverDraws: played.secondMoverDraws,
    scoreA: played.scoreA,
    scoreAFirst: played.scoreAFirst,
    scoreASecond: played.scoreASecond,
    illegalA: played.illegalA,
    illegalB: played.illegalB,
    plies: played.plies,
  });
}

/** The league's Elo input, and the players left out of it. */
export interface LeagueEloInput {
  readonly input: EloInput;
  /**
   * Players with no match at all (every match of theirs failed): they cannot be rated, and are
   * left out rather than failing the whole fit. Never the anchor.
   */
  readonly unrated: string[];
}

/**
 * Maps the league to shared/selfplay/elo.ts's input, anchored at the random bot. Players are in canonical
 * order; a match naming a player not in `players` is a ConfigError naming the match.
 */
export function toEloInput(players: readonly LeaguePlayer[], matchResults: readonly MatchResult[]): LeagueEloInput {
  checkUniqueIds(players, 'players');
  const known = new Set(players.map((p) => p.id));
  if (!known.has(ANCHOR_ID))
    throw new ConfigError(
      'players',
      players.map((p) => p.id),
      `must include the "${ANCHOR_ID}" bot, the Elo anchor`,
    );
  const played = new Set<string>();
  const matches: EloMatch[] = matchResults.map((m, i) => {
    if (!known.has(m.a)) throw new ConfigError(`matches[${i}].a`, m.a, 'unknown player id (not in players)');
    if (!known.has(m.b)) throw new ConfigError(`matches[${i}].b`, m.b, 'unknown player id (not in players)');
    if (m.games > 0) played.add(m.a).add(m.b);
    return { a: m.a, b: m.b, winsA: m.winsA, winsB: m.winsB, draws: m.draws };
  });
  const ordered = [...players].sort(compareLeaguePlayers).map((p) => p.id);
  return {
    input: { players: ordered.filter((id) => id === ANCHOR_ID || played.has(id)), matches, anchor: ANCHOR_ID },
    unrated: ordered.filter((id) => id !== ANCHOR_ID && !played.has(id)),
  };
}

/** Highest Elo first; ties go to the later generation (the fresher snapshot), then to the id. */
function rankedSnapshots(ratings: readonly Pick<PlayerRating, 'id' | 'elo'>[], players: readonly LeaguePlayer[]): LeaguePlayer[] {
  const elo = new Map(ratings.map((r) => [r.id, r.elo]));
  return players
    .filter((p) => p.kind === 'snapshot' && elo.has(p.id))
    .sort((x, y) => elo.get(y.id)! - elo.get(x.id)! || (y.generation ?? 0) - (x.generation ?? 0) || compareIds(x.id, y.id));
}

/**
 * The next generation's opponent groups: both bots (always: pure self-play collapses without
 * them), then the top `k` rated snapshots by Elo, best first (all of them when there are fewer).
 * Ties: the later generation first, then the id. Unrated snapshots are skipped.
 */
export function chooseOpponents(ratings: readonly Pick<PlayerRating, 'id' | 'elo'>[], players: readonly LeaguePlayer[], k = 3): LeaguePlayer[] {
  if (!Number.isSafeInteger(k) || k < 0) throw new ConfigError('k', k, 'must be an integer >= 0');
  checkUniqueIds(players, 'players');
  return [...BOT_PLAYERS, ...rankedSnapshots(ratings, players).slice(0, k)];
}

/** The best rated snapshot's id (ties as in chooseOpponents), or null before the first snapshot. */
export function championOf(ratings: readonly Pick<PlayerRating, 'id' | 'elo'>[], players: readonly LeaguePlayer[]): string | null {
  return rankedSnapshots(ratings, players)[0]?.id ?? null;
}

export interface RateLeagueOptions {
  /** Bootstrap resamples; default 200. */
  readonly bootstrapSamples?: number;
  /** Bootstrap seed; default 1, fixed so that a rerun (and its cache entry) gives the same ratings. */
  readonly seed?: number;
  /** Snapshots among the next opponents; default 3. */
  readonly opponents?: number;
}

export interface LeagueRating {
  readonly ratings: EloFit['ratings'];
  readonly opponents: LeaguePlayer[];
  readonly champion: string | null;
  readonly unrated: string[];
  readonly converged: boolean;
}

/** Steps 2c and 2d: the joint Elo fit of every match so far, then the next opponents and the champion. */
export function rateLeague(players: readonly LeaguePlayer[], matchResults: readonly MatchResult[], options: RateLeagueOptions = {}): LeagueRating {
  const { input, unrated } = toEloInput(players, matchResults);
  const fit = fitElo(input, { bootstrapSamples: options.bootstrapSamples ?? 200, seed: options.seed ?? 1 });
  return {
    ratings: fit.ratings,
    opponents: chooseOpponents(fit.ratings, players, options.opponents ?? 3),
    champion: championOf(fit.ratings, players),
    unrated,
    converged: fit.converged,
  };
}

/** A's score against B for every pair of players, pooled over all their matches. */
export interface HeadToHead {
  readonly players: string[];
  /** score[i][j]: players[i]'s score against players[j] (a draw counts half); null where they never met. */
  readonly score: (number | null)[][];
  /** games[i][j]: games between players[i] and players[j] (symmetric). */
  readonly games: number[][];
}

/**
 * The head-to-head matrix for the report. Rows and columns follow `order` when given (it must
 * name every player in the results), else the ids sorted with the bots first.
 */
export function headToHead(matchResults: readonly MatchResult[], order?: readonly string[]): HeadToHead {
  const ids = new Set<string>();
  for (const m of matchResults) ids.add(m.a).add(m.b);
  let players: string[];
  if (order) {
    const index = new Set(order);
    if (index.size !== order.length) throw new ConfigError('order', order, 'lists a player twice');
    const missing = [...ids].find((id) => !index.has(id));
    if (missing !== undefined) throw new ConfigError('order', order, `does not include player "${missing}", who played a match`);
    players = [...order];
  } else {
    const botRank = (id: string) => {
      const rank = (BOT_KINDS as readonly string[]).indexOf(id);
      return rank < 0 ? BOT_KINDS.length : rank;
    };
    players = [...ids].sort((x, y) => botRank(x) - botRank(y) || x.localeCompare(y, 'en', { numeric: true }));
  }
  const at = new Map(players.map((id, i) => [id, i]));
  const n = players.length;
  const points = Array.from({ length: n }, () => new Array<number>(n).fill(0));
  const games = Array.from({ length: n }, () => new Array<number>(n).fill(0));
  for (const m of matchResults) {
    const i = at.get(m.a)!;
    const j = at.get(m.b)!;
    points[i][j] += m.winsA + m.draws / 2;
    points[j][i] += m.winsB + m.draws / 2;
    games[i][j] += m.games;
    games[j][i] += m.games;
  }
  const score = points.map((row, i) => row.map((p, j) => (games[i][j] > 0 ? p / games[i][j] : null)));
  return { players, score, games };
}
