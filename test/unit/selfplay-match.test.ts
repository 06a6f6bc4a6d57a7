/**
 * The match runner (shared/selfplay/match.ts) and the ONNX policy adapter (shared/selfplay/onnx.ts).
 * The ONNX models are built at test time by test/fixtures/connect4/make_policy.py (numpy and
 * python3-onnx only) into a temporary folder.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRandomBot, createTacticalBot } from '#shared/selfplay/bots.ts';
import { COLS, Game, GameBatch, ROWS } from '#shared/selfplay/connect4.ts';
import { ConfigError, NotFoundError } from '#shared/errors.ts';
import { seededRandom } from '#shared/random.ts';
import { botPolicy, chooseMoves, playMatch, selectFromLogits, type MatchResult, type Policy } from '#shared/selfplay/match.ts';
import { InvalidPolicyModel } from '#shared/selfplay/errors.ts';
import { loadOnnxPolicy, type OnnxPolicy } from '#shared/selfplay/onnx.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';

const python = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const makePolicy = join(REPO_ROOT, 'test/fixtures/connect4/make_policy.py');

/** A policy that always answers `column`, legal or not (a buggy bot). */
function fixedColumn(column: number): Policy {
  return {
    name: `always-${column}`,
    act(_observations, _legal, count, out) {
      out.fill(column, 0, count);
    },
  };
}

interface CallRecord {
  readonly ply: number;
  readonly count: number;
}

/** Wraps a policy to log each call: the ply of its games (all the same, or it throws) and its size. */
function instrumented(inner: Policy, log: CallRecord[]): Policy {
  return {
    name: inner.name,
    act(observations, legal, count, out, context) {
      const ply = context.batch.plies(context.games[0]);
      for (let k = 1; k < count; k++) {
        if (context.batch.plies(context.games[k]) !== ply) throw new Error('a call mixed games at different plies');
      }
      log.push({ ply, count });
      return inner.act(observations, legal, count, out, context);
    },
  };
}

/** Replays every recorded game through the rules (throws on an illegal move) and checks the tally. */
function replayAndCheck(result: MatchResult): Game[] {
  assert.ok(result.moves, 'the match recorded its moves');
  const replays = result.moves.map((moves) => Game.fromMoves(moves));
  let winsA = 0;
  let winsB = 0;
  let draws = 0;
  replays.forEach((game, i) => {
    assert.ok(game.done, `game ${i} finished`);
    const aFirst = i % 2 === 0; // seatPlan(games, 1): A moves first in the even-numbered games
    if (game.winner === 0) draws++;
    else if ((game.winner === 1) === aFirst) winsA++;
    else winsB++;
  });
  assert.deepEqual({ winsA, winsB, draws }, { winsA: result.winsA, winsB: result.winsB, draws: result.draws });
  assert.equal(
    result.plies,
    result.moves.reduce((sum, m) => sum + m.length, 0),
  );
  return replays;
}

describe('playMatch', () => {
  let dir: string;
  let mlp: OnnxPolicy;
  let mlpOther: OnnxPolicy;
  let column: OnnxPolicy;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'connect4-policies-'));
    const made = spawnSync(python, [makePolicy, dir], { encoding: 'utf8', env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
    assert.equal(made.status, 0, `make_policy.py failed (needs numpy and python3-onnx):\n${made.stdout}\n${made.stderr}`);
    mlp = await loadOnnxPolicy(join(dir, 'mlp_policy.onnx'), { name: 'mlp' });
    mlpOther = await loadOnnxPolicy(join(dir, 'mlp_policy.onnx'), { name: 'mlp-copy' });
    column = await loadOnnxPolicy(join(dir, 'column_policy.onnx'), { name: 'column' });
  });

  after(async () => {
    await Promise.all([mlp?.release(), mlpOther?.release(), column?.release()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  describe('seats', () => {
    for (const games of [2, 10, 64, 400]) {
      it(`A moves first in exactly half of ${games} games`, async () => {
        // Independent of the result's own counts: the wrapper sees which games A opens.
        const openedByA = new Set<number>();
        const inner = botPolicy(createRandomBot(games));
        const a: Policy = {
          name: 'a',
          act(observations, legal, count, out, context) {
            for (let k = 0; k < count; k++) if (context.batch.plies(context.games[k]) === 0) openedByA.add(context.games[k]);
            return inner.act(observations, legal, count, out, context);
          },
        };
        const result = await playMatch({ a, b: botPolicy(createRandomBot(games + 1)), games, seed: 3, mode: 'sample' });
        assert.equal(openedByA.size, games / 2);
        assert.equal(result.gamesAFirst, games / 2);
        assert.equal(result.gamesASecond, games / 2);
        assert.equal(result.firstMoverWinsA + result.secondMoverWinsA, result.winsA);
        assert.equal(result.firstMoverDraws + result.secondMoverDraws, result.draws);
        assert.equal(result.winsA + result.winsB + result.draws, games);
      });
    }

    it('an odd number of games gives A the extra first move', async () => {
      const result = await playMatch({ a: botPolicy(createRandomBot(1)), b: botPolicy(createRandomBot(2)), games: 7, seed: 1, mode: 'sample' });
      assert.deepEqual([result.gamesAFirst, result.gamesASecond], [4, 3]);
    });
  });

  describe('batched inference', () => {
    it('calls each side once per ply, with every game it is to move in', async () => {
      const logA: CallRecord[] = [];
      const logB: CallRecord[] = [];
      const result = await playMatch({
        a: instrumented(mlp, logA),
        b: instrumented(botPolicy(createTacticalBot(9)), logB),
        games: 200,
        seed: 11,
        mode: 'sample',
        recordMoves: true,
      });
      for (const log of [logA, logB]) {
        assert.equal(new Set(log.map((c) => c.ply)).size, log.length, 'at most one call per ply per side');
      }
      assert.equal(logA.length + logB.length, result.policyCalls);
      assert.ok(result.policyCalls <= 2 * result.rounds);
      // The rows of A's calls add up to every move A made: no game was left out of a call.
      const movesOfA = result.moves!.reduce((sum, m, i) => sum + (i % 2 === 0 ? Math.ceil(m.length / 2) : Math.floor(m.length / 2)), 0);
      assert.equal(
        logA.reduce((sum, c) => sum + c.count, 0),
        movesOfA,
      );
      assert.equal(
        logB.reduce((sum, c) => sum + c.count, 0),
        result.plies - movesOfA,
      );
      replayAndCheck(result);
    });

    it('makes one call per ply in all when both sides are the same policy object', async () => {
      const log: CallRecord[] = [];
      const policy = instrumented(mlp, log);
      const result = await playMatch({ a: policy, b: policy, games: 100, seed: 5, mode: 'sample' });
      assert.equal(log.length, result.rounds);
      assert.equal(result.policyCalls, result.rounds);
      assert.equal(
        log.reduce((sum, c) => sum + c.count, 0),
        result.plies,
      );
    });
  });

  describe('strength', () => {
    // mlp_policy's logits come from onnxruntime's float32 kernels, which it picks by CPU (AVX2,
    // AVX-512, ...): another machine may round a logit differently, change a sampled draw near a
    // boundary and so play some other games. Hence no fixed game or score is asserted for it,
    // only a sampling band: 0.07 is 2.8 standard errors of a 400-game score (at most 0.025); this
    // machine scores 0.499.
    it('the same network against itself scores 50 % within noise (400 sampled games)', async (t) => {
      const result = await playMatch({ a: mlp, b: mlp, games: 400, seed: 2024, mode: 'sample' });
      t.diagnostic(`mlp vs itself: score ${result.scoreA.toFixed(3)}, first ${result.scoreAFirst?.toFixed(3)}, second ${result.scoreASecond?.toFixed(3)}`);
      assert.ok(Math.abs(result.scoreA - 0.5) <= 0.07, `score ${result.scoreA}`);
    });

    it('two sessions of the same network also score 50 % within noise', async () => {
      const result = await playMatch({ a: mlp, b: mlpOther, games: 400, seed: 77, mode: 'sample' });
      assert.ok(Math.abs(result.scoreA - 0.5) <= 0.07, `score ${result.scoreA}`);
    });

    it('column stacking beats the random bot', async (t) => {
      const result = await playMatch({ a: column, b: botPolicy(createRandomBot(4)), games: 400, seed: 4, mode: 'greedy' });
      t.diagnostic(`column vs random: score ${result.scoreA.toFixed(3)}`);
      assert.ok(result.scoreA > 0.6, `score ${result.scoreA}`);
    });

    it('the tactical bot beats column stacking (it blocks the vertical four)', async (t) => {
      const result = await playMatch({ a: botPolicy(createTacticalBot(6)), b: column, games: 400, seed: 6, mode: 'greedy' });
      t.diagnostic(`tactical vs column: score ${result.scoreA.toFixed(3)}`);
      assert.ok(result.scoreA > 0.9, `score ${result.scoreA}`);
    });
  });

  describe('illegal moves', () => {
    it("replaces a bot-like policy's illegal column with a legal one and counts each", async () => {
      const result = await playMatch({ a: fixedColumn(0), b: botPolicy(createRandomBot(8)), games: 200, seed: 8, mode: 'greedy', recordMoves: true });
      const replays = replayAndCheck(result); // throws if any played move was illegal
      // Count independently: every A move made while column 0 was already full.
      let expected = 0;
      replays.forEach((game, i) => {
        const check = new Game();
        const aFirst = i % 2 === 0;
        for (const move of game.moves) {
          const aToMove = (check.toMove === 1) === aFirst;
          if (aToMove && !check.isLegal(0)) expected++;
          check.play(move);
        }
      });
      assert.ok(result.illegalA > 0, 'column 0 filled up in some games');
      assert.equal(result.illegalA, expected);
      assert.equal(result.illegalB, 0);
    });

    it('a network whose top logit is on a full column plays its best legal logit, counted', async () => {
      // Exact games are safe here: column_policy's weights are all 0 and its inputs 0 or 1, so every
      // kernel computes 0 and returns the float32 biases exactly, at least 1 apart (make_policy.py
      // checks the gap): no rounding anywhere can reorder them.
      // column_policy's logits rank the columns 3 > 0 > 6 > 1 > 5 > 2 > 4. Against itself it
      // fills column 3, then 0, 6, 1 and 5, each from the bottom X, O, X, O, X, O (so no
      // vertical or diagonal four), and the first player completes cols 0-3 of the bottom row
      // with column 2 on ply 31. From ply 7 on, every move's top logit (column 3) is illegal.
      const result = await playMatch({ a: column, b: column, games: 10, seed: 1, mode: 'greedy', recordMoves: true });
      const expected = [3, 0, 6, 1, 5].flatMap((c) => new Array<number>(ROWS).fill(c)).concat([2]);
      for (const moves of result.moves!) assert.deepEqual(moves, expected);
      replayAndCheck(result);
      // 25 masked moves per game: 13 by the first player (plies 7, 9, ..., 31), 12 by the second.
      assert.equal(result.illegalA, 5 * 13 + 5 * 12);
      assert.equal(result.illegalB, 5 * 12 + 5 * 13);
      assert.deepEqual([result.firstMoverWinsA, result.secondMoverWinsA, result.scoreA], [5, 0, 0.5]);
    });

    it("chooseMoves applies the same masking to a single game (the arena's case)", async () => {
      const batch = new GameBatch(1);
      const random = seededRandom(1);
      assert.deepEqual(await chooseMoves(column, batch, [0], { mode: 'greedy', random }), { columns: [3], illegal: 0 });
      for (let k = 0; k < ROWS; k++) batch.play(0, 3);
      assert.deepEqual(await chooseMoves(column, batch, [0], { mode: 'greedy', random }), { columns: [0], illegal: 1 });
      const buggy = await chooseMoves(fixedColumn(3), batch, [0], { mode: 'greedy', random });
      assert.equal(buggy.illegal, 1);
      assert.ok(batch.isLegal(0, buggy.columns[0]));
    });
  });

  describe('determinism', () => {
    // Exact: one machine, one onnxruntime build and one model, run twice (one code path).
    const run = (seed: number) => playMatch({ a: mlp, b: botPolicy(createTacticalBot(seed)), games: 100, seed, mode: 'sample', recordMoves: true });

    it('the same seed replays the same match, move for move', async () => {
      assert.deepEqual(await run(31), await run(31));
    });

    it('another seed plays other games', async () => {
      const [x, y] = [await run(31), await run(32)];
      assert.notDeepEqual(x.moves, y.moves);
    });
  });

  describe('bad input', () => {
    for (const [file, pattern] of [
      ['wrong_shape.onnx', /output "logits" has last dimension 5; expected 7/],
      ['wrong_input.onnx', /input "observation" has last dimension 42; expected 126/],
      ['corrupt.onnx', /onnxruntime cannot load it/],
    ] as const) {
      it(`${file} is refused with InvalidPolicyModel naming the file`, async () => {
        const path = join(dir, file);
        await assert.rejects(loadOnnxPolicy(path, { name: 'x' }), (error: unknown) => {
          assert.ok(error instanceof InvalidPolicyModel, `got ${String(error)}`);
          assert.equal(error.name, 'InvalidPolicyModel');
          assert.equal(error.source, path);
          assert.ok(error.message.includes(path), error.message);
          assert.match(error.message, pattern);
          return true;
        });
      });
    }

    it('bytes are named by the policy name in the error', async () => {
      const bytes = readFileSync(join(dir, 'corrupt.onnx'));
      await assert.rejects(loadOnnxPolicy(bytes, { name: 'gen-3' }), (error: unknown) => {
        assert.ok(error instanceof InvalidPolicyModel);
        assert.match(error.message, /^gen-3 \(2048 bytes\): /);
        return true;
      });
    });

    it('a missing file is NotFoundError naming the path', async () => {
      const path = join(dir, 'absent.onnx');
      await assert.rejects(loadOnnxPolicy(path, { name: 'x' }), (error: unknown) => error instanceof NotFoundError && error.message.includes(path));
    });

    it('rejects a bad game count, seed or mode with ConfigError', async () => {
      const bot = botPolicy(createRandomBot(1));
      await assert.rejects(playMatch({ a: bot, b: bot, games: 0, seed: 1, mode: 'greedy' }), ConfigError);
      await assert.rejects(playMatch({ a: bot, b: bot, games: 2.5, seed: 1, mode: 'greedy' }), ConfigError);
      await assert.rejects(playMatch({ a: bot, b: bot, games: 2, seed: 0.5, mode: 'greedy' }), ConfigError);
      await assert.rejects(playMatch({ a: bot, b: bot, games: 2, seed: 1, mode: 'best' as 'greedy' }), /mode: must be one of greedy, sample/);
    });
  });
});

describe('selectFromLogits', () => {
  const legal = Uint8Array.from([1, 1, 0, 1, 0, 0, 0]);
  const logits = Float32Array.from([0, Math.log(2), 10, Math.log(3), 0, 0, 0]);

  it('greedy: the best legal logit, flagging a top logit on an illegal column', () => {
    const out = new Int32Array(1);
    const masked = new Uint8Array(1);
    selectFromLogits(logits, legal, 1, out, 'greedy', seededRandom(1), masked);
    assert.deepEqual([out[0], masked[0]], [3, 1]);
    selectFromLogits(Float32Array.from([0, 9, 0, 1, 0, 0, 0]), legal, 1, out, 'greedy', seededRandom(1), masked);
    assert.deepEqual([out[0], masked[0]], [1, 0]);
  });

  it('greedy: ties go to the lowest legal column', () => {
    const out = new Int32Array(1);
    selectFromLogits(new Float32Array(COLS), Uint8Array.from([0, 0, 1, 1, 1, 0, 0]), 1, out, 'greedy', seededRandom(1), new Uint8Array(1));
    assert.equal(out[0], 2);
  });

  it('sample: draws from the softmax over legal logits only (1/6, 2/6, 3/6 here)', () => {
    // log 2 and log 3 rounded to float32 (relative error <= 6e-8): the probabilities move by
    // < 1e-7, far inside the sampling band below.
    const draws = 60_000;
    const rows = new Float32Array(draws * COLS);
    const masks = new Uint8Array(draws * COLS);
    for (let k = 0; k < draws; k++) {
      rows.set(logits, k * COLS);
      masks.set(legal, k * COLS);
    }
    const out = new Int32Array(draws);
    selectFromLogits(rows, masks, draws, out, 'sample', seededRandom(42), new Uint8Array(draws));
    const counts = new Array(COLS).fill(0);
    for (const c of out) counts[c]++;
    assert.deepEqual([counts[2], counts[4], counts[5], counts[6]], [0, 0, 0, 0]);
    // Binomial standard deviation at n = 60,000 is at most 0.002; allow five of them.
    for (const [c, p] of [
      [0, 1 / 6],
      [1, 2 / 6],
      [3, 3 / 6],
    ] as const) {
      assert.ok(Math.abs(counts[c] / draws - p) < 0.01, `column ${c}: ${counts[c] / draws} vs ${p}`);
    }
  });
});
