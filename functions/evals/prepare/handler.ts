/**
 * Evaluation, step 1: the checkpoint (its manifest read and every listed file checked) and the
 * suite and guard settings registered when the run starts (shared/evals/prepare.ts).
 */
import type { Context } from 'aws-lambda';
import { ENV, requireEnv } from '#shared/env.ts';
import { prepareEvaluation, PrepareRequest } from '#shared/evals/prepare.ts';
import { startInvocationLog } from '#shared/log.ts';
import { parseOrThrow } from '#shared/schema.ts';

const registry = { table: requireEnv(ENV.table) };

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'prepare' });
  const request = parseOrThrow(PrepareRequest, event);
  return prepareEvaluation(registry, request);
}
