/** Writes the SAE report and lists the artifact's files (shared/sae/steps.ts). */
import type { Context } from 'aws-lambda';
import { ENV, optionalEnv, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { reportStep } from '#shared/sae/steps.ts';

const ctx = {
  bucket: requireEnv(ENV.bucket),
  pipeline: requireEnv(ENV.pipeline),
  table: optionalEnv(ENV.table),
  anthropicSecretArn: optionalEnv(ENV.anthropicSecretArn),
};

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'report' });
  return reportStep(ctx, event);
}
