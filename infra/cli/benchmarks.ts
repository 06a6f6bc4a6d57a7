/**
 * `frontier benchmarks ...` and `frontier backfill RUN`: the evaluation suite's registry and the
 * re-evaluation of a run's checkpoints, against the local runtime or a deployed platform.
 *
 *   benchmarks add NAME --data FILE --scorer SCORER --sample-size N [--description TEXT] [--bump]
 *   benchmarks list
 *   benchmarks guard TARGET GUARD [--margin POINTS]
 *   backfill RUN [--benchmarks a,b]
 */
import { readFileSync } from 'node:fs';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { StartExecutionCommand } from '@aws-sdk/client-sfn';
import { getGuardSettings, listBenchmarks, registerBenchmark, setGuardSettings, type RegistryLocation } from '#shared/evals/benchmarks.ts';
import { CHECKPOINTS_PREFIX, locateCheckpoint, MANIFEST_NAME } from '#shared/evals/checkpoints.ts';
import { s3Client, sfnClient } from '#shared/clients/aws.ts';
import { ConfigError } from '#shared/errors.ts';
import { sha256Hex } from '#shared/json.ts';
import { LocalRuntime } from '../local/runtime.ts';
import { pipelineNamed, resolveConfig } from './config.ts';
import type { Io } from './output.ts';
import { deployedPlatform, deployedStateMachine } from './run-aws.ts';

import { EVALS_PIPELINE } from '#pipelines/evals/stack.ts';

export interface RegistryOptions {
  readonly target: 'local' | 'aws';
  readonly dataDir?: string;
  readonly portBase?: number;
}

/** The platform's table and bucket: the local runtime's, or the deployed FrontierPlatform stack's outputs. */
async function withRegistry<T>(
  options: RegistryOptions,
  body: (where: RegistryLocation, runtime?: LocalRuntime) => Promise<T>,
  running?: LocalRuntime,
): Promise<T> {
  if (running) return body({ table: running.resources.tables[0]!, bucket: running.resources.buckets[0]! }, running);
  if (options.target === 'aws') return body(await deployedPlatform());
  const runtime = await LocalRuntime.start({ dataDir: options.dataDir, portBase: options.portBase });
  try {
    return await body({ table: runtime.resources.tables[0]!, bucket: runtime.resources.buckets[0]! }, runtime);
  } finally {
    await runtime.stop();
  }
}

export interface AddOptions {
  readonly data?: string;
  readonly scorer?: string;
  readonly sampleSize?: string;
  readonly description?: string;
  readonly bump?: boolean;
}

export async function benchmarksCommand(
  sub: string | undefined,
  args: string[],
  add: AddOptions & { margin?: string },
  options: RegistryOptions,
  io: Io,
): Promise<void> {
  if (sub === 'add') {
    const [name] = args;
    if (!name) throw new ConfigError('benchmarks add', undefined, 'needs a NAME');
    if (!add.data) throw new ConfigError('--data', undefined, 'is required: a JSONL file of rows {id, prompt, answer}');
    const sampleSize = Number(add.sampleSize);
    let data: string;
    try {
      data = readFileSync(add.data, 'utf8');
    } catch (error) {
      throw new ConfigError('--data', add.data, `cannot be read (${(error as Error).message})`);
    }
    await withRegistry(options, async (where) => {
      const { entry, change } = await registerBenchmark(where, {
        name,
        data,
        scorer: String(add.scorer),
        sampleSize,
        description: add.description,
        bump: add.bump,
      });
      io.out(`${entry.name} v${entry.version} ${change}: ${entry.rows} rows, sample ${entry.sampleSize}, scorer ${entry.scorer}, ${entry.dataUri}`);
    });
  } else if (sub === 'list' || sub === undefined) {
    await withRegistry(options, async (where) => {
      const all = await listBenchmarks(where);
      if (!all.length) io.out('no benchmarks registered (frontier benchmarks add NAME --data FILE --scorer SCORER --sample-size N)');
      for (const b of all)
        io.out(
          `${b.name.padEnd(20)} v${String(b.version).padEnd(4)} ${b.scorer.padEnd(13)} sample ${String(b.sampleSize).padEnd(6)} ${b.rows} rows  ${b.description}`,
        );
      const guard = await getGuardSettings(where);
      io.out(
        guard
          ? `guard: best on ${guard.target} with ${guard.guard} within ${guard.marginPoints} points of the base model`
          : 'guard: not configured (frontier benchmarks guard TARGET GUARD [--margin POINTS])',
      );
    });
  } else if (sub === 'guard') {
    const [target, guard] = args;
    await withRegistry(options, async (where) => {
      const set = await setGuardSettings(where, { target, guard, marginPoints: add.margin === undefined ? 2 : Number(add.margin) });
      io.out(`guard: best on ${set.target} with ${set.guard} within ${set.marginPoints} points of the base model`);
    });
  } else {
    throw new ConfigError('benchmarks', sub, 'use "benchmarks add NAME ...", "benchmarks list" or "benchmarks guard TARGET GUARD"');
  }
}

/** Every checkpoint manifest of a run, in step order. */
export async function runManifests(bucket: string, run: string): Promise<{ key: string; step: number }[]> {
  if (!run || run.includes('/')) throw new ConfigError('run', run, 'must be a run name (the <run> of checkpoints/<run>/<step>/)');
  const found: { key: string; step: number }[] = [];
  let ContinuationToken: string | undefined;
  do {
    const page = await s3Client().send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${CHECKPOINTS_PREFIX}${run}/`, ContinuationToken }));
    for (const object of page.Contents ?? []) {
      if (!object.Key?.endsWith(`/${MANIFEST_NAME}`)) continue;
      try {
        found.push({ key: object.Key, step: locateCheckpoint(bucket, object.Key).step });
      } catch {
        // Not checkpoints/<run>/<step>/manifest.json: not a checkpoint.
      }
    }
    ContinuationToken = page.NextContinuationToken;
  } while (ContinuationToken);
  if (!found.length) throw new ConfigError('run', run, `has no checkpoints under s3://${bucket}/${CHECKPOINTS_PREFIX}${run}/`);
  return found.sort((a, b) => a.step - b.step);
}

export interface BackfillSummary {
  readonly checkpoints: number;
  readonly succeeded: number;
  readonly failed: number;
  readonly evalJobs: number;
}

/**
 * One evaluation per checkpoint of the run, over the whole current suite (or the named
 * benchmarks): pairs already evaluated at their current version are cache hits, so only new or
 * bumped benchmarks compute. Locally it waits for every run; on AWS it starts them and prints
 * their ARNs.
 */
export async function backfill(
  run: string,
  benchmarks: string[] | undefined,
  options: RegistryOptions,
  io: Io,
  running?: LocalRuntime,
): Promise<BackfillSummary> {
  const entry = pipelineNamed(EVALS_PIPELINE);
  return withRegistry(
    options,
    async (where, runtime) => {
      const manifests = await runManifests(where.bucket, run);
      const stamp = new Date()
        .toISOString()
        .replace(/[^0-9]/g, '')
        .slice(0, 14);
      const inputs = manifests.map((m) => ({
        name: `backfill-${stamp}-${sha256Hex(m.key).slice(0, 12)}`,
        config: resolveConfig(entry, { config: JSON.stringify({ checkpoint: `s3://${where.bucket}/${m.key}`, benchmarks: benchmarks ?? null }) }),
        step: m.step,
      }));
      if (!runtime) {
        const stateMachineArn = await deployedStateMachine(entry);
        for (const input of inputs) {
          const out = await sfnClient().send(new StartExecutionCommand({ stateMachineArn, name: input.name, input: JSON.stringify({ config: input.config }) }));
          io.out(`step ${input.step}: started ${out.executionArn}`);
        }
        return { checkpoints: inputs.length, succeeded: 0, failed: 0, evalJobs: 0 };
      }
      const jobsBefore = runtime.counters().batchJobs;
      const records = await Promise.all(inputs.map((input) => runtime.startExecution(EVALS_PIPELINE, { config: input.config }, { name: input.name }).done));
      records.forEach((record, i) => {
        io.out(`step ${inputs[i]!.step}: ${record.status}${record.status === 'SUCCEEDED' ? '' : ` (${record.error}: ${record.cause})`}`);
      });
      const summary = {
        checkpoints: inputs.length,
        succeeded: records.filter((r) => r.status === 'SUCCEEDED').length,
        failed: records.filter((r) => r.status !== 'SUCCEEDED').length,
        evalJobs: runtime.counters().batchJobs - jobsBefore,
      };
      io.out(
        `backfill of ${run}: ${summary.checkpoints} checkpoints, ${summary.succeeded} succeeded, ${summary.failed} failed, ${summary.evalJobs} eval jobs started (the other pairs were cached)`,
      );
      return summary;
    },
    running,
  );
}
