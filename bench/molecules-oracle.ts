/**
 * The xTB oracle job's throughput against raw xtb on the same 50 molecules (goal: ratio >= 0.9).
 * Run alone with `tsx bench/molecules-oracle.ts`, or call `measureOracle()` from the bench runner.
 *
 * 1. 50 molecules drawn from the default pool with a fixed seed.
 * 2. Raw: `xtb mol.xyz --gfn 2 --opt --json`, one molecule after another, each in its own
 *    directory, from the starting geometry the oracle uses (startGeometry, seed 0), one OpenMP
 *    thread as in the oracle. Only the xtb processes are timed.
 * 3. Oracle: the real job end to end, as the embedded runtime runs it: the spec written to
 *    s3rver, the job started by the runtime's BatchHost from the synthesized BatchJob's metadata
 *    (a child process: Node, tsx, RDKit's start-up included), result.json read back. Sequential
 *    too (`parallel: 1`), so both sides use one core. Its bond-graph retries count against it.
 * 4. Two rounds, raw and oracle interleaved, the faster of each kept: other work on the machine
 *    slows one round, not both.
 *
 * `ratio` is the oracle's molecules/s over raw's; `perRunRatio` is the same per xtb run, which
 * leaves out the oracle's retries (a second xtb run from another start when the first changed
 * the molecule) and so shows what the job itself costs around xtb.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { JobQueue } from 'aws-cdk-lib/aws-batch';
import { TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { Bucket } from 'aws-cdk-lib/aws-s3';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { buildDefaultPool } from '#shared/molecules/pool.ts';
import { startGeometry, toXyz } from '#shared/molecules/xtb.ts';
import { seededRandom } from '#shared/random.ts';
import { BatchJob } from '#pipelines/steps/batch-job.ts';
import { META } from '#pipelines/steps/function.ts';
import { BatchHost, type LocalJobDefinition } from '#infra/local/batch-host.ts';
import { startS3rver } from '#infra/local/emulators.ts';
import { LOCAL_KEY, LOCAL_REGION } from '#infra/local/resolve.ts';

export interface OracleFigures {
  readonly molecules: number;
  readonly sampleSeed: number;
  readonly rawSeconds: number;
  readonly rawMoleculesPerSecond: number;
  /** xtb runs that exited non-zero in the raw loop. */
  readonly rawFailures: number;
  readonly oracleSeconds: number;
  readonly oracleMoleculesPerSecond: number;
  /** Oracle molecules/s over raw molecules/s. */
  readonly ratio: number;
  readonly goal: number;
  readonly oracleOk: number;
  readonly oracleFailed: number;
  /** xtb runs the oracle made: one per molecule plus one per bond-check retry. */
  readonly oracleXtbRuns: number;
  /** Oracle xtb runs/s over raw xtb runs/s (one run per molecule there). */
  readonly perRunRatio: number;
  /** The oracle's end-to-end time outside its measuring loop: process start, modules, S3 spec and result. */
  readonly oracleJobOverheadSeconds: number;
  readonly rounds: number;
}

const MOLECULES = 50;
const SAMPLE_SEED = 5;
const BUCKET = 'bench-oracle';
const ROUNDS = 2;

/** `count` distinct pool molecules, the same on every machine (a seeded partial Fisher-Yates shuffle). */
async function sampleDefaultPool(count: number, seed: number): Promise<string[]> {
  const pool = (await buildDefaultPool()).molecules.map((m) => m.smiles);
  const random = seededRandom(seed);
  for (let i = 0; i < count; i++) {
    const j = i + Math.floor(random() * (pool.length - i));
    [pool[i], pool[j]] = [pool[j]!, pool[i]!];
  }
  return pool.slice(0, count);
}

function runXtb(dir: string): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn('xtb', ['mol.xyz', '--gfn', '2', '--opt', '--json'], {
      cwd: dir,
      env: { ...process.env, OMP_NUM_THREADS: '1', OMP_STACKSIZE: '500M' },
      stdio: 'ignore',
    });
    child.on('error', reject);
    child.on('close', resolve);
  });
}

/** Raw xtb over the molecules, sequentially; the geometries are written before the clock starts. */
async function rawXtb(smiles: readonly string[], work: string): Promise<{ seconds: number; failures: number }> {
  const dirs: string[] = [];
  for (const [i, s] of smiles.entries()) {
    const dir = join(work, `raw-${i}`);
    dirs.push(dir);
    const start = await startGeometry(s, 0);
    mkdirSync(dir); // a directory per molecule, as the oracle has
    writeFileSync(join(dir, 'mol.xyz'), toXyz(start.atoms, s));
  }
  let failures = 0;
  const t0 = performance.now();
  for (const dir of dirs) if ((await runXtb(dir)) !== 0) failures += 1;
  return { seconds: (performance.now() - t0) / 1000, failures };
}

/** The oracle's local job definition, read from a synthesized BatchJob as LocalRuntime reads it. */
function oracleJobDefinition(): LocalJobDefinition {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(app, 'BenchOracle', { env: { account: '123456789012', region: LOCAL_REGION } });
  new BatchJob(stack, 'Oracle', {
    job: 'molecules-oracle',
    entry: 'main.ts',
    resources: {
      bucket: Bucket.fromBucketName(stack, 'Bucket', BUCKET),
      table: TableV2.fromTableName(stack, 'Table', 'bench-table'),
      gpuQueue: JobQueue.fromJobQueueArn(stack, 'GpuQueue', `arn:aws:batch:${LOCAL_REGION}:123456789012:job-queue/gpu`),
      cpuQueue: JobQueue.fromJobQueueArn(stack, 'CpuQueue', `arn:aws:batch:${LOCAL_REGION}:123456789012:job-queue/cpu`),
      signingSecret: Secret.fromSecretNameV2(stack, 'Signing', 'signing'),
      anthropicSecret: Secret.fromSecretNameV2(stack, 'Anthropic', 'anthropic'),
      senderEmail: 'bench@example.com',
      approverEmail: 'bench@example.com',
      approvalApiUrl: 'https://approvals.example.com',
    },
  });
  const [resource] = Object.values(Template.fromStack(stack).findResources('AWS::Batch::JobDefinition')) as { Metadata: Record<string, unknown> }[];
  rmSync(app.outdir, { recursive: true, force: true });
  return {
    arn: 'bench-oracle',
    name: 'Oracle',
    jobDir: resource!.Metadata[META.jobDir] as string,
    command: resource!.Metadata[META.jobCommand] as string[],
    environment: {},
    timeoutSeconds: 3600,
  };
}

interface OracleRun {
  readonly seconds: number;
  /** The job's own summary.wallSeconds: its measuring loop. */
  readonly loopSeconds: number;
  readonly ok: number;
  readonly failed: number;
  readonly xtbRuns: number;
}

/** The oracle job end to end: spec into s3rver, the job through the BatchHost, result.json back. */
async function oracleJob(smiles: readonly string[], work: string, definition: LocalJobDefinition): Promise<OracleRun> {
  const s3rver = await startS3rver(join(work, 's3'), 0);
  const s3 = new S3Client({
    forcePathStyle: true,
    endpoint: s3rver.url,
    region: LOCAL_REGION,
    credentials: { accessKeyId: LOCAL_KEY, secretAccessKey: LOCAL_KEY },
  });
  const host = new BatchHost(join(work, 'jobs'), {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    AWS_REGION: LOCAL_REGION,
    AWS_ACCESS_KEY_ID: LOCAL_KEY,
    AWS_SECRET_ACCESS_KEY: LOCAL_KEY,
    AWS_ENDPOINT_URL_S3: s3rver.url,
  });
  try {
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    const spec = {
      molecules: smiles.map((s, i) => ({ id: `m-${String(i).padStart(3, '0')}`, smiles: s })),
      xtb: { timeoutSeconds: 120, seed: 0 },
      parallel: 1,
    };
    const t0 = performance.now();
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'bench/spec.json', Body: JSON.stringify(spec) }));
    await host.run(definition, 'oracle-bench', { JOB_SPEC_URI: `s3://${BUCKET}/bench/spec.json`, OUTPUT_URI: `s3://${BUCKET}/bench/output/` });
    const out = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'bench/output/result.json' }));
    const result = JSON.parse(await out.Body!.transformToString()) as {
      measurements: { attempts: number }[];
      summary: { ok: number; failed: number; wallSeconds: number };
    };
    const seconds = (performance.now() - t0) / 1000;
    return {
      seconds,
      loopSeconds: result.summary.wallSeconds,
      ok: result.summary.ok,
      failed: result.summary.failed,
      xtbRuns: result.measurements.reduce((n, m) => n + m.attempts, 0),
    };
  } finally {
    host.stop();
    s3.destroy();
    await s3rver.close();
  }
}

export async function measureOracle(): Promise<OracleFigures> {
  const smiles = await sampleDefaultPool(MOLECULES, SAMPLE_SEED);
  const definition = oracleJobDefinition();
  let raw: { seconds: number; failures: number } | undefined;
  let oracle: OracleRun | undefined;
  for (let round = 0; round < ROUNDS; round++) {
    const work = mkdtempSync(join(tmpdir(), 'fp-bench-oracle-'));
    try {
      const r = await rawXtb(smiles, work);
      if (!raw || r.seconds < raw.seconds) raw = r;
      const o = await oracleJob(smiles, work, definition);
      if (!oracle || o.seconds < oracle.seconds) oracle = o;
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
  return figuresOf(smiles.length, raw!, oracle!);
}

function figuresOf(molecules: number, raw: { seconds: number; failures: number }, oracle: OracleRun): OracleFigures {
  const rawRate = molecules / raw.seconds;
  const oracleRate = molecules / oracle.seconds;
  return {
    molecules,
    sampleSeed: SAMPLE_SEED,
    rawSeconds: raw.seconds,
    rawMoleculesPerSecond: rawRate,
    rawFailures: raw.failures,
    oracleSeconds: oracle.seconds,
    oracleMoleculesPerSecond: oracleRate,
    ratio: oracleRate / rawRate,
    goal: 0.9,
    oracleOk: oracle.ok,
    oracleFailed: oracle.failed,
    oracleXtbRuns: oracle.xtbRuns,
    perRunRatio: oracle.xtbRuns / oracle.seconds / rawRate,
    oracleJobOverheadSeconds: oracle.seconds - oracle.loopSeconds,
    rounds: ROUNDS,
  };
}

/** One line for the bench output. */
export function describeOracle(f: OracleFigures): string {
  return (
    `xTB oracle, ${f.molecules} pool molecules, one core: raw xtb ${f.rawMoleculesPerSecond.toFixed(2)} molecules/s (${f.rawSeconds.toFixed(1)} s), ` +
    `oracle job ${f.oracleMoleculesPerSecond.toFixed(2)} molecules/s (${f.oracleSeconds.toFixed(1)} s end to end), ratio ${f.ratio.toFixed(3)} (goal >= ${f.goal}); ` +
    `oracle ok ${f.oracleOk}, failed ${f.oracleFailed}, ${f.oracleXtbRuns} xtb runs (raw: ${f.molecules}, ${f.rawFailures} exited non-zero), ` +
    `per xtb run ${f.perRunRatio.toFixed(3)}; job start and S3 ${f.oracleJobOverheadSeconds.toFixed(1)} s; fastest of ${f.rounds} interleaved rounds`
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(describeOracle(await measureOracle()));
}
