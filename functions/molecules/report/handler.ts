/**
 * Discovery report: the HTML report, every measurement as CSV and the campaign document, listed
 * for the publish step (shared/molecules/report.ts).
 */
import type { Context } from 'aws-lambda';
import { z } from 'zod';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { reportStep } from '#shared/molecules/report.ts';
import { parseOrThrow } from '#shared/schema.ts';

const ctx = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

const Event = z.object({ campaignUri: z.string(), config: z.record(z.string(), z.unknown()) }).strict();

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'report' });
  return reportStep(ctx, parseOrThrow(Event, event));
}
