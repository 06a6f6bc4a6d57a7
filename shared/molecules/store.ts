/**
 * Where molecular discovery keeps its data:
 * - the pool (canonical SMILES, JSON) and its packed Morgan fingerprints (binary), named by what
 *   they were built from, so every run on the same pool shares them;
 * - the campaign document, content-addressed like the league document;
 * - the oracle cache in the table: one item per (oracle version, canonical SMILES), the oracle
 *   version being the job's code version with the xTB settings. A molecule is measured once.
 */
import { BatchGetCommand, BatchWriteCommand, type BatchGetCommandOutput, type BatchWriteCommandOutput } from '@aws-sdk/lib-dynamodb';
import { z } from 'zod';
import { dynamoClient, readObjectBytes } from '../clients/aws.ts';
import { parseJsonBytes, readContentAddressed, writeContentAddressed, writeFile, type S3Written } from '../documents.ts';
import { ConfigError, PipelineError } from '../errors.ts';
import { canonicalJson, sha256Hex } from '../json.ts';
import { parseOrThrow } from '../schema.ts';
import { oracleKey } from '../table.ts';
import { type Campaign, type OracleResult, parseCampaign } from './discovery.ts';
import type { Fingerprint } from './surrogate.ts';

// ---- the pool ----

export const PoolDoc = z
  .object({
    version: z.literal(1),
    /** What the pool was built from: `default(...)` or the pool file's URI. */
    source: z.string(),
    smiles: z.array(z.string().min(1)).min(1),
    /** Ids from the pool file, parallel to smiles (empty string where none). */
    ids: z.array(z.string()).optional(),
    skipped: z.record(z.string(), z.int()),
    examples: z.array(z.object({ reason: z.string(), input: z.string(), line: z.int().optional(), detail: z.string().optional() }).strict()),
    candidates: z.int().optional(),
    fingerprint: z.object({ radius: z.int(), nBits: z.int() }).strict(),
  })
  .strict();
export type PoolDoc = z.infer<typeof PoolDoc>;

export function poolKeys(pipeline: string, buildKey: string): { doc: string; fingerprints: string } {
  const name = sha256Hex(buildKey);
  return { doc: `data/${pipeline}/pools/${name}.json`, fingerprints: `data/${pipeline}/pools/${name}.fp` };
}

export async function writePool(
  bucket: string,
  keys: { doc: string; fingerprints: string },
  doc: PoolDoc,
  fingerprints: readonly Fingerprint[],
): Promise<{ doc: S3Written; fingerprints: S3Written }> {
  const nBytes = doc.fingerprint.nBits / 8;
  const packed = new Uint8Array(fingerprints.length * nBytes);
  fingerprints.forEach((fp, i) => {
    if (fp.length !== nBytes) throw new PipelineError(`fingerprint ${i} has ${fp.length} bytes, expected ${nBytes}`);
    packed.set(fp, i * nBytes);
  });
  // Fingerprints first: a pool document is only ever seen with its fingerprints beside it.
  const fpWritten = await writeFile(bucket, keys.fingerprints, packed, 'application/octet-stream');
  const docWritten = await writeFile(bucket, keys.doc, JSON.stringify(parseOrThrow(PoolDoc, doc, 'pool')), 'application/json');
  return { doc: docWritten, fingerprints: fpWritten };
}

export async function readPool(uri: string): Promise<PoolDoc> {
  return parseOrThrow(PoolDoc, parseJsonBytes(await readObjectBytes(uri, 'pool.uri'), 'pool.uri', uri), 'pool');
}

export async function readFingerprints(uri: string, size: number, nBytes: number): Promise<Fingerprint[]> {
  const bytes = await readObjectBytes(uri, 'pool.fingerprintsUri');
  if (bytes.length !== size * nBytes) {
    throw new ConfigError('pool.fingerprintsUri', uri, `holds ${bytes.length} bytes, expected ${size} fingerprints of ${nBytes} bytes`);
  }
  const all = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
  return Array.from({ length: size }, (_, i) => all.subarray(i * nBytes, (i + 1) * nBytes));
}

// ---- the campaign ----

export async function writeCampaign(bucket: string, pipeline: string, campaign: Campaign): Promise<S3Written> {
  return writeContentAddressed(bucket, `data/${pipeline}/campaigns/`, parseCampaign(campaign));
}

export async function readCampaign(uri: string): Promise<Campaign> {
  return parseCampaign(await readContentAddressed(uri, 'campaignUri', 'campaign document'));
}

// ---- the oracle cache ----

/** The xTB settings that change a measurement; with the job's code version they name the cache. */
export const XtbSettings = z.object({ timeoutSeconds: z.int().min(1).max(3600), seed: z.int().min(0) }).strict();
export type XtbSettings = z.infer<typeof XtbSettings>;

export function oracleVersion(jobCodeVersion: string, settings: XtbSettings): string {
  return sha256Hex(`${jobCodeVersion}|${canonicalJson(settings)}`).slice(0, 32);
}

type Known = Omit<OracleResult, 'cached'>;
const CachedResult = z.object({
  ok: z.boolean(),
  gap: z.number().optional(),
  reason: z.string().optional(),
  attempts: z.int().optional(),
  seconds: z.number(),
});

/**
 * One BatchGetItem or BatchWriteItem request and its retries: `send` returns what DynamoDB left
 * unprocessed, which is sent again after an exponential pause, at most 8 times.
 */
async function untilProcessed<T>(initial: T[], what: string, send: (batch: T[]) => Promise<T[] | undefined>): Promise<void> {
  let pending: T[] | undefined = initial;
  for (let attempt = 0; pending?.length; attempt++) {
    if (attempt > 8) throw new PipelineError(`oracle cache: ${pending.length} ${what} still unprocessed after ${attempt} attempts`);
    if (attempt) await new Promise((r) => setTimeout(r, 50 * 2 ** attempt));
    pending = await send(pending);
  }
}

/** Earlier results for these SMILES under this oracle version (BatchGetItem, 100 keys a call). */
export async function lookupOracle(table: string, version: string, smiles: readonly string[]): Promise<Map<string, Known>> {
  const found = new Map<string, Known>();
  const unique = [...new Set(smiles)];
  for (let i = 0; i < unique.length; i += 100) {
    await untilProcessed<Record<string, unknown>>(
      unique.slice(i, i + 100).map((s) => oracleKey(version, s)),
      'keys',
      async (keys) => {
        const out: BatchGetCommandOutput = await dynamoClient().send(new BatchGetCommand({ RequestItems: { [table]: { Keys: keys, ConsistentRead: true } } }));
        for (const item of out.Responses?.[table] ?? []) {
          const parsed = CachedResult.safeParse(item);
          if (parsed.success) found.set(String(item.sk), parsed.data);
        }
        return out.UnprocessedKeys?.[table]?.Keys;
      },
    );
  }
  return found;
}

/** Stores fresh results (BatchWriteItem, 25 items a call); `cached` results are already there. */
export async function storeOracle(
  table: string,
  version: string,
  results: readonly { smiles: string; result: OracleResult }[],
  context: { executionId: string },
): Promise<number> {
  const fresh = results.filter((r) => !r.result.cached);
  const now = new Date().toISOString();
  for (let i = 0; i < fresh.length; i += 25) {
    const requests = fresh.slice(i, i + 25).map(({ smiles, result }) => ({
      PutRequest: {
        Item: {
          ...oracleKey(version, smiles),
          ok: result.ok,
          ...(result.gap !== undefined ? { gap: result.gap } : {}),
          ...(result.reason !== undefined ? { reason: result.reason } : {}),
          ...(result.attempts !== undefined ? { attempts: result.attempts } : {}),
          seconds: result.seconds,
          measuredAt: now,
          executionId: context.executionId,
        },
      },
    }));
    await untilProcessed<Record<string, unknown>>(requests, 'writes', async (batch) => {
      const out: BatchWriteCommandOutput = await dynamoClient().send(new BatchWriteCommand({ RequestItems: { [table]: batch as never } }));
      return out.UnprocessedItems?.[table] as Record<string, unknown>[] | undefined;
    });
  }
  return fresh.length;
}
