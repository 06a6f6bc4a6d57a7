/**
 * A Distributed Map's results, read back from what its ResultWriter wrote: the manifest names
 * SUCCEEDED and FAILED files, each a JSON array of child runs whose `Output` is the child's
 * output as a JSON string. Read in item order (each entry's input carries its index).
 */
import pMap from 'p-map';
import { z } from 'zod';
import { readObjectBytes } from '../clients/aws.ts';
import { parseJsonBytes } from '../documents.ts';
import { ConfigError } from '../errors.ts';
import { parseOrThrow } from '../schema.ts';

export const MapManifestLocation = z.object({ Bucket: z.string().min(1), Key: z.string().min(1) }).strict();

const Manifest = z
  .object({
    DestinationBucket: z.string().min(1),
    ResultFiles: z.object({
      SUCCEEDED: z.array(z.object({ Key: z.string() }).loose()).default([]),
      FAILED: z.array(z.object({ Key: z.string() }).loose()).default([]),
    }),
  })
  .loose();

const Entry = z
  .object({
    Input: z.string().optional(),
    Output: z.string().optional(),
    Status: z.string().optional(),
    Error: z.string().optional(),
    Cause: z.string().optional(),
  })
  .loose();

/** A failed child run: its input (the item it was given) and its error. */
export interface MapFailure {
  readonly input: unknown;
  readonly error: string;
  readonly cause: string;
}

export interface MapResults {
  /** Each succeeded child's output, parsed. */
  readonly outputs: unknown[];
  readonly failed: number;
  /** Each failed child run, with its input and error. */
  readonly failures: MapFailure[];
  /** Bytes of the manifest and result files read. */
  readonly bytesRead: number;
}

/** The outputs of a Distributed Map run (its ResultWriter's manifest at `location`). */
export async function readMapResults(location: unknown, field = 'manifest'): Promise<MapResults> {
  const where = parseOrThrow(MapManifestLocation, location, field);
  const manifestUri = `s3://${where.Bucket}/${where.Key}`;
  const manifestBytes = await readObjectBytes(manifestUri, field);
  const manifest = parseOrThrow(Manifest, parseJsonBytes(manifestBytes, field, manifestUri), field);
  let bytesRead = manifestBytes.length;
  let failed = 0;
  const outputs: unknown[] = [];
  const read = async (key: string) => {
    const uri = `s3://${manifest.DestinationBucket}/${key}`;
    const bytes = await readObjectBytes(uri, `${field}.ResultFiles`);
    bytesRead += bytes.length;
    return parseOrThrow(z.array(Entry), parseJsonBytes(bytes, `${field}.ResultFiles`, uri), uri);
  };
  const failures: MapFailure[] = [];
  for (const entries of await pMap(manifest.ResultFiles.FAILED, (f) => read(f.Key), { concurrency: 4 })) {
    failed += entries.length;
    for (const entry of entries) {
      let input: unknown = entry.Input;
      try {
        input = entry.Input === undefined ? null : JSON.parse(entry.Input);
      } catch {
        // Kept as the string it was.
      }
      failures.push({ input, error: entry.Error ?? 'unknown', cause: entry.Cause ?? '' });
    }
  }
  for (const entries of await pMap(manifest.ResultFiles.SUCCEEDED, (f) => read(f.Key), { concurrency: 4 })) {
    for (const entry of entries) {
      if (entry.Output === undefined) throw new ConfigError(`${field}.Output`, entry.Status, 'a succeeded child run has no Output');
      outputs.push(JSON.parse(entry.Output));
    }
  }
  return { outputs, failed, failures, bytesRead };
}
