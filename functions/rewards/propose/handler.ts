/** Reward search, step 1 of a generation: the candidates (Claude, or reward files) and their training items. */
import type { Context } from 'aws-lambda';
import { ENV, optionalEnv, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { LoopConfig, ProposeRequest, proposeStep } from '#shared/rewards/steps.ts';
import { parseOrThrow } from '#shared/schema.ts';

const anthropicSecretArn = optionalEnv(ENV.anthropicSecretArn);
const ctx = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'propose' });
  const request = parseOrThrow(ProposeRequest, event, 'propose');
  return proposeStep(ctx, request, parseOrThrow(LoopConfig, request.config, 'config'), { anthropicSecretArn });
}
