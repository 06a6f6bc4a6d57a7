/**
 * The humanoid's CPU job stages in-process against a real s3rver: training writes checkpoints
 * (files first, checkpoint.json last) and a rerun of the same run (Batch's retry after a
 * reclaimed instance) continues from its newest checkpoint to the same weights an uninterrupted
 * run reaches; `resume` continues an earlier run's checkpoint; a replay measures and films a
 * checkpoint's policy. Refused, each named: a checkpoint of another trainer, a tampered file, a
 * policy of the wrong shape, a command outside the trained range.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { resetClients } from '#shared/clients/aws.ts';
import { jobContext } from '#shared/job.ts';
import { zeroPolicy } from '#shared/humanoid/ars.ts';
import { CHECKPOINT_FILE, checkpointFolder, readCheckpoint, writeCheckpoint } from '#shared/humanoid/checkpoint.ts';
import { latestCheckpoint, runReplay, runTrain, type TrainSpec } from '#shared/humanoid/jobs.ts';
import { reportSettings } from '#shared/humanoid/steps.ts';
import { linearPolicyOnnx } from '#shared/humanoid/onnx-policy.ts';
import { RolloutPool } from '#shared/humanoid/rollouts.ts';
import { startS3rver, type S3Emulator } from '#infra/local/emulators.ts';
import { bundleHumanoidJob } from '../../batch-jobs/humanoid-cpu/build.ts';
import { LOCAL_KEY, LOCAL_REGION } from '#infra/local/resolve.ts';

const BUCKET = 'humanoid-test';
let work: string;
let s3rver: S3Emulator;
let s3: S3Client;
let pool: RolloutPool;
const saved = { ...process.env };

const spec = (run: string, iterations: number, resume: string | null = null, start: 'balance' | 'gait' | 'zero' = 'zero'): TrainSpec => ({
  stage: 'train',
  trainer: 'ars',
  run,
  seed: 3,
  resume,
  workers: 2,
  ars: {
    iterations,
    start,
    objective: 'return',
    directions: 2,
    topDirections: 1,
    stepSize: 0.02,
    noise: 0.03,
    rolloutSteps: 15,
    evaluations: 1,
    checkpointEvery: 1,
    normaliserIterations: 2,
  },
  env: { noiseLevel: 1, pushes: true, randomReset: true, survivalBonus: 0, command: null },
});
const ctx = (name: string) => jobContext(`s3://${BUCKET}/runs/humanoid/test/${name}/output/`);

async function keys(prefix: string): Promise<string[]> {
  const page = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: prefix }));
  return (page.Contents ?? []).map((o) => o.Key!).sort();
}

async function params(uri: string): Promise<{ iteration: number; weights: number[] }> {
  return JSON.parse((await (await readCheckpoint(uri)).file('params.json')).toString('utf8'));
}

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'fp-humanoid-jobs-'));
  s3rver = await startS3rver(join(work, 's3'), 0);
  Object.assign(process.env, {
    AWS_REGION: LOCAL_REGION,
    AWS_ACCESS_KEY_ID: LOCAL_KEY,
    AWS_SECRET_ACCESS_KEY: LOCAL_KEY,
    AWS_ENDPOINT_URL_S3: s3rver.url,
  });
  resetClients();
  s3 = new S3Client({ forcePathStyle: true, endpoint: s3rver.url, region: LOCAL_REGION, credentials: { accessKeyId: LOCAL_KEY, secretAccessKey: LOCAL_KEY } });
  await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
  pool = new RolloutPool(2);
});

after(async () => {
  await pool.close();
  await s3rver.close();
  process.env = saved;
  resetClients();
  rmSync(work, { recursive: true, force: true });
});

describe('humanoid CPU job: train', () => {
  it('writes a checkpoint per iteration, checkpoint.json listing its files, and a rerun continues from the newest to the same weights', async () => {
    const whole = await runTrain(spec('whole', 3), ctx('whole'), pool);
    assert.equal(whole.iterations, 3);
    assert.equal(whole.checkpoints.length, 3);
    assert.equal(whole.startedFrom, null);
    const read = await readCheckpoint(whole.checkpoint);
    assert.equal(read.manifest.history.length, 3);
    assert.deepEqual(read.manifest.files.map((f) => f.name).sort(), ['params.json', 'policy.onnx']);
    assert.equal(read.manifest.step, whole.steps);
    assert.ok(whole.stepsPerSecond > 0);

    // The same run cut after 2 iterations, then rerun as Batch would: it continues from its own newest.
    await runTrain(spec('cut', 2), ctx('cut-1'), pool);
    const resumed = await runTrain(spec('cut', 3), ctx('cut-2'), pool);
    assert.match(resumed.startedFrom!, /\/cut\/\d{12}\/checkpoint\.json$/);
    assert.equal(resumed.checkpoints.length, 1, 'one more iteration, one more checkpoint');
    const [a, b] = [await params(whole.checkpoint), await params(resumed.checkpoint)];
    assert.equal(b.iteration, 3);
    for (let i = 0; i < a.weights.length; i++) assert.ok(Math.abs(a.weights[i]! - b.weights[i]!) < 1e-12, `weight ${i}`);
    assert.equal((await readCheckpoint(resumed.checkpoint)).manifest.history.length, 3, 'the history goes on from the checkpoint');
    assert.equal(await latestCheckpoint(BUCKET, 'cut'), resumed.checkpoint);

    // `resume`: another run continues this one's checkpoint.
    const next = await runTrain(spec('next', 4, whole.checkpoint), ctx('next'), pool);
    assert.equal(next.startedFrom, whole.checkpoint);
    assert.equal(next.iterations, 4);
    assert.equal((await params(next.checkpoint)).iteration, 4);
    assert.ok((await keys(checkpointFolder('next', 0).replace(/0+\/$/, ''))).every((k) => k.startsWith('runs/humanoid/checkpoints/next/')));
  });

  it('starts from the balance controller, keeps its normaliser in every checkpoint, and a rerun continues to the same weights', async () => {
    const whole = await runTrain(spec('balance-whole', 2, null, 'balance'), ctx('balance-whole'), pool);
    assert.equal(whole.start, 'balance');
    const saved = JSON.parse((await (await readCheckpoint(whole.checkpoint)).file('params.json')).toString('utf8'));
    assert.equal(saved.start, 'balance');
    assert.equal(saved.normaliser.std.length, 103);
    assert.ok(
      saved.normaliser.mean.some((m: number) => m !== 0),
      'the controller normalises about the standing pose',
    );
    // Held, not learnt: the task's noise scales (linear velocity 0.1, joint angles 0.03), and no states counted.
    assert.deepEqual([saved.normaliser.std[0], saved.normaliser.std[12], saved.stats.count], [0.1, 0.03, 0]);
    assert.equal(saved.weights.filter((w: number) => w !== 0).length > 1000, true, 'the controller has gains, not zeros');

    await runTrain(spec('balance-cut', 1, null, 'balance'), ctx('balance-cut-1'), pool);
    // The rerun's config says zero: the checkpoint's start (and its held normaliser) wins.
    const resumed = await runTrain(spec('balance-cut', 2, null, 'zero'), ctx('balance-cut-2'), pool);
    assert.equal(resumed.start, 'balance');
    const [a, b] = [await params(whole.checkpoint), await params(resumed.checkpoint)];
    for (let i = 0; i < a.weights.length; i++) assert.ok(Math.abs(a.weights[i]! - b.weights[i]!) < 1e-12, `weight ${i}`);
  });

  it('starts from the gait start, searches its basis, and a rerun continues to the same weights', async () => {
    const gait = (run: string, iterations: number) => ({
      ...spec(run, iterations, null, 'gait'),
      ars: { ...spec(run, iterations, null, 'gait').ars, objective: 'progress' as const },
    });
    const whole = await runTrain(gait('gait-whole', 2), ctx('gait-whole'), pool);
    assert.equal(whole.start, 'gait');
    const saved = JSON.parse((await (await readCheckpoint(whole.checkpoint)).file('params.json')).toString('utf8'));
    assert.equal(saved.start, 'gait');
    assert.deepEqual([saved.normaliser.std[0], saved.stats.count], [0.1, 0], "the controller's normaliser, held");
    // Cut after one iteration and rerun: the basis is recomputed from the same controller, and the run ends where the uninterrupted one did.
    await runTrain(gait('gait-cut', 1), ctx('gait-cut-1'), pool);
    const resumed = await runTrain(gait('gait-cut', 2), ctx('gait-cut-2'), pool);
    assert.equal(resumed.start, 'gait');
    const [a, b] = [await params(whole.checkpoint), await params(resumed.checkpoint)];
    for (let i = 0; i < a.weights.length; i++) assert.ok(Math.abs(a.weights[i]! - b.weights[i]!) < 1e-12, `weight ${i}`);
  });

  it("reports the trainer's own settings, and the start its checkpoint records over the config's", async () => {
    const balance = await readCheckpoint((await runTrain(spec('report-balance', 1, null, 'balance'), ctx('report-balance'), pool)).checkpoint);
    const settings = {
      trainer: 'ars' as const,
      seed: 3,
      ars: { iterations: 1, start: 'zero', directions: 2 },
      env: { pushes: true, noiseLevel: 1 },
      ppo: { numEnvs: 8192, terrain: 'flat' },
    };
    // A continued run whose config says zero keeps its checkpoint's balance start: the row says both.
    assert.deepEqual(await reportSettings(settings, balance), {
      trainer: 'ars',
      seed: 3,
      'ars.iterations': 1,
      'ars.start': 'balance (from the checkpoint; the config says zero)',
      'ars.directions': 2,
      'env.pushes': true,
      'env.noiseLevel': 1,
    });
    assert.equal((await reportSettings({ ...settings, ars: { ...settings.ars, start: 'balance' } }, balance))['ars.start'], 'balance');
    // A checkpoint from before the balance start records none: it started from zeros.
    const { start: _, ...older } = JSON.parse((await balance.file('params.json')).toString('utf8'));
    const old = await writeCheckpoint(
      BUCKET,
      { trainer: 'ars', run: 'report-old', step: 1, history: [] },
      { 'policy.onnx': await balance.file('policy.onnx'), 'params.json': JSON.stringify(older) },
    );
    assert.equal((await reportSettings({ ...settings, ars: { ...settings.ars, start: 'zero' } }, await readCheckpoint(old.uri)))['ars.start'], 'zero');
    // PPO's run shows PPO's settings, none of ARS's or the CPU twin's episodes.
    assert.deepEqual(await reportSettings({ ...settings, trainer: 'ppo' }, balance), {
      trainer: 'ppo',
      seed: 3,
      'ppo.numEnvs': 8192,
      'ppo.terrain': 'flat',
    });
  });

  it('refuses a checkpoint of another trainer or with a tampered file, naming it', async () => {
    const ppo = await writeCheckpoint(
      BUCKET,
      { trainer: 'ppo', run: 'gpu-run', step: 1000, history: [] },
      { 'policy.onnx': linearPolicyOnnx(zeroPolicy(103, 29)), 'params.msgpack': new Uint8Array([1, 2, 3]) },
    ).then((w) => w.uri);
    await assert.rejects(
      runTrain(spec('from-ppo', 2, ppo), ctx('from-ppo'), pool),
      (e: Error) => e.name === 'ConfigError' && /resume.*ppo checkpoint/.test(e.message),
    );

    const good = await runTrain(spec('tamper', 1), ctx('tamper'), pool);
    const folder = good.checkpoint.slice(`s3://${BUCKET}/`.length, -CHECKPOINT_FILE.length);
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: `${folder}params.json`, Body: '{"tampered": true}' }));
    await assert.rejects(runTrain(spec('tamper-2', 2, good.checkpoint), ctx('tamper-2'), pool), (e: Error) =>
      /resume\.files: has sha256 .*params\.json/.test(e.message),
    );
  });
});

describe('humanoid CPU job: replay', () => {
  it("measures and films a checkpoint's policy", async () => {
    const trained = await runTrain(spec('replayed', 1), ctx('replayed'), pool);
    const result = await runReplay(
      { stage: 'replay', checkpoint: trained.checkpoint, command: { forward: 0.5, lateral: 0, yaw: 0 }, steps: 40, filmEvery: 2 },
      ctx('replay'),
    );
    assert.equal(result.metrics.steps, 40);
    assert.ok(result.metrics.stepsUpright >= 1 && result.metrics.stepsUpright <= 40);
    assert.ok(result.frames >= 2);
    const film = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: result.film.slice(`s3://${BUCKET}/`.length) }));
    const bytes = await film.Body!.transformToByteArray();
    assert.equal(Buffer.from(bytes.subarray(4, 8)).toString('latin1'), 'ftyp', 'an MP4');
  });

  it('refuses a policy of the wrong shape and a command outside the trained range, naming them', async () => {
    const wrong = await writeCheckpoint(
      BUCKET,
      { trainer: 'ars', run: 'wrong-shape', step: 0, history: [] },
      { 'policy.onnx': linearPolicyOnnx(zeroPolicy(50, 29)), 'params.json': '{}' },
    ).then((w) => w.uri);
    await assert.rejects(
      runReplay({ stage: 'replay', checkpoint: wrong, command: { forward: 0.5, lateral: 0, yaw: 0 }, steps: 5, filmEvery: 1 }, ctx('wrong')),
      (e: Error) => e.name === 'ConfigError' && /policy\.onnx.*observations of 103/.test(e.message),
    );
    const trained = await runTrain(spec('range', 1), ctx('range'), pool);
    await assert.rejects(
      runReplay({ stage: 'replay', checkpoint: trained.checkpoint, command: { forward: 3.5, lateral: 0, yaw: 0 }, steps: 5, filmEvery: 1 }, ctx('range-r')),
      (e: Error) => e.name === 'ConfigError' && /command\.forward: must be within the trained range.*3\.5/.test(e.message),
    );
  });
});

describe('humanoid CPU job: the bundle the image ships', () => {
  it('trains on worker threads of its own module and replays with onnxruntime beside it', async () => {
    const out = join(work, 'bundle');
    const main = await bundleHumanoidJob(out);
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/tmp',
      AWS_REGION: LOCAL_REGION,
      AWS_ACCESS_KEY_ID: LOCAL_KEY,
      AWS_SECRET_ACCESS_KEY: LOCAL_KEY,
      AWS_ENDPOINT_URL_S3: s3rver.url,
    };
    const runBundle = async (name: string, jobSpec: unknown) => {
      const prefix = `runs/humanoid/bundle/${name}/`;
      await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: `${prefix}spec.json`, Body: JSON.stringify(jobSpec) }));
      // The bundle runs on its own: no tsx, from its own folder (as `node main.mjs` in the image).
      // Asynchronously: s3rver answers from this process.
      await promisify(execFile)(process.execPath, [main], {
        cwd: out,
        env: { ...env, JOB_SPEC_URI: `s3://${BUCKET}/${prefix}spec.json`, OUTPUT_URI: `s3://${BUCKET}/${prefix}output/` },
        timeout: 120_000,
      });
      const result = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: `${prefix}output/result.json` }));
      return JSON.parse(await result.Body!.transformToString()) as Record<string, unknown>;
    };
    const trained = (await runBundle('train', spec('bundled', 2))) as { checkpoint: string; workers: number; iterations: number };
    assert.equal(trained.iterations, 2);
    assert.equal(trained.workers, 2);
    const replayed = (await runBundle('replay', {
      stage: 'replay',
      checkpoint: trained.checkpoint,
      command: { forward: 1.5, lateral: 0, yaw: 0 },
      steps: 20,
      filmEvery: 2,
    })) as { metrics: { steps: number }; film: string };
    assert.equal(replayed.metrics.steps, 20);
    assert.match(replayed.film, /film\.mp4$/);
  });
});
