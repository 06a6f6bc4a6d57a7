/**
 * The humanoid's CPU job (batch-jobs/humanoid-cpu), two stages in one image:
 *
 * - `train`: ARS over the CPU twin on every core the job has (train-ars.ts), a checkpoint every
 *   `checkpointEvery` iterations and at the end (checkpoint.ts). It resumes from the newest
 *   checkpoint already under its run's folder (Batch reran it: a reclaimed instance, a retry),
 *   else from `resume` (a checkpoint of an earlier run: `frontier run humanoid --checkpoint URI`),
 *   else starts from the balance controller (balance.ts) or a zero policy, as `ars.start` says.
 * - `replay`: one checkpoint's policy.onnx drives the twin at one command for `steps` control
 *   steps (replay.ts), measured and filmed as an MP4.
 */
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { z } from 'zod';
import { s3Client } from '../clients/aws.ts';
import { ConfigError } from '../errors.ts';
import type { JobContext } from '../job.ts';
import { parseOrThrow } from '../schema.ts';
import { emptyStats, type LinearPolicy, normaliser, zeroPolicy } from './ars.ts';
import {
  CHECKPOINT_FILE,
  CHECKPOINTS_PREFIX,
  type HistoryEntry,
  MAX_CHECKPOINTS,
  POLICY_FILE,
  ARS_PARAMS_FILE,
  ARS_STARTS,
  arsParamsOf,
  readCheckpoint,
  RUN_NAME,
  writeCheckpoint,
} from './checkpoint.ts';
import { balancePolicy } from './balance.ts';
import { gaitStart } from './gait.ts';
import { compileG1 } from './model.ts';
import { loadPolicyActor } from './policy-actor.ts';
import { linearPolicyOnnx } from './onnx-policy.ts';
import { filmMp4, replay } from './replay.ts';
import type { RolloutPool } from './rollouts.ts';
import { ACTIONS, OBSERVATION_SIZE, TIMING } from './task.ts';
import { type IterationFigures, TRAIN_OBJECTIVES, type TrainState, trainArs } from './train-ars.ts';

export const ArsSettings = z
  .object({
    /** Iterations in all (a resumed run continues up to this count). */
    iterations: z.int().min(1).max(100_000),
    /**
     * A new run's first policy: the LQR balance controller (balance.ts), the gait start (gait.ts:
     * the controller marching, searched along its gait's directions only) or zeros (a spec written
     * before this setting: zeros).
     */
    start: z.enum(ARS_STARTS).default('zero'),
    /** What rollouts are ranked by (train-ars.ts TRAIN_OBJECTIVES; a spec written before this setting: return). */
    objective: z.enum(TRAIN_OBJECTIVES).default('return'),
    directions: z.int().min(1).max(1_024),
    topDirections: z.int().min(1).max(1_024),
    stepSize: z.number().positive().max(10),
    noise: z.number().positive().max(10),
    /** Control steps per training rollout at most (upstream's episode: 1,000). */
    rolloutSteps: z.int().min(1).max(TIMING.episodeSteps),
    /** Held-out rollouts of each iteration's policy, for the curve. */
    evaluations: z.int().min(1).max(64),
    checkpointEvery: z.int().min(1).max(100_000),
    /** Iterations whose states update the normaliser (null: all of them); the balance start holds its own. */
    normaliserIterations: z.int().min(1).max(100_000).nullable(),
  })
  .strict()
  .superRefine((s, ctx) => {
    if (s.topDirections > s.directions) {
      ctx.addIssue({ code: 'custom', path: ['topDirections'], message: `${s.topDirections} exceeds directions (${s.directions})` });
    }
    const checkpoints = Math.ceil(s.iterations / s.checkpointEvery);
    if (checkpoints > MAX_CHECKPOINTS) {
      ctx.addIssue({
        code: 'custom',
        path: ['checkpointEvery'],
        message: `${s.checkpointEvery} makes ${checkpoints} checkpoints of ${s.iterations} iterations, over the ${MAX_CHECKPOINTS} a run may write`,
      });
    }
  });
export type ArsSettings = z.infer<typeof ArsSettings>;
export type ArsStart = ArsSettings['start'];

const Command = z.object({ forward: z.number(), lateral: z.number(), yaw: z.number() }).strict();

export const TrainEnv = z
  .object({
    /** Observation noise, times upstream's scales (1: upstream's). */
    noiseLevel: z.number().min(0).max(10),
    pushes: z.boolean(),
    randomReset: z.boolean(),
    /** Reward per control step (times ctrlDt) while upright; upstream: 0. */
    survivalBonus: z.number().min(0).max(100),
    /** A fixed command while training instead of upstream's sampled ones; null: sampled. */
    command: Command.nullable(),
  })
  .strict();

export const TrainSpec = z
  .object({
    stage: z.literal('train'),
    trainer: z.literal('ars'),
    run: z.string().regex(RUN_NAME, 'must be 1-80 letters, digits, "_" or "-"'),
    seed: z
      .int()
      .min(0)
      .max(2 ** 30),
    /** checkpoint.json of an earlier run to continue from; null: start afresh. */
    resume: z.string().nullable(),
    /** Worker threads for rollouts; null: one per core the job has. */
    workers: z.int().min(1).max(64).nullable(),
    ars: ArsSettings,
    env: TrainEnv,
  })
  .strict();
export type TrainSpec = z.infer<typeof TrainSpec>;

export const ReplaySpec = z
  .object({
    stage: z.literal('replay'),
    checkpoint: z.string().min(1),
    command: Command,
    steps: z.int().min(1).max(10_000),
    filmEvery: z.int().min(1).max(100),
  })
  .strict();
export type ReplaySpec = z.infer<typeof ReplaySpec>;

function paramsOf(state: TrainState, seed: number, start: ArsStart): string {
  return JSON.stringify({
    trainer: 'ars',
    iteration: state.iteration,
    steps: state.steps,
    seed,
    weights: Array.from(state.policy.weights),
    start,
    ...(start !== 'zero' ? { normaliser: { mean: Array.from(state.policy.mean), std: Array.from(state.policy.std) } } : {}),
    stats: { count: state.stats.count, sum: Array.from(state.stats.sum), sumSquares: Array.from(state.stats.sumSquares) },
    history: [],
  });
}

/** A train state from a checkpoint's params.json. */
async function stateFromCheckpoint(uri: string, field: string): Promise<{ state: TrainState; history: HistoryEntry[]; start: ArsStart }> {
  const checkpoint = await readCheckpoint(uri, field);
  if (checkpoint.manifest.trainer !== 'ars') {
    throw new ConfigError(field, uri, `is a ${checkpoint.manifest.trainer} checkpoint: the CPU trainer continues only ARS checkpoints`);
  }
  const params = await arsParamsOf(checkpoint, field);
  const stats = emptyStats(OBSERVATION_SIZE);
  stats.count = params.stats.count;
  stats.sum.set(params.stats.sum);
  stats.sumSquares.set(params.stats.sumSquares);
  const { mean, std } = params.normaliser
    ? { mean: Float64Array.from(params.normaliser.mean), std: Float64Array.from(params.normaliser.std) }
    : normaliser(stats);
  const policy: LinearPolicy = { observationSize: OBSERVATION_SIZE, actionSize: ACTIONS.size, weights: Float64Array.from(params.weights), mean, std };
  return {
    state: { policy, stats, iteration: params.iteration, steps: params.steps },
    history: [...checkpoint.manifest.history],
    start: params.start ?? 'zero',
  };
}

/** The newest complete checkpoint (with its checkpoint.json) under a run's folder, or null. */
export async function latestCheckpoint(bucket: string, run: string): Promise<string | null> {
  const prefix = `${CHECKPOINTS_PREFIX}${run}/`;
  let newest: string | null = null;
  let token: string | undefined;
  do {
    const page = await s3Client().send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    for (const o of page.Contents ?? []) {
      // Keys sort by step (12 zero-padded digits), so the last complete one is the newest.
      if (o.Key?.endsWith(`/${CHECKPOINT_FILE}`) && (newest === null || o.Key > newest)) newest = o.Key;
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return newest === null ? null : `s3://${bucket}/${newest}`;
}

export interface TrainResult {
  readonly checkpoint: string;
  readonly checkpointSha256: string;
  readonly steps: number;
  readonly iterations: number;
  /** This run's checkpoints, oldest first. */
  readonly checkpoints: readonly string[];
  /** Where training started from: a checkpoint.json, or null for a new run (its first policy: `start`). */
  readonly startedFrom: string | null;
  /** The run's first policy: the balance controller or zeros (a continued run: its checkpoint's). */
  readonly start: ArsStart;
  readonly seconds: number;
  /** Environment steps per second over the job's cores (training and evaluation rollouts). */
  readonly stepsPerSecond: number;
  readonly workers: number;
  readonly last: HistoryEntry | null;
}

function bucketOf(ctx: JobContext): string {
  return /^s3:\/\/([^/]+)\//.exec(ctx.outputUri)![1]!;
}

export async function runTrain(raw: unknown, ctx: JobContext, pool: RolloutPool): Promise<TrainResult> {
  const spec = parseOrThrow(TrainSpec, raw, 'spec');
  const bucket = bucketOf(ctx);
  const started = performance.now();
  const own = await latestCheckpoint(bucket, spec.run);
  const startedFrom = own ?? spec.resume;
  let state: TrainState | undefined;
  let history: HistoryEntry[] = [];
  let start: ArsStart = spec.ars.start;
  if (startedFrom) ({ state, history, start } = await stateFromCheckpoint(startedFrom, own ? 'checkpoint' : 'resume'));
  // A new run's first policy; a resumed gait run needs only the basis its search keeps to.
  const first = state === undefined || start === 'gait' ? await firstPolicy(start) : undefined;
  state ??= { policy: first!.policy, stats: emptyStats(OBSERVATION_SIZE), iteration: 0, steps: 0 };
  if (own) ctx.progress({ stage: 'train', resumedFrom: own, iteration: state.iteration });
  const checkpoints: string[] = [];
  let lastSha256 = '';
  const offsetSeconds = history.at(-1)?.seconds ?? 0;
  let evaluationSteps = 0;
  const save = async (s: TrainState) => {
    const { uri, sha256 } = await writeCheckpoint(
      bucket,
      { trainer: 'ars', run: spec.run, step: s.steps, history },
      { [POLICY_FILE]: linearPolicyOnnx(s.policy), [ARS_PARAMS_FILE]: paramsOf(s, spec.seed, start) },
    );
    checkpoints.push(uri);
    lastSha256 = sha256;
  };
  const onIteration = async (s: TrainState, f: IterationFigures) => {
    evaluationSteps += f.meanStepsUpright * spec.ars.evaluations;
    history.push({
      steps: f.steps,
      meanReturn: f.meanReturn,
      meanStepsUpright: f.meanStepsUpright,
      meanForwardSpeed: f.meanForwardSpeed,
      seconds: offsetSeconds + (performance.now() - started) / 1000,
    });
    ctx.progress({
      stage: 'train',
      iteration: f.iteration,
      steps: f.steps,
      meanReturn: f.meanReturn,
      stepsUpright: f.meanStepsUpright,
      speed: f.meanForwardSpeed,
    });
    if (f.iteration % spec.ars.checkpointEvery === 0 || f.iteration === spec.ars.iterations) await save(s);
  };
  const { env } = spec;
  const { state: final } = await trainArs(
    pool,
    state,
    {
      ...spec.ars,
      // The balance controller's gains (and the gait's, tracked through them) are written against its own normaliser: it holds.
      normaliserIterations: start === 'zero' ? (spec.ars.normaliserIterations ?? undefined) : 0,
      ...(first?.basis ? { basis: first.basis } : {}),
      seed: spec.seed,
      env: {
        noiseLevel: env.noiseLevel,
        pushes: env.pushes,
        randomReset: env.randomReset,
        survivalBonus: env.survivalBonus,
        ...(env.command ? { command: env.command } : {}),
      },
    },
    onIteration,
  );
  // Nothing left to train (resumed at or past `iterations`): the starting point is the result.
  if (checkpoints.length === 0) await save(final);
  const last = checkpoints.at(-1)!;
  const seconds = (performance.now() - started) / 1000;
  const trained = final.steps - state.steps + evaluationSteps;
  return {
    checkpoint: last,
    checkpointSha256: lastSha256,
    steps: final.steps,
    iterations: final.iteration,
    checkpoints,
    startedFrom,
    start,
    seconds,
    stepsPerSecond: seconds > 0 ? trained / seconds : 0,
    workers: pool.size,
    last: history.at(-1) ?? null,
  };
}

/**
 * A new run's first policy: the balance controller (computed on the twin, about 0.5 s), the gait
 * start with the basis its search keeps to (computed from the same controller, so a resumed run
 * recomputes the same), or zeros.
 */
async function firstPolicy(start: ArsStart): Promise<{ policy: LinearPolicy; basis?: Float64Array[] }> {
  if (start === 'zero') return { policy: zeroPolicy(OBSERVATION_SIZE, ACTIONS.size) };
  const sim = await compileG1({ timestep: TIMING.simDt });
  try {
    const balance = balancePolicy(sim).policy;
    return start === 'gait' ? gaitStart(balance) : { policy: balance };
  } finally {
    sim.dispose();
  }
}

export interface ReplayResult {
  readonly metrics: Awaited<ReturnType<typeof replay>>['metrics'];
  readonly film: string;
  readonly frames: number;
  readonly seconds: number;
}

export async function runReplay(raw: unknown, ctx: JobContext): Promise<ReplayResult> {
  const spec = parseOrThrow(ReplaySpec, raw, 'spec');
  const started = performance.now();
  const checkpoint = await readCheckpoint(spec.checkpoint, 'checkpoint');
  const actor = await loadPolicyActor(await checkpoint.file(POLICY_FILE), `checkpoint ${POLICY_FILE}`);
  const sim = await compileG1({ timestep: TIMING.simDt });
  try {
    const result = await replay(sim, (o) => actor.act(o), { command: spec.command, steps: spec.steps, filmEvery: spec.filmEvery });
    const film = await ctx.putBytes('film.mp4', filmMp4(result.frames, result.framesPerSecond), 'video/mp4');
    await ctx.putJson('metrics.json', result.metrics);
    return { metrics: result.metrics, film: film.uri, frames: result.frames.length, seconds: (performance.now() - started) / 1000 };
  } finally {
    sim.dispose();
    await actor.release();
  }
}
