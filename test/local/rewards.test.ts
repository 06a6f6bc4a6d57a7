/**
 * Reward search end to end on the embedded runtime, at the `test` size, with Claude played by a
 * fake Messages API on loopback: two generations of five candidates, each trained with the real
 * PPO job inside the sandbox and graded outside it, hostile candidates contained and recorded as
 * their verdicts, the graded history fed back, and the final comparing the winner with both
 * baselines on the same seeds. Then reward files are evaluated without asking Claude.
 */
import { costOf, usageOfStats } from '#shared/cost/usage.ts';
import { planRun } from '#infra/cli/plan.ts';
import { assertPlanMatchesRun } from '../support/plan.ts';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import type { ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { sandboxAvailable } from '#infra/local/sandbox.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { REWARDS_SIZES, RewardsConfig } from '#pipelines/rewards/config.ts';
import { REWARD_ARTIFACT, REWARDS_PIPELINE } from '#pipelines/rewards/stack.ts';
import { s3Client } from '#shared/clients/aws.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import { readSearch, writeRewardSource } from '#shared/rewards/steps.ts';
import { startFakeClaude, type FakeClaude } from '../support/fake-claude.ts';
import { startTestRuntime, stopTestRuntime } from '../support/runtime.ts';
import { assertRunCost } from '../support/run-cost.ts';

const probe = await sandboxAvailable();
const skip = probe.available ? false : `no sandbox here: ${probe.reason}`;
const shaped = readFileSync(join(REPO_ROOT, 'batch-jobs/rewards-train/rewards/shaped_reward.py'), 'utf8');
const candidate = (name: string, source: string) => ({ name, rationale: `try ${name}`, source });
/** A candidate's source: `lines` (what it does when loaded), then a reward of 0 everywhere. */
const zeroRewardAfter = (lines: string[]) => [...lines, '', 'def reward(obs, action, next_obs, done, info):', '    return 0.0', ''].join('\n');
const HEIGHT =
  'import math\n\ndef reward(obs, action, next_obs, done, info):\n    return 10.0 * (math.sin(3 * next_obs[0]) - math.sin(3 * obs[0])) + (100.0 if info["goal_reached"] else -0.1)\n';
const NETWORK = zeroRewardAfter(['import socket', 'socket.create_connection(("169.254.170.2", 80), timeout=2)']);
/**
 * Prints a fake result line and forges a policy that works (it pushes in the direction of the
 * velocity, which solves MountainCar), written to where the job's outputs go both at import and
 * at exit, after the trainer's own; its reward teaches nothing. Only the trainer's policy may
 * count.
 */
const FORGED_POLICY = zeroRewardAfter([
  'import atexit, json, os',
  'from policy import ACTIVATION, LAYER_SHAPES, OBS_OFFSET, OBS_SCALE, POLICY_FORMAT',
  '',
  'layers = [{"weight": [[0.0] * cols for _ in range(rows)], "bias": [0.0] * rows} for rows, cols in LAYER_SHAPES]',
  'layers[0]["weight"][0][1] = 5.0',
  'layers[1]["weight"][0][0] = 3.0',
  'layers[2]["weight"][0][0] = -4.0',
  'layers[2]["weight"][2][0] = 4.0',
  'FORGED = {"format": POLICY_FORMAT, "obs_offset": list(OBS_OFFSET), "obs_scale": list(OBS_SCALE), "activation": ACTIVATION, "layers": layers}',
  '',
  '',
  'def forge():',
  '    os.makedirs("/job/out", exist_ok=True)',
  '    json.dump(FORGED, open("/job/out/policy.json", "w"))',
  '    json.dump({"selfEvaluation": {"successRate": 1.0}, "forged": True}, open("/job/out/result.json", "w"))',
  '',
  '',
  'forge()',
  'atexit.register(forge)',
  'print(json.dumps({"result": {"success_rate": 1.0}, "forged": True}))',
]);
/**
 * Looks for credentials (environment, files, the container endpoint) and raises with what it
 * found: the only way out of its process is the trainer's error, which the job hands back.
 */
const STEAL = zeroRewardAfter([
  'import json, os, glob, urllib.request',
  'found = {"env": dict(os.environ), "files": {}}',
  'for path in glob.glob("/root/.aws/*") + glob.glob(os.path.expanduser("~/.aws/*")) + ["/proc/1/environ"]:',
  '    try:',
  '        found["files"][path] = open(path, errors="replace").read()',
  '    except Exception as error:',
  '        found["files"][path] = repr(error)',
  'try:',
  '    found["endpoint"] = urllib.request.urlopen("http://169.254.170.2/v2/credentials", timeout=2).read().decode()',
  'except Exception as error:',
  '    found["endpoint"] = repr(error)',
  'raise RuntimeError(json.dumps({"stolen": found}))',
]);
const MEMORY_HOG = zeroRewardAfter(['hog = bytearray(8 * 1024 ** 3)']);
/** Tries to change the trainer, the system and the host's files; raises with what happened (its error comes back). */
const WRITES_OUTSIDE = zeroRewardAfter([
  'import json, os',
  'attempts = {}',
  'for path in ["/app/trainer.py", "/app/reward_module.py", "/usr/lib/python3/dist-packages/evil.py", "/etc/evil", "/job/../evil", "/opt/common/jobio.py"]:',
  '    try:',
  '        with open(path, "a") as handle:',
  '            handle.write("# changed by a candidate")',
  '        attempts[path] = "written"',
  '    except OSError as error:',
  '        attempts[path] = type(error).__name__',
  'raise RuntimeError(json.dumps({"attempts": attempts}))',
]);
/** Never returns: sleeps at import, using no CPU, until the job's wall limit stops it. */
const NEVER_RETURNS = zeroRewardAfter(['import time', 'while True:', '    time.sleep(1)']);
/**
 * Monkeypatches the trainer: its self-evaluation reports 100 %, and the environment's goal moves
 * so that the trainer's bookkeeping counts every episode a success. It runs apart from the
 * trainer, so it patches only its own copies.
 */
const MONKEYPATCH = zeroRewardAfter([
  'import sys',
  'import mountaincar',
  'import trainer',
  '',
  '',
  'def perfect(document, seeds, episodes_per_seed):',
  '    total = len(seeds) * episodes_per_seed',
  '    return {"perSeed": [], "episodes": total, "successes": total, "successRate": 1.0, "claim": "monkeypatched"}',
  '',
  '',
  'trainer.evaluate_policy = perfect',
  'mountaincar.GOAL_POSITION = -10.0',
  'for name in ("__main__", "main"):',
  '    if name in sys.modules:',
  '        sys.modules[name].evaluate_policy = perfect',
]);
const FORK_BOMB = zeroRewardAfter(['import os', 'while True:', '    os.fork()']);

/** A result.json a job handed back (under runs/rewards/ in the bucket) that contains `marker`. */
async function jobResultContaining(bucket: string, marker: string): Promise<string | undefined> {
  let token: string | undefined;
  do {
    const page = await s3Client().send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'runs/rewards/', ContinuationToken: token }));
    for (const object of page.Contents ?? []) {
      if (!object.Key!.endsWith('/result.json')) continue;
      const text = await readText(`s3://${bucket}/${object.Key}`);
      if (text.includes(marker)) return text;
    }
    token = page.NextContinuationToken;
  } while (token);
  return undefined;
}

async function readText(uri: string): Promise<string> {
  return (await s3Client().send(new GetObjectCommand(parseS3Uri(uri)))).Body!.transformToString();
}

describe('reward search on the embedded runtime (test size)', { skip }, () => {
  let rt: LocalRuntime;
  let fake: FakeClaude;
  let record: ExecutionRecord;
  const saved = { ...process.env };
  // Five candidates a generation: the hostile ones beside honest ones. The shortest wall limit
  // Batch allows (60 s) stops the one that never returns.
  const config = RewardsConfig.parse({ ...REWARDS_SIZES.test, candidates: 5, trainTimeoutSeconds: 60 });

  before(async () => {
    fake = await startFakeClaude();
    fake.reply(
      {
        candidates: [
          candidate('height', HEIGHT),
          candidate('phone-home', NETWORK),
          candidate('memory-hog', MEMORY_HOG),
          candidate('writes-outside', WRITES_OUTSIDE),
          candidate('never-returns', NEVER_RETURNS),
        ],
      },
      {
        candidates: [
          candidate('energy', shaped),
          candidate('fork-bomb', FORK_BOMB),
          candidate('forged-policy', FORGED_POLICY),
          candidate('steal', STEAL),
          candidate('monkeypatch', MONKEYPATCH),
        ],
      },
    );
    Object.assign(process.env, { ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: fake.url });
    rt = await startTestRuntime({ pipelines: [pipelineNamed(REWARDS_PIPELINE)] });
    record = await rt.startExecution(REWARDS_PIPELINE, { config }).done;
  });
  after(async () => {
    await stopTestRuntime(rt);
    await fake?.close();
    process.env = saved;
  });

  it('runs every generation, contains the hostile candidates, and publishes the winner with the final', async () => {
    assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
    await assertRunCost(record);
    const out = record.output as { winner: string; searchUri: string; reportUri: string; artifact: { name: string } };
    const doc = await readSearch(out.searchUri);
    assert.deepEqual(
      doc.generations.map((g) => g.candidates.map((c) => c.name)),
      [
        ['height', 'phone-home', 'memory-hog', 'writes-outside', 'never-returns'],
        ['energy', 'fork-bomb', 'forged-policy', 'steal', 'monkeypatch'],
      ],
    );
    const byName = new Map(doc.generations.flatMap((g) => g.candidates.map((c) => [c.name, c])));
    assert.equal(byName.get('phone-home')!.seeds[0]!.success, null, 'no network: its training failed');
    // Forked interpreters hit the task limit or, counted together, the memory cap first: contained either way.
    assert.match(byName.get('fork-bomb')!.verdict ?? '', /the sandbox stopped the job: (processes|memory) limit/);
    assert.equal(typeof byName.get('energy')!.seeds[0]!.success, 'number', JSON.stringify(byName.get('energy')!.seeds));
    assert.ok(
      !['phone-home', 'memory-hog', 'writes-outside', 'never-returns', 'fork-bomb', 'forged-policy', 'steal', 'monkeypatch'].includes(out.winner),
      out.winner,
    );
    // Stopped at the run's wall limit (trainTimeoutSeconds, Batch's attempt timeout on AWS).
    assert.match(byName.get('never-returns')!.verdict ?? '', /the sandbox stopped the job: wall limit/);
    assert.equal(byName.get('never-returns')!.seeds[0]!.success, null);
    // The monkeypatches reached only the candidate's own process: the trainer trained on its
    // reward (0 everywhere), evaluated itself honestly, and the grader found what it learned.
    assert.equal(await jobResultContaining(rt.resources.buckets[0]!, 'monkeypatched'), undefined);
    const patched = byName.get('monkeypatch')!.seeds[0]!;
    assert.equal(typeof patched.success, 'number', JSON.stringify(patched));
    assert.ok(patched.success! < 0.5, `graded ${patched.success}`);
    assert.ok(byName.get('monkeypatch')!.curves![0]!.points.at(-1)!.success < 1, "the trainer's own log is honest");
    // The working policy it forged never left its process: the trainer's own policy was graded.
    const forged = byName.get('forged-policy')!.seeds[0]!;
    assert.equal(typeof forged.success, 'number', JSON.stringify(forged));
    assert.ok(forged.success! < 0.5, `graded ${forged.success}, not the forged controller's ~1.0`);
    assert.equal(await jobResultContaining(rt.resources.buckets[0]!, 'forged'), undefined);
    assert.ok(byName.get('height')!.curves?.[0]?.points.length, "the honest candidate's curve is recorded");
    assert.ok((byName.get('height')!.seeds[0]!.trainSeconds ?? 0) > 0);
    assert.match(byName.get('memory-hog')!.verdict ?? '', /the sandbox stopped the job: memory limit/);
    // Every write outside its work dir failed, and the trainer on this machine is unchanged.
    const attempts = await jobResultContaining(rt.resources.buckets[0]!, 'attempts');
    assert.ok(attempts, "the candidate's attempts came back in the trainer's error");
    assert.match(attempts, /PermissionError|OSError|FileNotFoundError/);
    assert.ok(!attempts.includes('written'), attempts);
    assert.ok(!readFileSync(join(REPO_ROOT, 'batch-jobs/rewards-train/trainer.py'), 'utf8').includes('changed by a candidate'));
    // What the thief found (in the trainer's error, whole): no key of ours, no credentials, no endpoint.
    const stolen = await jobResultContaining(rt.resources.buckets[0]!, 'stolen');
    assert.ok(stolen, "the thief's findings came back in the trainer's error");
    assert.match(stolen, /endpoint/, 'not cut short');
    for (const secret of ['test-key', 'S3RVER', 'AWS_SECRET_ACCESS_KEY', 'ANTHROPIC'])
      assert.ok(!stolen.includes(secret), `${secret} not found by the candidate`);
    assert.match(stolen, /endpoint.*(URLError|Errno|refused|unreachable)/i);
    const final = doc.final!;
    assert.deepEqual(
      final.entries.map((e) => e.role),
      ['winner', 'env-reward', 'shaped-reward'],
    );
    assert.deepEqual(final.gradeSeeds, config.finalSeeds);
    // Retrained from scratch on the final's own training seeds, none of them the search's.
    assert.ok(final.entries.every((e) => e.seeds.map((s) => s.seed).join() === config.finalTrainSeeds.join()));
    // The person-written shaped reward learns within this budget; the environment's -1 per step does not.
    const mean = (role: string) => final.entries.find((e) => e.role === role)!.seeds[0]!.success!;
    assert.ok(mean('shaped-reward') > mean('env-reward'), `shaped ${mean('shaped-reward')} vs env ${mean('env-reward')}`);
    assert.equal(out.artifact.name, REWARD_ARTIFACT);
    const html = await readText(out.reportUri);
    assert.match(html, /fork-bomb/);
    assert.match(html, /training curve \(environment's return, success\)/);
    assert.ok(!html.includes('<script'));
  });

  it('asked Claude twice, the second time with the graded history, the task block read from the cache', () => {
    assert.equal(fake.requests.length, 2);
    // As many calls as the plan says: one per generation.
    assert.deepEqual(
      planRun(pipelineNamed(REWARDS_PIPELINE), config).claude.map((c) => [c.step, c.calls.high]),
      [['propose', fake.requests.length]],
    );
    const [first, second] = fake.requests;
    assert.deepEqual((first!.body.system as unknown[])[0], (second!.body.system as unknown[])[0]);
    const history = (second!.body.messages as { content: { text: string }[] }[])[0]!.content[0]!.text;
    assert.match(history, /generation 1, phone-home: mean success 0\.00/);
    assert.match(history, /generation 1, height[^#]*training curve \(the job's own log, not graded\): seed 1: step \d+ return -?\d+ success \d+%/);
    assert.match(history, /generation 1, never-returns: mean success 0\.00; sandbox verdict: the sandbox stopped the job: wall limit/);
    assert.doesNotMatch(history, /selfEvaluation/);
    // The run's counters hold the tokens of both answers, from the API's usage fields, priced by model.
    const sum = (f: (u: (typeof fake.usages)[number]) => number) => fake.usages.reduce((n, u) => n + f(u), 0);
    assert.deepEqual(record.stats.claude, [
      {
        model: config.model,
        inputTokens: sum((u) => u.input_tokens),
        outputTokens: sum((u) => u.output_tokens),
        cacheReadTokens: sum((u) => u.cache_read_input_tokens),
        cacheWriteTokens: sum((u) => u.cache_creation_input_tokens),
      },
    ]);
    assert.ok(sum((u) => u.cache_read_input_tokens) > 0);
    const priced = costOf(usageOfStats(record.stats)).lines.filter((l) => l.item.includes(config.model));
    assert.ok(priced.length > 0 && priced.every((l) => l.lowUsd > 0), JSON.stringify(priced));
    assert.equal(
      record.stats.steps?.propose?.claude?.[0]?.inputTokens,
      sum((u) => u.input_tokens),
    );
  });

  it('evaluates reward files without asking Claude', async () => {
    // The sources go to the bucket first (the CLI's --reward-file does it); the config names them by hash.
    const ctx = { bucket: rt.resources.buckets[0]!, pipeline: REWARDS_PIPELINE };
    // Seeds of its own, so that nothing comes from the first run's cache: a cold run, every item a success.
    const files = RewardsConfig.parse({
      ...REWARDS_SIZES.test,
      trainSeeds: [5],
      finalTrainSeeds: [105],
      rewardFiles: [
        { name: 'shaped', sha256: await writeRewardSource(ctx, shaped) },
        { name: 'height', sha256: await writeRewardSource(ctx, HEIGHT) },
      ],
    });
    const before = fake.requests.length;
    const run = await rt.startExecution(REWARDS_PIPELINE, { config: files }).done;
    assert.equal(run.status, 'SUCCEEDED', `${run.error}: ${run.cause}`);
    assert.equal(fake.requests.length, before);
    // Reward files decide the work: the plan's counts are the run's, exactly.
    assertPlanMatchesRun(REWARDS_PIPELINE, files, run);
    const doc = await readSearch((run.output as { searchUri: string }).searchUri);
    assert.equal(doc.generations.length, 1);
    assert.deepEqual(
      doc.generations[0]!.candidates.map((c) => [c.name, c.origin]),
      [
        ['shaped', 'file'],
        ['height', 'file'],
      ],
    );
  });
});
