/**
 * The first step of every pipeline: the run's config parsed with the pipeline's schema, defaults
 * filled in. The CLI and the upload trigger parse it before they start a run; a run started any
 * other way (StartExecution from the console or an SDK) is checked here, so every later step,
 * and every cache key, reads a config the schema bounds. A bad config fails the run at once with
 * a ConfigError naming the field and the value.
 *
 * In a stack that caches runs (RUN_VERSION set; shared/run-cache.ts) it also looks the parsed
 * config up in the run cache and returns the check the state machine branches on: `{config, key}`
 * on a miss, `{key, hit}` on a hit.
 */
import type { Context } from 'aws-lambda';
import { z } from 'zod';
import { ENV, optionalEnv, requireEnv } from './env.ts';
import { logger, startInvocationLog } from './log.ts';
import { lookupRun, RUN_VERSION_ENV, type RunCheck, runCacheKey } from './run-cache.ts';
import { parseOrThrow } from './schema.ts';

const Event = z.object({ config: z.unknown() }).strict();

export function configCheckHandler(schema: z.ZodType) {
  return async (event: unknown, context?: Context): Promise<unknown> => {
    startInvocationLog(context, { step: 'config' });
    const config = parseOrThrow(schema, parseOrThrow(Event, event, 'input').config, 'config');
    const runVersion = optionalEnv(RUN_VERSION_ENV);
    if (runVersion === undefined) return config;
    return checkRun(config, runVersion);
  };
}

async function checkRun(config: unknown, runVersion: string): Promise<RunCheck> {
  const where = { table: requireEnv(ENV.table), bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };
  const key = runCacheKey(where.pipeline, runVersion, config);
  try {
    const found = await lookupRun(where, key);
    if ('hit' in found) {
      logger.info('run cache hit', { key, computedBy: found.hit.executionId });
      return { key, hit: found.hit };
    }
    logger.info('run cache miss', { key, why: found.miss });
  } catch (error) {
    // The run computes; the steps' own entries still save what they can.
    const e = error as Error;
    logger.warn('run cache lookup failed: the run computes', { key, error: `${e?.name}: ${e?.message}` });
  }
  return { config, key };
}
