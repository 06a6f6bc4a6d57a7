/**
 * Discovery step 2 of a round: the surrogate's batch and the random baseline's (round 0: the
 * sample), molecules known from earlier runs taken from the oracle cache, the rest split into
 * oracle jobs and written as the approval email's items.
 */
import type { Context } from 'aws-lambda';
import { z } from 'zod';
import { proposeStep } from '#shared/molecules/campaign.ts';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { parseOrThrow } from '#shared/schema.ts';

const ctx = {
  bucket: requireEnv(ENV.bucket),
  pipeline: requireEnv(ENV.pipeline),
  table: requireEnv(ENV.table),
  oracleCodeVersion: requireEnv('ORACLE_CODE_VERSION'),
};

const Event = z.object({ campaignUri: z.string(), options: z.unknown() }).strict();

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'propose' });
  const { campaignUri, options } = parseOrThrow(Event, event);
  return proposeStep(ctx, campaignUri, options as never);
}
