/**
 * Discovery step 3 of a round: the approver's decision and the oracle jobs' results into the
 * campaign; fresh results into the oracle cache, so no molecule is measured twice.
 */
import type { Context } from 'aws-lambda';
import { z } from 'zod';
import { recordStep } from '#shared/molecules/campaign.ts';
import { DECISIONS } from '#shared/molecules/discovery.ts';
import { XtbSettings } from '#shared/molecules/store.ts';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { parseOrThrow } from '#shared/schema.ts';

const ctx = {
  bucket: requireEnv(ENV.bucket),
  pipeline: requireEnv(ENV.pipeline),
  table: requireEnv(ENV.table),
  oracleCodeVersion: requireEnv('ORACLE_CODE_VERSION'),
};

const Event = z
  .object({
    campaignUri: z.string(),
    outcome: z.enum(DECISIONS),
    results: z.array(z.unknown()).optional(),
    xtb: XtbSettings,
    executionId: z.string(),
  })
  .strict();

export async function handler(event: unknown, context?: Context) {
  const input = parseOrThrow(Event, event);
  startInvocationLog(context, { step: 'record', executionId: input.executionId });
  return recordStep(ctx, { ...input, results: input.results ?? [] });
}
