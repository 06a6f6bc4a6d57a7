/**
 * The humanoid pipeline's Lambda steps.
 *
 * A training run: `prepare` checks the checkpoint it continues from (if any: its format, its
 * policy's shape, its trainer) and writes the run's replay settings beside its checkpoints
 * (run.json), so the replays its uploads fire use them; after training and the final replays,
 * `report` writes the report and lists what the artifact `g1-run-policy` publishes.
 *
 * A checkpoint's upload: `checkpoint` reads and checks the uploaded checkpoint and its run's replay
 * settings (the defaults if the run wrote none); after its replays, `live` records them beside the
 * run's checkpoints and rewrites the run's live report from every checkpoint replayed so far.
 */
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { z } from 'zod';
import { readObjectBytes, s3Client } from '../clients/aws.ts';
import { writeFile } from '../documents.ts';
import { ConfigError, NoSuchKey } from '../errors.ts';
import { sha256Hex } from '../json.ts';
import { readOutcomes } from '../fan-out.ts';
import { type StepContext, stepHandler, writeJson } from '../pipeline-steps.ts';
import { parseOrThrow } from '../schema.ts';
import { loadPolicyActor } from './policy-actor.ts';
import { CHECKPOINT_FILE, CHECKPOINTS_PREFIX, checkpointArsStart, POLICY_FILE, type ReadCheckpoint, readCheckpoint, RUN_NAME } from './checkpoint.ts';
import type { ReplayMetrics } from './replay.ts';
import { type HumanoidReportInput, humanoidMetrics, humanoidReportHtml, type ReplayFigures } from './report.ts';
import {
  ACTIONS,
  COMMANDS,
  OBSERVATION_LAYOUT,
  OBSERVATION_NOISE,
  PUSHES,
  RESET,
  REWARD_SETTINGS,
  REWARD_WEIGHTS,
  TIMING,
  UPSTREAM_DIFFERENCES,
} from './task.ts';

export const humanoidHandler = stepHandler;

export const RUN_FILE = 'run.json';

const ReplaySettings = z
  .object({
    forward: z.array(z.number().min(COMMANDS.forward[0]).max(COMMANDS.forward[1])).min(1).max(6),
    steps: z.int().min(1).max(10_000),
    filmEvery: z.int().min(1).max(100),
  })
  .strict();
type ReplaySettings = z.infer<typeof ReplaySettings>;

/** The replays a checkpoint gets when its run wrote no run.json (a GPU job's, a copied checkpoint). */
export const DEFAULT_REPLAY: ReplaySettings = { forward: [0.5, 1.5, 2.5], steps: TIMING.replaySteps, filmEvery: 2 };

const runFolder = (run: string) => `${CHECKPOINTS_PREFIX}${run}/`;

/** Checks a checkpoint fully: its manifest, its policy file's hash, and that the policy acts on the task's observations. */
async function checkedCheckpoint(uri: string, field: string) {
  const checkpoint = await readCheckpoint(uri, field);
  const actor = await loadPolicyActor(await checkpoint.file(POLICY_FILE), `${field} ${POLICY_FILE}`);
  await actor.release();
  return checkpoint;
}

// ---------------------------------------------------------------------------------------------
// prepare (a training run)

const PrepareRequest = z
  .object({
    run: z.string().regex(RUN_NAME),
    trainer: z.enum(['ars', 'ppo']),
    checkpoint: z.string().nullable(),
    replay: ReplaySettings,
    /** The CPU trainer's fixed forward command, or null for sampled commands. */
    trainForward: z.number().min(COMMANDS.forward[0]).max(COMMANDS.forward[1]).nullable(),
  })
  .strict();

export async function prepareStep(ctx: StepContext, raw: unknown) {
  const request = parseOrThrow(PrepareRequest, raw, 'prepare');
  let resume: { uri: string; sha256: string; step: number } | null = null;
  if (request.checkpoint !== null) {
    const checkpoint = await checkedCheckpoint(request.checkpoint, 'checkpoint');
    if (checkpoint.manifest.trainer !== request.trainer) {
      throw new ConfigError('checkpoint', request.checkpoint, `is a ${checkpoint.manifest.trainer} checkpoint, but this run's trainer is ${request.trainer}`);
    }
    resume = { uri: checkpoint.uri, sha256: checkpoint.sha256, step: checkpoint.manifest.step };
  }
  await writeFile(ctx.bucket, `${runFolder(request.run)}${RUN_FILE}`, JSON.stringify({ replay: request.replay }, null, 2), 'application/json');
  return {
    run: request.run,
    resume,
    // A cache key cannot read a missing field: 'none' stands for a run that starts afresh.
    resumeSha256: resume?.sha256 ?? 'none',
    resumeUri: resume?.uri ?? null,
    forward: request.replay.forward,
    published: resume === null,
    trainCommand: request.trainForward === null ? null : { forward: request.trainForward, lateral: 0, yaw: 0 },
    checkpointPrefix: `s3://${ctx.bucket}/${runFolder(request.run)}`,
    task: gpuTaskSpec(),
  };
}

// ---------------------------------------------------------------------------------------------
// checkpoint (an upload)

const CheckpointRequest = z.object({ trigger: z.object({ bucket: z.string().min(1), key: z.string().min(1) }).passthrough() }).strict();

export async function checkpointStep(ctx: StepContext, raw: unknown) {
  const { trigger } = parseOrThrow(CheckpointRequest, raw, 'checkpoint');
  const uri = `s3://${trigger.bucket}/${trigger.key}`;
  const checkpoint = await checkedCheckpoint(uri, 'checkpoint');
  const { run, step } = checkpoint.manifest;
  const expected = `${runFolder(run)}${String(step).padStart(12, '0')}/${CHECKPOINT_FILE}`;
  if (trigger.key !== expected) {
    throw new ConfigError('checkpoint', uri, `names run ${run} and step ${step}, so it belongs at ${expected}`);
  }
  let replay = DEFAULT_REPLAY;
  try {
    const body = await readObjectBytes(`s3://${ctx.bucket}/${runFolder(run)}${RUN_FILE}`, RUN_FILE);
    replay = parseOrThrow(ReplaySettings, (JSON.parse(body.toString('utf8')) as { replay?: unknown }).replay, `${run}/${RUN_FILE} replay`);
  } catch (error) {
    if (!(error instanceof NoSuchKey)) throw error;
  }
  return { run, step, uri, sha256: checkpoint.sha256, forward: replay.forward, steps: replay.steps, filmEvery: replay.filmEvery };
}

// ---------------------------------------------------------------------------------------------
// live (an upload's replays recorded; the run's live report rewritten)

const ReplayValue = z
  .object({ metrics: z.custom<ReplayMetrics>((v) => typeof v === 'object' && v !== null && 'command' in v), film: z.string().startsWith('s3://') })
  .loose();
type ReplayValue = z.infer<typeof ReplayValue>;

const LiveRequest = z
  .object({
    run: z.string().regex(RUN_NAME),
    step: z.int().min(0),
    checkpoint: z.string().startsWith('s3://'),
    replays: z.unknown(),
  })
  .strict();

/** The replays fan-out's records read back: each replay's result, and how many failed. */
async function replaysOf(records: unknown): Promise<{ replays: ReplayValue[]; failed: string[] }> {
  const outcomes = await readOutcomes(records, 'replays');
  const replays: ReplayValue[] = [];
  const failed: string[] = [];
  for (const [i, o] of outcomes.entries()) {
    if (o.ok) replays.push(parseOrThrow(ReplayValue, o.value, `replays[${i}]`));
    else failed.push(`${o.error}: ${o.cause.slice(0, 300)}`);
  }
  return { replays, failed };
}

export async function liveStep(ctx: StepContext, raw: unknown) {
  const request = parseOrThrow(LiveRequest, raw, 'live');
  const { replays } = await replaysOf(request.replays);
  const folder = `data/humanoid/live/${request.run}/`;
  const record = { step: request.step, checkpoint: request.checkpoint, replays: replays.map((r) => ({ metrics: r.metrics, film: r.film })) };
  await writeFile(ctx.bucket, `${folder}replays/${String(request.step).padStart(12, '0')}.json`, JSON.stringify(record), 'application/json');
  // Every checkpoint of the run replayed so far (this one's record is written: it is among them).
  const records: (typeof record)[] = [];
  let token: string | undefined;
  do {
    const page = await s3Client().send(new ListObjectsV2Command({ Bucket: ctx.bucket, Prefix: `${folder}replays/`, ContinuationToken: token }));
    for (const o of page.Contents ?? []) {
      records.push(JSON.parse((await readObjectBytes(`s3://${ctx.bucket}/${o.Key}`, 'live replays')).toString('utf8')) as typeof record);
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  records.sort((a, b) => a.step - b.step);
  const newest = records.at(-1)!;
  const checkpoint = await readCheckpoint(newest.checkpoint, 'checkpoint');
  const films = await Promise.all(newest.replays.map(async (r) => ({ forward: r.metrics.command.forward, mp4: await readObjectBytes(r.film, 'film') })));
  const live: HumanoidReportInput = {
    run: request.run,
    trainer: checkpoint.manifest.trainer,
    live: true,
    history: checkpoint.manifest.history,
    replays: records.flatMap((r) => r.replays.map((x) => ({ step: r.step, metrics: x.metrics }))),
    films,
    checkpoints: records.map((r) => ({ step: r.step, uri: r.checkpoint })),
    settings: {},
    resumedFrom: null,
    stepsPerSecond: null,
  };
  const report = await writeFile(ctx.bucket, `${folder}report.html`, await humanoidReportHtml(live), 'text/html; charset=utf-8');
  return { reportUri: report.uri, checkpoints: records.length, newestStep: newest.step };
}

// ---------------------------------------------------------------------------------------------
// report (a training run's end)

/** A setting as the report's table shows it. */
const Setting = z.union([z.string(), z.number(), z.boolean(), z.null()]);

const ReportRequest = z
  .object({
    run: z.string().regex(RUN_NAME),
    trainer: z.enum(['ars', 'ppo']),
    train: z
      .object({
        checkpoint: z.string().startsWith('s3://'),
        checkpoints: z.array(z.string().startsWith('s3://')).min(1).max(64),
        startedFrom: z.string().nullable().optional(),
        stepsPerSecond: z.number().nullable().optional(),
      })
      .passthrough(),
    replays: z.unknown(),
    settings: z
      .object({
        trainer: z.enum(['ars', 'ppo']),
        seed: z.int(),
        ars: z.record(z.string(), Setting),
        env: z.record(z.string(), Setting),
        ppo: z.record(z.string(), Setting),
      })
      .strict(),
  })
  .strict();

/**
 * The settings table of a run's report: the seed and the settings of the trainer that ran (ARS's
 * with the environment's, or PPO's), each named by its config path. For ARS the start is the one
 * the final checkpoint records, which a continued run takes from its checkpoint whatever its config
 * says; where the two differ the row says so.
 */
export async function reportSettings(
  settings: z.infer<typeof ReportRequest>['settings'],
  checkpoint: ReadCheckpoint,
): Promise<Record<string, z.infer<typeof Setting>>> {
  const rows: Record<string, z.infer<typeof Setting>> = { trainer: settings.trainer, seed: settings.seed };
  const group = (name: 'ars' | 'env' | 'ppo') => {
    for (const [key, value] of Object.entries(settings[name])) rows[`${name}.${key}`] = value;
  };
  if (settings.trainer === 'ppo') {
    group('ppo');
    return rows;
  }
  group('ars');
  const start = await checkpointArsStart(checkpoint, 'train.checkpoint');
  if (settings.ars.start !== undefined && settings.ars.start !== start)
    rows['ars.start'] = `${start} (from the checkpoint; the config says ${settings.ars.start})`;
  else rows['ars.start'] = start;
  group('env');
  return rows;
}

/** The task's constants as the GPU job reads them (batch-jobs/humanoid-gpu). */
export function gpuTaskSpec() {
  return {
    timing: TIMING,
    actions: ACTIONS,
    commands: COMMANDS,
    rewardWeights: REWARD_WEIGHTS,
    rewardSettings: REWARD_SETTINGS,
    observationNoise: OBSERVATION_NOISE,
    reset: RESET,
    pushes: PUSHES,
  };
}

/** The task as the artifact records it: what a policy's observation and action mean. */
export function taskSpec() {
  return {
    task: 'MuJoCo Playground G1 joystick (google-deepmind/mujoco_playground d5e6b47), as changed here',
    timing: TIMING,
    actions: ACTIONS,
    commands: COMMANDS,
    observationLayout: OBSERVATION_LAYOUT,
    rewardWeights: REWARD_WEIGHTS,
    differences: UPSTREAM_DIFFERENCES,
    policy: { input: 'observation float32 [batch, 103]', output: 'action float32 [batch, 29] in (-1, 1): ctrl = keyframe pose + 0.5 action' },
  };
}

export async function reportStep(ctx: StepContext, raw: unknown) {
  const request = parseOrThrow(ReportRequest, raw, 'report');
  const { replays, failed } = await replaysOf(request.replays);
  if (failed.length > 0)
    throw new ConfigError('replays', failed.length, `replays of the final checkpoint failed (${failed[0]}): the report needs every command's`);
  if (replays.length === 0) throw new ConfigError('replays', 0, 'every replay of the final checkpoint failed: nothing to report');
  const checkpoint = await readCheckpoint(request.train.checkpoint, 'train.checkpoint');
  const step = checkpoint.manifest.step;
  const films = await Promise.all(replays.map(async (r) => ({ forward: r.metrics.command.forward, mp4: await readObjectBytes(r.film, 'film') })));
  const checkpoints = request.train.checkpoints.map((uri) => ({ step: Number(/\/(\d{12})\/checkpoint\.json$/.exec(uri)?.[1] ?? -1), uri }));
  const reportInput: HumanoidReportInput = {
    run: request.run,
    trainer: request.trainer,
    live: false,
    history: checkpoint.manifest.history,
    replays: replays.map((r): ReplayFigures => ({ step, metrics: r.metrics })),
    films,
    checkpoints,
    settings: await reportSettings(request.settings, checkpoint),
    resumedFrom: request.train.startedFrom ?? null,
    stepsPerSecond: request.train.stepsPerSecond ?? null,
  };
  const html = await humanoidReportHtml(reportInput);
  const metrics = humanoidMetrics(reportInput);
  const reportSha = sha256Hex(html);
  const report = await writeFile(ctx.bucket, `data/humanoid/report/${reportSha}.html`, html, 'text/html; charset=utf-8');
  const task = await writeJson(ctx, 'task', taskSpec());
  const replayDoc = await writeJson(ctx, 'replays', { step, checkpoint: checkpoint.uri, replays: replays.map((r) => r.metrics) });
  const folder = checkpoint.uri.slice(0, -CHECKPOINT_FILE.length);
  const files = [
    ...checkpoint.manifest.files.map((f) => ({ name: f.name, uri: `${folder}${f.name}` })),
    { name: CHECKPOINT_FILE, uri: checkpoint.uri },
    { name: 'task.json', uri: task.uri },
    { name: 'replays.json', uri: replayDoc.uri },
    ...replays.map((r) => ({ name: `film-${String(r.metrics.command.forward).replace('.', '_')}.mp4`, uri: r.film })),
    { name: 'report.html', uri: report.uri },
  ];
  // Up to 64 of them: listed in a document, so that no list the config sizes passes through the state.
  const checkpointFiles = await writeJson(
    ctx,
    'checkpoint-files',
    checkpoints.map((c) => ({ name: `checkpoint-${String(c.step).padStart(12, '0')}.json`, uri: c.uri })),
  );
  return {
    files,
    checkpointFilesUri: checkpointFiles.uri,
    checkpointMetrics: { run: request.run, checkpoints: checkpoints.length, lastStep: step },
    metrics,
    reportUri: report.uri,
  };
}
