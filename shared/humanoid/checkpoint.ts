/**
 * Checkpoints, the one format both trainers write (the CPU trainer here, the GPU job's
 * batch-jobs/humanoid-gpu/checkpoints.py) and everything downstream reads: under
 * `runs/humanoid/checkpoints/<run>/<step, 12 digits>/` in the platform bucket, the files first
 * and `checkpoint.json` last, listing each with its sha256 and size. The upload of
 * checkpoint.json is what starts a replay, so a checkpoint is complete when it is seen.
 *
 * Every checkpoint holds `policy.onnx` (input `observation` float32 [batch, 103], output `action`
 * float32 [batch, 29] in (-1, 1)), whatever the trainer, so replays and the published policy do
 * not care which trainer made it; and the trainer's raw parameters (`params.json` for ARS: the
 * weights, the normaliser's sums and the iteration; `params.msgpack` for Brax PPO), from which a
 * run resumes. `history` is the training curve so far (one entry per evaluation).
 */
import { z } from 'zod';
import { readObjectBytes } from '../clients/aws.ts';
import { writeFile } from '../documents.ts';
import { ConfigError } from '../errors.ts';
import { sha256Hex } from '../json.ts';
import { parseOrThrow } from '../schema.ts';
import { weightCount } from './ars.ts';
import { ACTIONS, OBSERVATION_SIZE } from './task.ts';

export const CHECKPOINT_FILE = 'checkpoint.json';
export const POLICY_FILE = 'policy.onnx';
/** Where a run's checkpoints go, under the pipeline's runs/ prefix (which its jobs may write). */
export const CHECKPOINTS_PREFIX = 'runs/humanoid/checkpoints/';
/** What starts a replay: a checkpoint.json under a run's step folder. */
export const CHECKPOINT_PATTERN = `${CHECKPOINTS_PREFIX}*/*/${CHECKPOINT_FILE}`;
/** A run writes at most this many checkpoints: their list travels in the state machine's state. */
export const MAX_CHECKPOINTS = 64;
/** A run's name in the key: an execution name's characters. */
export const RUN_NAME = /^[A-Za-z0-9_-]{1,80}$/;

const FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export const HistoryEntry = z.object({
  /** Environment (control) steps of training so far. */
  steps: z.int().min(0),
  meanReturn: z.number(),
  /** Mean control steps before an evaluation episode ended (fell, or reached its length). */
  meanStepsUpright: z.number().min(0),
  /** Mean forward speed (m/s) of the evaluation episodes; null where the trainer does not measure it. */
  meanForwardSpeed: z.number().nullable(),
  seconds: z.number().min(0),
});
export type HistoryEntry = z.infer<typeof HistoryEntry>;

export const CheckpointManifest = z.object({
  format: z.literal(1),
  trainer: z.enum(['ars', 'ppo']),
  run: z.string().regex(RUN_NAME, 'must be 1-80 letters, digits, "_" or "-"'),
  step: z.int().min(0),
  observationSize: z.literal(OBSERVATION_SIZE),
  actionSize: z.literal(ACTIONS.size),
  files: z
    .array(z.object({ name: z.string().regex(FILE_NAME), sha256: z.string().regex(/^[0-9a-f]{64}$/), size: z.int().min(0) }))
    .min(1)
    .max(16)
    .refine((files) => files.some((f) => f.name === POLICY_FILE), `must include ${POLICY_FILE}`),
  /** At most one entry per evaluation: 10,000 of them is far beyond any config's. */
  history: z.array(HistoryEntry).max(10_000),
});
export type CheckpointManifest = z.infer<typeof CheckpointManifest>;

/** The key of a checkpoint's folder: its run and its step, zero-padded so keys sort by step. */
export function checkpointFolder(run: string, step: number): string {
  if (!RUN_NAME.test(run)) throw new ConfigError('run', run, 'must be 1-80 letters, digits, "_" or "-"');
  if (!Number.isInteger(step) || step < 0 || step >= 1e12) throw new ConfigError('step', step, 'must be an integer from 0 to 10^12 - 1');
  return `${CHECKPOINTS_PREFIX}${run}/${String(step).padStart(12, '0')}/`;
}

/** Writes a checkpoint's files, then checkpoint.json; returns checkpoint.json's URI and the sha256 of its bytes. */
export async function writeCheckpoint(
  bucket: string,
  checkpoint: { trainer: CheckpointManifest['trainer']; run: string; step: number; history: readonly HistoryEntry[] },
  files: Readonly<Record<string, Uint8Array | string>>,
): Promise<{ uri: string; sha256: string }> {
  const folder = checkpointFolder(checkpoint.run, checkpoint.step);
  const listed: CheckpointManifest['files'] = [];
  for (const [name, body] of Object.entries(files)) {
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    await writeFile(bucket, `${folder}${name}`, bytes, name.endsWith('.json') ? 'application/json' : 'application/octet-stream');
    listed.push({ name, sha256: sha256Hex(bytes), size: bytes.byteLength });
  }
  const manifest = parseOrThrow(
    CheckpointManifest,
    {
      format: 1,
      trainer: checkpoint.trainer,
      run: checkpoint.run,
      step: checkpoint.step,
      observationSize: OBSERVATION_SIZE,
      actionSize: ACTIONS.size,
      files: listed,
      history: checkpoint.history,
    },
    'checkpoint',
  );
  const body = JSON.stringify(manifest, null, 2);
  const written = await writeFile(bucket, `${folder}${CHECKPOINT_FILE}`, body, 'application/json');
  return { uri: written.uri, sha256: sha256Hex(body) };
}

export interface ReadCheckpoint {
  readonly uri: string;
  readonly manifest: CheckpointManifest;
  /** The sha256 of checkpoint.json's bytes: the checkpoint's identity for caching. */
  readonly sha256: string;
  /** A listed file's bytes, checked against its sha256. */
  file(name: string): Promise<Buffer>;
}

/**
 * Reads and checks checkpoint.json at `uri` (a checkpoint folder's, s3://...): its schema (the
 * policy's sizes included), and on each file read, the file's sha256. `field` names where the URI
 * came from in errors.
 */
export async function readCheckpoint(uri: string, field = 'checkpoint'): Promise<ReadCheckpoint> {
  if (!uri.endsWith(`/${CHECKPOINT_FILE}`)) throw new ConfigError(field, uri, `must be the s3:// URI of a checkpoint's ${CHECKPOINT_FILE}`);
  const bytes = await readObjectBytes(uri, field);
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new ConfigError(field, uri, `is not JSON (${(error as Error).message})`);
  }
  const manifest = parseOrThrow(CheckpointManifest, json, field);
  const folder = uri.slice(0, -CHECKPOINT_FILE.length);
  return {
    uri,
    manifest,
    sha256: sha256Hex(bytes),
    async file(name) {
      const listed = manifest.files.find((f) => f.name === name);
      if (!listed) throw new ConfigError(`${field}.files`, name, `is not a file of the checkpoint at ${uri}`);
      const body = await readObjectBytes(`${folder}${name}`, `${field}.files`);
      const sha256 = sha256Hex(body);
      if (sha256 !== listed.sha256) throw new ConfigError(`${field}.files`, name, `has sha256 ${sha256}, but ${CHECKPOINT_FILE} lists ${listed.sha256}`);
      return body;
    },
  };
}

/** An ARS checkpoint's raw parameters. */
export const ARS_PARAMS_FILE = 'params.json';

/** Where an ARS run starts (jobs.ts): the balance controller, the gait start or zeros. */
export const ARS_STARTS = ['balance', 'gait', 'zero'] as const;

/** ARS's raw parameters in a checkpoint: enough to resume exactly. */
export const ArsParams = z.object({
  trainer: z.literal('ars'),
  iteration: z.int().min(0),
  steps: z.int().min(0),
  seed: z.int(),
  weights: z.array(z.number()).length(weightCount(OBSERVATION_SIZE, ACTIONS.size)),
  /** The run's first policy (absent in checkpoints older than the balance start: zero). */
  start: z.enum(ARS_STARTS).optional(),
  /** The normaliser the weights act through, when it is held rather than learnt from `stats` (the balance and gait starts'). */
  normaliser: z.object({ mean: z.array(z.number()).length(OBSERVATION_SIZE), std: z.array(z.number().positive()).length(OBSERVATION_SIZE) }).optional(),
  stats: z.object({
    count: z.int().min(0),
    sum: z.array(z.number()).length(OBSERVATION_SIZE),
    sumSquares: z.array(z.number()).length(OBSERVATION_SIZE),
  }),
  history: z.array(z.unknown()),
});

/** An ARS checkpoint's params.json, checked. */
export async function arsParamsOf(checkpoint: ReadCheckpoint, field: string): Promise<z.infer<typeof ArsParams>> {
  return parseOrThrow(ArsParams, JSON.parse((await checkpoint.file(ARS_PARAMS_FILE)).toString('utf8')), `${field} ${ARS_PARAMS_FILE}`);
}

/**
 * The first policy an ARS checkpoint's run started from, as its params.json records it (a
 * checkpoint older than the balance start: zero). A continued run keeps its checkpoint's start
 * whatever its config says, so this, not the config, is what the report shows.
 */
export async function checkpointArsStart(checkpoint: ReadCheckpoint, field = 'checkpoint'): Promise<(typeof ARS_STARTS)[number]> {
  return (await arsParamsOf(checkpoint, field)).start ?? 'zero';
}
