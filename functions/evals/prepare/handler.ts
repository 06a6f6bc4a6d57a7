/**
 * Evaluation, step 1: the checkpoint and the suite. Reads the checkpoint's manifest (the exact
 * bytes the upload event announced, when it names an etag), checks every file it lists exists
 * with the listed size, and reads the benchmark registry and the guard settings, so the suite is
 * whatever is registered when the run starts.
 */
import { GetObjectCommand, HeadObjectCommand } from '@aws-sdk/client-s3';
import { z } from 'zod';
import { getGuardSettings, listBenchmarks, selectSuite } from '#shared/evals/benchmarks.ts';
import { checkpointContentHash, evalArtifactNames, locateCheckpoint, parseManifest } from '#shared/evals/checkpoints.ts';
import { s3Client } from '#shared/clients/aws.ts';
import { ENV, requireEnv } from '#shared/env.ts';
import { ConfigError, errorName } from '#shared/errors.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import { parseOrThrow } from '#shared/schema.ts';

const table = requireEnv(ENV.table);

const Event = z
  .object({
    /** The upload event's object; empty when the run was started from the CLI. */
    trigger: z.union([z.object({ bucket: z.string(), key: z.string(), etag: z.string().nullable().optional() }).loose(), z.object({}).strict()]),
    checkpoint: z.string().nullable(),
    benchmarks: z.array(z.string()).nullable(),
    guard: z.object({ target: z.string().nullable(), guard: z.string().nullable(), marginPoints: z.number().nullable() }),
  })
  .strict();

export async function handler(event: unknown) {
  const request = parseOrThrow(Event, event);
  const trigger = 'key' in request.trigger ? (request.trigger as { bucket: string; key: string; etag?: string | null }) : null;
  let source: { bucket: string; key: string; etag: string | null };
  if (trigger) source = { bucket: trigger.bucket, key: trigger.key, etag: trigger.etag ?? null };
  else if (request.checkpoint) {
    const { Bucket, Key } = parseS3Uri(request.checkpoint, 'config.checkpoint');
    source = { bucket: Bucket, key: Key, etag: null };
  } else {
    throw new ConfigError('config.checkpoint', null, 'is required when a run is not started by an upload: s3://<bucket>/checkpoints/<run>/<step>/manifest.json');
  }
  const { bucket, key } = source;
  const location = locateCheckpoint(bucket, key);
  const s3 = s3Client();
  let text: string;
  try {
    const out = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, ...(source.etag ? { IfMatch: source.etag } : {}) }));
    text = await out.Body!.transformToString();
  } catch (error) {
    if (errorName(error) === 'PreconditionFailed') throw new ConfigError('manifest', `s3://${bucket}/${key}`, `changed since its upload event (etag ${source.etag}); the newer upload starts its own evaluation`);
    if (errorName(error) === 'NoSuchKey') throw new ConfigError('manifest', `s3://${bucket}/${key}`, 'does not exist');
    throw error;
  }
  const manifest = parseManifest(text, location);
  const prefix = key.slice(0, -'manifest.json'.length);
  for (const [i, file] of manifest.files.entries()) {
    let size: number | undefined;
    try {
      size = (await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: `${prefix}${file.name}` }))).ContentLength;
    } catch (error) {
      if (errorName(error) === 'NotFound' || errorName(error) === 'NoSuchKey') {
        throw new ConfigError(`manifest.files.${i}`, file.name, `is missing: no object s3://${bucket}/${prefix}${file.name}`);
      }
      throw error;
    }
    if (size !== file.size) throw new ConfigError(`manifest.files.${i}.size`, file.size, `but s3://${bucket}/${prefix}${file.name} has ${size} bytes`);
  }
  const suite = selectSuite(await listBenchmarks({ table }), request.benchmarks ?? undefined);
  if (suite.length === 0) throw new ConfigError('benchmarks', [], 'no benchmark is registered: add one with `frontier benchmarks add`');
  const stored = await getGuardSettings({ table });
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
