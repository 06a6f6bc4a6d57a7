/** Labels a stratified sample of the survivors with Claude, or reads a labels file (shared/refinery/label-step.ts). */
import type { Context } from 'aws-lambda';
import { ENV, optionalEnv, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { labelStep } from '#shared/refinery/label-step.ts';

const ctx = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline), anthropicSecretArn: optionalEnv(ENV.anthropicSecretArn) };

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'label' });
  return labelStep(ctx, event);
}
