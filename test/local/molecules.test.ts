/**
 * Closed-loop molecular discovery end to end on the embedded runtime, at the `test` size: the
 * synthesized state machine builds the pool, emails each batch, waits (doing nothing) until the
 * link in the email is followed and Approve posted, measures the batch with the real xtb job,
 * refits and goes again, then publishes the report. A rerun takes every molecule from the oracle
 * cache (no job, no email); a pool file with bad lines is counted and a Reject ends the loop
 * keeping what was measured; a pool file that does not parse fails the run naming it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import type { ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { getArtifactVersion } from '#shared/artifacts.ts';
import { buildDefaultPool } from '#shared/molecules/pool.ts';
import { campaignSummary } from '#shared/molecules/discovery.ts';
import { readCampaign } from '#shared/molecules/store.ts';
import { dynamoClient, s3Client } from '#shared/clients/aws.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import { MOLECULES_SIZES, MoleculesConfig } from '#pipelines/molecules/config.ts';
import { DISCOVERY_ARTIFACT, MOLECULES_PIPELINE } from '#pipelines/molecules/stack.ts';
import { startTestRuntime, stopTestRuntime, type ParsedEmail } from '../support/runtime.ts';
import { decide, runAnswering } from '../support/approvals.ts';
import { assertPlanMatchesRun } from '../support/plan.ts';
import { assertRunCost } from '../support/run-cost.ts';

interface RunOutput {
  campaignUri: string;
  metrics: Record<string, number>;
  reportUri: string;
  artifact: { name: string; version: number };
}

async function readText(uri: string): Promise<string> {
  const out = await s3Client().send(new GetObjectCommand(parseS3Uri(uri)));
  return out.Body!.transformToString();
}

/**
 * Child processes of this process (a Batch job or xtb would be one), leaving out the idle
 * transform service the TypeScript loader keeps for this test process itself.
 */
function childProcesses(): string[] {
  try {
    return execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)], { encoding: 'utf8' })
      .split('\n')
      .filter((line) => line.trim() && !/\bps\b -o/.test(line) && !/esbuild --service/.test(line));
  } catch {
    return []; // ps exits 1 when there are none
  }
}

/** How long the CPU of the waiting runtime is measured. */
const IDLE_WINDOW_MS = 2000;

describe('molecular discovery on the embedded runtime (test size)', () => {
  let rt: LocalRuntime;
  const config = MoleculesConfig.parse(MOLECULES_SIZES.test);
  let cold: { record: ExecutionRecord; emails: ParsedEmail[] };
  const idle: { counters: string; children: string[]; cpuMs: number }[] = [];
  let firstPage = '';

  before(async () => {
    rt = await startTestRuntime({ pipelines: [pipelineNamed(MOLECULES_PIPELINE)] });
    const execution = rt.startExecution(MOLECULES_PIPELINE, { config });
    cold = await runAnswering(rt, execution, async (email, index) => {
      if (index === 0) {
        // While the gate waits, nothing of ours runs: no Lambda, no job, no child process. The CPU
        // is measured after half a second, when what sent the email (its Lambda's worker, the
        // emulators' writes, a collection) has settled, over a window long enough that a few
        // milliseconds of housekeeping do not count as work.
        const before = JSON.stringify(rt.counters());
        await new Promise((resolve) => setTimeout(resolve, 500));
        const cpu = process.cpuUsage();
        await new Promise((resolve) => setTimeout(resolve, IDLE_WINDOW_MS));
        const used = process.cpuUsage(cpu);
        idle.push({ counters: `${before} -> ${JSON.stringify(rt.counters())}`, children: childProcesses(), cpuMs: (used.user + used.system) / 1000 });
      }
      const page = await decide(email, 'approve');
      if (index === 0) firstPage = page;
    });
  });
  after(() => stopTestRuntime(rt));

  it('runs the sample and every round, each approved from its email, and publishes the report', async () => {
    const { record, emails } = cold;
    assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
    await assertRunCost(record);
    assert.equal(emails.length, 1 + config.rounds, 'one email per oracle batch');
    // Every batch approved: the high end of the plan's range, exactly.
    assertPlanMatchesRun(MOLECULES_PIPELINE, config, record);
    const out = record.output as RunOutput;
    const campaign = await readCampaign(out.campaignUri);
    const s = campaignSummary(campaign);
    assert.equal(campaign.stopped?.reason, 'rounds');
    assert.deepEqual(
      campaign.rounds.map((r) => r.decision),
      ['approved', 'approved', 'approved'],
    );
    assert.equal(campaign.measurements.length, config.sampleSize + 2 * config.rounds * config.batchSize);
    assert.equal(s.surrogate.calls, config.rounds * config.batchSize);
    assert.equal(s.random.calls, config.rounds * config.batchSize);
    // No molecule measured twice, in the run or by the oracle.
    assert.equal(new Set(campaign.measurements.map((m) => m.smiles)).size, campaign.measurements.length);
    assert.equal(s.oracleCalls, campaign.measurements.length);
    const ok = campaign.measurements.filter((m) => m.result.ok);
    assert.ok(
      ok.length >= campaign.measurements.length - 3,
      `most molecules measured: ${JSON.stringify(campaign.measurements.filter((m) => !m.result.ok).map((m) => m.result.reason))}`,
    );
    assert.ok(
      ok.every((m) => m.result.gap! > 0.5 && m.result.gap! < 15),
      'gaps in eV',
    );
    assert.ok(campaign.threshold && campaign.threshold.sampleMeasured >= config.sampleSize - 2);
    // Predictions were recorded before measuring, and calibration reported per round.
    assert.ok(campaign.rounds.slice(1).every((r) => r.calibration && r.calibration.n > 0 && r.calibration.mae !== null));
    // The report, published.
    assert.equal(out.artifact.name, DISCOVERY_ARTIFACT);
    const version = await getArtifactVersion({ table: rt.resources.tables[0]!, bucket: rt.resources.buckets[0]! }, DISCOVERY_ARTIFACT, out.artifact.version);
    assert.equal(version.metrics.surrogateHits, s.surrogate.hits);
    assert.ok(version);
    const html = await readText(out.reportUri);
    assert.match(html, new RegExp(`<strong id="surrogate-hits">${s.surrogate.hits}</strong>`));
    assert.match(html, /id="top"/);
    assert.equal(out.metrics.surrogateCalls, s.surrogate.calls);
  });

  it('emails the batch: SMILES, predicted gap with uncertainty, arm and drawing, with the link', () => {
    const [first, second] = cold.emails;
    // Round 0: the random sample, no predictions yet.
    assert.match(first!.text, /Round 0: a random sample/);
    assert.equal((first!.html.match(/src="data:image\/svg\+xml;base64,/g) ?? []).length, config.sampleSize);
    // Round 1: the surrogate's picks and the random baseline's, each predicted.
    assert.match(second!.text, /\d+\.\d\d ± \d+\.\d\d eV/);
    for (const arm of ['exploit', 'random']) assert.match(second!.text, new RegExp(arm));
    assert.equal((second!.html.match(/src="data:image\/svg\+xml;base64,/g) ?? []).length, 2 * config.batchSize);
    // The page behind the link shows the same batch.
    assert.equal((firstPage.match(/<tr data-item-index=/g) ?? []).length, config.sampleSize);
  });

  it('holds nothing while the gate waits: no Lambda, no job, no child process', () => {
    assert.equal(idle.length, 1);
    const [counts] = idle;
    const [before, after] = counts!.counters.split(' -> ');
    assert.equal(after, before, 'no Lambda invocation or job while waiting');
    assert.deepEqual(counts!.children, [], 'no child process while waiting');
    // The runtime, the emulators and the Lambda workers share this process: it sleeps. Anything
    // that polls (a loop over the callbacks, a job watcher) takes far more than a tenth of a core.
    assert.ok(counts!.cpuMs < IDLE_WINDOW_MS / 10, `this process used ${counts!.cpuMs} ms of CPU in ${IDLE_WINDOW_MS} ms of waiting`);
  });

  it('caches every measurement per molecule: a rerun measures nothing and asks nothing', async () => {
    const table = rt.resources.tables[0]!;
    const cacheItems = await dynamoClient().send(
      new ScanCommand({ TableName: table, FilterExpression: 'begins_with(pk, :p)', ExpressionAttributeValues: { ':p': 'ORACLE#' } }),
    );
    assert.equal(cacheItems.Items?.length, (cold.record.output as RunOutput).metrics.oracleCalls);
    const jobsBefore = rt.counters().batchJobs;
    const rerun = await runAnswering(rt, rt.startExecution(MOLECULES_PIPELINE, { config }), async () => {
      throw new Error('the rerun asked for approval');
    });
    assert.equal(rerun.record.status, 'SUCCEEDED', rerun.record.cause);
    assert.equal(rerun.emails.length, 0);
    assert.equal(rt.counters().batchJobs, jobsBefore, 'no oracle job');
    const campaign = await readCampaign((rerun.record.output as RunOutput).campaignUri);
    assert.equal(campaignSummary(campaign).oracleCalls, 0);
    assert.deepEqual(
      campaign.rounds.map((r) => r.decision),
      ['nothingToMeasure', 'nothingToMeasure', 'nothingToMeasure'],
    );
    const first = await readCampaign((cold.record.output as RunOutput).campaignUri);
    // Exact: the rerun's gaps are the cold run's, read back from the oracle cache (a JSON round trip).
    assert.deepEqual(
      campaign.measurements.map((m) => [m.smiles, m.result.gap]),
      first.measurements.map((m) => [m.smiles, m.result.gap]),
    );
  });

  it('counts bad lines of a pool file, and a Reject ends the loop keeping what was measured', async () => {
    const pool = await buildDefaultPool({ maxSubstituents: 1 });
    const lines = [
      '# a pool file: SMILES and an optional id',
      ...pool.molecules.slice(100, 160).map((m, i) => `${m.smiles} mol-${i}`),
      'c1ccccc1(',
      'C1CC',
      'not-a-smiles',
      'C[N+](C)(C)C',
    ];
    const bucket = rt.resources.buckets[0]!;
    await s3Client().send(new PutObjectCommand({ Bucket: bucket, Key: 'uploads/pools/small.smi', Body: lines.join('\n') }));
    const withFile = MoleculesConfig.parse({ ...MOLECULES_SIZES.test, pool: { uri: `s3://${bucket}/uploads/pools/small.smi` }, seed: 5 });
    const run = await runAnswering(rt, rt.startExecution(MOLECULES_PIPELINE, { config: withFile }), (email, index) =>
      decide(email, index === 0 ? 'approve' : 'reject').then(() => undefined),
    );
    assert.equal(run.record.status, 'SUCCEEDED', run.record.cause);
    assert.equal(run.emails.length, 2);
    const campaign = await readCampaign((run.record.output as RunOutput).campaignUri);
    assert.equal(campaign.pool.size, 60);
    assert.deepEqual(campaign.stopped, { reason: 'rejected', round: 1 });
    assert.equal(campaign.measurements.length, withFile.sampleSize);
    const html = await readText((run.record.output as RunOutput).reportUri);
    assert.match(html, /skipped: malformed 3, net_charge 1/);
    assert.match(html, /the loop ended: rejected/);
  });

  it('fails a run whose pool file does not parse, naming the file', async () => {
    const bucket = rt.resources.buckets[0]!;
    await s3Client().send(new PutObjectCommand({ Bucket: bucket, Key: 'uploads/pools/binary.smi', Body: Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]) }));
    const bad = MoleculesConfig.parse({ ...MOLECULES_SIZES.test, pool: { uri: `s3://${bucket}/uploads/pools/binary.smi` } });
    const record = await rt.startExecution(MOLECULES_PIPELINE, { config: bad }).done;
    assert.equal(record.status, 'FAILED');
    assert.match(`${record.error} ${record.cause}`, /PoolFileError/);
    assert.match(String(record.cause), /uploads\/pools\/binary\.smi/);
  });
});

describe('molecular discovery without xtb installed', () => {
  let rt: LocalRuntime;
  before(async () => {
    // The runtime hands its PATH to jobs: one without xtb on it.
    const path = process.env.PATH;
    process.env.PATH = '/nonexistent-bin';
    try {
      rt = await startTestRuntime({ pipelines: [pipelineNamed(MOLECULES_PIPELINE)] });
    } finally {
      process.env.PATH = path;
    }
  });
  after(() => stopTestRuntime(rt));

  it('fails the run at the first oracle batch with an error naming the Debian package, measuring nothing', async () => {
    const config = MoleculesConfig.parse({ ...MOLECULES_SIZES.test, seed: 9 });
    const run = await runAnswering(rt, rt.startExecution(MOLECULES_PIPELINE, { config }), (email) => decide(email, 'approve').then(() => undefined));
    assert.equal(run.emails.length, 1);
    assert.equal(run.record.status, 'FAILED');
    assert.equal(run.record.error, 'OracleJobFailed');
    assert.match(String(run.record.cause), /XtbMissingError/);
    assert.match(String(run.record.cause), /install Debian's xtb package \(apt-get install xtb\)/);
  });
});
