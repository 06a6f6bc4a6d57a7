/**
 * League report (step 3): the champion's files and the HTML report, listed for the publish step
 * (writeLeagueReport in shared/selfplay/league-report.ts).
 */
import type { Context } from 'aws-lambda';
import { z } from 'zod';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { parseOrThrow } from '#shared/schema.ts';
import { writeLeagueReport } from '#shared/selfplay/league-report.ts';

const store = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

const Event = z.object({ leagueUri: z.string(), config: z.record(z.string(), z.unknown()) }).strict();

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'report' });
  return writeLeagueReport(store, parseOrThrow(Event, event));
}
