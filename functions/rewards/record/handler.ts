/** Reward search, step 3 of a generation: the graded seeds into the search document. */
import type { Context } from 'aws-lambda';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { LoopConfig, RecordRequest, recordStep } from '#shared/rewards/steps.ts';
import { parseOrThrow } from '#shared/schema.ts';

const ctx = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'record' });
  const request = parseOrThrow(RecordRequest, event, 'record');
  return recordStep(ctx, request, parseOrThrow(LoopConfig, request.config, 'config'));
}
