/**
 * The league's two Lambdas, run in-process: functions/selfplay/match (ONNX snapshots downloaded
 * from a mocked S3, played with onnxruntime-node), functions/selfplay/plan and functions/selfplay/elo
 * (the league document in a mocked S3, the joint fit).
 * The ONNX models are built at test time by test/fixtures/connect4/make_policy.py.
 */
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { GetObjectCommand, NoSuchKey, PutObjectCommand, S3Client, type GetObjectCommandOutput } from '@aws-sdk/client-s3';
import { mockClient } from 'aws-sdk-client-mock';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { ConfigError } from '#shared/errors.ts';
import { BOT_PLAYERS, type LeaguePlayer, type MatchResult } from '#shared/selfplay/league.ts';
import { handler as matchHandler } from '#functions/selfplay/match/handler.ts';

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
    // A strength claim, not an exact outcome: onnxruntime's float32 kernels differ by CPU, so the
    // sampled games may differ between machines; the untrained network loses by a wide margin.
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
    // Exact: the same model, seed and onnxruntime on one machine (one code path).
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

  it("a missing snapshot object is S3's NoSuchKey, not a policy error", async () => {
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

describe('league handlers: start, plan, elo', () => {
  // The league Lambdas read their bucket and pipeline at module scope: import them after setting both.
  const env = async () => {
    process.env.BUCKET_NAME = BUCKET;
    process.env.PIPELINE_NAME = 'selfplay';
    return {
      elo: (await import('#functions/selfplay/elo/handler.ts')).handler,
      plan: (await import('#functions/selfplay/plan/handler.ts')).handler,
    };
  };
  /** A training job's result, its curves.json put where it names them, as the job writes it. */
  const train = (id: string, file: string) => {
    const curvesKey = `runs/league/exec-1/${id}/curves.json`;
    objects.set(
      curvesKey,
      Buffer.from(
        JSON.stringify({
          groups: ['tactical', 'random', 'self'],
          iteration: [1, 2],
          score_by_group: [
            [0.1, 0.5, 0.5],
            [0.2, 0.6, 0.5],
          ],
          policy_loss: [0.1, 0.05],
        }),
      ),
    );
    return {
      snapshotOnnx: `s3://${BUCKET}/runs/league/exec-1/${id}/${file}`,
      stateDict: `s3://${BUCKET}/runs/league/exec-1/${id}/snapshot.pt`,
      curvesUri: `s3://${BUCKET}/${curvesKey}`,
      groups: ['tactical', 'random', 'self'],
      iterations: 2,
      evaluation: {
        vsTactical: { first: 0.3, second: 0.1, overall: 0.2, games: 100 },
        vsRandom: { first: 0.9, second: 0.8, overall: 0.85, games: 100 },
      },
      envStepsPerSecond: 1000,
      seconds: 3,
    };
  };
  const settings = { games: 100, seed: 3, mode: 'sample' as const, maxFailedPercent: 50 };
  const PLAN = { ppo: { learning_rate: 1e-3 }, generations: 3, lrSchedule: 'step' as const };

  beforeEach(() => {
    s3.on(PutObjectCommand).callsFake((input: { Bucket: string; Key: string; Body: string }) => {
      objects.set(input.Key, Buffer.from(input.Body));
      return {};
    });
  });

  it('runs two generations: the snapshot joins, plays every player, and the league is rated', async () => {
    const { elo, plan } = await env();
    const started = await elo({ start: true, ...PLAN });
    assert.deepEqual(started.trainGroups, [['random', 'tactical'], ['tactical'], ['tactical'], ['self']]);
    assert.deepEqual(started.trainPpo, { learning_rate: 1e-3 });
    assert.equal(started.initialStateDict, null);
    assert.match(started.leagueUri, /^s3:\/\/league-bucket\/data\/selfplay\/league\/[0-9a-f]{64}\.json$/);

    const planned1 = await plan({ leagueUri: started.leagueUri, generation: 1, train: train('gen-1', 'column_policy.onnx'), ...settings });
    assert.deepEqual(
      planned1.requests.map((r) => r.pairId),
      ['gen-1~random', 'gen-1~tactical'],
    );
    assert.equal(planned1.maxFailures, 1);
    const results1 = [];
    for (const r of planned1.requests) results1.push({ ok: true, value: await matchHandler(r) });
    const rated1 = await elo({ leagueUri: planned1.leagueUri, generation: 1, results: results1, bootstrapSamples: 30, ...PLAN });
    assert.equal(rated1.champion, 'gen-1');
    assert.equal(rated1.initialStateDict, train('gen-1', '').stateDict);
    assert.deepEqual(rated1.trainGroups.at(-1), [{ name: 'gen-1', state_dict: train('gen-1', '').stateDict }]);
    assert.deepEqual(rated1.trainPpo, { learning_rate: 5e-4 }, 'generation 2 of 3 on the step schedule');

    const planned2 = await plan({ leagueUri: rated1.leagueUri, generation: 2, train: train('gen-2', 'mlp_policy.onnx'), ...settings });
    assert.deepEqual(
      planned2.requests.map((r) => r.pairId),
      ['gen-2~random', 'gen-2~tactical', 'gen-2~gen-1'],
    );
    const results2 = [];
    for (const r of planned2.requests) results2.push({ ok: true, value: await matchHandler(r) });
    const rated2 = await elo({ leagueUri: planned2.leagueUri, generation: 2, results: results2, bootstrapSamples: 30, ...PLAN });
    assert.equal(rated2.matches, 5);
    const ratings = Object.fromEntries(rated2.ratings.map((r) => [r.id, r.elo]));
    assert.equal(ratings.random, 0);
    assert.deepEqual(Object.keys(ratings).sort(), ['gen-1', 'gen-2', 'random', 'tactical']);
    for (const r of rated2.ratings) assert.ok(r.low <= r.elo && r.elo <= r.high, `${r.id} interval`);
    // Content-addressed and seeded: the same inputs write the same league document.
    assert.deepEqual(await elo({ leagueUri: planned2.leagueUri, generation: 2, results: results2, bootstrapSamples: 30, ...PLAN }), rated2);
  });

  it('a failed pair is recorded and the league goes on without it', async () => {
    const { elo, plan } = await env();
    const started = await elo({ start: true, ...PLAN });
    const planned = await plan({ leagueUri: started.leagueUri, generation: 1, train: train('gen-1', 'column_policy.onnx'), ...settings });
    const [first, second] = planned.requests;
    // The fan-out's records, as the state machine writes them: the value inline, the cause in S3.
    objects.set('runs/selfplay/exec-1/matches/failures/1.txt', Buffer.from('gen-1: not an ONNX model'));
    const results = [
      { ok: true, value: await matchHandler(first!) },
      { ok: false, error: 'InvalidPolicyModel', causeUri: `s3://${BUCKET}/runs/selfplay/exec-1/matches/failures/1.txt`, item: { pairId: second!.pairId } },
    ];
    const rated = await elo({ leagueUri: planned.leagueUri, generation: 1, results, bootstrapSamples: 30, ...PLAN });
    assert.equal(rated.failedMatches, 1);
    assert.equal(rated.matches, 1);
    assert.equal(rated.champion, 'gen-1');
  });

  it('bad input names the field and leaves the earlier league document as it was', async () => {
    const { elo, plan } = await env();
    const started = await elo({ start: true, ...PLAN });
    const key = started.leagueUri.slice(`s3://${BUCKET}/`.length);
    const before = objects.get(key);
    const broken = { ...train('gen-1', 'column_policy.onnx'), snapshotOnnx: 'not-a-uri' };
    await assert.rejects(plan({ leagueUri: started.leagueUri, generation: 1, train: broken, ...settings }), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(error.field, 'train.snapshotOnnx');
      return true;
    });
    const lost = { ...train('gen-1', 'column_policy.onnx'), curvesUri: `s3://${BUCKET}/runs/league/exec-1/gone/curves.json` };
    // A lost curves.json is S3's NoSuchKey with the key (the state machine retries and then fails the step).
    await assert.rejects(plan({ leagueUri: started.leagueUri, generation: 1, train: lost, ...settings }), (error: Error) => {
      assert.equal(error.name, 'NoSuchKey');
      assert.match(error.message, /gone\/curves\.json/);
      return true;
    });
    const garbled = train('gen-1', 'column_policy.onnx');
    objects.set(garbled.curvesUri.slice(`s3://${BUCKET}/`.length), Buffer.from(JSON.stringify({ groups: ['self'], iteration: ['one'] })));
    await assert.rejects(plan({ leagueUri: started.leagueUri, generation: 1, train: garbled, ...settings }), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.match(error.field, /^train\.curves\./);
      return true;
    });
    await assert.rejects(
      plan({ leagueUri: started.leagueUri, generation: 2, train: train('gen-2', 'mlp_policy.onnx'), ...settings }),
      /generation.*next generation is 1/,
    );
    await assert.rejects(elo({ leagueUri: started.leagueUri, generation: 1, results: [], ...PLAN }), /generation.*last planned generation is none/);
    const bad = { pairId: 'gen-1~random', a: 'gen-1', b: 'random', games: 3 };
    const planned = await plan({ leagueUri: started.leagueUri, generation: 1, train: train('gen-1', 'column_policy.onnx'), ...settings });
    await assert.rejects(elo({ leagueUri: planned.leagueUri, generation: 1, results: [{ ok: true, value: bad }], ...PLAN }), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.match(error.field, /^results\.0\.value\./);
      return true;
    });
    assert.deepEqual(objects.get(key), before);
  });
});
