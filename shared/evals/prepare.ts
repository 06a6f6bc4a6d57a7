/**
 * Evaluation, step 1 (the prepare Lambda): the checkpoint and the suite. Reads the checkpoint's
 * manifest (the exact bytes the upload event announced, when it names an etag), checks every
 * file it lists exists with the listed size, and reads the benchmark registry and the guard
 * settings, so the suite is whatever is registered when the run starts.
 */
import { GetObjectCommand, HeadObjectCommand } from '@aws-sdk/client-s3';
import { z } from 'zod';
import { s3Client } from '../clients/aws.ts';
import { ConfigError, errorName } from '../errors.ts';
import { parseS3Uri } from '../s3uri.ts';
import { getGuardSettings, listBenchmarks, selectSuite, type RegistryLocation } from './benchmarks.ts';
import { checkpointContentHash, evalArtifactNames, locateCheckpoint, parseManifest, type CheckpointManifest } from './checkpoints.ts';

export const PrepareRequest = z
  .object({
    /** The upload event's object; empty when the run was started from the CLI. */
    trigger: z.union([z.object({ bucket: z.string(), key: z.string(), etag: z.string().nullable().optional() }).loose(), z.object({}).strict()]),
    checkpoint: z.string().nullable(),
    benchmarks: z.array(z.string()).nullable(),
    guard: z.object({ target: z.string().nullable(), guard: z.string().nullable(), marginPoints: z.number().nullable() }),
  })
  .strict();
export type PrepareRequest = z.infer<typeof PrepareRequest>;

interface ManifestSource {
  readonly bucket: string;
  readonly key: string;
  readonly etag: string | null;
}

/** The manifest to evaluate: the upload event's object, else the configured checkpoint URI. */
function manifestSource(request: PrepareRequest): ManifestSource {
  if ('key' in request.trigger) {
    const trigger = request.trigger as { bucket: string; key: string; etag?: string | null };
    return { bucket: trigger.bucket, key: trigger.key, etag: trigger.etag ?? null };
  }
  if (request.checkpoint) {
    const { Bucket, Key } = parseS3Uri(request.checkpoint, 'config.checkpoint');
    return { bucket: Bucket, key: Key, etag: null };
  }
  throw new ConfigError('config.checkpoint', null, 'is required when a run is not started by an upload: s3://<bucket>/checkpoints/<run>/<step>/manifest.json');
}

/** The manifest's text; with an etag, exactly the bytes the upload event announced. */
async function readManifestText({ bucket, key, etag }: ManifestSource): Promise<string> {
  try {
    const out = await s3Client().send(new GetObjectCommand({ Bucket: bucket, Key: key, ...(etag ? { IfMatch: etag } : {}) }));
    return await out.Body!.transformToString();
  } catch (error) {
    if (errorName(error) === 'PreconditionFailed')
      throw new ConfigError('manifest', `s3://${bucket}/${key}`, `changed since its upload event (etag ${etag}); the newer upload starts its own evaluation`);
    if (errorName(error) === 'NoSuchKey') throw new ConfigError('manifest', `s3://${bucket}/${key}`, 'does not exist');
    throw error;
  }
}

/** Every file the manifest lists exists beside it, with the listed size. */
async function checkManifestFiles(bucket: string, prefix: string, manifest: CheckpointManifest): Promise<void> {
  for (const [i, file] of manifest.files.entries()) {
    let size: number | undefined;
    try {
      size = (await s3Client().send(new HeadObjectCommand({ Bucket: bucket, Key: `${prefix}${file.name}` }))).ContentLength;
    } catch (error) {
      if (errorName(error) === 'NotFound' || errorName(error) === 'NoSuchKey') {
        throw new ConfigError(`manifest.files.${i}`, file.name, `is missing: no object s3://${bucket}/${prefix}${file.name}`);
      }
      throw error;
    }
    if (size !== file.size) throw new ConfigError(`manifest.files.${i}.size`, file.size, `but s3://${bucket}/${prefix}${file.name} has ${size} bytes`);
  }
}

/** The most benchmarks one run evaluates (config.benchmarks takes at most as many). */
export const MAX_SUITE_BENCHMARKS = 64;

/** Step 1: the checkpoint (checked), the suite, the guard settings and the run's artifact names. */
export async function prepareEvaluation(where: Pick<RegistryLocation, 'table'>, request: PrepareRequest) {
  const source = manifestSource(request);
  const { bucket, key } = source;
  const location = locateCheckpoint(bucket, key);
  const manifest = parseManifest(await readManifestText(source), location);
  await checkManifestFiles(bucket, key.slice(0, -'manifest.json'.length), manifest);
  const suite = selectSuite(await listBenchmarks(where), request.benchmarks ?? undefined);
  if (suite.length === 0) throw new ConfigError('benchmarks', [], 'no benchmark is registered: add one with `frontier benchmarks add`');
  // Each benchmark is a fan-out item carried in the state: a run evaluates a bounded suite.
  if (suite.length > MAX_SUITE_BENCHMARKS) {
    throw new ConfigError('benchmarks', suite.length, `registered benchmarks: over ${MAX_SUITE_BENCHMARKS} in one run; choose some with config.benchmarks`);
  }
  const stored = await getGuardSettings(where);
  const guard = {
    target: request.guard.target ?? stored?.target ?? null,
    guard: request.guard.guard ?? stored?.guard ?? null,
    marginPoints: request.guard.marginPoints ?? stored?.marginPoints ?? 2,
  };
  return {
    checkpoint: {
      run: location.run,
      step: location.step,
      uri: location.uri,
      manifestUri: `s3://${bucket}/${key}`,
      contentHash: checkpointContentHash(manifest),
      baseStep: manifest.base_step ?? null,
      manifest,
    },
    suite: suite.map(({ name, version, scorer, sampleSize, dataUri, dataSha256 }) => ({ name, version, scorer, sampleSize, dataUri, dataSha256 })),
    guard,
    artifacts: evalArtifactNames(location.run),
  };
}
