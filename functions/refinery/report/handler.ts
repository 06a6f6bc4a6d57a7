/** The refinery report and the files the publish step indexes as `refined-corpus` (shared/refinery/report.ts). */
import type { Context } from 'aws-lambda';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { reportStep } from '#shared/refinery/report.ts';

const ctx = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'report' });
  return reportStep(ctx, event);
}
