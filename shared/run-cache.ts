/**
 * The run cache: one entry per (pipeline, run version, config), holding a succeeded run's output,
 * for pipelines whose output is a function of their config and their code (the stack says so,
 * and why: PipelineStack.cacheRuns). A rerun of the same config finds it in the config check it
 * makes anyway, and ends with the output the first run made: a handful of state transitions and
 * that one invocation, where a rerun that hits every step's entry still walks every step.
 *
 * - The key is sha256 of the pipeline, the run version and the config (canonical JSON, defaults
 *   filled in). A Lambda computes it: a config may be longer than the 10,000 characters
 *   States.Hash takes. The run version (RUN_VERSION) is made at synth from the state machine's
 *   definition (every step's cache key version is in it) and the code version of every function
 *   and job of the stack: a change anywhere in the pipeline starts a new run version.
 * - The entry is `CACHE#<pipeline>#run` / key, written by the state machine's `run: Cache store`
 *   (a direct DynamoDB integration) after the run's Output, beside the step entries.
 * - A run whose fan-out tolerated failed items is partial (RUN_PARTIAL_PATH) and is not stored: a
 *   rerun retries those items, as it would with only the steps' entries.
 * - A hit whose output names an S3 object of the bucket that is gone is a miss, as a step's is.
 * - A lookup that fails (throttled past the SDK's retries) is a miss: the run computes, and the
 *   steps' own entries still save what they can.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import pMap from 'p-map';
import { dynamoClient, objectExists } from './clients/aws.ts';
import { canonicalJson, sha256Hex } from './json.ts';
import { cacheKeyOf, RUN_STEP } from './table.ts';

/** The state the run's cache check writes: `{config, key}` on a miss, `{key, hit}` on a hit. */
export const RUN_STATE = '$._run';

/** Set (true) by a fan-out whose tolerated items failed: a partial run is not stored, so a rerun retries them. */
export const RUN_PARTIAL_PATH = '$._partial';

/** The environment variable that holds the run version; a config check without it caches no run. */
export const RUN_VERSION_ENV = 'RUN_VERSION';

/** S3 objects a hit checks at once. */
const HEAD_CONCURRENCY = 16;

export function runCacheKey(pipeline: string, runVersion: string, config: unknown): string {
  return sha256Hex(`${pipeline}|${runVersion}|${canonicalJson(config)}`);
}

/** A hit: the output the run that stored it ended with, and that run's execution. */
export interface RunCacheHit {
  readonly output: unknown;
  readonly executionId: string;
}

/** What the run's cache check puts at `$._run`. */
export type RunCheck = { readonly config: unknown; readonly key: string } | { readonly key: string; readonly hit: RunCacheHit };

/** The S3 objects of `bucket` the output names (`s3://bucket/key` strings at any depth), once each. */
export function bucketObjectsOf(output: unknown, bucket: string): { Bucket: string; Key: string }[] {
  const keys = new Set<string>();
  const prefix = `s3://${bucket}/`;
  const walk = (value: unknown): void => {
    if (typeof value === 'string') {
      // A prefix (ending in "/") names a folder, not an object: nothing to check.
      if (value.startsWith(prefix) && value.length > prefix.length && !value.endsWith('/')) keys.add(value.slice(prefix.length));
    } else if (Array.isArray(value)) {
      for (const v of value) walk(v);
    } else if (value && typeof value === 'object') {
      for (const v of Object.values(value)) walk(v);
    }
  };
  walk(output);
  return [...keys].map((Key) => ({ Bucket: bucket, Key }));
}

/** The first of the objects that is gone (HeadObject, a few at a time), if any. */
async function firstMissing(objects: { Bucket: string; Key: string }[]): Promise<string | undefined> {
  const gone = await pMap(objects, async (o) => ((await objectExists(o.Bucket, o.Key)) ? undefined : `s3://${o.Bucket}/${o.Key}`), {
    concurrency: HEAD_CONCURRENCY,
  });
  return gone.find((uri) => uri !== undefined);
}

export type RunLookup = { readonly hit: RunCacheHit } | { readonly miss: string };

/** The run cache's entry for `key`, when it is there and every object of the bucket its output names still exists. */
export async function lookupRun(where: { table: string; bucket: string; pipeline: string }, key: string): Promise<RunLookup> {
  const found = await dynamoClient().send(new GetCommand({ TableName: where.table, Key: cacheKeyOf(where.pipeline, RUN_STEP, key), ConsistentRead: true }));
  const item = found.Item as { output?: string; executionId?: string } | undefined;
  if (!item) return { miss: 'no entry' };
  if (typeof item.output !== 'string' || typeof item.executionId !== 'string') return { miss: 'the entry has no output or no execution' };
  let output: unknown;
  try {
    output = JSON.parse(item.output);
  } catch {
    return { miss: "the entry's output is not JSON" };
  }
  const missing = await firstMissing(bucketObjectsOf(output, where.bucket));
  if (missing) return { miss: `its output names ${missing}, which is gone` };
  return { hit: { output, executionId: item.executionId } };
}

/**
 * A cache hit a state entered records: a step's `<step>: Restore` (the entry's execution is in the
 * lookup it read) or the run's `run: Restore` (in the run's check). Undefined for any other state.
 */
export function cacheHitOf(stateName: string, input: unknown): { step: string; executionArn: string } | undefined {
  if (!stateName.endsWith(': Restore')) return undefined;
  const step = stateName.slice(0, -': Restore'.length);
  const state = input as { _step?: { lookup?: { Item?: { executionId?: { S?: string } } } }; _run?: { hit?: { executionId?: string } } } | undefined;
  const arn = step === RUN_STEP ? state?._run?.hit?.executionId : state?._step?.lookup?.Item?.executionId?.S;
  return typeof arn === 'string' ? { step, executionArn: arn } : undefined;
}
