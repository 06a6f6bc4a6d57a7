/**
 * The league's two Lambdas, run in-process: functions/selfplay/match (ONNX snapshots downloaded
 * from a mocked S3, played with onnxruntime-node) and functions/selfplay/elo (the joint fit).
 * The ONNX models are built at test time by test/fixtures/connect4/make_policy.py.
 */
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { GetObjectCommand, NoSuchKey, S3Client, type GetObjectCommandOutput } from '@aws-sdk/client-s3';
import { mockClient } from 'aws-sdk-client-mock';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { ConfigError } from '#shared/errors.ts';
import { BOT_PLAYERS, type LeaguePlayer, type MatchResult } from '#shared/league.ts';
import { handler as matchHandler } from '#functions/selfplay/match/handler.ts';
import { handler as eloHandler } from '#functions/selfplay/elo/handler.ts';

const python = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const makePolicy = join(REPO_ROOT, 'test/fixtures/connect4/make_policy.py');
const BUCKET = 'league-bucket';
const [RANDOM, TACTICAL] = BOT_PLAYERS;

const s3 = mockClient(S3Client);
/** S3 key -> bytes, served by the GetObject mock. */
const objects = new Map<string, Buffer>();

function snapshot(id: string, generation: number, file: string): LeaguePlayer {
  return { id, kind: 'snapshot', generation, onnxUri: `s3://${BUCKET}/runs/league/exec-1/${id}/${file}` };
}

function getCountFor(uri: string): number {
  const key = uri.slice(`s3://${BUCKET}/`.length);
  return s3.commandCalls(GetObjectCommand).filter((call) => call.args[0].input.Key === key).length;
}

/** Expects InvalidPolicyModel, by name: the name is what the state machine's Catch matches. */
function isInvalidPolicyModel(error: unknown): boolean {
  assert.ok(error instanceof Error, `got ${String(error)}`);
  assert.equal(error.name, 'InvalidPolicyModel');
  return true;
}

let dir: string;

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'league-policies-'));
  const made = spawnSync(python, [makePolicy, dir], { encoding: 'utf8', env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
  assert.equal(made.status, 0, `make_policy.py failed (needs numpy and python3-onnx):\n${made.stdout}\n${made.stderr}`);
  // The same bytes may sit under several keys: each test that counts downloads uses its own key.
  const files = ['column_policy.onnx', 'mlp_policy.onnx', 'corrupt.onnx', 'wrong_shape.onnx'];
  for (const id of ['gen-1', 'gen-2', 'gen-3', 'gen-4', 'bad-1', 'bad-2']) {
    for (const file of files) objects.set(`runs/league/exec-1/${id}/${file}`, readFileSync(join(dir, file)));
  }
});

after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  s3.reset();
  s3.on(GetObjectCommand).callsFake((input: { Bucket: string; Key: string }) => {
    const bytes = input.Bucket === BUCKET ? objects.get(input.Key) : undefined;
    if (!bytes) throw new NoSuchKey({ message: `no such key ${input.Key}`, $metadata: {} });
    // Two chunks, as a real response body may arrive.
    const cut = Math.floor(bytes.length / 2);
    return { Body: Readable.from([bytes.subarray(0, cut), bytes.subarray(cut)]) as unknown as GetObjectCommandOutput['Body'] };
  });
});

describe('match handler', () => {
  it('a snapshot against the tactical bot returns sane counts summing to the games', async () => {
    const a = snapshot('gen-2', 2, 'mlp_policy.onnx');
    const result = (await matchHandler({ a, b: TACTICAL, games: 200, seed: 11, mode: 'sample' })) as MatchResult;
    assert.equal(result.pairId, 'gen-2~tactical');
    assert.deepEqual([result.a, result.b, result.games], ['gen-2', 'tactical', 200]);
    assert.equal(result.winsA + result.winsB + result.draws, 200);
    assert.deepEqual([result.gamesAFirst, result.gamesASecond], [100, 100]);
    assert.equal(result.firstMoverWinsA + result.secondMoverWinsA, result.winsA);
    assert.equal(result.firstMoverDraws + result.secondMoverDraws, result.draws);
    assert.equal(result.scoreA, (result.winsA + result.draws / 2) / 200);
    assert.ok(result.plies >= 200 * 7 && result.plies <= 200 * 42, `plies ${result.plies}`);
    assert.equal(result.illegalB, 0, 'the tactical bot only plays legal columns');
    assert.ok(result.winsB > result.winsA, `an untrained network loses to the tactical bot: ${result.winsA}-${result.winsB}`);
    assert.equal('moves' in result, false);
    assert.ok(JSON.stringify(result).length < 1024, 'the result stays small');
  });

  it('plays the real network: column stacking is blocked by the tactical bot and counted on full columns', async () => {
    const a = snapshot('gen-1', 1, 'column_policy.onnx');
    const result = (await matchHandler({ a, b: TACTICAL, games: 100, seed: 3, mode: 'greedy' })) as MatchResult;
    assert.ok(result.scoreA < 0.1, `column stacking scored ${result.scoreA} against the tactical bot`);
    // After the tactical bot caps column 3, the network's top logit sits on a full column.
    assert.ok(result.illegalA > 0, 'masked moves on the full column are counted');
  });

  it('the same request replays the same result', async () => {
    const request = { a: snapshot('gen-2', 2, 'mlp_policy.onnx'), b: RANDOM, games: 50, seed: 4, mode: 'sample' };
    assert.deepEqual(await matchHandler(request), await matchHandler(request));
  });

  it('two bots play without touching S3', async () => {
    const result = (await matchHandler({ a: TACTICAL, b: RANDOM, games: 100, seed: 2, mode: 'sample' })) as MatchResult;
    assert.equal(result.pairId, 'tactical~random');
    assert.ok(result.scoreA > 0.7, `tactical vs random ${result.scoreA}`);
    assert.equal(s3.commandCalls(GetObjectCommand).length, 0);
  });

  it('a warm container downloads each snapshot once', async () => {
    const a = snapshot('gen-3', 3, 'mlp_policy.onnx');
    await matchHandler({ a, b: RANDOM, games: 20, seed: 1, mode: 'greedy' });
    await matchHandler({ a, b: TACTICAL, games: 20, seed: 2, mode: 'greedy' });
    assert.equal(getCountFor(a.onnxUri!), 1);
  });

  it('a corrupt ONNX rejects with InvalidPolicyModel, and a retry downloads it again', async () => {
    const a = snapshot('bad-1', 4, 'corrupt.onnx');
    const request = { a, b: TACTICAL, games: 20, seed: 1, mode: 'greedy' };
    await assert.rejects(matchHandler(request), isInvalidPolicyModel);
    await assert.rejects(matchHandler(request), (error: unknown) => isInvalidPolicyModel(error) && /bad-1/.test((error as Error).message));
    assert.equal(getCountFor(a.onnxUri!), 2, 'a failed load is not cached');
  });

  it('a wrong-shaped ONNX on side B rejects with InvalidPolicyModel naming the problem', async () => {
    const b = snapshot('bad-2', 5, 'wrong_shape.onnx');
    await assert.rejects(matchHandler({ a: snapshot('gen-4', 6, 'mlp_policy.onnx'), b, games: 20, seed: 1, mode: 'greedy' }), (error: unknown) => {
      isInvalidPolicyModel(error);
      assert.match((error as Error).message, /last dimension 5; expected 7/);
      return true;
    });
  });

  it('a missing snapshot object is S3\'s NoSuchKey, not a policy error', async () => {
    const a = snapshot('gen-9', 9, 'mlp_policy.onnx');
    await assert.rejects(matchHandler({ a, b: RANDOM, games: 2, seed: 1, mode: 'greedy' }), (error: unknown) => (error as Error).name === 'NoSuchKey');
  });

  it('a bad request is a ConfigError naming the field and the value', async () => {
    await assert.rejects(matchHandler({ a: TACTICAL, b: RANDOM, games: 401, seed: 1, mode: 'greedy' }), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.equal(error.field, 'games');
      assert.equal(error.value, 401);
      return true;
    });
    await assert.rejects(matchHandler({ a: { id: 'x', kind: 'wizard' }, b: RANDOM, games: 2, seed: 1, mode: 'greedy' }), /a\.kind: .*"wizard"/);
  });
});

describe('elo handler', () => {
  it('rates a small league played by the match handler: random = 0, both bots among the opponents', async () => {
    const gen1 = snapshot('gen-1', 1, 'column_policy.onnx');
    const gen2 = snapshot('gen-2', 2, 'mlp_policy.onnx');
    const matches: unknown[] = [];
    for (const b of [RANDOM, TACTICAL]) matches.push(await matchHandler({ a: gen1, b, games: 200, seed: 1, mode: 'greedy' }));
    for (const b of [RANDOM, TACTICAL, gen1]) matches.push(await matchHandler({ a: gen2, b, games: 200, seed: 2, mode: 'sample' }));
    const players = [...BOT_PLAYERS, gen1, gen2];

    const out = await eloHandler({ players, matches, bootstrapSamples: 50 });

    const elo = Object.fromEntries(out.ratings.map((r) => [r.id, r.elo]));
    assert.equal(elo.random, 0);
    assert.deepEqual(Object.keys(elo).sort(), ['gen-1', 'gen-2', 'random', 'tactical']);
    assert.ok(elo.tactical > 100, `the tactical bot is well above random: ${elo.tactical}`);
    for (const r of out.ratings) assert.ok(r.low <= r.elo && r.elo <= r.high, `${r.id} interval`);
    assert.deepEqual(out.opponents.slice(0, 2), [...BOT_PLAYERS]);
    assert.deepEqual(out.opponents.slice(2).map((p) => p.id).sort(), ['gen-1', 'gen-2']);
    assert.equal(out.opponents[2].onnxUri?.startsWith('s3://'), true);
    const bestSnapshot = elo['gen-1'] >= elo['gen-2'] ? 'gen-1' : 'gen-2';
    assert.equal(out.champion, bestSnapshot);
    assert.deepEqual(out.unrated, []);
    // Fixed bootstrap seed: a rerun gives the same table.
    assert.deepEqual(await eloHandler({ players, matches, bootstrapSamples: 50 }), out);
  });

  it('a bad match in the input is a ConfigError naming it', async () => {
    const bad = { pairId: 'gen-1~random', a: 'gen-1', b: 'random', games: 3 };
    await assert.rejects(eloHandler({ players: [...BOT_PLAYERS], matches: [bad] }), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.match(error.field, /^matches\.0\./);
      return true;
    });
    await assert.rejects(eloHandler({ players: [{ id: 'x', kind: 'wizard' }], matches: [] }), /players\.0\.kind/);
  });
});
