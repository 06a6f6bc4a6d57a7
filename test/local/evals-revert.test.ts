/**
 * A reverted checkpoint is evaluated again, end to end on the embedded runtime: a tiny lm-sft run
 * uploads two checkpoints (each upload starts an evaluation); then step 1's checkpoint is replaced
 * (content B: another trainer state, so another content hash) and reverted (content A again, the
 * same bytes as its first upload). Every upload starts one run; the revert's run starts no Batch
 * job (its eval is a cache hit on A's content) and makes A's result the current one again: the
 * latest eval result and the latest leaderboard of step 1 are A's, as its files are.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import type { ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { EVALS_PIPELINE } from '#pipelines/evals/stack.ts';
import { LmSftConfig } from '#pipelines/lm-sft/config.ts';
import { LM_SFT_PIPELINE } from '#pipelines/lm-sft/stack.ts';
import { getArtifactVersion, listArtifactVersions } from '#shared/artifacts.ts';
import { s3Client } from '#shared/clients/aws.ts';
import { registerBenchmark } from '#shared/evals/benchmarks.ts';
import { sha256Hex } from '#shared/json.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import { startTestRuntime, stopTestRuntime } from '../support/runtime.ts';

const RUN = 'revert';
/** A one-layer GPT, ten base steps and one fine-tune step: checkpoints 0 and 1. */
const producer = LmSftConfig.parse({
  run: RUN,
  model: { n_layer: 1, n_embd: 16, n_head: 2, block_size: 96 },
  base: { steps: 10, batch_size: 4, lr: 0.004 },
  finetune: { steps: 1, batch_size: 4, lr: 0.004, checkpoint_every: 1 },
});
const PREFIX = `checkpoints/${RUN}/1/`;

interface Manifest {
  files: { name: string; sha256: string; size: number }[];
}
interface EvalOutput {
  step: number;
  contentHash: string;
  leaderboard: { name: string; version: number };
}

describe('a reverted checkpoint (A, then B, then A again) is evaluated again, from the cache', () => {
  let runtime: LocalRuntime;
  const evals: ExecutionRecord[] = [];
  const where = () => ({ table: runtime.resources.tables[0]!, bucket: runtime.resources.buckets[0]! });
  const put = (key: string, body: string | Uint8Array) => s3Client().send(new PutObjectCommand({ Bucket: where().bucket, Key: key, Body: body }));
  const read = async (key: string) => (await s3Client().send(new GetObjectCommand({ Bucket: where().bucket, Key: key }))).Body!.transformToString();
  /** Uploads as a user would, and returns the run it started and the Batch jobs it ran. */
  const uploadAndWait = async (uploads: [string, string][]) => {
    const before = evals.length;
    const jobs = runtime.counters().batchJobs;
    const events: Record<string, unknown>[] = [];
    const listener = (event: Record<string, unknown>) => events.push(event);
    runtime.on('objectCreated', listener);
    for (const [key, body] of uploads) await put(key, body);
    await runtime.idle();
    runtime.off('objectCreated', listener);
    assert.equal(evals.length, before + 1, 'one run for the manifest upload');
    return { run: evals.at(-1)!, jobs: runtime.counters().batchJobs - jobs, manifestEvent: events.at(-1)! };
  };
  /** The current result of step 1: the latest published eval result of that step, and the latest leaderboard's row. */
  const current = async () => {
    const results = await listArtifactVersions(where(), `eval-${RUN}`); // newest first
    const result = results.find((r) => r.metrics.step === 1)!;
    const board = await getArtifactVersion(where(), `leaderboard-${RUN}`);
    const json = JSON.parse(await read(parseS3Uri(board.files.find((f) => f.name === 'leaderboard.json')!.uri).Key)) as {
      results: { step: number; contentHash: string }[];
    };
    return { result: result.metrics.contentHash, leaderboard: json.results.find((r) => r.step === 1)!.contentHash, board };
  };

  let manifestA: string;
  let stateA: string;
  let first: ExecutionRecord;

  before(
    async () => {
      runtime = await startTestRuntime({ pipelines: [pipelineNamed(EVALS_PIPELINE), pipelineNamed(LM_SFT_PIPELINE)] });
      runtime.on('executionDone', (record: ExecutionRecord) => {
        if (record.pipeline === EVALS_PIPELINE) evals.push(record);
      });
      const data = Array.from({ length: 5 }, (_, i) => JSON.stringify({ id: `q${i}`, prompt: `${i}+${i}=`, answer: String(2 * i) })).join('\n');
      await registerBenchmark(where(), { name: 'sums', scorer: 'exact-number', sampleSize: 5, data });
      const made = await runtime.startExecution(LM_SFT_PIPELINE, { config: producer }).done;
      assert.equal(made.status, 'SUCCEEDED', `${made.error}: ${made.cause}`);
      await runtime.idle();
      first = evals.find((e) => (e.output as EvalOutput | undefined)?.step === 1)!;
      manifestA = await read(`${PREFIX}manifest.json`);
      stateA = await read(`${PREFIX}trainer_state.json`);
    },
    { timeout: 10 * 60_000 },
  );
  after(() => stopTestRuntime(runtime));

  it('each uploaded checkpoint was evaluated once', () => {
    assert.equal(evals.length, 2, evals.map((e) => `${e.name} ${e.status} ${e.cause ?? ''}`).join('\n'));
    for (const e of evals) assert.equal(e.status, 'SUCCEEDED', `${e.name}: ${e.error}: ${e.cause}`);
    assert.ok(first, 'the evaluation of step 1');
  });

  it('B, then A again: the revert starts a run, runs no job, and A is the current result again', { timeout: 10 * 60_000 }, async () => {
    const hashA = (first.output as EvalOutput).contentHash;
    assert.deepEqual(await current().then(({ result, leaderboard }) => ({ result, leaderboard })), { result: hashA, leaderboard: hashA });

    // B: another trainer state under the same key, listed by a new manifest.
    const stateB = JSON.stringify({ phase: 'replaced' });
    const manifestB = JSON.stringify({
      ...(JSON.parse(manifestA) as Manifest),
      files: (JSON.parse(manifestA) as Manifest).files.map((f) =>
        f.name === 'trainer_state.json' ? { name: f.name, sha256: sha256Hex(stateB), size: Buffer.byteLength(stateB) } : f,
      ),
    });
    const b = await uploadAndWait([
      [`${PREFIX}trainer_state.json`, stateB],
      [`${PREFIX}manifest.json`, manifestB],
    ]);
    assert.equal(b.run.status, 'SUCCEEDED', `${b.run.error}: ${b.run.cause}`);
    assert.equal(b.jobs, 1, "B's content is new: its one benchmark is evaluated");
    const hashB = (b.run.output as EvalOutput).contentHash;
    assert.notEqual(hashB, hashA);
    assert.deepEqual(await current().then(({ result, leaderboard }) => ({ result, leaderboard })), { result: hashB, leaderboard: hashB });

    // A again: the first files and the first manifest, byte for byte.
    const a = await uploadAndWait([
      [`${PREFIX}trainer_state.json`, stateA],
      [`${PREFIX}manifest.json`, manifestA],
    ]);
    assert.equal(a.run.status, 'SUCCEEDED', `${a.run.error}: ${a.run.cause}`);
    assert.equal(a.jobs, 0, "A's evaluation is a cache hit: the revert is nearly free");
    assert.equal(a.run.stats.batchJobs, 0);
    assert.equal((a.run.output as EvalOutput).contentHash, hashA);
    const now = await current();
    assert.deepEqual(
      { result: now.result, leaderboard: now.leaderboard },
      { result: hashA, leaderboard: hashA },
      "the current result is A's, as the files are",
    );
    assert.equal(now.board.version, (a.run.output as EvalOutput).leaderboard.version, "the revert's leaderboard is the latest");

    // Its event delivered five more times: nothing more starts.
    const before = evals.length;
    for (let i = 0; i < 5; i++) await runtime.deliverEvent(a.manifestEvent);
    await runtime.idle();
    assert.equal(evals.length, before);
  });
});
