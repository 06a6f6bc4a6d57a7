/**
 * The local Batch host running a sandboxed job (untrusted candidate code) as the image's stager
 * does on AWS: the spec fetched into the sandbox's private work dir and the declared outputs
 * uploaded back, both through the presigned URLs of the job's staging document (its one URL,
 * JOB_STAGING_URL), the job run with no network, and a limit it hit turned into the job's error.
 * The job is the real reward-search trainer with a candidate reward.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { BatchHost, type LocalJobDefinition } from '#infra/local/batch-host.ts';
import { startS3rver, type S3Emulator } from '#infra/local/emulators.ts';
import { sandboxAvailable } from '#infra/local/sandbox.ts';
import type { TaskError } from '#infra/local/lambda-host.ts';
import { LOCAL_KEY } from '#infra/local/resolve.ts';
import { resetClients, s3Client } from '#shared/clients/aws.ts';
import { presignJob, STAGING_URL_VARIABLE } from '#shared/presign.ts';
import { gradePolicy, parsePolicy } from '#shared/rewards/mountaincar.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';

const BUCKET = 'sandbox-jobs';
const probe = await sandboxAvailable();
const skip = probe.available ? false : `no sandbox here: ${probe.reason}`;
const shaped = readFileSync(join(REPO_ROOT, 'batch-jobs/rewards-train/rewards/shaped_reward.py'), 'utf8');

describe('local Batch host: sandboxed jobs', () => {
  let work: string;
  let s3rver: S3Emulator;
  let host: BatchHost;
  const saved = { ...process.env };
  const def = (limits: Record<string, number> = {}): LocalJobDefinition => ({
    arn: 'arn:aws:batch:us-east-1:000000000000:job-definition/train:1',
    name: 'train',
    jobDir: 'batch-jobs/rewards-train',
    command: ['python3', 'main.py'],
    environment: {},
    timeoutSeconds: 60,
    sandbox: { outputs: ['policy.json', 'curves.json'], limits, worker: 'reward_channel.py' },
  });
  /** `timeoutSeconds`: the submit's attempt timeout, which replaces the definition's. */
  async function runWith(name: string, spec: Record<string, unknown>, limits?: Record<string, number>, timeoutSeconds?: number) {
    await s3Client().send(new PutObjectCommand({ Bucket: BUCKET, Key: `runs/${name}/spec.json`, Body: JSON.stringify(spec) }));
    // As the step's Presign state does: the staging document next to the spec, and its URL.
    const [specUri, outputUri] = [`s3://${BUCKET}/runs/${name}/spec.json`, `s3://${BUCKET}/runs/${name}/output/`];
    const { stagingUrl } = await presignJob({ specUri, outputUri, outputs: [...def().sandbox!.outputs], expiresSeconds: 3600, stagingExpiresSeconds: 600 });
    return host.run(def(limits), name, { JOB_SPEC_URI: specUri, OUTPUT_URI: outputUri, [STAGING_URL_VARIABLE]: stagingUrl }, timeoutSeconds);
  }
  const read = async (key: string) => (await s3Client().send(new GetObjectCommand({ Bucket: BUCKET, Key: key }))).Body!.transformToString();
  const keys = async (prefix: string) =>
    ((await s3Client().send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: prefix }))).Contents ?? []).map((o) => o.Key!.slice(prefix.length)).sort();

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'fp-sandbox-host-'));
    s3rver = await startS3rver(join(work, 's3'), 0);
    Object.assign(process.env, { AWS_ENDPOINT_URL_S3: s3rver.url, AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: LOCAL_KEY, AWS_SECRET_ACCESS_KEY: LOCAL_KEY });
    resetClients();
    await s3Client().send(new CreateBucketCommand({ Bucket: BUCKET }));
    host = new BatchHost(join(work, 'jobs'), { PATH: '/usr/bin:/bin', AWS_SECRET_ACCESS_KEY: 'local-secret-never-inside' }, 2);
  });
  after(async () => {
    host?.stop();
    await s3rver?.close();
    process.env = saved;
    resetClients();
    rmSync(work, { recursive: true, force: true });
  });

  it('trains a candidate in the sandbox and hands back only its declared outputs; the grader reads the policy', { skip }, async () => {
    const run = await runWith('benign', { reward_source: shaped, seed: 1, total_steps: 4000, num_envs: 8, evaluation_episodes: 10 });
    assert.equal(run.exitCode, 0);
    assert.deepEqual(await keys('runs/benign/output/'), ['curves.json', 'policy.json', 'result.json']);
    const policy = parsePolicy(JSON.parse(await read('runs/benign/output/policy.json')));
    const grade = gradePolicy(policy, [5001, 5002], { episodesPerSeed: 5, excludeSeeds: [1] });
    assert.equal(grade.perSeed.length, 2);
  });

  it('fails a sandboxed job started without its staging URL, as the stager does, before anything runs', { skip }, async () => {
    await assert.rejects(
      host.run(def(), 'unstaged', { JOB_SPEC_URI: `s3://${BUCKET}/runs/unstaged/spec.json`, OUTPUT_URI: `s3://${BUCKET}/runs/unstaged/output/` }),
      (error: TaskError) => error.name === 'States.TaskFailed' && /JOB_STAGING_URL must be set/.test(error.message) && /"ExitCode":2/.test(error.message),
    );
    assert.deepEqual(await keys('runs/unstaged/'), []);
  });

  it("stops a candidate that never returns at the submit's timeout (the wall limit): the verdict is the job error and its result.json", { skip }, async () => {
    const forever = 'def reward(obs, action, next_obs, done, info):\n    while True:\n        pass\n';
    await assert.rejects(
      runWith('forever', { reward_source: forever, seed: 1, total_steps: 4000, num_envs: 8, evaluation_episodes: 10 }, {}, 4),
      (error: TaskError) => error.name === 'States.TaskFailed' && /"SandboxLimit":"wall"/.test(error.message),
    );
    const result = JSON.parse(await read('runs/forever/output/result.json')) as { error: { type: string; limit: string } };
    assert.deepEqual([result.error.type, result.error.limit], ['SandboxLimit', 'wall']);
  });

  it('gives a candidate no secret and no network: a reward that tries fails the job, and nothing it wrote is trusted', { skip }, async () => {
    const nosy = [
      'import os, socket',
      `s = socket.create_connection(("127.0.0.1", ${new URL(s3rver.url).port}), timeout=1)`,
      'def reward(obs, action, next_obs, done, info):',
      '    return 0.0',
    ].join('\n');
    await assert.rejects(
      runWith('nosy', { reward_source: nosy, seed: 1, total_steps: 2000, num_envs: 8, evaluation_episodes: 10 }),
      (error: TaskError) => error.name === 'States.TaskFailed' && !/local-secret-never-inside/.test(error.message),
    );
    assert.ok(!(await keys('runs/nosy/output/')).includes('policy.json'));
  });

  it("runs the candidate apart from the trainer: what it writes, at import or at exit, never becomes the job's output", { skip }, async () => {
    const forger = [
      'import atexit, json, os',
      'def forge():',
      '    os.makedirs("/job/out", exist_ok=True)',
      '    json.dump({"forged": True}, open("/job/out/policy.json", "w"))',
      '    json.dump({"forged": True}, open("/job/out/result.json", "w"))',
      'forge()',
      'atexit.register(forge)',
      'def reward(obs, action, next_obs, done, info):',
      '    return 0.0',
    ].join('\n');
    const run = await runWith('forger', { reward_source: forger, seed: 1, total_steps: 2000, num_envs: 8, evaluation_episodes: 2 });
    assert.equal(run.exitCode, 0);
    assert.doesNotMatch(await read('runs/forger/output/policy.json'), /forged/);
    assert.ok(parsePolicy(JSON.parse(await read('runs/forger/output/policy.json'))), "the trainer's own policy");
    assert.doesNotMatch(await read('runs/forger/output/result.json'), /forged/);
  });
});
