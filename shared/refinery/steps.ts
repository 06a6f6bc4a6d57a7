/**
 * The refinery's Lambda steps. Each takes a zod-checked request and a StoreContext, reads and
 * writes S3 (content-addressed under data/refinery/), and returns a small record: URIs, hashes
 * and counts, never documents. Each cached step's result lists the objects it made as
 * `s3Outputs`, so a cache hit whose files are gone is a miss.
 */
import { HeadObjectCommand } from '@aws-sdk/client-s3';
import { z } from 'zod';
import { readObjectBytes, s3Client } from '../clients/aws.ts';
import { writeContentAddressed, writeFile, type S3Written } from '../documents.ts';
import { ConfigError, errorName } from '../errors.ts';
import { checkBenchmarkData, listBenchmarks, selectSuite } from '../evals/benchmarks.ts';
import { canonicalJson, sha256Hex } from '../json.ts';
import { parseOrThrow } from '../schema.ts';
import { parseS3Uri } from '../s3uri.ts';
import { type BenchmarkItem, buildContaminationIndex, type ContaminationIndex } from './decontaminate.ts';
import { createMinHasher, type MinHasher } from './dedup.ts';
import { globalDedup } from './dedup-step.ts';
import { FilterConfig } from './filters.ts';
import { readMapResults } from './map-results.ts';
import { skippedTotal } from './corpus.ts';
import { decodeShard } from './shards.ts';
import { encodeJsonl, refineShardDocuments } from './shard-refine.ts';

export interface StoreContext {
  readonly bucket: string;
  readonly pipeline: string;
  readonly table?: string;
}

const s3Out = (w: S3Written) => ({ Bucket: w.Bucket, Key: w.Key });

async function writeBytes(
  ctx: StoreContext,
  folder: string,
  bytes: Uint8Array,
  extension: string,
  contentType: string,
): Promise<S3Written & { sha256: string }> {
  const sha256 = sha256Hex(bytes);
  const written = await writeFile(ctx.bucket, `data/${ctx.pipeline}/${folder}/${sha256}.${extension}`, bytes, contentType);
  return { ...written, sha256 };
}

// ---------------------------------------------------------------------------------------------
// prepare: the corpus exists; the benchmarks to decontaminate against, in one file

export const PrepareRequest = z
  .object({
    corpus: z.string(),
    benchmarks: z.array(z.string()).nullable(),
    extra: z.array(z.string()),
    filters: z.unknown(),
  })
  .strict();

/** Where an extra decontamination set named in the config lies in the platform bucket. */
export function extraSetKey(name: string): string {
  return `decontamination/${name}.jsonl`;
}

/** What prepare says about the benchmarks it found (at most this many named in the state). */
export const MAX_NAMED_BENCHMARKS = 50;

export async function prepareStep(ctx: StoreContext, raw: unknown) {
  const request = parseOrThrow(PrepareRequest, raw, 'prepare');
  const corpusIdentity = await corpusIdentityOf(request.corpus);
  // The filter settings, parsed (defaults filled in), keyed by their hash: the shard steps' keys
  // hold the hash, not the settings (whose JSON could pass what a key may hold).
  const filtersSha256 = sha256Hex(canonicalJson(parseOrThrow(FilterConfig, request.filters, 'config.filters')));
  if (!ctx.table) throw new ConfigError('table', ctx.table, 'the prepare step reads the benchmark registry: set TABLE_NAME');
  const suite = selectSuite(await listBenchmarks({ table: ctx.table }), request.benchmarks ?? undefined);
  const items: BenchmarkItem[] = [];
  for (const entry of suite) {
    const text = (await readObjectBytes(entry.dataUri, `benchmark ${entry.name}.dataUri`)).toString('utf8');
    items.push(...benchmarkItems(text, `${entry.name}`, entry.name, entry.version));
  }
  const extra: { name: string; sha256: string }[] = [];
  for (const [n, set] of request.extra.entries()) {
    const bytes = await readObjectBytes(`s3://${ctx.bucket}/${extraSetKey(set)}`, `decontamination.extra[${n}]`);
    const name = `extra-${set}`;
    extra.push({ name, sha256: sha256Hex(bytes) });
    items.push(...benchmarkItems(bytes.toString('utf8'), `decontamination.extra[${n}]`, name, 1));
  }
  const benchmarks = [
    ...suite.map((e) => ({ name: e.name, version: e.version, dataSha256: e.dataSha256 })),
    ...extra.map((e) => ({ name: e.name, version: 1, dataSha256: e.sha256 })),
  ];
  if (items.length === 0) {
    return { corpusIdentity, filtersSha256, benchmarksUri: null, benchmarksSha256: 'none', items: 0, benchmarks: [], benchmarkCount: 0 };
  }
  const written = await writeBytes(ctx, 'benchmarks', Buffer.from(items.map((i) => `${JSON.stringify(i)}\n`).join('')), 'jsonl', 'application/x-ndjson');
  return {
    corpusIdentity,
    filtersSha256,
    benchmarksUri: written.uri,
    benchmarksSha256: written.sha256,
    items: items.length,
    benchmarks: benchmarks.slice(0, MAX_NAMED_BENCHMARKS),
    benchmarkCount: benchmarks.length,
  };
}

/** A benchmark file's rows as items, checked as the evals registry checks them (a bad line named). */
function benchmarkItems(text: string, field: string, benchmark: string, version: number): BenchmarkItem[] {
  checkBenchmarkData(text, field);
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const row = JSON.parse(line) as { id: string | number; prompt: string; answer: string };
      return { benchmark, version, id: row.id, prompt: row.prompt, answer: row.answer };
    });
}

/** What identifies the corpus's content in cache keys: its ETag and size (S3), or its URI. */
async function corpusIdentityOf(corpus: string): Promise<string> {
  if (!corpus.startsWith('s3://')) return corpus;
  const location = parseS3Uri(corpus, 'config.corpus');
  try {
    const head = await s3Client().send(new HeadObjectCommand(location));
    return `${head.ETag ?? ''}:${head.ContentLength ?? 0}`;
  } catch (error) {
    const name = errorName(error);
    if (name === 'NotFound' || name === 'NoSuchKey' || name === 'NoSuchBucket') {
      throw new ConfigError('config.corpus', corpus, `does not exist (${name}): upload the corpus there, or name another`);
    }
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------
// filter: one shard's filters, decontamination and signatures

export const ShardItem = z.object({ uri: z.string(), sha256: z.string().regex(/^[0-9a-f]{64}$/), documents: z.int().min(0), bytes: z.int().min(0) }).loose();

export const FilterShardRequest = z
  .object({
    shard: ShardItem,
    filters: z.unknown(),
    ngram: z.int(),
    indexPrompt: z.boolean(),
    benchmarksUri: z.string().nullable(),
  })
  .strict();

let hasher: Promise<MinHasher> | undefined;
const indexes = new Map<string, ContaminationIndex>();

async function contaminationIndex(uri: string | null, ngram: number, indexPrompt: boolean): Promise<ContaminationIndex | null> {
  if (!uri) return null;
  const key = `${ngram}|${indexPrompt}|${uri}`;
  let index = indexes.get(key);
  if (!index) {
    const text = (await readObjectBytes(uri, 'decontamination.benchmarksUri')).toString('utf8');
    const items = text
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as unknown);
    index = buildContaminationIndex(items, { ngram, indexPrompt });
    indexes.clear();
    indexes.set(key, index);
  }
  return index;
}

export async function filterShardStep(ctx: StoreContext, raw: unknown) {
  const started = Date.now();
  const request = parseOrThrow(FilterShardRequest, raw, 'filter');
  const filters = parseOrThrow(FilterConfig, request.filters, 'config.filters');
  const bytes = await readObjectBytes(request.shard.uri, 'shard.uri');
  if (sha256Hex(bytes) !== request.shard.sha256)
    throw new ConfigError('shard.uri', request.shard.uri, `does not hash to the shard's sha256 ${request.shard.sha256}`);
  const { documents, report } = decodeShard(bytes);
  const index = await contaminationIndex(request.benchmarksUri, request.ngram, request.indexPrompt);
  hasher ??= createMinHasher();
  const refined = refineShardDocuments(documents, { filters, contamination: index, hasher: await hasher });
  const kept = encodeJsonl(refined.kept);
  const [keptFile, signatures, full, removals] = await Promise.all([
    writeBytes(ctx, 'filtered', kept.bytes, 'jsonl', 'application/x-ndjson'),
    writeBytes(ctx, 'signatures', refined.signatures, 'rmh', 'application/octet-stream'),
    writeBytes(ctx, 'signatures', refined.fullSignatures, 'rmf', 'application/octet-stream'),
    writeBytes(ctx, 'removals', Buffer.from(refined.removed.map((r) => `${JSON.stringify(r)}\n`).join('')), 'jsonl', 'application/x-ndjson'),
  ]);
  const removedByRule: Record<string, number> = {};
  for (const r of refined.removed) removedByRule[r.rule] = (removedByRule[r.rule] ?? 0) + 1;
  const skipped = skippedTotal(report);
  return {
    shard: request.shard.sha256,
    keptUri: keptFile.uri,
    keptSha256: keptFile.sha256,
    signaturesUri: signatures.uri,
    fullUri: full.uri,
    removalsUri: removals.uri,
    counts: { lines: report.lines, documents: documents.length, skipped, kept: refined.kept.length, removed: refined.removed.length },
    removedByRule,
    skippedByReason: Object.fromEntries(Object.entries(report.skipped).map(([k, v]) => [k, v.count])),
    bytes: { input: bytes.length, kept: kept.bytes.length, signatures: refined.signatures.length, full: refined.fullSignatures.length },
    changed: refined.changed,
    linesRemoved: refined.linesRemoved,
    millis: Date.now() - started,
    s3Outputs: [s3Out(keptFile), s3Out(signatures), s3Out(full), s3Out(removals)],
  };
}

export type FilterShardResult = Awaited<ReturnType<typeof filterShardStep>>;

// ---------------------------------------------------------------------------------------------
// dedup: the global step over every shard's signatures

export const DedupRequest = z.object({ manifest: z.unknown() }).strict();

/** The filter stage's outputs, one per shard, in shard order (by the input shard's hash). */
export async function readFilterResults(manifest: unknown, field = 'manifest') {
  const results = await readMapResults(manifest, field);
  if (results.failed > 0) throw new ConfigError(field, results.failed, 'shards failed in the filter stage: their documents would be lost');
  const outputs = results.outputs.map((o) => {
    const value = (o as { result?: unknown }).result ?? o;
    return value as FilterShardResult;
  });
  outputs.sort((a, b) => (a.shard < b.shard ? -1 : a.shard > b.shard ? 1 : 0));
  outputs.forEach((o, i) => {
    if (typeof o?.keptUri !== 'string') throw new ConfigError(`${field}[${i}]`, JSON.stringify(o).slice(0, 200), 'is not a filter result');
  });
  return { outputs, bytesRead: results.bytesRead };
}

export async function dedupStep(ctx: StoreContext, raw: unknown) {
  const started = Date.now();
  const request = parseOrThrow(DedupRequest, raw, 'dedup');
  const filtered = await readFilterResults(request.manifest);
  const result = await globalDedup(filtered.outputs.map((o) => ({ signaturesUri: o.signaturesUri, fullUri: o.fullUri })));
  const shards = filtered.outputs.map((o) => ({
    shard: o.shard,
    keptUri: o.keptUri,
    keptSha256: o.keptSha256,
    removalsUri: o.removalsUri,
    counts: o.counts,
    removedByRule: o.removedByRule,
    skippedByReason: o.skippedByReason,
    bytes: o.bytes,
    linesRemoved: o.linesRemoved,
    millis: o.millis,
  }));
  const doc = { ...result, shards, metadataBytesRead: filtered.bytesRead, millis: Date.now() - started };
  const written = await writeContentAddressed(ctx.bucket, `data/${ctx.pipeline}/dedup/`, doc);
  // The scoring fan-out's items: every filtered shard (dedup removals are skipped by curate).
  const items = await writeContentAddressed(
    ctx.bucket,
    `data/${ctx.pipeline}/score-items/`,
    shards.map((s) => ({ uri: s.keptUri, sha256: s.keptSha256, documents: s.counts.kept })),
  );
  const exact = result.removed.filter((r) => r.kind === 'exact').length;
  return {
    dedupUri: written.uri,
    scoreItemsKey: items.Key,
    documents: result.documents,
    kept: result.kept,
    removed: { exact, near: result.removed.length - exact },
    clusters: Object.values(result.clusterSizes).reduce((a, b) => a + b, 0),
    bytesRead: { compact: result.bytesRead.compact, full: result.bytesRead.full, metadata: filtered.bytesRead },
    s3Outputs: [s3Out(written), s3Out(items)],
  };
}
