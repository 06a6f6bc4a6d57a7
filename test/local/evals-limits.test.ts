/**
 * Checkpoint evaluation at its limits, every item failing: 64 registered benchmarks (the most a run
 * evaluates) against an uploaded checkpoint of 64 files (the most a manifest lists) whose hashes
 * are all wrong, under a long run name. The upload starts the run; every eval job fails on its
 * own; the run completes, the leaderboard records each failure with its reason, and the largest
 * state stays far below 256 KiB.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import type { ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { EVALS_PIPELINE } from '#pipelines/evals/stack.ts';
import { s3Client } from '#shared/clients/aws.ts';
import { registerBenchmark } from '#shared/evals/benchmarks.ts';
import { MAX_CHECKPOINT_FILES } from '#shared/evals/checkpoints.ts';
import { MAX_SUITE_BENCHMARKS } from '#shared/evals/prepare.ts';
import { readOutcomes } from '#shared/fan-out.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import { startTestRuntime, stopTestRuntime, within } from '../support/runtime.ts';

describe('checkpoint evaluation at its limits, every benchmark failing', () => {
  let runtime: LocalRuntime;
  let record: ExecutionRecord;
  const run = `r${'x'.repeat(99)}`;

  before(
    async () => {
      runtime = await startTestRuntime({ pipelines: [pipelineNamed(EVALS_PIPELINE)] });
      const where = { table: runtime.resources.tables[0]!, bucket: runtime.resources.buckets[0]! };
      const data = Array.from({ length: 5 }, (_, i) => JSON.stringify({ id: `q${i}`, prompt: `${i}+${i}=`, answer: String(2 * i) })).join('\n');
      for (let i = 0; i < MAX_SUITE_BENCHMARKS; i++) {
        await registerBenchmark(where, { name: `bench-${String(i).padStart(2, '0')}`, scorer: 'exact-number', sampleSize: 5, data });
      }
      const prefix = `checkpoints/${run}/7/`;
      const files = Array.from({ length: MAX_CHECKPOINT_FILES }, (_, i) => ({ name: `part-${String(i).padStart(2, '0')}.bin`, body: `file ${i}` }));
      for (const f of files) await s3Client().send(new PutObjectCommand({ Bucket: where.bucket, Key: `${prefix}${f.name}`, Body: f.body }));
      // Sizes right (prepare checks them), every sha256 wrong: each eval job refuses the checkpoint.
      const manifest = { run, step: 7, files: files.map((f) => ({ name: f.name, sha256: '0'.repeat(64), size: f.body.length })) };
      const done = new Promise<ExecutionRecord>((resolve) => {
        runtime.on('executionDone', (r: ExecutionRecord) => {
          if (r.pipeline === EVALS_PIPELINE) resolve(r);
        });
      });
      await s3Client().send(new PutObjectCommand({ Bucket: where.bucket, Key: `${prefix}manifest.json`, Body: JSON.stringify(manifest) }));
      record = await within(done, 20 * 60_000, 'the evaluation the upload started');
    },
    { timeout: 25 * 60_000 },
  );
  after(() => stopTestRuntime(runtime));

  it('completes, records every failed benchmark with its reason, and keeps its state small', async () => {
    assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
    assert.equal(record.stats.batchJobs, MAX_SUITE_BENCHMARKS);
    const output = record.output as { reportUri: string; results: unknown[] };
    // The fan-out's records, read back: each failure with the job's own reason.
    const outcomes = await readOutcomes(output.results, 'results');
    assert.equal(outcomes.filter((o) => !o.ok).length, MAX_SUITE_BENCHMARKS);
    const boardUri = output.reportUri.replace(/leaderboard\.html$/, 'leaderboard.json');
    const board = JSON.parse(await (await s3Client().send(new GetObjectCommand(parseS3Uri(boardUri)))).Body!.transformToString()) as {
      failures: { benchmark: string; error: string; cause: string }[];
    };
    assert.equal(board.failures.length, MAX_SUITE_BENCHMARKS);
    for (const f of board.failures) assert.match(f.cause, /Checksum|sha256|Manifest/i, `${f.benchmark}: ${f.cause.slice(0, 300)}`);
    const { largestState } = record.stats;
    console.log(`evals at its limits: largest state ${largestState.bytes} bytes (${largestState.name})`);
    assert.ok(largestState.bytes < 128 * 1024, `${largestState.name}: ${largestState.bytes} bytes`);
  });
});
