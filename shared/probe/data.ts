/**
 * The probe's prepare step: its data file (items and label) written to S3 content-addressed,
 * beside the items alone as a JSON array (what a Distributed Map's ItemReader reads), and the
 * items handed on. `padKiB` pads the output, to probe the state size limit.
 */
import { z } from 'zod';
import { writeFile } from '../documents.ts';
import { canonicalJson, sha256Hex } from '../json.ts';

export const PrepareRequest = z.object({ items: z.array(z.number()), label: z.string(), padKiB: z.number().int().min(0) });
export type PrepareRequest = z.infer<typeof PrepareRequest>;

export async function writeProbeData(bucket: string, { items, label, padKiB }: PrepareRequest) {
  const body = canonicalJson({ items, label });
  const key = `data/probe/${sha256Hex(body)}.json`;
  const itemsKey = key.replace(/\.json$/, '-items.json');
  await writeFile(bucket, key, body, 'application/json');
  await writeFile(bucket, itemsKey, JSON.stringify(items), 'application/json');
  return {
    dataUri: `s3://${bucket}/${key}`,
    itemsKey,
    items,
    s3Outputs: [
      { Bucket: bucket, Key: key },
      { Bucket: bucket, Key: itemsKey },
    ],
    ...(padKiB > 0 ? { padding: 'x'.repeat(padKiB * 1024) } : {}),
  };
}
