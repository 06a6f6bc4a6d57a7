/** The league's pure bookkeeping (shared/selfplay/league.ts): pairs, opponents, Elo input, head-to-head, schemas. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createRandomBot, createTacticalBot } from '#shared/selfplay/bots.ts';
import { ConfigError } from '#shared/errors.ts';
import {
  BOT_PLAYERS,
  botSeed,
  championOf,
  chooseOpponents,
  headToHead,
  LeaguePlayer,
  MatchRequest,
  MatchResult,
  matchPairs,
  matchRequests,
  pairIdOf,
  rateLeague,
  toEloInput,
  toMatchResult,
} from '#shared/selfplay/league.ts';
import { botPolicy, playMatch } from '#shared/selfplay/match.ts';
import { parseOrThrow } from '#shared/schema.ts';

const [RANDOM, TACTICAL] = BOT_PLAYERS;

function snapshot(generation: number, id = `gen-${generation}`): LeaguePlayer {
  return { id, kind: 'snapshot', generation, onnxUri: `s3://bucket/runs/league/x/${id}/policy.onnx` };
}

/** A result with the given tally; the seat split puts every game's outcome in A's first-move half. */
function result(a: string, b: string, winsA: number, winsB: number, draws: number): MatchResult {
  const games = winsA + winsB + draws;
  const half = games / 2;
  return parseOrThrow(MatchResult, {
    pairId: pairIdOf(a, b),
    a,
    b,
    games,
    winsA,
    winsB,
    draws,
    gamesAFirst: Math.ceil(half),
    gamesASecond: Math.floor(half),
    firstMoverWinsA: 0,
    firstMoverDraws: 0,
    secondMoverWinsA: winsA,
    secondMoverDraws: draws,
    scoreA: (winsA + draws / 2) / games,
    scoreAFirst: 0,
    scoreASecond: 0,
    illegalA: 0,
    illegalB: 0,
    plies: games * 20,
  });
}

/** Expects a ConfigError naming `field` and carrying `value`. */
function rejectsWith(fn: () => unknown, field: string, value: unknown, reason?: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof ConfigError, `got ${String(error)}`);
    assert.equal(error.field, field);
    assert.deepEqual(error.value, value);
    if (reason) assert.match(error.message, reason);
    return true;
  });
}

describe('LeaguePlayer', () => {
  it('accepts the two bots and a snapshot', () => {
    for (const player of [...BOT_PLAYERS, snapshot(1)]) assert.deepEqual(parseOrThrow(LeaguePlayer, player), player);
  });

  it('names the field and value of a bad player', () => {
    rejectsWith(() => parseOrThrow(LeaguePlayer, { id: 'x', kind: 'wizard' }), 'kind', 'wizard');
    rejectsWith(() => parseOrThrow(LeaguePlayer, { id: 'gen-1', kind: 'snapshot', generation: 1 }), 'onnxUri', undefined, /needs onnxUri/);
    rejectsWith(() => parseOrThrow(LeaguePlayer, { ...snapshot(1), generation: undefined }), 'generation', undefined);
    rejectsWith(() => parseOrThrow(LeaguePlayer, { id: 'rand', kind: 'random' }), 'id', 'rand', /must be "random"/);
    rejectsWith(() => parseOrThrow(LeaguePlayer, snapshot(1, 'tactical')), 'id', 'tactical', /reserved/);
    rejectsWith(() => parseOrThrow(LeaguePlayer, snapshot(1, 'gen~1')), 'id', 'gen~1');
    rejectsWith(() => parseOrThrow(LeaguePlayer, { ...snapshot(1), onnxUri: 'policy.onnx' }), 'onnxUri', 'policy.onnx', /s3:\/\/bucket\/key/);
  });
});

describe('MatchRequest', () => {
  const valid = { a: snapshot(2), b: TACTICAL, games: 400, seed: 7, mode: 'greedy' };

  it('accepts a valid request', () => {
    assert.deepEqual(parseOrThrow(MatchRequest, valid), valid);
  });

  it('an odd game count names games and its value', () => {
    rejectsWith(() => parseOrThrow(MatchRequest, { ...valid, games: 401 }), 'games', 401, /must be even/);
  });

  it('a game count outside 2..10000 or not an integer is refused', () => {
    rejectsWith(() => parseOrThrow(MatchRequest, { ...valid, games: 0 }), 'games', 0);
    rejectsWith(() => parseOrThrow(MatchRequest, { ...valid, games: 10_002 }), 'games', 10_002);
    rejectsWith(() => parseOrThrow(MatchRequest, { ...valid, games: 3.5 }), 'games', 3.5);
  });

  it('an unknown kind names a.kind and its value', () => {
    rejectsWith(() => parseOrThrow(MatchRequest, { ...valid, a: { id: 'x', kind: 'wizard' } }), 'a.kind', 'wizard');
  });

  it('an unknown mode, a fractional seed and a player against itself are refused', () => {
    rejectsWith(() => parseOrThrow(MatchRequest, { ...valid, mode: 'best' }), 'mode', 'best');
    rejectsWith(() => parseOrThrow(MatchRequest, { ...valid, seed: 1.5 }), 'seed', 1.5);
    rejectsWith(() => parseOrThrow(MatchRequest, { ...valid, b: valid.a }), 'b.id', 'gen-2', /cannot play itself/);
  });
});

describe('MatchResult', () => {
  it('refuses counts that do not add up, naming the field', () => {
    const good = result('gen-1', 'random', 300, 90, 10);
    rejectsWith(() => parseOrThrow(MatchResult, { ...good, winsA: 301 }), 'games', 400, /winsA \+ winsB \+ draws \(401\)/);
    rejectsWith(() => parseOrThrow(MatchResult, { ...good, gamesAFirst: 199 }), 'gamesAFirst', 199);
    rejectsWith(() => parseOrThrow(MatchResult, { ...good, pairId: 'random~gen-1' }), 'pairId', 'random~gen-1');
  });

  it('toMatchResult keeps the tally of a real match and leaves the moves out', async () => {
    const played = await playMatch({
      a: botPolicy(createTacticalBot(1)),
      b: botPolicy(createRandomBot(2)),
      games: 40,
      seed: 3,
      mode: 'sample',
      recordMoves: true,
    });
    const wire = toMatchResult(played, 'tactical', 'random');
    assert.equal(wire.pairId, 'tactical~random');
    assert.equal('moves' in wire, false);
    assert.equal(wire.winsA + wire.winsB + wire.draws, 40);
    assert.deepEqual([wire.gamesAFirst, wire.gamesASecond], [20, 20]);
    assert.equal(wire.winsA, played.winsA);
    assert.equal(wire.plies, played.plies);
  });
});

describe('matchPairs', () => {
  it('pairs the new snapshot with every existing player, in canonical order, whatever the input order', () => {
    const existing = [snapshot(1), TACTICAL, snapshot(10), RANDOM, snapshot(2)];
    const pairs = matchPairs(snapshot(11), existing);
    assert.deepEqual(
      pairs.map((p) => p.pairId),
      ['gen-11~random', 'gen-11~tactical', 'gen-11~gen-1', 'gen-11~gen-2', 'gen-11~gen-10'],
    );
    for (const pair of pairs) assert.equal(pair.a.id, 'gen-11');
    assert.deepEqual(matchPairs(snapshot(11), [...existing].reverse()), pairs);
  });

  it('the first snapshot plays the two bots', () => {
    assert.deepEqual(
      matchPairs(snapshot(1), BOT_PLAYERS).map((p) => [p.a.id, p.b.id]),
      [
        ['gen-1', 'random'],
        ['gen-1', 'tactical'],
      ],
    );
  });

  it('refuses a bot as the new player, a player already in the league and duplicate ids', () => {
    rejectsWith(() => matchPairs(TACTICAL, [RANDOM]), 'newPlayer.kind', 'tactical');
    rejectsWith(() => matchPairs(snapshot(1), [...BOT_PLAYERS, snapshot(1)]), 'existingPlayers[2].id', 'gen-1', /already in the league/);
    rejectsWith(() => matchPairs(snapshot(3), [RANDOM, snapshot(1), snapshot(1)]), 'existingPlayers[2].id', 'gen-1', /duplicate/);
  });

  it('matchRequests gives each pair a seed that other players joining do not change', () => {
    const options = { games: 400, seed: 5, mode: 'sample' as const };
    const first = matchRequests(snapshot(3), [...BOT_PLAYERS, snapshot(1)], options);
    const more = matchRequests(snapshot(3), [...BOT_PLAYERS, snapshot(1), snapshot(2)], options);
    assert.deepEqual(more.slice(0, 3), first);
    assert.equal(new Set(more.map((r) => r.seed)).size, more.length, 'every pair has its own seed');
    const reseeded = matchRequests(snapshot(3), [...BOT_PLAYERS, snapshot(1)], { ...options, seed: 6 });
    assert.notDeepEqual(
      reseeded.map((r) => r.seed),
      first.map((r) => r.seed),
    );
    for (const request of more) assert.equal(request.games, 400);
    rejectsWith(() => matchRequests(snapshot(3), BOT_PLAYERS, { ...options, games: 3 }), 'games', 3);
  });

  it('botSeed differs by side', () => {
    assert.notEqual(botSeed(1, 'a'), botSeed(1, 'b'));
    assert.equal(botSeed(1, 'a'), botSeed(1, 'a'));
  });
});

describe('chooseOpponents', () => {
  const league = [...BOT_PLAYERS, snapshot(1), snapshot(2), snapshot(3), snapshot(4), snapshot(5)];

  it('the bots plus the top 3 snapshots by Elo, best first', () => {
    const ratings = [
      { id: 'random', elo: 0 },
      { id: 'tactical', elo: 470 },
      { id: 'gen-1', elo: 100 },
      { id: 'gen-2', elo: 520 },
      { id: 'gen-3', elo: 610 },
      { id: 'gen-4', elo: 300 },
      { id: 'gen-5', elo: 580 },
    ];
    assert.deepEqual(
      chooseOpponents(ratings, league).map((p) => p.id),
      ['random', 'tactical', 'gen-3', 'gen-5', 'gen-2'],
    );
    assert.equal(championOf(ratings, league), 'gen-3');
    // The snapshots keep their URIs: the training job downloads them.
    assert.equal(chooseOpponents(ratings, league)[2].onnxUri, snapshot(3).onnxUri);
  });

  it('ties go to the later generation, then to the id', () => {
    const ratings = league.map((p) => ({ id: p.id, elo: p.kind === 'snapshot' ? 200 : 0 }));
    assert.deepEqual(
      chooseOpponents(ratings, league).map((p) => p.id),
      ['random', 'tactical', 'gen-5', 'gen-4', 'gen-3'],
    );
    const twins = [snapshot(1, 'b-1'), snapshot(1, 'a-1')];
    assert.deepEqual(
      chooseOpponents(
        [
          { id: 'b-1', elo: 5 },
          { id: 'a-1', elo: 5 },
        ],
        twins,
        1,
      ).map((p) => p.id),
      ['random', 'tactical', 'a-1'],
    );
    // Independent of the order of the inputs.
    assert.deepEqual(chooseOpponents([...ratings].reverse(), [...league].reverse()), chooseOpponents(ratings, league));
  });

  it('fewer than k snapshots: all of them', () => {
    const ratings = [
      { id: 'random', elo: 0 },
      { id: 'tactical', elo: 400 },
      { id: 'gen-1', elo: 50 },
      { id: 'gen-2', elo: 90 },
    ];
    assert.deepEqual(
      chooseOpponents(ratings, league.slice(0, 4)).map((p) => p.id),
      ['random', 'tactical', 'gen-2', 'gen-1'],
    );
  });

  it('the bots are always included: no snapshot yet, k = 0, bots rated above every snapshot', () => {
    assert.deepEqual(chooseOpponents([], []), [...BOT_PLAYERS]);
    const ratings = league.map((p) => ({ id: p.id, elo: p.kind === 'snapshot' ? -100 : 900 }));
    assert.deepEqual(
      chooseOpponents(ratings, league, 0).map((p) => p.id),
      ['random', 'tactical'],
    );
    assert.deepEqual(
      chooseOpponents(ratings, league, 1).map((p) => p.id),
      ['random', 'tactical', 'gen-5'],
    );
    assert.equal(championOf([], BOT_PLAYERS), null);
  });

  it('skips unrated snapshots and refuses a bad k', () => {
    assert.deepEqual(
      chooseOpponents([{ id: 'gen-2', elo: 10 }], league).map((p) => p.id),
      ['random', 'tactical', 'gen-2'],
    );
    rejectsWith(() => chooseOpponents([], league, -1), 'k', -1);
    rejectsWith(() => chooseOpponents([], league, 1.5), 'k', 1.5);
  });
});

describe('toEloInput', () => {
  it('maps players (canonical order) and match tallies, anchored at random', () => {
    const players = [snapshot(2), snapshot(1), TACTICAL, RANDOM];
    const matches = [result('gen-1', 'random', 300, 80, 20), result('gen-1', 'tactical', 100, 280, 20), result('gen-2', 'gen-1', 210, 180, 10)];
    const { input, unrated } = toEloInput(players, matches);
    assert.deepEqual(input, {
      players: ['random', 'tactical', 'gen-1', 'gen-2'],
      matches: [
        { a: 'gen-1', b: 'random', winsA: 300, winsB: 80, draws: 20 },
        { a: 'gen-1', b: 'tactical', winsA: 100, winsB: 280, draws: 20 },
        { a: 'gen-2', b: 'gen-1', winsA: 210, winsB: 180, draws: 10 },
      ],
      anchor: 'random',
    });
    assert.deepEqual(unrated, []);
  });

  it('leaves out a player with no match (all of its matches failed) and says so', () => {
    const { input, unrated } = toEloInput(
      [...BOT_PLAYERS, snapshot(1), snapshot(2)],
      [result('gen-1', 'random', 1, 1, 0), result('gen-1', 'tactical', 1, 1, 0)],
    );
    assert.deepEqual(input.players, ['random', 'tactical', 'gen-1']);
    assert.deepEqual(unrated, ['gen-2']);
  });

  it('names an unknown player, a missing anchor and a duplicate id', () => {
    rejectsWith(() => toEloInput(BOT_PLAYERS, [result('gen-9', 'random', 1, 1, 0)]), 'matches[0].a', 'gen-9');
    rejectsWith(() => toEloInput([TACTICAL, snapshot(1)], []), 'players', ['tactical', 'gen-1'], /"random"/);
    rejectsWith(() => toEloInput([...BOT_PLAYERS, RANDOM], []), 'players[2].id', 'random');
  });
});

describe('rateLeague', () => {
  it('fits the league: random at 0, the stronger snapshot champion, bots among the opponents', () => {
    const players = [...BOT_PLAYERS, snapshot(1), snapshot(2)];
    const matches = [
      result('gen-1', 'random', 300, 90, 10),
      result('gen-1', 'tactical', 120, 270, 10),
      result('gen-2', 'random', 380, 15, 5),
      result('gen-2', 'tactical', 250, 140, 10),
      result('gen-2', 'gen-1', 300, 90, 10),
    ];
    const rated = rateLeague(players, matches, { bootstrapSamples: 50 });
    const elo = Object.fromEntries(rated.ratings.map((r) => [r.id, r.elo]));
    assert.equal(elo.random, 0);
    assert.ok(elo['gen-2'] > elo.tactical && elo.tactical > elo['gen-1'] && elo['gen-1'] > 0, JSON.stringify(elo));
    assert.equal(rated.champion, 'gen-2');
    assert.deepEqual(
      rated.opponents.map((p) => p.id),
      ['random', 'tactical', 'gen-2', 'gen-1'],
    );
    for (const r of rated.ratings) assert.ok(r.low <= r.elo && r.elo <= r.high, `${r.id}: ${r.low} ${r.elo} ${r.high}`);
    assert.deepEqual(rateLeague(players, [...matches].reverse(), { bootstrapSamples: 50 }), rated, 'independent of match order');
  });
});

describe('headToHead', () => {
  it("A's score for every pair, pooled over both orientations, null where they never met", () => {
    const matches = [
      result('gen-1', 'random', 300, 80, 20), // gen-1 scores 310/400 against random
      result('gen-2', 'gen-1', 100, 280, 20), // gen-2 scores 110/400 against gen-1
      result('gen-1', 'gen-2', 50, 40, 10), // and gen-1 another 55/100: 345/500 in all
    ];
    const h = headToHead(matches);
    assert.deepEqual(h.players, ['random', 'gen-1', 'gen-2']);
    assert.deepEqual(h.score, [
      [null, 90 / 400, null],
      [310 / 400, null, 345 / 500],
      [null, 155 / 500, null],
    ]);
    assert.deepEqual(h.games, [
      [0, 400, 0],
      [400, 0, 500],
      [0, 500, 0],
    ]);
    // Every met pair's scores add up to 1.
    for (let i = 0; i < 3; i++) for (let j = 0; j < 3; j++) if (h.score[i][j] !== null) assert.equal(h.score[i][j]! + h.score[j][i]!, 1);
  });

  it('orders ids numerically with the bots first, or as asked', () => {
    const matches = [result('gen-10', 'tactical', 1, 1, 0), result('gen-2', 'random', 1, 1, 0)];
    assert.deepEqual(headToHead(matches).players, ['random', 'tactical', 'gen-2', 'gen-10']);
    assert.deepEqual(headToHead(matches, ['gen-10', 'gen-2', 'tactical', 'random', 'gen-3']).players, ['gen-10', 'gen-2', 'tactical', 'random', 'gen-3']);
    rejectsWith(() => headToHead(matches, ['gen-10', 'gen-2', 'tactical']), 'order', ['gen-10', 'gen-2', 'tactical'], /"random"/);
  });
});
