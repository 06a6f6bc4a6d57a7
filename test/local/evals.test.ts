/**
 * Evaluate every checkpoint, end to end on the embedded runtime at the `test` size: the producer
 * pipeline trains a small GPT (base model, then arithmetic fine-tuning) and uploads checkpoints;
 * each manifest upload starts one evaluation through the S3 trigger; every (checkpoint,
 * benchmark) pair runs the real eval job, is cached and indexed; the leaderboard and the guard
 * decide. Then the trigger's exactly-once behaviour (once per upload), a backfill of a new
 * benchmark, and the faults: a missing file, a changed file, a pickle that would run code.
 */
import { assertRunCost } from '../support/run-cost.ts';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import type { ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { backfill } from '#infra/cli/benchmarks.ts';
import { getArtifactVersion, listArtifactVersions } from '#shared/artifacts.ts';
import { registerBenchmark, setGuardSettings } from '#shared/evals/benchmarks.ts';
import { s3Client } from '#shared/clients/aws.ts';
import { readOutcomes } from '#shared/fan-out.ts';
import { sha256Hex } from '#shared/json.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { LM_SFT_SIZES, LmSftConfig } from '#pipelines/lm-sft/config.ts';
import { EVALS_PIPELINE } from '#pipelines/evals/stack.ts';
import { EvalsConfig } from '#pipelines/evals/config.ts';
import { LM_SFT_PIPELINE } from '#pipelines/lm-sft/stack.ts';
import { startTestRuntime, stopTestRuntime } from '../support/runtime.ts';
import { assertPlanMatchesRun } from '../support/plan.ts';

const python = '/usr/bin/python3';
const EVALS_CLI = EvalsConfig.parse({});
const config = LmSftConfig.parse(LM_SFT_SIZES.test);
const checkpointSteps = [
  0,
  ...Array.from({ length: config.finetune.steps / config.finetune.checkpoint_every }, (_, i) => (i + 1) * config.finetune.checkpoint_every),
];

interface Board {
  results: { step: number; benchmark: string; benchmarkVersion: number; accuracy: number; baseline: number }[];
  decision: { candidate: number | null; summary: string; verdicts: { step: number; reason: string }[] };
  failures: { step: number; benchmark: string; error: string; cause: string }[];
}

async function text(uri: string): Promise<string> {
  return (await s3Client().send(new GetObjectCommand(parseS3Uri(uri)))).Body!.transformToString();
}

describe('evaluate every checkpoint (test size)', () => {
  let runtime: LocalRuntime;
  let dataDir: string;
  let producer: ExecutionRecord;
  const evals: ExecutionRecord[] = [];
  const io = { out: () => {}, err: () => {} };
  const where = () => ({ table: runtime.resources.tables[0]!, bucket: runtime.resources.buckets[0]! });
  const leaderboard = async (): Promise<Board> => {
    const latest = await getArtifactVersion(where(), `leaderboard-${config.run}`);
    return JSON.parse(await text(latest.files.find((f) => f.name === 'leaderboard.json')!.uri)) as Board;
  };
  const put = (key: string, body: string | Uint8Array) => s3Client().send(new PutObjectCommand({ Bucket: where().bucket, Key: key, Body: body }));

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'evals-bench-'));
    const made = spawnSync(python, [join(REPO_ROOT, 'batch-jobs/evals-lm/make_benchmarks.py'), dataDir, '--rows', '300'], { encoding: 'utf8' });
    assert.equal(made.status, 0, made.stderr);
    runtime = await startTestRuntime({ pipelines: [pipelineNamed(EVALS_PIPELINE), pipelineNamed(LM_SFT_PIPELINE)] });
    runtime.on('executionDone', (record: ExecutionRecord) => {
      if (record.pipeline === EVALS_PIPELINE) evals.push(record);
    });
    for (const [name, scorer] of [
      ['arithmetic', 'exact-number'],
      ['reversal', 'exact-string'],
    ] as const) {
      await registerBenchmark(where(), { name, scorer, sampleSize: 100, data: readFileSync(join(dataDir, `${name}.jsonl`), 'utf8') });
    }
    await setGuardSettings(where(), { target: 'arithmetic', guard: 'reversal', marginPoints: 2 });
    producer = await runtime.startExecution(LM_SFT_PIPELINE, { config }).done;
    await runtime.idle();
  });
  after(async () => {
    await stopTestRuntime(runtime);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('each uploaded checkpoint starts exactly one evaluation, which scores it on the whole suite', async () => {
    assert.equal(producer.status, 'SUCCEEDED', producer.cause);
    await assertRunCost(producer);
    assert.equal(evals.length, checkpointSteps.length, evals.map((e) => `${e.name} ${e.status} ${e.cause ?? ''}`).join('\n'));
    for (const e of evals) assert.equal(e.status, 'SUCCEEDED', `${e.name}: ${e.error}: ${e.cause}`);
    // The plans of both cold runs: the producer's, and an upload's evaluation of the 2 registered benchmarks.
    assertPlanMatchesRun(LM_SFT_PIPELINE, config, producer);
    assertPlanMatchesRun(EVALS_PIPELINE, EVALS_CLI, evals[0]!, { startedByUpload: true, registeredBenchmarks: 2 });
    const steps = evals.map((e) => (e.output as { step: number }).step).sort((a, b) => a - b);
    assert.deepEqual(steps, checkpointSteps);
  });

  it('fine-tuning raises arithmetic and the guard benchmark falls; the leaderboard says why each checkpoint passed or failed', async () => {
    const board = await leaderboard();
    const acc = (benchmark: string, step: number) => board.results.find((r) => r.benchmark === benchmark && r.step === step)!.accuracy;
    const first = checkpointSteps[1]!;
    const last = checkpointSteps.at(-1)!;
    assert.equal(board.results.length, 2 * checkpointSteps.length);
    assert.ok(acc('arithmetic', 0) < 0.05, `base model on arithmetic ${acc('arithmetic', 0)}`);
    assert.ok(acc('arithmetic', first) < 0.05, `first checkpoint ${acc('arithmetic', first)}`);
    assert.ok(acc('arithmetic', last) >= 0.6, `last checkpoint ${acc('arithmetic', last)}`);
    // Accuracies are counts over 100 questions, each a rounded multiple of 0.01; the difference
    // of two is off by ~1e-16, which would decide a comparison that lands on its boundary (a gain
    // of exactly 20 points: 0.6 - 0.4 is 0.19999999999999996). Which counts a run gets depends on
    // PyTorch's kernels on this CPU, so the boundary can come up: EPS, far below one question,
    // takes the rounding out. (A single accuracy against a literal needs none: both are the
    // correctly rounded k/100.)
    const EPS = 1e-9;
    assert.ok(acc('arithmetic', last) - acc('arithmetic', first) >= 0.2 - EPS);
    assert.ok(acc('reversal', 0) >= 0.8, `base model on reversal ${acc('reversal', 0)}`);
    assert.ok(acc('reversal', 0) - acc('reversal', last) > 0.02 + EPS, 'reversal falls during fine-tuning');
    assert.equal(board.decision.verdicts.length, checkpointSteps.length);
    for (const v of board.decision.verdicts.slice(1)) assert.match(v.reason, /^(passed|failed): reversal/);
    const passed = board.decision.verdicts.filter((v) => v.reason.startsWith('passed'));
    assert.equal(
      board.decision.candidate,
      passed.length ? passed.reduce((a, b) => (acc('arithmetic', b.step) > acc('arithmetic', a.step) ? b : a)).step : null,
    );
    // Each result is indexed with lineage to its checkpoint.
    const results = await listArtifactVersions(where(), `eval-${config.run}`);
    assert.equal(results.length, 2 * checkpointSteps.length);
    const parent = results[0]!.lineage[0]!;
    assert.equal(parent.name, `checkpoint-${config.run}`);
    assert.equal((await getArtifactVersion(where(), parent.name, parent.version)).metrics.step, results[0]!.metrics.step);
  });

  it('a repeated event starts nothing; a re-upload, unchanged or changed, starts one run, all cached', async () => {
    const key = `checkpoints/${config.run}/${checkpointSteps[2]}/manifest.json`;
    const manifest = await text(`s3://${where().bucket}/${key}`);
    const before = evals.length;
    const jobs = runtime.counters().batchJobs;
    const captured: Record<string, unknown>[] = [];
    // The manifest's own event (the run it starts writes other objects, each with its event).
    const listener = (event: { detail: { object: { key: string } } }) => {
      if (event.detail.object.key === key) captured.push(event);
    };
    runtime.on('objectCreated', listener);
    await put(key, manifest); // the same bytes again
    await runtime.idle();
    runtime.off('objectCreated', listener);
    assert.equal(captured.length, 1);
    for (let i = 0; i < 5; i++) await runtime.deliverEvent(captured[0]!); // at-least-once delivery
    await runtime.idle();
    // The re-upload is an upload of record: evaluated once, from the cache.
    assert.equal(evals.length, before + 1, 'one evaluation for the re-upload, none for its redeliveries');
    assert.equal(evals.at(-1)!.status, 'SUCCEEDED', evals.at(-1)!.cause);
    assert.equal(runtime.counters().batchJobs, jobs, 'the same files: every pair a cache hit');

    const changed = JSON.stringify({ ...JSON.parse(manifest), created_at: '2030-01-01T00:00:00.000000Z' }, null, 2);
    await put(key, changed);
    await runtime.idle();
    assert.equal(evals.length, before + 2);
    assert.equal(evals.at(-1)!.status, 'SUCCEEDED', evals.at(-1)!.cause);
    assert.equal(runtime.counters().batchJobs, jobs, 'the same files: every pair a cache hit');
  });

  it('a backfill of a new benchmark computes only that benchmark, one eval job per checkpoint', async () => {
    const data = readFileSync(join(dataDir, 'arithmetic.jsonl'), 'utf8').split('\n').slice(0, 50).join('\n');
    await registerBenchmark(where(), { name: 'arithmetic-small', scorer: 'exact-number', sampleSize: 50, data });
    const summary = await backfill(config.run, undefined, { target: 'local', dataDir: runtime.dataDir }, io, runtime);
    assert.equal(summary.checkpoints, checkpointSteps.length);
    assert.equal(summary.failed, 0);
    assert.equal(summary.evalJobs, checkpointSteps.length);
    const board = await leaderboard();
    assert.equal(board.results.filter((r) => r.benchmark === 'arithmetic-small').length, checkpointSteps.length);
  });

  it('faults: a missing file fails its run naming it; a changed file and a pickle are recorded per benchmark', async () => {
    const base = `checkpoints/${config.run}`;
    const files = async (step: number) =>
      JSON.parse(await text(`s3://${where().bucket}/${base}/${step}/manifest.json`)) as { files: { name: string; sha256: string; size: number }[] };
    const good = await files(checkpointSteps.at(-1)!);
    const copy = async (to: number, names: string[]) => {
      for (const n of names)
        await put(
          `${base}/${to}/${n}`,
          await (
            await s3Client().send(new GetObjectCommand({ Bucket: where().bucket, Key: `${base}/${checkpointSteps.at(-1)}/${n}` }))
          ).Body!.transformToByteArray(),
        );
    };
    const manifestFor = (step: number, list: { name: string; sha256: string; size: number }[]) =>
      JSON.stringify({ run: config.run, step, files: list, base_step: 0 });
    const count = evals.length;

    // A manifest naming a file that was never uploaded: the run fails, naming the file.
    await put(`${base}/9001/manifest.json`, manifestFor(9001, good.files));
    // A file replaced after its manifest was written: the same size, another hash.
    await copy(
      9002,
      good.files.map((f) => f.name),
    );
    const weights = good.files.find((f) => f.name === 'model.safetensors')!;
    const tampered = Buffer.from(
      await (await s3Client().send(new GetObjectCommand({ Bucket: where().bucket, Key: `${base}/9002/model.safetensors` }))).Body!.transformToByteArray(),
    );
    tampered[tampered.length - 1] ^= 0xff;
    await put(`${base}/9002/model.safetensors`, tampered);
    // Its own trainer state, so its content hash is new and the job runs (a manifest claiming
    // exactly another checkpoint's files would be that checkpoint, a cache hit).
    const state = Buffer.from('{"phase": "tampered"}');
    await put(`${base}/9002/trainer_state.json`, state);
    const files9002 = good.files.map((f) => (f.name === 'trainer_state.json' ? { name: f.name, sha256: sha256Hex(state), size: state.length } : f));
    await put(`${base}/9002/manifest.json`, manifestFor(9002, files9002));
    // A pickle checkpoint that would run code if loaded.
    const marker = join(dataDir, 'pickle-ran');
    const pickle = spawnSync(
      python,
      [
        '-c',
        `
import os, sys, torch
class Boom:
    def __reduce__(self):
        return (os.system, (${JSON.stringify(`touch ${marker}`)},))
torch.save({"w": Boom()}, sys.argv[1])`,
        join(dataDir, 'model.pt'),
      ],
      { encoding: 'utf8' },
    );
    assert.equal(pickle.status, 0, pickle.stderr);
    const pt = readFileSync(join(dataDir, 'model.pt'));
    const configJson = good.files.find((f) => f.name === 'config.json')!;
    await copy(9003, ['config.json']);
    await put(`${base}/9003/model.pt`, pt);
    await put(`${base}/9003/manifest.json`, manifestFor(9003, [configJson, { name: 'model.pt', sha256: sha256Hex(pt), size: pt.length }]));
    await runtime.idle();

    const byStep = (step: number) => evals.slice(count).find((e) => JSON.stringify(e.input).includes(`/${step}/manifest.json`))!;
    const missing = byStep(9001);
    assert.equal(missing.status, 'FAILED');
    assert.match(missing.cause ?? '', /manifest\.files\.\d.*is missing: no object .*\/9001\/config\.json|manifest\.files\.\d.*is missing/);
    for (const step of [9002, 9003]) assert.equal(byStep(step).status, 'SUCCEEDED', byStep(step).cause);
    const board = await leaderboard();
    const failures = new Map(
      await Promise.all(
        [9002, 9003].map(async (step) => {
          // The fan-out's records: each failure's cause is read back from S3.
          const out = byStep(step).output as { results: unknown[] };
          return [step, await readOutcomes(out.results, 'results')] as const;
        }),
      ),
    );
    for (const r of failures.get(9002)!) assert.equal(r.ok, false);
    assert.match(JSON.stringify(failures.get(9002)), /ChecksumMismatch|sha256/);
    assert.match(JSON.stringify(failures.get(9003)), /CheckpointRefused/);
    assert.equal(spawnSync('test', ['-e', marker]).status, 1, 'the pickle never ran');
    assert.ok(
      board.results.every((r) => r.step < 9000),
      'failed pairs are not results',
    );

    // The file repaired, a rerun computes exactly the pairs that failed.
    await copy(9002, ['model.safetensors']);
    const jobs = runtime.counters().batchJobs;
    const rerun = await runtime.startExecution(EVALS_PIPELINE, { config: { ...EVALS_CLI, checkpoint: `s3://${where().bucket}/${base}/9002/manifest.json` } })
      .done;
    assert.equal(rerun.status, 'SUCCEEDED', rerun.cause);
    assert.equal(runtime.counters().batchJobs - jobs, 3, 'the three benchmarks of the repaired checkpoint, nothing else');
    assert.ok((rerun.output as { results: { ok: boolean }[] }).results.every((r) => r.ok));
    void weights;
  });
});
