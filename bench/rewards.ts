/**
 * Reward search: the sandbox's start-up overhead (the same `python3 -c pass` in bubblewrap and
 * plain, median of 10), `import torch` inside it, and the training time of one candidate (the
 * shaped reward, one seed, the default 8,000 steps) three ways: as the pipeline runs it (the
 * trainer in one sandbox, the candidate's reward in a second, joined by a socket), with the
 * reward inside the trainer's sandbox, and outside any sandbox; with the seconds spent in reward
 * calls each way (the socket's cost).
 * Run alone with `tsx bench/rewards.ts`, or call `measureRewards()`.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { newSandboxWorkDir, runPythonJobSandboxed, runSandboxed } from '#infra/local/sandbox.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { runSandboxedWithWorker } from '#infra/local/batch-host.ts';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const workDir = () => newSandboxWorkDir('bench');

export interface RewardsFigures {
  readonly sandboxStartMs: number;
  readonly plainStartMs: number;
  readonly overheadMs: number;
  readonly torchImportSandboxedSeconds: number;
  /** The pipeline's way: the reward in its own sandbox. */
  readonly trainSplitSeconds: number;
  readonly trainSandboxedSeconds: number;
  readonly trainPlainSeconds: number;
  /** Seconds in reward calls (the trainer's own count): across the socket, and in-process. */
  readonly rewardSplitSeconds: number;
  readonly rewardInProcessSeconds: number;
  readonly totalSteps: number;
}

export async function measureRewards(): Promise<RewardsFigures> {
  const sandboxed: number[] = [];
  const plain: number[] = [];
  for (let i = 0; i < 10; i++) {
    const dir = workDir();
    let t = performance.now();
    await runSandboxed({ command: '/usr/bin/python3', args: ['-c', 'pass'], workDir: dir });
    sandboxed.push(performance.now() - t);
    rmSync(dir, { recursive: true, force: true });
    t = performance.now();
    spawnSync('/usr/bin/python3', ['-c', 'pass']);
    plain.push(performance.now() - t);
  }
  let dir = workDir();
  const torch = await runSandboxed({
    command: '/usr/bin/python3',
    args: ['-c', 'import time; t = time.time(); import torch; print(time.time() - t)'],
    workDir: dir,
    env: { OMP_NUM_THREADS: '1' },
  });
  rmSync(dir, { recursive: true, force: true });

  const totalSteps = 8000;
  const spec = {
    reward_source: readFileSync(join(REPO_ROOT, 'batch-jobs/rewards-train/rewards/shaped_reward.py'), 'utf8'),
    seed: 1,
    total_steps: totalSteps,
    num_envs: 8,
    evaluation_episodes: 0,
  };
  const job = (workDir: string) => ({ jobDir: 'batch-jobs/rewards-train', workDir, args: ['main.py', '--spec', '/job/spec.json', '--output-dir', '/job/out'] });
  const rewardSecondsIn = (dir: string) => (JSON.parse(readFileSync(join(dir, 'out', 'result.json'), 'utf8')) as { rewardSeconds: number }).rewardSeconds;
  dir = workDir();
  writeFileSync(join(dir, 'spec.json'), JSON.stringify(spec));
  let t = performance.now();
  const split = await runSandboxedWithWorker(job(dir), 'reward_channel.py', 'bench');
  const trainSplitSeconds = (performance.now() - t) / 1000;
  if (split.job.exitCode !== 0) throw new Error(`split training failed: ${split.job.stderrTail}`);
  const rewardSplitSeconds = rewardSecondsIn(dir);
  rmSync(dir, { recursive: true, force: true });
  dir = workDir();
  writeFileSync(join(dir, 'spec.json'), JSON.stringify(spec));
  t = performance.now();
  const run = await runPythonJobSandboxed(job(dir));
  const trainSandboxedSeconds = (performance.now() - t) / 1000;
  if (run.exitCode !== 0) throw new Error(`sandboxed training failed: ${run.stderrTail}`);
  const rewardInProcessSeconds = rewardSecondsIn(dir);
  rmSync(dir, { recursive: true, force: true });
  const plainDir = mkdtempSync(join(tmpdir(), 'fp-bench-train-'));
  writeFileSync(join(plainDir, 'spec.json'), JSON.stringify(spec));
  t = performance.now();
  const plainRun = spawnSync('/usr/bin/python3', ['-B', 'main.py', '--spec', join(plainDir, 'spec.json'), '--output-dir', join(plainDir, 'out')], {
    cwd: join(REPO_ROOT, 'batch-jobs/rewards-train'),
    env: { PATH: '/usr/bin:/bin', PYTHONPATH: join(REPO_ROOT, 'batch-jobs/common'), OMP_NUM_THREADS: '1', OPENBLAS_NUM_THREADS: '1' },
  });
  const trainPlainSeconds = (performance.now() - t) / 1000;
  rmSync(plainDir, { recursive: true, force: true });
  if (plainRun.status !== 0) throw new Error(`training failed: ${plainRun.stderr}`);
  return {
    sandboxStartMs: median(sandboxed),
    plainStartMs: median(plain),
    overheadMs: median(sandboxed) - median(plain),
    torchImportSandboxedSeconds: Number(torch.stdoutTail.trim()),
    trainSplitSeconds,
    trainSandboxedSeconds,
    trainPlainSeconds,
    rewardSplitSeconds,
    rewardInProcessSeconds,
    totalSteps,
  };
}

export function describeRewards(f: RewardsFigures): string {
  return (
    `reward search: sandbox start ${f.sandboxStartMs.toFixed(0)} ms vs plain ${f.plainStartMs.toFixed(0)} ms (overhead ${f.overheadMs.toFixed(0)} ms, median of 10); ` +
    `import torch in the sandbox ${f.torchImportSandboxedSeconds.toFixed(2)} s; one candidate (shaped reward, ${f.totalSteps} steps, one seed): ` +
    `${f.trainSplitSeconds.toFixed(1)} s as the pipeline runs it (the reward in its own sandbox), ${f.trainSandboxedSeconds.toFixed(1)} s with the reward in the trainer's sandbox, ` +
    `${f.trainPlainSeconds.toFixed(1)} s plain; reward calls ${f.rewardSplitSeconds.toFixed(2)} s across the socket vs ${f.rewardInProcessSeconds.toFixed(2)} s in-process`
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const figures = await measureRewards();
  console.log(describeRewards(figures));
}
