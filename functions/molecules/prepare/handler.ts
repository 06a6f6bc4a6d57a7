/**
 * Discovery step 1: the pool (the default pool built in code, or a pool file in S3, parsed with
 * malformed lines counted), its fingerprints, and the campaign with round 0 (the random sample)
 * pending. Pools are stored by what they were built from, so later runs reuse them.
 */
import type { Context } from 'aws-lambda';
import { z } from 'zod';
import { prepareCampaign } from '#shared/molecules/campaign.ts';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { parseOrThrow } from '#shared/schema.ts';

const ctx = { bucket: requireEnv(ENV.bucket), pipeline: requireEnv(ENV.pipeline) };

const Event = z
  .object({
    pool: z.unknown(),
    /** Checked by prepareCampaign (CampaignSettings), which names the field. */
    settings: z.unknown(),
  })
  .strict();

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'prepare' });
  const { pool, settings } = parseOrThrow(Event, event);
  return prepareCampaign(ctx, pool as never, settings);
}
