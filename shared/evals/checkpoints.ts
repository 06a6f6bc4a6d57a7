/**
 * Checkpoints as training jobs upload them: `checkpoints/<run>/<step>/` in the platform bucket,
 * the files first and `manifest.json` last, listing every file with its sha256 and size. The
 * manifest's upload is what starts an evaluation, so a checkpoint is complete when it is seen.
 *
 * A checkpoint's identity for caching is its content hash: the sha256 of the canonical JSON of
 * its files (name, sha256, size), so the same weights uploaded under another run or step are the
 * same checkpoint, and a changed file is a different one.
 */
import { z } from 'zod';
import { ConfigError } from '../errors.ts';
import { canonicalJson, sha256Hex } from '../json.ts';
import { parseOrThrow } from '../schema.ts';

export const CHECKPOINTS_PREFIX = 'checkpoints/';
export const MANIFEST_NAME = 'manifest.json';
/** What the evaluation trigger matches. */
export const MANIFEST_PATTERN = `${CHECKPOINTS_PREFIX}*/*/${MANIFEST_NAME}`;

const FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Files in one checkpoint: the manifest travels in the run's state, so its length is bounded. */
export const MAX_CHECKPOINT_FILES = 64;

/** manifest.json as training jobs write it (snake_case, as the Python side writes it). */
export const CheckpointManifest = z
  .object({
    run: z.string().min(1).max(128),
    step: z.int().min(0),
    files: z
      .array(
        z.object({
          name: z.string().regex(FILE_NAME, 'must be a plain file name (letters, digits, ".", "_", "-")'),
          sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits'),
          size: z.int().min(0),
        }),
      )
      .min(1)
      .max(MAX_CHECKPOINT_FILES),
    base_step: z.int().min(0).optional(),
    created_at: z.string().max(64).optional(),
  })
  // Other keys are dropped: the parsed manifest travels in the run's state, so its size is the schema's.
  .strip();
export type CheckpointManifest = z.infer<typeof CheckpointManifest>;

export interface CheckpointLocation {
  readonly run: string;
  readonly step: number;
  /** s3://bucket/checkpoints/<run>/<step>/ */
  readonly uri: string;
}

/** Run and step from a manifest's key, `checkpoints/<run>/<step>/manifest.json`. */
export function locateCheckpoint(bucket: string, key: string): CheckpointLocation {
  const match = /^checkpoints\/([^/]+)\/(\d{1,12})\/manifest\.json$/.exec(key);
  if (!match) throw new ConfigError('key', key, 'must be checkpoints/<run>/<step>/manifest.json with a whole-number step');
  return { run: match[1]!, step: Number(match[2]), uri: `s3://${bucket}/${CHECKPOINTS_PREFIX}${match[1]}/${match[2]}/` };
}

/** Parses manifest.json and checks it agrees with where it was found. */
export function parseManifest(text: string, location: CheckpointLocation): CheckpointManifest {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ConfigError('manifest', text.slice(0, 80), `is not JSON (${(error as Error).message})`);
  }
  const manifest = parseOrThrow(CheckpointManifest, value, 'manifest');
  if (manifest.run !== location.run) throw new ConfigError('manifest.run', manifest.run, `does not match the key's run "${location.run}"`);
  if (manifest.step !== location.step) throw new ConfigError('manifest.step', manifest.step, `does not match the key's step ${location.step}`);
  const seen = new Set<string>();
  manifest.files.forEach((file, i) => {
    if (file.name === MANIFEST_NAME) throw new ConfigError(`manifest.files.${i}.name`, file.name, 'the manifest cannot list itself');
    if (seen.has(file.name)) throw new ConfigError(`manifest.files.${i}.name`, file.name, 'is listed twice');
    seen.add(file.name);
  });
  return manifest;
}

/** The checkpoint's content hash: its files' names, hashes and sizes, in name order. */
export function checkpointContentHash(manifest: CheckpointManifest): string {
  const files = [...manifest.files].sort((a, b) => (a.name < b.name ? -1 : 1)).map(({ name, sha256, size }) => ({ name, sha256, size }));
  return sha256Hex(canonicalJson(files));
}

/**
 * An artifact-name-safe form of a run name (lowercase letters, digits, "-"): the run itself when
 * it already is one, otherwise a readable slug plus a hash of the run, so two runs never share it.
 */
export function runSlug(run: string): string {
  if (/^[a-z0-9][a-z0-9-]{0,39}$/.test(run)) return run;
  const base =
    run
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 32) || 'run';
  return `${base}-${sha256Hex(run).slice(0, 6)}`;
}

/** The artifacts of a training run's evaluations. */
export function evalArtifactNames(run: string): { checkpoint: string; eval: string; leaderboard: string } {
  const slug = runSlug(run);
  return { checkpoint: `checkpoint-${slug}`, eval: `eval-${slug}`, leaderboard: `leaderboard-${slug}` };
}
