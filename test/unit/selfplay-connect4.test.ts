import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { COLS, CELLS, OBSERVATION_SIZE, Game, GameBatch, encodeObservation, seatPlan, type Player } from '#shared/selfplay/connect4.ts';
import { IllegalMoveError } from '#shared/selfplay/errors.ts';
import { createRandomBot, createTacticalBot, playOut, tacticalCandidates } from '#shared/selfplay/bots.ts';
import { ConfigError } from '#shared/errors.ts';
import { VECTORS_PATH, renderVectorsFile, type Vector } from '../fixtures/connect4/make-vectors.ts';

const vectorsText = readFileSync(VECTORS_PATH, 'utf8');
const vectors = (JSON.parse(vectorsText) as { vectors: Vector[] }).vectors;

/** The 126 floats a vector's three plane strings stand for. */
function expectedObservation(v: Vector): number[] {
  const { own, opponent, empty } = v.observation;
  return [...own, ...opponent, ...empty].map(Number);
}

function maskToColumns(mask: Uint8Array): number[] {
  return [...mask].flatMap((on, c) => (on ? [c] : []));
}

describe('Connect Four shared vectors', () => {
  it('the vectors file is what make-vectors.ts generates, with at least 40 vectors', () => {
    assert.equal(vectorsText, renderVectorsFile());
    assert.ok(vectors.length >= 40, `only ${vectors.length} vectors`);
  });

  for (const v of vectors) {
    it(`${v.name}: state, legal moves, observation, tactical choices`, () => {
      const game = Game.fromMoves(v.moves);
      assert.equal(game.toMove, v.toMove);
      assert.equal(game.done, v.over);
      assert.equal(game.winner, v.winner);
      assert.equal(game.batch.plies(0), v.plies);
      assert.deepEqual(game.legalMoves(), v.legal);
      assert.deepEqual(maskToColumns(game.legalMask()), v.legal);
      assert.deepEqual(game.render(), v.board);
      // Exact: the observation's floats are 0 and 1, written, never computed.
      assert.deepEqual([...game.observation()], expectedObservation(v));

      for (let col = 0; col < COLS; col++) {
        if (v.legal.includes(col)) continue;
        assert.throws(() => Game.fromMoves(v.moves).play(col), IllegalMoveError, `column ${col} should be refused`);
      }

      const mask = new Uint8Array(COLS);
      const kind = tacticalCandidates(game.batch, 0, mask);
      if (v.tactical) {
        assert.equal(kind, v.tactical.kind);
        assert.deepEqual(maskToColumns(mask), v.tactical.moves);
        // The bot only ever picks from the set, and it samples: every member shows up.
        const bot = createTacticalBot(v.plies + 1);
        const seen = new Set<number>();
        for (let k = 0; k < 200; k++) seen.add(bot.chooseMove(game.batch, 0));
        assert.deepEqual([...seen].sort(), v.tactical.moves);
      } else {
        assert.deepEqual(maskToColumns(mask), []);
        assert.equal(createTacticalBot(1).chooseMove(game.batch, 0), -1);
      }
    });
  }

  it('a batch holding every vector at once agrees with each one (per-game offsets)', () => {
    const batch = new GameBatch(vectors.length);
    const longest = Math.max(...vectors.map((v) => v.moves.length));
    for (let ply = 0; ply < longest; ply++) {
      vectors.forEach((v, i) => {
        if (ply < v.moves.length) batch.play(i, v.moves[ply]!);
      });
    }
    const observations = batch.encodeObservations();
    const finished = vectors.filter((v) => v.over).length;
    assert.equal(batch.liveGames, vectors.length - finished);
    vectors.forEach((v, i) => {
      assert.equal(batch.winner(i), v.winner, v.name);
      assert.deepEqual(maskToColumns(batch.legalMask(i)), v.legal, v.name);
      assert.deepEqual([...observations.subarray(i * OBSERVATION_SIZE, (i + 1) * OBSERVATION_SIZE)], expectedObservation(v), v.name);
    });
  });
});

describe('seatPlan', () => {
  const gameCounts = [0, 1, 2, 3, 7, 8, 9, 16, 25, 400, 401, 2048, 2049];

  for (let groups = 1; groups <= 8; groups++) {
    it(`${groups} group(s): every group gets its share of games and half of them moving first`, () => {
      for (const games of gameCounts) {
        const plan = seatPlan(games, groups);
        assert.equal(plan.length, games);
        const total = new Array<number>(groups).fill(0);
        const first = new Array<number>(groups).fill(0);
        for (const seat of plan) {
          assert.ok(Number.isInteger(seat.group) && seat.group >= 0 && seat.group < groups);
          total[seat.group]!++;
          if (seat.learnerFirst) first[seat.group]!++;
        }
        assert.ok(Math.max(...total) - Math.min(...total) <= 1, `games ${games}: group sizes ${total}`);
        for (let g = 0; g < groups; g++) {
          const second = total[g]! - first[g]!;
          // Exactly half when the group's count is even, one apart when it is odd.
          assert.equal(Math.abs(first[g]! - second), total[g]! % 2, `games ${games}, group ${g}: ${first[g]} first of ${total[g]}`);
        }
        const allFirst = first.reduce((a, b) => a + b, 0);
        assert.ok(Math.abs(2 * allFirst - games) <= 1, `games ${games}: ${allFirst} first overall`);
      }
    });
  }

  it('the check above catches the known wrong scheme (group = i % n, first = i % 2 === 0)', () => {
    const wrong = Array.from({ length: 400 }, (_, i) => ({ group: i % 2, learnerFirst: i % 2 === 0 }));
    const firstInGroup0 = wrong.filter((s) => s.group === 0 && s.learnerFirst).length;
    assert.equal(firstInGroup0, 200); // all 200 games of group 0 have the learner first
    const right = seatPlan(400, 2).filter((s) => s.group === 0 && s.learnerFirst).length;
    assert.equal(right, 100);
  });

  it('throws ConfigError naming the field for bad sizes', () => {
    assert.throws(
      () => seatPlan(-1, 2),
      (e: unknown) => e instanceof ConfigError && e.field === 'games',
    );
    assert.throws(
      () => seatPlan(10, 0),
      (e: unknown) => e instanceof ConfigError && e.field === 'groups',
    );
    assert.throws(
      () => seatPlan(10, 1.5),
      (e: unknown) => e instanceof ConfigError && e.field === 'groups',
    );
  });
});

describe('GameBatch', () => {
  it('lock-step play matches the same games played one at a time, ply by ply', () => {
    const size = 64;
    const batch = new GameBatch(size);
    const singles = Array.from({ length: size }, () => new Game());
    const bot = createRandomBot(7);
    const batchObs = new Float32Array(OBSERVATION_SIZE);
    while (batch.liveGames > 0) {
      for (let i = 0; i < size; i++) {
        if (batch.done(i)) continue;
        const col = bot.chooseMove(batch, i);
        assert.equal(batch.play(i, col), singles[i]!.play(col));
      }
      for (let i = 0; i < size; i++) {
        const single = singles[i]!;
        assert.equal(batch.toMove(i), single.toMove);
        assert.equal(batch.done(i), single.done);
        assert.equal(batch.winner(i), single.winner);
        assert.deepEqual(batch.legalMask(i), single.legalMask());
        assert.deepEqual(batch.encodeObservation(i, batchObs), single.observation());
      }
    }
    for (let i = 0; i < size; i++) {
      // The finished board, cell by cell, and the same result from a fresh replay of its moves.
      assert.deepEqual(batch.cells.subarray(i * CELLS, (i + 1) * CELLS), singles[i]!.batch.cells);
      assert.equal(Game.fromMoves(singles[i]!.moves).winner, batch.winner(i));
    }
  });

  it('refuses an illegal move with IllegalMoveError naming the game and the column', () => {
    const batch = new GameBatch(8);
    for (let k = 0; k < 6; k++) batch.play(5, 3);
    const err = (() => {
      try {
        batch.play(5, 3);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    assert.ok(err instanceof IllegalMoveError);
    assert.equal(err.name, 'IllegalMoveError');
    assert.equal(err.game, 5);
    assert.equal(err.column, 3);
    assert.match(err.message, /game 5/);
    assert.match(err.message, /column 3/);
    assert.match(err.message, /full/);
    // The refused move changed nothing.
    assert.equal(batch.plies(5), 6);
    assert.equal(batch.toMove(5), 1);

    for (const col of [-1, 7, 2.5, Number.NaN]) {
      assert.throws(
        () => batch.play(0, col),
        (e: unknown) => e instanceof IllegalMoveError && e.game === 0 && Object.is(e.column, col),
      );
    }
    const won = new GameBatch(3);
    for (const col of [0, 1, 0, 1, 0, 1, 0]) won.play(2, col);
    assert.throws(
      () => won.play(2, 4),
      (e: unknown) => e instanceof IllegalMoveError && /game 2: column 4 .*over/.test(e.message),
    );
    assert.throws(
      () => won.play(3, 0),
      (e: unknown) => e instanceof ConfigError && e.field === 'game',
    );
  });

  it('reset empties every game', () => {
    const batch = new GameBatch(4);
    playOut(batch, () => createRandomBot(3));
    assert.equal(batch.liveGames, 0);
    batch.reset();
    assert.equal(batch.liveGames, 4);
    for (let i = 0; i < 4; i++) {
      assert.equal(batch.winner(i), null);
      assert.equal(batch.plies(i), 0);
      assert.deepEqual(maskToColumns(batch.legalMask(i)), [0, 1, 2, 3, 4, 5, 6]);
    }
    assert.ok(batch.cells.every((v) => v === 0));
  });

  it('encodeObservation overwrites a reused buffer and flips with the player to move', () => {
    const cells = new Int8Array(CELLS);
    cells[3] = 1;
    const out = new Float32Array(OBSERVATION_SIZE).fill(9);
    encodeObservation(cells, -1, out);
    assert.ok(out.every((x) => x === 0 || x === 1));
    assert.equal(out[CELLS + 3], 1); // the first player's piece is the opponent's for player -1
    encodeObservation(cells, 1, out);
    assert.equal(out[3], 1);
    assert.equal(out[CELLS + 3], 0);
    assert.equal(out[2 * CELLS + 3], 0);
  });
});

describe('bots', () => {
  it('a bot replays its moves from its seed', () => {
    const movesOf = (seed: number) => {
      const batch = new GameBatch(50);
      const bot = createTacticalBot(seed);
      playOut(batch, () => bot);
      return [...batch.cells];
    };
    assert.deepEqual(movesOf(4), movesOf(4));
    assert.notDeepEqual(movesOf(4), movesOf(5));
    assert.throws(
      () => createRandomBot(0.5),
      (e: unknown) => e instanceof ConfigError && e.field === 'seed',
    );
  });

  function score(games: number, botA: (i: number) => ReturnType<typeof createRandomBot>, botB: (i: number) => ReturnType<typeof createRandomBot>) {
    // A moves first in the games where the seat plan says the learner (A) does.
    const plan = seatPlan(games, 1);
    const batch = new GameBatch(games);
    const a = botA(0);
    const b = botB(0);
    playOut(batch, (i, player: Player) => ((player === 1) === plan[i]!.learnerFirst ? a : b));
    let points = 0;
    let firstWins = 0;
    for (let i = 0; i < games; i++) {
      const aPlayer: Player = plan[i]!.learnerFirst ? 1 : -1;
      const w = batch.winner(i);
      points += w === aPlayer ? 1 : w === 0 ? 0.5 : 0;
      if (w === 1) firstWins++;
    }
    return { score: points / games, firstWinShare: firstWins / games };
  }

  it('tactical beats random in more than 80 % of 1,000 seeded games, half from each seat', () => {
    const { score: s } = score(
      1000,
      () => createTacticalBot(11),
      () => createRandomBot(12),
    );
    assert.ok(s > 0.8, `tactical scored ${s}`);
  });

  it('random against random: the first player wins a little over half (loose sanity bounds)', () => {
    const { firstWinShare } = score(
      1000,
      () => createRandomBot(21),
      () => createRandomBot(22),
    );
    assert.ok(firstWinShare > 0.5 && firstWinShare < 0.63, `first player won ${firstWinShare}`);
  });

  it('the random bot spreads its moves over the legal columns only', () => {
    const batch = new GameBatch(1);
    for (const col of [3, 3, 3, 3, 3, 3]) batch.play(0, col);
    const bot = createRandomBot(5);
    const counts = new Array<number>(COLS).fill(0);
    for (let k = 0; k < 6000; k++) counts[bot.chooseMove(batch, 0)]!++;
    assert.equal(counts[3], 0);
    for (const c of [0, 1, 2, 4, 5, 6]) assert.ok(Math.abs(counts[c]! - 1000) < 160, `counts ${counts}`);
  });
});
