/** Reward search, step 1 of a generation: the candidates (Claude, or reward files) and their training items. */
import type { Context } from 'aws-lambda';
import { ENV, optionalEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { LoopConfig, ProposeRequest, proposeStep } from '#shared/rewards/steps.ts';
import { parseOrThrow } from '#shared/schema.ts';

const anthropicSecretArn = optionalEnv(ENV.anthropicSecretArn);

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'propose' });
  const request = parseOrThrow(ProposeRequest, event, 'propose');
  return proposeStep(request, parseOrThrow(LoopConfig, request.config, 'config'), { anthropicSecretArn });
}
