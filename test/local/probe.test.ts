/**
 * The probe pipeline end to end on the embedded runtime: every step kind against real
 * emulators, the cache across runs, and the faults a user meets (a Lambda that throws, a
 * Batch job that fails or leaves no result, an oversized state, lost S3 outputs).
 */
import { pipelineNamed } from '#infra/cli/config.ts';
import { limitBreaches, planRun } from '#infra/cli/plan.ts';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeleteObjectCommand, GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { LocalRuntime, type ExecutionRecord } from '#infra/local/runtime.ts';
import { dynamoClient } from '#shared/clients/aws.ts';
import { cacheSaving, costOf, formatUsd, usageOfStats, usageOfStep } from '#shared/cost/usage.ts';
import { readOutcomes } from '#shared/fan-out.ts';
import { cachePartition } from '#shared/table.ts';
import { getArtifactVersion, listArtifactVersions } from '#shared/artifacts.ts';
import { ProbeConfig } from '#pipelines/probe/config.ts';
import { PROBE_PIPELINE } from '#pipelines/probe/stack.ts';
import { assertRunCost } from '../support/run-cost.ts';
import { assertPlanMatchesRun } from '../support/plan.ts';

const config = (overrides: Record<string, unknown> = {}) => ProbeConfig.parse({ items: [1, 2, 3], ...overrides });

describe('probe pipeline on the embedded runtime', () => {
  let runtime: LocalRuntime;
  let dataDir: string;
  const run = (overrides: Record<string, unknown> = {}): Promise<ExecutionRecord> => runtime.startExecution('probe', { config: config(overrides) }).done;
  const where = () => ({ table: runtime.resources.tables[0]!, bucket: runtime.resources.buckets[0]! });

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'fp-probe-'));
    runtime = await LocalRuntime.start({ dataDir, retryDelayMs: 1 });
  });
  after(async () => {
    await runtime.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('runs every step kind and publishes the summary artifact', async () => {
    const record = await run({ items: [1, 2, 3, 5] });
    assert.equal(record.status, 'SUCCEEDED', record.cause);
    await assertRunCost(record);
    const output = record.output as {
      total: number;
      artifact: { name: string; version: number };
      steps: { square: { ok: boolean; value: { square: number } }[] };
    };
    assert.equal(output.total, 1 + 4 + 9 + 25);
    assert.deepEqual(
      output.steps.square.map((s) => s.value.square),
      [1, 4, 9, 25],
    );
    assert.equal(record.stats.batchJobs, 1);
    // config + prepare + 4 squares + publish
    assert.equal(record.stats.lambdaInvocations, 7);
    // What the cost model prices: each invocation billed at least 1 ms at its memory size, and
    // the sum job's seconds with what it asks for on AWS (Fargate, the CPU queue).
    const usage = usageOfStats(record.stats);
    assert.ok(usage.lambda.billedMs >= 7, `billed ${usage.lambda.billedMs} ms`);
    assert.ok(usage.lambda.gbSeconds >= (usage.lambda.billedMs / 1000) * (128 / 1024) - 1e-9);
    assert.equal(usage.batch.length, 1);
    assert.equal(usage.batch[0]!.platform, 'FARGATE');
    assert.ok(usage.batch[0]!.vcpus >= 0.25 && usage.batch[0]!.memoryMiB >= 512, JSON.stringify(usage.batch[0]));
    assert.ok(usage.batch[0]!.seconds > 0);
    const cost = costOf(usage);
    assert.ok(cost.lowUsd > 0 && cost.lowUsd === cost.highUsd, 'no EC2: one figure');
    assert.deepEqual(cost.unpriced, []);
    const artifact = await getArtifactVersion(where(), 'probe-summary', output.artifact.version);
    assert.deepEqual(artifact.metrics, { total: 39, count: 4 });
    assert.equal(artifact.executionId, record.executionArn);
    const summary = await new S3Client({ forcePathStyle: true }).send(
      new GetObjectCommand({ Bucket: where().bucket, Key: new URL(artifact.files[0]!.uri).pathname.slice(1) }),
    );
    assert.equal(JSON.parse(await summary.Body!.transformToString()).total, 39);
  });

  it('reruns fully cached: the same output, zero Batch jobs, and no Lambda but the config check', async () => {
    const first = await run({ items: [7, 8] });
    const second = await run({ items: [7, 8] });
    assert.equal(second.status, 'SUCCEEDED');
    assert.deepEqual(second.output, first.output);
    assert.equal(second.stats.lambdaInvocations, 1, 'the config check only');
    assert.equal(second.stats.batchJobs, 0);
    // The cached rerun pays no Batch job and one Lambda; it still walks the state machine, and
    // for a run this small its transitions are most of the cost (the cache check states included).
    const cold = costOf(usageOfStats(first.stats));
    const warm = costOf(usageOfStats(second.stats));
    assert.ok(warm.highUsd < cold.highUsd, `cached rerun $${warm.highUsd} against cold $${cold.highUsd}`);
    assert.equal(warm.lines.filter((l) => l.item.startsWith('Batch')).length, 0);
    assert.ok(second.stats.statesEntered <= first.stats.statesEntered);
    // What the cache saved: every cached step hit, each entry computed by the cold run; the
    // saving is the cold run's cost of exactly those steps.
    assert.deepEqual(
      (second.stats.cacheHits ?? []).map((h) => h.step),
      ['prepare', 'square-item', 'square-item', 'sum', 'publish'],
    );
    assert.ok((second.stats.cacheHits ?? []).every((h) => h.executionArn === first.executionArn));
    const saving = cacheSaving(second.stats.cacheHits ?? [], (arn) => (arn === first.executionArn ? first.stats.steps : undefined));
    const coldSteps = ['prepare', 'square-item', 'sum', 'publish'].reduce((sum, step) => sum + costOf(usageOfStep(first.stats.steps![step]!)).highUsd, 0);
    assert.equal(saving.priced, 5);
    assert.ok(Math.abs(saving.highUsd - coldSteps) < 1e-12, `${saving.highUsd} vs ${coldSteps}`);
    assert.ok(saving.highUsd > warm.highUsd, 'the rerun saved more than it cost');
    // The rerun's line says both: its own cost, and the saving of its 5 hits, priced from the cold run.
    await assertRunCost(second);
    assert.ok(
      second.runCost!.line.includes(`; its 5 cache hits saved ${formatUsd(coldSteps)}, those steps' cost in the runs that computed them.`),
      second.runCost!.line,
    );
  });

  it('keys each fan-out item by its own input: one cache entry per item', async () => {
    await run({ items: [11, 12, 13] });
    const out = await dynamoClient().send(
      new QueryCommand({
        TableName: where().table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': cachePartition(PROBE_PIPELINE, 'square-item') },
      }),
    );
    const inputs = new Set((out.Items ?? []).map((i) => i.inputs as string));
    for (const x of [11, 12, 13]) assert.ok(inputs.has(JSON.stringify({ x })), `no cache entry for item ${x}`);
  });

  it('recomputes a cached step whose S3 outputs were deleted (a hit with dangling URIs is a miss)', async () => {
    await run({ items: [21, 22] });
    // The sum job's summary.json, listed in its cached result's s3Outputs.
    const entries = await dynamoClient().send(
      new QueryCommand({
        TableName: where().table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': cachePartition(PROBE_PIPELINE, 'sum') },
      }),
    );
    const entry = entries.Items!.find((i) => i.inputs === JSON.stringify({ values: [441, 484], fault: 'none' }))!;
    const [output] = JSON.parse(entry.s3Outputs as string) as { Bucket: string; Key: string }[];
    await new S3Client({ forcePathStyle: true }).send(new DeleteObjectCommand({ Bucket: output!.Bucket, Key: output!.Key }));
    const second = await run({ items: [21, 22] });
    assert.equal(second.status, 'SUCCEEDED', second.cause);
    assert.equal(second.stats.batchJobs, 1, 'the sum job runs again');
    // prepare and the squares stay cached; the config check, and publish for the new summary file.
    assert.equal(second.stats.lambdaInvocations, 2);
    assert.equal((second.output as { total: number }).total, 441 + 484);
  });

  it('publishes a new version instead of overwriting, and records lineage', async () => {
    const first = await run({ items: [31] });
    const parent = (first.output as { artifact: { version: number } }).artifact.version;
    const second = await run({ items: [32], lineage: [{ name: 'probe-summary', version: parent }] });
    assert.equal(second.status, 'SUCCEEDED', second.cause);
    const child = await getArtifactVersion(where(), 'probe-summary', (second.output as { artifact: { version: number } }).artifact.version);
    assert.ok(child.version > parent);
    assert.deepEqual(child.lineage, [{ name: 'probe-summary', version: parent }]);
    const versions = await listArtifactVersions(where(), 'probe-summary');
    assert.equal(new Set(versions.map((v) => v.version)).size, versions.length);
  });

  it('a Lambda that throws fails its fan-out item; beyond the tolerance the run fails with FanOutFailed', async () => {
    const record = await run({ items: [2, -3, 4] });
    assert.equal(record.status, 'FAILED');
    assert.equal(record.error, 'FanOutFailed');
  });

  it('at the schema limits, every item failing: the run completes, records each failure, and its state stays bounded', async () => {
    // 200 items (the most), each failing in the fan-out and in the Distributed Map, and the longest
    // label at its worst escaping.
    const items = Array.from({ length: 200 }, (_, i) => -1 - i);
    const record = await run({ items, maxFailures: 200, distributed: true, maxFailurePercent: 100, label: '\u0001"\\'.repeat(67).slice(0, 200) });
    assert.equal(record.status, 'SUCCEEDED', record.cause);
    const output = record.output as { total: number; steps: { square: unknown[] } };
    assert.equal(output.total, 0);
    const outcomes = await readOutcomes(output.steps.square, 'square');
    assert.equal(outcomes.length, 200);
    outcomes.forEach((o, i) => {
      assert.ok(!o.ok);
      assert.match(o.cause, new RegExp(`item ${-1 - i} is negative`));
    });
    const { largestState } = record.stats;
    console.log(`probe at its limits: largest state ${largestState.bytes} bytes (${largestState.name})`);
    assert.ok(largestState.bytes < 128 * 1024, `${largestState.name}: ${largestState.bytes} bytes`);
    // Within the plan's bound, every record a failure.
    const bound = planRun(
      pipelineNamed('probe'),
      config({ items, maxFailures: 200, distributed: true, maxFailurePercent: 100, label: '\u0001"\\'.repeat(67).slice(0, 200) }),
    ).payload.bytes;
    assert.ok(largestState.bytes <= bound, `${largestState.bytes} > ${bound}`);
  });

  it("plans a failed item's path exactly: within the tolerance and past it", async () => {
    // Items no other test runs, so every step is a cache miss, as a plan assumes. (A run whose
    // items all fail sums nothing, as the schema-limits test's does: its later steps would hit.)
    for (const overrides of [
      { items: [51, -52, 53], maxFailures: 1 },
      { items: [61, -62], maxFailures: 0 },
    ]) {
      const record = await run(overrides);
      assert.equal(record.status, overrides.maxFailures ? 'SUCCEEDED' : 'FAILED', `${JSON.stringify(overrides)}: ${record.cause}`);
      assertPlanMatchesRun(PROBE_PIPELINE, config(overrides), record);
    }
  });

  it('within the tolerance, the failed item is recorded with its error and the run goes on', async () => {
    const record = await run({ items: [2, -3, 4], maxFailures: 1 });
    assert.equal(record.status, 'SUCCEEDED', record.cause);
    const output = record.output as { total: number; steps: { square: { ok: boolean; causeUri?: string }[] } };
    assert.equal(output.total, 4 + 16);
    // The record holds the error's name, the item and where the cause went; the cause is read back from S3.
    assert.match(output.steps.square.find((s) => !s.ok)!.causeUri!, /^s3:\/\/.*\/runs\/probe\/.*\/square\/failures\/[0-9a-f-]+\.txt$/);
    const failed = (await readOutcomes(output.steps.square, 'square')).filter((s) => !s.ok);
    assert.equal(failed.length, 1);
    assert.equal(failed[0]!.error, 'NegativeItem');
    assert.match(failed[0]!.cause, /item -3 is negative/);
    assert.deepEqual(failed[0]!.item, { item: -3 });
  });

  it('a Batch job that exits non-zero fails the run with States.TaskFailed and its exit code', async () => {
    const record = await run({ items: [41], jobFault: 'exit' });
    assert.equal(record.status, 'FAILED');
    assert.equal(record.error, 'States.TaskFailed');
    const cause = JSON.parse(record.cause!) as { Status: string; Container: { ExitCode: number }; StderrTail: string };
    assert.equal(cause.Container.ExitCode, 3);
    assert.match(cause.StderrTail, /fault drill/);
  });

  it("a job timeout set at submit under Batch's 60 s minimum is refused, as AWS does, naming the field", async () => {
    const record = await run({ items: [43], jobTimeoutSeconds: 30 });
    assert.equal(record.status, 'FAILED');
    assert.equal(record.error, 'Batch.ClientException');
    assert.match(record.cause ?? '', /Timeout\.AttemptDurationSeconds: must be an integer of at least 60 seconds \(got 30\)/);
  });

  it('a Batch job that writes no result.json fails the run with JobResultMissing', async () => {
    const record = await run({ items: [42], jobFault: 'no-result' });
    assert.equal(record.status, 'FAILED');
    assert.equal(record.error, 'JobResultMissing');
    assert.match(record.cause!, /wrote no result\.json/);
  });

  it("the plan's largest padding runs, cold and from the cache, within the plan's bound of its largest state", async () => {
    const probe = pipelineNamed('probe');
    const over = config({ items: [44], padKiB: 300 });
    const [breach] = limitBreaches(probe, over);
    const padKiB = breach!.driver!.largestFitting!;
    const fitting = config({ items: [44], padKiB });
    const bound = planRun(probe, fitting).payload.bytes;
    assert.ok(bound <= 256 * 1024);
    for (const which of ['cold', 'cached']) {
      const record = await run({ items: [44], padKiB });
      assert.equal(record.status, 'SUCCEEDED', `${which}: ${record.error}: ${record.cause}`);
      assert.ok(record.stats.largestState.bytes <= bound, `${which}: ${JSON.stringify(record.stats.largestState)} over ${bound}`);
      if (which === 'cached')
        assert.ok(
          (record.stats.cacheHits ?? []).some((h) => h.step === 'prepare'),
          'prepare came from the cache',
        );
    }
  });

  it('a state output over 256 KiB fails the run naming the state, as AWS does', async () => {
    const record = await run({ items: [43], padKiB: 300 });
    assert.equal(record.status, 'FAILED');
    assert.equal(record.error, 'States.DataLimitExceeded');
    assert.match(record.cause!, /"prepare: Invoke"/);
  });

  it('a failed run leaves the cache, the artifact index and earlier results as they were', async () => {
    const before = await listArtifactVersions(where(), 'probe-summary');
    const cached = await run({ items: [7, 8] });
    assert.equal(cached.stats.lambdaInvocations, 1, 'the config check only');
    const failed = await run({ items: [7, 8], jobFault: 'exit' });
    assert.equal(failed.status, 'FAILED');
    const again = await run({ items: [7, 8] });
    assert.equal(again.stats.lambdaInvocations, 1, 'the config check only');
    assert.equal(again.stats.batchJobs, 0);
    assert.deepEqual(await listArtifactVersions(where(), 'probe-summary'), before);
  });

  it('a Distributed Map reads its items from S3 and writes every result, failures included, to S3', async () => {
    const record = await run({ items: [3, -4, 5, 6], maxFailures: 1, distributed: true, maxFailurePercent: 30 });
    assert.equal(record.status, 'SUCCEEDED', record.cause);
    const { manifest } = (record.output as { steps: { recheck: { manifest: { Bucket: string; Key: string } } } }).steps.recheck;
    const s3 = new S3Client({ forcePathStyle: true });
    const read = async (key: string) =>
      JSON.parse(await (await s3.send(new GetObjectCommand({ Bucket: manifest.Bucket, Key: key }))).Body!.transformToString());
    const files = (await read(manifest.Key)) as { ResultFiles: { SUCCEEDED: { Key: string }[]; FAILED: { Key: string }[] } };
    const succeeded = (await read(files.ResultFiles.SUCCEEDED[0]!.Key)) as { Output: string }[];
    const failed = (await read(files.ResultFiles.FAILED[0]!.Key)) as { Input: string; Error: string; Cause: string }[];
    assert.deepEqual(
      succeeded.map((r) => (JSON.parse(r.Output) as { result: { square: number } }).result.square).sort((a, b) => a - b),
      [9, 25, 36],
    );
    assert.equal(failed.length, 1);
    assert.equal(failed[0]!.Error, 'NegativeItem');
    assert.deepEqual(JSON.parse(failed[0]!.Input), { item: -4, index: 1 });
  });

  it('a Distributed Map past its tolerated failure percentage fails the run with States.ExceedToleratedFailureThreshold', async () => {
    const record = await run({ items: [3, -4, 5, 6], maxFailures: 1, distributed: true, maxFailurePercent: 20 });
    assert.equal(record.status, 'FAILED');
    assert.equal(record.error, 'States.ExceedToleratedFailureThreshold');
    assert.match(record.cause!, /1 of 4 items failed, over the tolerated 20 %/);
  });

  it('starts from the trigger input shape as well as from a config', async () => {
    const record = await runtime.startExecution('probe', { trigger: { bucket: where().bucket, key: 'uploads/probe/t/manifest.json' } }).done;
    assert.equal(record.status, 'SUCCEEDED', record.cause);
    assert.equal((record.output as { total: number }).total, 1 + 4 + 9);
  });
});
