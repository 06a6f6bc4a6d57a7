/**
 * Discovery report: the HTML report, every measurement as CSV and the campaign document, listed
 * for the publish step.
 */
import { z } from 'zod';
import { readCampaign, readPool } from '#shared/molecules/store.ts';
import { writeFile } from '#shared/documents.ts';
import { discoveryMetrics, discoveryReportHtml, measurementsCsv } from '#shared/molecules/report.ts';
import { ENV, requireEnv } from '#shared/env.ts';
import { canonicalJson, sha256Hex } from '#shared/json.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import { parseOrThrow } from '#shared/schema.ts';

const bucket = requireEnv(ENV.bucket);
const pipeline = requireEnv(ENV.pipeline);

const Event = z.object({ campaignUri: z.string(), config: z.record(z.string(), z.unknown()) }).strict();

export async function handler(event: unknown) {
  const { campaignUri, config } = parseOrThrow(Event, event);
  const campaign = await readCampaign(campaignUri);
  const pool = await readPool(campaign.pool.uri);
  const prefix = `data/${pipeline}/report/${sha256Hex(canonicalJson({ campaignUri, config })).slice(0, 32)}/`;
  const written = [
    await writeFile(bucket, `${prefix}measurements.csv`, measurementsCsv(campaign), 'text/csv'),
    await writeFile(
      bucket,
      `${prefix}report.html`,
      await discoveryReportHtml(campaign, { source: pool.source, size: pool.smiles.length, skipped: pool.skipped }, config),
      'text/html; charset=utf-8',
    ),
  ];
  const files = [
    { name: 'campaign.json', uri: campaignUri },
    ...written.map((w) => ({ name: w.Key.slice(prefix.length), uri: w.uri })),
  ];
  return {
    files,
    metrics: discoveryMetrics(campaign),
    reportUri: written.at(-1)!.uri,
    s3Outputs: [parseS3Uri(campaignUri), ...written.map(({ Bucket, Key }) => ({ Bucket, Key }))],
  };
}
