/**
 * Molecular discovery at its limits, every oracle job failing: a pool file under the longest key
 * a config takes, with ids of the most characters a line may have (256) and 100,000-character lines that are no
 * molecule,
 * the widest round a config allows (100 oracle jobs of one molecule each), as many such rounds as
 * the history holds, and every other
 * setting at its maximum. No xtb is installed, so each job fails. The round's approval email
 * lists its 100 molecules, and after Approve the record step fails the run naming the first
 * job's error; the state, which holds a record per job, stays far below 256 KiB throughout.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import type { ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { s3Client } from '#shared/clients/aws.ts';
import { buildDefaultPool, MAX_POOL_ID_CHARS } from '#shared/molecules/pool.ts';
import { MAX_S3_URI_CHARS } from '#shared/schema.ts';
import { planRun } from '#infra/cli/plan.ts';
import { MoleculesConfig } from '#pipelines/molecules/config.ts';
import { MOLECULES_PIPELINE } from '#pipelines/molecules/stack.ts';
import { decide, runAnswering } from '../support/approvals.ts';
import { startTestRuntime, stopTestRuntime, type ParsedEmail } from '../support/runtime.ts';

describe('molecular discovery at its limits, every oracle job failing', () => {
  let rt: LocalRuntime;
  let run: { record: ExecutionRecord; emails: ParsedEmail[] };
  let page = '';
  let config: MoleculesConfig;

  before(
    async () => {
      // The runtime hands its PATH to jobs: one without xtb on it, so every oracle job fails.
      const path = process.env.PATH;
      process.env.PATH = '/nonexistent-bin';
      try {
        rt = await startTestRuntime({ pipelines: [pipelineNamed(MOLECULES_PIPELINE)] });
      } finally {
        process.env.PATH = path;
      }
      const bucket = rt.resources.buckets[0]!;
      // The longest pool URI a config takes.
      const prefix = `s3://${bucket}/uploads/pools/`;
      // In folders of 200 characters: the local S3 keeps each object as a file, and a file name
      // has at most 255 bytes (S3 itself takes a 1,024-byte key in one piece).
      const long = 'p'.repeat(MAX_S3_URI_CHARS - prefix.length - 4);
      const key = `uploads/pools/${long.replace(/(.{199})./g, '$1/')}.smi`;
      const pool = await buildDefaultPool({ maxSubstituents: 1 });
      const lines = [
        ...pool.molecules.slice(0, 300).map((m, i) => `${m.smiles} ${String(i).padStart(4, '0')}${'i'.repeat(MAX_POOL_ID_CHARS - 4)}`),
        ...Array.from({ length: 5 }, (_, i) => `${String.fromCharCode(65 + i)}${'(C'.repeat(50_000)}`),
      ];
      await s3Client().send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: lines.join('\n') }));
      config = MoleculesConfig.parse({
        pool: { uri: `s3://${bucket}/${key}`, maxSubstituents: 2, maxHeavyAtoms: 100 },
        sampleSize: 100,
        hitPercent: 50,
        // The most rounds of 100 jobs the history holds (4: 21,825 events; the schema refuses 5: 26,174).
        rounds: 4,
        batchSize: 50,
        explorationFraction: 1,
        acquisition: 'lcb',
        oracle: { timeoutSeconds: 3600, chunkSize: 1, parallel: 16, seed: 2 ** 30 },
        approvalTimeoutSeconds: 2_000_000,
        seed: 2 ** 30,
      });
      assert.equal(`s3://${bucket}/${key}`.length, MAX_S3_URI_CHARS);
      run = await runAnswering(rt, rt.startExecution(MOLECULES_PIPELINE, { config }), async (email) => {
        page = await decide(email, 'approve');
      });
    },
    { timeout: 15 * 60_000 },
  );
  after(() => stopTestRuntime(rt));

  it('asks once for the widest round, and fails it naming the first failed job', () => {
    assert.equal(run.emails.length, 1, `${run.record.status} ${run.record.error}: ${run.record.cause}`);
    assert.equal(run.record.status, 'FAILED');
    assert.equal(run.record.error, 'OracleJobFailed', run.record.cause);
    assert.match(String(run.record.cause), /XtbMissingError/);
    assert.match(run.emails[0]!.text, /Items \(100\): Round 0/);
    assert.match(page, /Pool #/);
  });

  it('holds a record per job in a state far below 256 KiB', () => {
    const { largestState } = run.record.stats;
    console.log(`molecules at its limits, every job failing: largest state ${largestState.bytes} bytes (${largestState.name})`);
    assert.ok(largestState.bytes < 128 * 1024, `${largestState.name}: ${largestState.bytes} bytes`);
    // The plan's bound of the largest state (its worst case) holds at the limits, every record a failure.
    const plan = planRun(pipelineNamed(MOLECULES_PIPELINE), config);
    console.log(`molecules at its limits: the plan's bound ${plan.payload.bytes} bytes`);
    assert.ok(largestState.bytes <= plan.payload.bytes, `${largestState.bytes} > ${plan.payload.bytes}`);
  });
});
