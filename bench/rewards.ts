/**
 * Reward search: the sandbox's start-up overhead (the same `python3 -c pass` in bubblewrap and
 * plain, median of 10), `import torch` inside it, and the training time of one candidate (the
 * shaped reward, one seed, the default 8,000 steps) in the sandbox against the same run outside.
 * Run alone with `tsx bench/rewards.ts`, or call `measureRewards()`.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { newSandboxWorkDir, runPythonJobSandboxed, runSandboxed } from '#infra/local/sandbox.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const workDir = () => newSandboxWorkDir('bench');

export interface RewardsFigures {
  readonly sandboxStartMs: number;
  readonly plainStartMs: number;
  readonly overheadMs: number;
  readonly torchImportSandboxedSeconds: number;
  readonly trainSandboxedSeconds: number;
  readonly trainPlainSeconds: number;
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
  const torch = await runSandboxed({ command: '/usr/bin/python3', args: ['-c', 'import time; t = time.time(); import torch; print(time.time() - t)'], workDir: dir, env: { OMP_NUM_THREADS: '1' } });
  rmSync(dir, { recursive: true, force: true });

  const totalSteps = 8000;
  const spec = { reward_source: readFileSync(join(REPO_ROOT, 'batch-jobs/reward-train/rewards/shaped_reward.py'), 'utf8'), seed: 1, total_steps: totalSteps, num_envs: 8, evaluation_episodes: 0 };
  dir = workDir();
  writeFileSync(join(dir, 'spec.json'), JSON.stringify(spec));
  let t = performance.now();
  const run = await runPythonJobSandboxed({ jobDir: 'batch-jobs/reward-train', workDir: dir, args: ['main.py', '--spec', '/job/spec.json', '--output-dir', '/job/out'] });
  const trainSandboxedSeconds = (performance.now() - t) / 1000;
  rmSync(dir, { recursive: true, force: true });
  if (run.exitCode !== 0) throw new Error(`sandboxed training failed: ${run.stderrTail}`);
  const plainDir = mkdtempSync(join(tmpdir(), 'fp-bench-train-'));
  writeFileSync(join(plainDir, 'spec.json'), JSON.stringify(spec));
  t = performance.now();
  const plainRun = spawnSync('/usr/bin/python3', ['-B', 'main.py', '--spec', join(plainDir, 'spec.json'), '--output-dir', join(plainDir, 'out')], {
    cwd: join(REPO_ROOT, 'batch-jobs/reward-train'),
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
    trainSandboxedSeconds,
    trainPlainSeconds,
    totalSteps,
  };
}

export function describeRewards(f: RewardsFigures): string {
  return (
    `reward search: sandbox start ${f.sandboxStartMs.toFixed(0)} ms vs plain ${f.plainStartMs.toFixed(0)} ms (overhead ${f.overheadMs.toFixed(0)} ms, median of 10); ` +
    `import torch in the sandbox ${f.torchImportSandboxedSeconds.toFixed(2)} s; one candidate (shaped reward, ${f.totalSteps} steps, one seed): ` +
    `${f.trainSandboxedSeconds.toFixed(1)} s sandboxed vs ${f.trainPlainSeconds.toFixed(1)} s plain`
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const figures = await measureRewards();
  console.log(describeRewards(figures));
}
