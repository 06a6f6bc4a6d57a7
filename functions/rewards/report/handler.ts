/** Reward search report: the HTML report, the winning reward function and the search document. */
import type { Context } from 'aws-lambda';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { ReportRequest, reportStep } from '#shared/rewards/steps.ts';
import { parseOrThrow } from '#shared/schema.ts';

const ctx = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'report' });
  return reportStep(ctx, parseOrThrow(ReportRequest, event, 'report'));
}
