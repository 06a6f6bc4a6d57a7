/**
 * The humanoid's CPU job (Batch, CPU queue): `train` (ARS over the CPU twin, rollouts on worker
 * threads) or `replay` (a checkpoint's policy driving the twin, measured and filmed), by the
 * spec's `stage` (shared/humanoid/jobs.ts has both; shared/job.ts the contract).
 *
 * This module is also each rollout worker's script: a worker thread runs it again and serves
 * rollouts instead of a job, so the bundle the image runs (`node main.mjs`, from build.ts) needs no
 * second file. Locally the embedded runtime runs `node --import tsx main.ts`, and the workers
 * inherit that flag.
 */
import { availableParallelism } from 'node:os';
import { isMainThread, parentPort } from 'node:worker_threads';
import { ConfigError } from '#shared/errors.ts';
import { runJobMain } from '#shared/job.ts';
import { runReplay, runTrain } from '#shared/humanoid/jobs.ts';
import { RolloutPool, serveRollouts } from '#shared/humanoid/rollouts.ts';

if (!isMainThread) {
  await serveRollouts(parentPort!);
} else {
  await runJobMain(async (spec, ctx) => {
    const stage = (spec as { stage?: unknown } | null)?.stage;
    if (stage === 'replay') return runReplay(spec, ctx);
    if (stage !== 'train') throw new ConfigError('spec.stage', stage, 'must be "train" or "replay"');
    const workers = (spec as { workers?: unknown }).workers;
    const pool = new RolloutPool(typeof workers === 'number' && Number.isInteger(workers) && workers > 0 ? Math.min(workers, 64) : availableParallelism(), {
      url: new URL(import.meta.url),
    });
    try {
      return await runTrain(spec, ctx, pool);
    } finally {
      await pool.close();
    }
  });
}
