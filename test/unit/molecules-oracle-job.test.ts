/**
 * The xTB oracle job (batch-jobs/molecules-oracle) run as the embedded runtime runs it: the Node
 * BatchJob is synthesized, its job folder and local command are read from the template's
 * metadata, and the runtime's BatchHost starts it as a child process with its spec in a real
 * s3rver; result.json and the progress lines are read back. Also: the bundle the image ships
 * (`node main.mjs` beside RDKit_minimal.wasm), the contract in shared/job.ts, the spec's
 * validation, and the Node BatchJob construct (command, metadata, code version, build context).
 * The job's failed measurements are also taken through a campaign round into the report's count
 * of molecules that failed both attempts.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { App } from 'aws-cdk-lib';
import { AssetManifestArtifact } from 'aws-cdk-lib/cx-api';
import { Template } from 'aws-cdk-lib/assertions';
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { ConfigError } from '#shared/errors.ts';
import { sha256Hex } from '#shared/json.ts';
import { runJob } from '#shared/job.ts';
import { resetClients } from '#shared/clients/aws.ts';
import { BatchJob, NODE_JOB_COMMAND, nodeJobContextExcludes } from '#pipelines/steps/batch-job.ts';
import { clearCodeVersionMemo, nodeJobCodeVersion, REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { META } from '#pipelines/steps/function.ts';
import { BatchHost, type LocalJobDefinition } from '#infra/local/batch-host.ts';
import { startS3rver, type S3Emulator } from '#infra/local/emulators.ts';
import { TaskError } from '#infra/local/lambda-host.ts';
import { LOCAL_KEY, LOCAL_REGION } from '#infra/local/resolve.ts';
import { newCampaign, recordRound, type OracleResult as CampaignResult } from '#shared/molecules/discovery.ts';
import { discoveryMetrics, discoveryReportHtml } from '#shared/molecules/report.ts';
import { parseOracleSpec, type OracleResult } from '../../batch-jobs/molecules-oracle/oracle.ts';
import { bundleOracleJob } from '../../batch-jobs/molecules-oracle/build.ts';
import { minimalScope } from '../support/stacks.ts';

const BUCKET = 'oracle-test';
const REGION = LOCAL_REGION;
const KEY = LOCAL_KEY;

// ---- the job as the runtime runs it -------------------------------------------------------

let s3rver: S3Emulator;
let s3: S3Client;
let work: string;
let host: BatchHost;
let definition: LocalJobDefinition;
let baseEnv: Record<string, string>;
const progress = new Map<string, unknown[]>();
let runs = 0;

/** The Node BatchJob's template resource and the local job definition the runtime would build from it. */
function oracleJob(): { template: Template; resource: { Metadata: Record<string, unknown>; Properties: Record<string, unknown> }; job: BatchJob } {
  const { stack, resources } = minimalScope();
  const job = new BatchJob(stack, 'Oracle', { job: 'molecules-oracle', entry: 'main.ts', resources });
  const template = Template.fromStack(stack);
  // The synth staged the image's build context in a temporary cloud assembly: not needed here.
  rmSync((stack.node.root as App).outdir, { recursive: true, force: true });
  const [resource] = Object.values(template.findResources('AWS::Batch::JobDefinition')) as {
    Metadata: Record<string, unknown>;
    Properties: Record<string, unknown>;
  }[];
  return { template, resource: resource!, job };
}

interface JobOutcome {
  readonly failed: boolean;
  readonly cause?: { Container?: { ExitCode?: number }; StderrTail?: string };
  readonly result: Record<string, unknown>;
  readonly progress: { done: number; total: number; ok: number; failed: number; id: string }[];
}

/** Writes the spec to s3rver, runs the job through the BatchHost, reads result.json back. */
async function runOracle(spec: unknown): Promise<JobOutcome> {
  runs += 1;
  const prefix = `runs/test/${runs}/`;
  await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: `${prefix}spec.json`, Body: JSON.stringify(spec) }));
  const jobName = `oracle-${runs}`;
  let failed = false;
  let cause: JobOutcome['cause'];
  try {
    await host.run(definition, jobName, { JOB_SPEC_URI: `s3://${BUCKET}/${prefix}spec.json`, OUTPUT_URI: `s3://${BUCKET}/${prefix}output/` });
  } catch (error) {
    assert.ok(error instanceof TaskError, String(error));
    assert.equal(error.name, 'States.TaskFailed');
    failed = true;
    cause = JSON.parse(error.message) as JobOutcome['cause'];
  }
  const out = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: `${prefix}output/result.json` }));
  const result = JSON.parse(await out.Body!.transformToString()) as Record<string, unknown>;
  return { failed, cause, result, progress: (progress.get(jobName) ?? []) as JobOutcome['progress'] };
}

/** A stand-in xtb: crashes like a failing xtb for one molecule (the SMILES is mol.xyz's comment line), runs the real one otherwise. */
function writeFakeXtb(crashOn: string): string {
  const realXtb = ['/usr/bin/xtb', '/usr/local/bin/xtb'].find((p) => existsSync(p)) ?? 'xtb';
  const path = join(work, 'fake-xtb');
  writeFileSync(path, `#!/bin/sh\nif [ "$(sed -n 2p mol.xyz)" = '${crashOn}' ]; then echo '[ERROR] fake SCF crash' >&2; exit 1; fi\nexec ${realXtb} "$@"\n`);
  chmodSync(path, 0o755);
  return path;
}

/**
 * A stand-in xtb that gives the real xtb a deliberately bad input: for one molecule (mol.xyz's
 * comment line), the second atom is moved to 0.01 A from the first before xtb starts.
 */
function writeCrushingXtb(crushOn: string): string {
  const realXtb = ['/usr/bin/xtb', '/usr/local/bin/xtb'].find((p) => existsSync(p)) ?? 'xtb';
  const path = join(work, 'crushing-xtb');
  writeFileSync(
    path,
    [
      '#!/bin/sh',
      `if [ -f mol.xyz ] && [ "$(sed -n 2p mol.xyz)" = '${crushOn}' ]; then`,
      "  awk 'NR==3{x=$2;y=$3;z=$4} NR==4{$2=x+0.01;$3=y;$4=z} {print}' mol.xyz > crushed.xyz && mv crushed.xyz mol.xyz",
      'fi',
      `exec ${realXtb} "$@"`,
      '',
    ].join('\n'),
  );
  chmodSync(path, 0o755);
  return path;
}

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'fp-oracle-'));
  s3rver = await startS3rver(join(work, 's3'), 0);
  const credentials = { accessKeyId: KEY, secretAccessKey: KEY };
  s3 = new S3Client({ forcePathStyle: true, endpoint: s3rver.url, region: REGION, credentials });
  await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
  baseEnv = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    AWS_REGION: REGION,
    AWS_ACCESS_KEY_ID: KEY,
    AWS_SECRET_ACCESS_KEY: KEY,
    AWS_ENDPOINT_URL_S3: s3rver.url,
  };
  host = new BatchHost(join(work, 'jobs'), baseEnv, 2, (jobName, p) => progress.set(jobName, [...(progress.get(jobName) ?? []), p]));
  const { resource } = oracleJob();
  // What loadJobDefinitions (infra/local/synthesis.ts) reads from the template.
  definition = {
    arn: 'arn:aws:batch:us-east-1:123456789012:job-definition/oracle',
    name: 'Oracle',
    jobDir: resource.Metadata[META.jobDir] as string,
    command: resource.Metadata[META.jobCommand] as string[],
    environment: {},
    timeoutSeconds: 120,
  };
});

after(async () => {
  host?.stop();
  await s3rver?.close();
  s3?.destroy();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('oracle job, run by the local BatchHost from the synthesized metadata', () => {
  it('measures each molecule in spec order; a malformed SMILES is a failed measurement with the reason', async () => {
    const spec = {
      molecules: [
        { id: 'm-phenol', smiles: 'c1ccc(O)cc1' },
        { id: 'm-bad', smiles: 'C1CC' },
        { id: 'm-water', smiles: 'O' },
        { id: 'm-empty', smiles: '' },
      ],
      xtb: { timeoutSeconds: 60, seed: 0 },
      parallel: 2,
    };
    const { failed, result, progress: lines } = await runOracle(spec);
    assert.equal(failed, false, JSON.stringify(result));
    const { measurements, summary, s3Outputs } = result as unknown as OracleResult;
    assert.deepEqual(
      measurements.map((m) => [m.id, m.smiles]),
      spec.molecules.map((m) => [m.id, m.smiles]),
    );
    const [phenol, bad, water, empty] = measurements;
    // xtb's gap against a reference value: another build or CPU (its BLAS, the optimiser's own
    // convergence threshold) moves it by far less than 1e-3 eV; 0.05 eV catches a wrong molecule.
    assert.ok(phenol!.ok && Math.abs(phenol.gap - 4.35) < 0.05, JSON.stringify(phenol));
    assert.equal(phenol.attempts, 1);
    assert.ok(phenol.seconds > 0);
    assert.ok(water!.ok && water.gap > 5, JSON.stringify(water));
    assert.ok(!bad!.ok);
    assert.match(bad.reason, /^malformed SMILES: .*unclosed ring/);
    assert.equal(bad.attempts, 0);
    assert.ok(!empty!.ok);
    assert.equal(empty.reason, 'malformed SMILES: no atoms');
    assert.deepEqual({ ...summary, wallSeconds: 0 }, { molecules: 4, ok: 2, failed: 2, wallSeconds: 0 });
    assert.ok(summary.wallSeconds > 0);
    assert.deepEqual(s3Outputs, []);
    // One progress line per molecule, counting up; the last one totals the run.
    assert.deepEqual(
      lines.map((p) => p.done),
      [1, 2, 3, 4],
    );
    assert.deepEqual(new Set(lines.map((p) => p.id)), new Set(spec.molecules.map((m) => m.id)));
    assert.deepEqual({ ...lines.at(-1), id: '' }, { done: 4, total: 4, ok: 2, failed: 2, id: '' });
  });

  it('records an xtb crash on one molecule as that molecule failed (retried once) and measures the rest', async () => {
    const command = writeFakeXtb('c1ccccc1');
    const { failed, result } = await runOracle({
      molecules: [
        { id: 'benzene', smiles: 'c1ccccc1' },
        { id: 'methane', smiles: 'C' },
      ],
      xtb: { command },
    });
    assert.equal(failed, false, JSON.stringify(result));
    const { measurements, summary } = result as unknown as OracleResult;
    const [benzene, methane] = measurements;
    assert.ok(!benzene!.ok);
    assert.equal(benzene.reason, 'xtb exited 1: [ERROR] fake SCF crash');
    assert.equal(benzene.attempts, 2);
    assert.ok(methane!.ok && methane.gap > 5, JSON.stringify(methane));
    assert.equal(summary.ok, 1);
    assert.equal(summary.failed, 1);
  });

  it('measures a crowded molecule on its retry, records why xtb failed from its output, and the report counts the molecule that failed both attempts', async () => {
    // o-dinitrobenzene: the flat start's optimisation bonds two oxygens; the retry's GFN-FF
    // relaxed start measures it. Water, crushed by the stand-in, fails in xtb on both attempts.
    // Methane is measured at once (a campaign's sample needs two measured molecules).
    const smiles = ['O=[N+]([O-])c1ccccc1[N+](=O)[O-]', 'O', 'C'];
    const { failed, result } = await runOracle({
      molecules: smiles.map((s, i) => ({ id: String(i), smiles: s })),
      xtb: { command: writeCrushingXtb('O'), timeoutSeconds: 60 },
    });
    assert.equal(failed, false, JSON.stringify(result));
    const { measurements } = result as unknown as OracleResult;
    const [dinitro, water, methane] = measurements;
    assert.ok(dinitro!.ok, JSON.stringify(dinitro));
    assert.equal(dinitro.attempts, 2);
    // As in molecules-xtb.test.ts: 2.941-2.947 eV measured here; 0.05 eV tells it from the
    // O-O bonded geometry's 1.2 eV.
    assert.ok(Math.abs(dinitro.gap - 2.95) < 0.05, JSON.stringify(dinitro));
    assert.ok(!water!.ok);
    assert.equal(water.attempts, 2);
    assert.match(water.reason, /^xtb exited 1: Geometry optimization failed; .*; optimizer_relax: \|grad\| > 500, something is totally wrong!$/);
    assert.ok(methane!.ok && methane.attempts === 1, JSON.stringify(methane));

    // The measurements into a campaign round as recordStep (shared/molecules/campaign.ts) takes
    // them, then the report's metrics and page.
    const settings = { sampleSize: 3, rounds: 0, batchSize: 1, explorationFraction: 0, hitPercent: 5, acquisition: 'ei' as const, seed: 0 };
    const pool = { uri: 's3://b/pool.json', fingerprintsUri: 's3://b/pool.fp', size: 3, nBytes: 256, source: 'test pool' };
    const c0 = newCampaign(pool, settings, (i) => smiles[i]!);
    const results = new Map<number, CampaignResult>(
      measurements.map((m) => [
        Number(m!.id),
        { ok: m!.ok, ...(m!.ok ? { gap: m!.gap } : { reason: m!.reason }), attempts: m!.attempts, seconds: m!.seconds, cached: false },
      ]),
    );
    const c1 = recordRound(c0, 'approved', results);
    const metrics = discoveryMetrics(c1);
    assert.equal(metrics['failed'], 1);
    assert.equal(metrics['failedBothAttempts'], 1);
    const html = await discoveryReportHtml(c1, { source: pool.source, size: pool.size, skipped: {} }, settings);
    assert.match(html, /1 failed\s+\(<span id="failed-both-attempts">1<\/span> of them on both attempts\)/);
    assert.match(html, /<td style="text-align:left">xtb exited N: Geometry optimization failed; /);
  });

  it("fails the whole job when xtb is missing, naming Debian's xtb package", async () => {
    const { failed, cause, result } = await runOracle({
      molecules: [
        { id: 'a', smiles: 'C' },
        { id: 'b', smiles: 'O' },
      ],
      xtb: { command: 'xtb-not-installed-here' },
    });
    assert.equal(failed, true);
    assert.equal(cause?.Container?.ExitCode, 1);
    const error = result['error'] as { type: string; message: string };
    assert.equal(error.type, 'XtbMissingError');
    assert.match(
      error.message,
      /^xtb-not-installed-here: not found; install Debian's xtb package \(apt-get install xtb\); none of the 2 molecules can be measured$/,
    );
    assert.match(cause?.StderrTail ?? '', /XtbMissingError/);
  });

  it('fails on a bad spec with an error naming the field and the value', async () => {
    const { failed, result } = await runOracle({ molecules: [{ id: 'a', smiles: 'C' }], parallel: 0 });
    assert.equal(failed, true);
    const error = result['error'] as { type: string; message: string };
    assert.equal(error.type, 'ConfigError');
    assert.match(error.message, /^spec\.parallel: .* \(got 0\)$/);
  });
});

describe('oracle job bundle (what the image runs: node main.mjs beside RDKit_minimal.wasm)', () => {
  it('bundles to one ES module that loads RDKit from beside itself and runs the contract', async () => {
    const dir = join(work, 'bundle');
    const main = await bundleOracleJob(dir);
    assert.ok(existsSync(join(dir, 'RDKit_minimal.wasm')));
    const prefix = 'runs/bundle/';
    await s3.send(
      new PutObjectCommand({ Bucket: BUCKET, Key: `${prefix}spec.json`, Body: JSON.stringify({ molecules: [{ id: 'm', smiles: 'c1ccc(O)cc1' }] }) }),
    );
    const [cmd, ...args] = NODE_JOB_COMMAND;
    assert.equal(cmd, 'node');
    const child = spawn(process.execPath, [...args.map((a) => (a === 'main.mjs' ? main : a))], {
      // Not the repository: the bundle must not need node_modules.
      cwd: dir,
      env: { ...baseEnv, JOB_SPEC_URI: `s3://${BUCKET}/${prefix}spec.json`, OUTPUT_URI: `s3://${BUCKET}/${prefix}output` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 0, stderr);
    const line = JSON.parse(stdout.trim().split('\n').at(-1)!) as { progress: Record<string, unknown>; time: number };
    assert.deepEqual(line.progress, { done: 1, total: 1, ok: 1, failed: 0, id: 'm' });
    assert.ok(Math.abs(line.time - Date.now() / 1000) < 120);
    const out = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: `${prefix}output/result.json` }));
    const result = JSON.parse(await out.Body!.transformToString()) as OracleResult;
    assert.ok(result.measurements[0]!.ok && Math.abs(result.measurements[0].gap - 4.35) < 0.05); // as above
  });
});

describe('job contract (shared/job.ts), in-process', () => {
  const saved: Record<string, string | undefined> = {};
  before(() => {
    for (const [k, v] of Object.entries(baseEnv)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
    resetClients();
  });
  after(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    resetClients();
  });

  it('writes what main returns as result.json, and returns 0', async () => {
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'contract/ok/spec.json', Body: '{"n": 2}' }));
    const status = await runJob(
      async (spec, ctx) => {
        const written = await ctx.putJson('extra.json', { twice: (spec as { n: number }).n * 2 });
        return { written: written.uri, outputUri: ctx.outputUri };
      },
      { JOB_SPEC_URI: `s3://${BUCKET}/contract/ok/spec.json`, OUTPUT_URI: `s3://${BUCKET}/contract/ok/out` },
    );
    assert.equal(status, 0);
    const read = async (key: string) =>
      JSON.parse(await (await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }))).Body!.transformToString()) as unknown;
    assert.deepEqual(await read('contract/ok/out/result.json'), {
      written: `s3://${BUCKET}/contract/ok/out/extra.json`,
      outputUri: `s3://${BUCKET}/contract/ok/out/`,
    });
    assert.deepEqual(await read('contract/ok/out/extra.json'), { twice: 4 });
  });

  it('records an unreadable spec as the job error, and returns 1', async () => {
    const status = await runJob(async () => ({ never: true }), {
      JOB_SPEC_URI: `s3://${BUCKET}/contract/missing/spec.json`,
      OUTPUT_URI: `s3://${BUCKET}/contract/missing/out/`,
    });
    assert.equal(status, 1);
    const out = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'contract/missing/out/result.json' }));
    const { error } = JSON.parse(await out.Body!.transformToString()) as { error: { type: string; message: string } };
    assert.equal(error.type, 'NoSuchKey');
  });

  it('returns 2 without JOB_SPEC_URI or OUTPUT_URI: there is nowhere to write result.json', async () => {
    assert.equal(await runJob(async () => ({}), { OUTPUT_URI: `s3://${BUCKET}/x/` }), 2);
    assert.equal(await runJob(async () => ({}), { JOB_SPEC_URI: `s3://${BUCKET}/x/spec.json` }), 2);
  });
});

describe('oracle spec', () => {
  const molecules = [{ id: 'a', smiles: 'C' }];

  it('fills the defaults: xtb on PATH, 120 s per attempt, seed 0, one molecule at a time', () => {
    assert.deepEqual(parseOracleSpec({ molecules }), { molecules, xtb: { timeoutSeconds: 120, seed: 0, command: 'xtb' }, parallel: 1 });
  });

  const rejects = (input: unknown, field: string, value?: string) =>
    assert.throws(
      () => parseOracleSpec(input),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(error.field, field);
        if (value !== undefined) assert.ok(error.message.endsWith(`(got ${value})`), error.message);
        return true;
      },
    );

  it('names the field and the value it refuses', () => {
    rejects({ molecules: [] }, 'spec.molecules', '[]');
    rejects({ molecules: Array.from({ length: 501 }, (_, i) => ({ id: `m${i}`, smiles: 'C' })) }, 'spec.molecules');
    rejects({ molecules: [{ id: '', smiles: 'C' }] }, 'spec.molecules.0.id', '""');
    rejects({ molecules: [{ id: 'a', smiles: 5 }] }, 'spec.molecules.0.smiles', '5');
    rejects({ molecules, xtb: { timeoutSeconds: -1 } }, 'spec.xtb.timeoutSeconds', '-1');
    rejects({ molecules, xtb: { seed: 0.5 } }, 'spec.xtb.seed', '0.5');
    rejects({ molecules, xtb: { timeoutSecond: 10 } }, 'spec.xtb', '{"timeoutSecond":10}');
    rejects({ molecules, parallel: 65 }, 'spec.parallel', '65');
    rejects({ molecules: [...molecules, { id: 'a', smiles: 'O' }] }, 'spec.molecules.1.id', '"a"');
  });
});

// ---- the Node BatchJob construct ------------------------------------------------------------

describe('BatchJob with an entry (a Node job)', () => {
  it('runs node main.mjs in the container and node --import tsx main.ts locally, on the CPU queue', () => {
    const { template, resource } = oracleJob();
    const props = resource.Properties as { ContainerProperties: { Command: string[]; Environment: { Name: string }[] }; PlatformCapabilities: string[] };
    assert.deepEqual(props.ContainerProperties.Command, ['node', 'main.mjs']);
    assert.deepEqual(props.PlatformCapabilities, ['FARGATE']);
    assert.ok(!props.ContainerProperties.Environment.some((e) => e.Name === 'PYTHONUNBUFFERED'));
    assert.equal(resource.Metadata[META.jobDir], 'batch-jobs/molecules-oracle');
    assert.deepEqual(resource.Metadata[META.jobCommand], ['node', '--import', 'tsx', 'main.ts']);
    template.resourceCountIs('AWS::Batch::JobDefinition', 1);
  });

  it('versions the code the entry bundles (shared/molecules/xtb.ts, shared/job.ts, packages) plus the job folder', () => {
    clearCodeVersionMemo();
    const { job, resource } = oracleJob();
    const { components } = job.codeVersion;
    for (const file of [
      'shared/molecules/xtb.ts',
      'shared/molecules/rdkit.ts',
      'shared/job.ts',
      'batch-jobs/molecules-oracle/main.ts',
      'batch-jobs/molecules-oracle/oracle.ts',
      'batch-jobs/molecules-oracle/Dockerfile',
      'batch-jobs/molecules-oracle/build.ts',
    ]) {
      assert.equal(components[file], sha256Hex(readFileSync(join(REPO_ROOT, file))), file);
    }
    assert.equal(
      components['npm:@rdkit/rdkit'],
      (JSON.parse(readFileSync(join(REPO_ROOT, 'node_modules/@rdkit/rdkit/package.json'), 'utf8')) as { version: string }).version,
    );
    assert.ok(!Object.keys(components).some((k) => k.startsWith('batch-jobs/common/')), 'a Node job does not copy the Python contract');
    assert.equal(resource.Metadata[META.codeVersion], job.codeVersion.hash);
  });

  it('changes its code version when a module the entry imports changes', () => {
    const dir = mkdtempSync(join(REPO_ROOT, 'batch-jobs', '.tmp-node-job-'));
    try {
      writeFileSync(join(dir, 'main.ts'), "import { double } from './helpers/maths.ts';\nconsole.log(double(2));\n");
      mkdirSync(join(dir, 'helpers'));
      writeFileSync(join(dir, 'helpers', 'maths.ts'), 'export const double = (x: number) => 2 * x;\n');
      clearCodeVersionMemo();
      const before = nodeJobCodeVersion(dir, join(dir, 'main.ts'));
      writeFileSync(join(dir, 'helpers', 'maths.ts'), 'export const double = (x: number) => x + x;\n');
      clearCodeVersionMemo();
      const after = nodeJobCodeVersion(dir, join(dir, 'main.ts'));
      assert.notEqual(after.hash, before.hash);
      clearCodeVersionMemo();
      assert.notEqual(nodeJobCodeVersion(dir, join(dir, 'main.ts'), 'salt').hash, after.hash);
    } finally {
      clearCodeVersionMemo();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('builds its image from the repository root with the job Dockerfile, sending only package files, shared/ and the job folder', () => {
    const { stack, resources } = minimalScope();
    new BatchJob(stack, 'Oracle', { job: 'molecules-oracle', entry: 'main.ts', resources });
    const assembly = (stack.node.root as App).synth();
    const outdir = assembly.directory;
    try {
      const manifest = assembly.artifacts.find((a): a is AssetManifestArtifact => a instanceof AssetManifestArtifact)!;
      const images = Object.values(manifest.contents.dockerImages ?? {});
      assert.equal(images.length, 1);
      assert.equal(images[0]!.source.dockerFile, 'batch-jobs/molecules-oracle/Dockerfile');
      const context = join(outdir, images[0]!.source.directory!);
      for (const kept of [
        'package.json',
        'package-lock.json',
        'shared/molecules/xtb.ts',
        'shared/job.ts',
        'batch-jobs/molecules-oracle/main.ts',
        'batch-jobs/molecules-oracle/Dockerfile',
      ]) {
        assert.ok(existsSync(join(context, kept)), `${kept} is in the build context`);
      }
      for (const left of ['node_modules', '.git', '.local', 'cdk.out', 'test', 'bench', 'infra', 'batch-jobs/common', 'batch-jobs/probe-sum']) {
        assert.ok(!existsSync(join(context, left)), `${left} is not in the build context`);
      }
      assert.deepEqual(nodeJobContextExcludes('molecules-oracle').slice(0, 1), ['*']);
    } finally {
      rmSync(outdir, { recursive: true, force: true });
    }
  });

  it('leaves Python jobs as they were: python3 main.py, PYTHONUNBUFFERED, batch-jobs/common in the version', () => {
    const { stack, resources } = minimalScope();
    const job = new BatchJob(stack, 'Sum', { job: 'probe-sum', resources });
    const [resource] = Object.values(Template.fromStack(stack).findResources('AWS::Batch::JobDefinition')) as {
      Metadata: Record<string, unknown>;
      Properties: { ContainerProperties: { Command: string[]; Environment: { Name: string }[] } };
    }[];
    assert.deepEqual(resource!.Properties.ContainerProperties.Command, ['python3', 'main.py']);
    assert.deepEqual(resource!.Metadata[META.jobCommand], ['python3', 'main.py']);
    assert.ok(resource!.Properties.ContainerProperties.Environment.some((e) => e.Name === 'PYTHONUNBUFFERED'));
    assert.ok('batch-jobs/common/jobio.py' in job.codeVersion.components);
  });

  it('throws when the entry is not a .ts file in the job folder, or comes with a command', () => {
    const cases: [Record<string, unknown>, string, string][] = [
      [{ entry: 'main.py' }, 'entry', '"main.py"'],
      [{ entry: '../probe-sum/main.ts' }, 'entry', '"../probe-sum/main.ts"'],
      [{ entry: 'missing.ts' }, 'entry', '"missing.ts"'],
      [{ entry: 'main.ts', command: ['node', 'other.mjs'] }, 'command', '["node","other.mjs"]'],
    ];
    for (const [extra, field, value] of cases) {
      const { stack, resources } = minimalScope();
      assert.throws(
        () => new BatchJob(stack, 'Job', { job: 'molecules-oracle', resources, ...extra }),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.equal(error.field, field);
          assert.ok(error.message.endsWith(`(got ${value})`), error.message);
          return true;
        },
      );
    }
  });
});
