/** Scores each label for detection against a mismatched-label control (shared/sae/steps.ts). */
import type { Context } from 'aws-lambda';
import { ENV, optionalEnv, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { detectStep } from '#shared/sae/steps.ts';

const ctx = {
  bucket: requireEnv(ENV.bucket),
  pipeline: requireEnv(ENV.pipeline),
  table: optionalEnv(ENV.table),
  anthropicSecretArn: optionalEnv(ENV.anthropicSecretArn),
};

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'detect' });
  return detectStep(ctx, event);
}
