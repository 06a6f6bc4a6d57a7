/**
 * The refinery's ingest job (Batch, CPU queue): reads a corpus, samples it, mixes in labelled
 * test material, and writes content-addressed JSONL shards plus the Distributed Map's item list.
 * main.ts runs it under the job contract (shared/job.ts); nothing here builds an SDK client.
 *
 * 1. The spec is checked (zod); a bad or conflicting field fails the job naming the field and
 *    the value.
 * 2. The corpus is read: `debian:` (the local default, shared/refinery/debian-corpus.ts; the
 *    sample is drawn before any page is parsed), `s3://bucket/key` (.jsonl, .jsonl.gz or
 *    .parquet; a missing key fails with NoSuchKey naming the URI) or
 *    `hf://datasets/<owner>/<name>[@revision]/<path>.parquet` (read over HTTPS by ranges, one row
 *    group at a time; for AWS, where the job can reach the Hub). Bad lines are counted by reason.
 * 3. `sample` documents are drawn by the seed (kept in corpus order) before anything is injected.
 * 4. With `inject`, spam, near-duplicates and (given `benchmarksUri`) contaminated documents are
 *    mixed in at seeded positions (shared/refinery/inject.ts); the labels go to truth.jsonl only.
 * 5. Shards of `shardDocuments` documents (or 32 MiB) go to `shardPrefix` as `<sha256>.jsonl`;
 *    items.json lists them for the Map, ingest.json holds the read report and the counts, and
 *    the small result points at all three.
 */
import { asyncBufferFromUrl } from 'hyparquet';
import pMap from 'p-map';
import { z } from 'zod';
import { ConfigError } from '#shared/errors.ts';
import { canonicalJson, sha256Hex } from '#shared/json.ts';
import type { JobContext } from '#shared/job.ts';
import { seededRandom } from '#shared/random.ts';
import { parseOrThrow } from '#shared/schema.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import {
  type CorpusDocument,
  type CorpusReadReport,
  corpusFormatOf,
  DEFAULT_MAX_DOCUMENT_BYTES,
  readCorpusBytes,
  readParquetDocuments,
  skippedTotal,
  truncateUtf8,
} from '#shared/refinery/corpus.ts';
import { BenchmarkItem } from '#shared/refinery/decontaminate.ts';
import { readDebianCorpus } from '#shared/refinery/debian-corpus.ts';
import { type InjectedCounts, type InjectionTruth, injectTestMaterial } from '#shared/refinery/inject.ts';
import { DEFAULT_MAX_SHARD_BYTES, DEFAULT_SHARD_DOCUMENTS, MAX_SHARD_DOCUMENTS, planShards, shardKey } from '#shared/refinery/shards.ts';

/** The local default corpus. */
export const DEBIAN_CORPUS = 'debian:';
/** Shards written to S3 at once. */
const PUT_CONCURRENCY = 8;

const S3_PREFIX = /^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\/(.+\/)?$/;
const S3_OBJECT = /^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\/.+$/;

export const IngestSpec = z
  .strictObject({
    /** `debian:`, `s3://bucket/key.{jsonl,jsonl.gz,parquet}` or `hf://datasets/<owner>/<name>/<path>.parquet`. */
    corpus: z.string().min(1).max(1100),
    /** Documents to draw (seeded) before injection; null: all of them. */
    sample: z.int().min(1).max(10_000_000).nullable().default(null),
    /** Seeds the sample and (as seed + 1) the injection. */
    seed: z.int().default(0),
    /** Mix in labelled spam, near-duplicates and contamination (truth.jsonl has the labels). */
    inject: z.boolean().default(false),
    /** JSONL of benchmark items ({benchmark, version, id, prompt, answer}) to embed; null: none. Only with inject. */
    benchmarksUri: z.string().regex(S3_OBJECT, 'must be s3://bucket/key').nullable().default(null),
    /** Documents per shard at most. */
    shardDocuments: z.int().min(1).max(MAX_SHARD_DOCUMENTS).default(DEFAULT_SHARD_DOCUMENTS),
    /** Bytes per shard at most (whichever of the two limits comes first). */
    maxShardBytes: z
      .int()
      .min(1024)
      .max(256 * 1024 * 1024)
      .default(DEFAULT_MAX_SHARD_BYTES),
    /** A longer text is cut to this many UTF-8 bytes and counted as truncated. */
    maxDocumentBytes: z
      .int()
      .min(1)
      .max(64 * 1024 * 1024)
      .default(DEFAULT_MAX_DOCUMENT_BYTES),
    /** s3://bucket/prefix/ (ending in '/') under which the shards go, as <sha256>.jsonl. */
    shardPrefix: z.string().regex(S3_PREFIX, "must be s3://bucket/prefix/ ending in '/'"),
  })
  .superRefine((spec, ctx) => {
    if (spec.benchmarksUri !== null && !spec.inject)
      ctx.addIssue({ code: 'custom', path: ['benchmarksUri'], message: 'is read only to inject contamination: set inject to true or benchmarksUri to null' });
  });
export type IngestSpec = z.output<typeof IngestSpec>;

export type CorpusSource =
  | { readonly kind: 'debian' }
  | { readonly kind: 's3'; readonly uri: string }
  | { readonly kind: 'hf'; readonly uri: string; readonly url: string; readonly name: string };

const HF_DATASET = /^hf:\/\/datasets\/([A-Za-z0-9][\w.-]*)\/([A-Za-z0-9][\w.-]*)(?:@([\w.-]+))?\/(.+\.parquet)$/;

/** Where a corpus URI points (`field` names it in errors). */
export function parseCorpusUri(corpus: string, field = 'spec.corpus'): CorpusSource {
  if (corpus === DEBIAN_CORPUS) return { kind: 'debian' };
  if (corpus.startsWith('s3://')) {
    parseS3Uri(corpus, field);
    corpusFormatOf(corpus, field);
    return { kind: 's3', uri: corpus };
  }
  if (corpus.startsWith('hf://')) return { kind: 'hf', uri: corpus, url: huggingFaceUrl(corpus, field), name: corpus.slice(corpus.lastIndexOf('/') + 1) };
  throw new ConfigError(field, corpus, 'must be "debian:", s3://bucket/key (.jsonl, .jsonl.gz or .parquet) or hf://datasets/<owner>/<name>/<path>.parquet');
}

/**
 * The HTTPS URL of a Hub dataset file: hf://datasets/<owner>/<name>[@revision]/<path>.parquet ->
 * https://huggingface.co/datasets/<owner>/<name>/resolve/<revision or main>/<path>.
 */
export function huggingFaceUrl(uri: string, field = 'spec.corpus'): string {
  const match = HF_DATASET.exec(uri);
  if (!match || match[4]!.split('/').some((part) => part === '' || part === '.' || part === '..'))
    throw new ConfigError(field, uri, 'must be hf://datasets/<owner>/<name>[@revision]/<path>.parquet');
  const [, owner, name, revision, path] = match;
  return `https://huggingface.co/datasets/${owner}/${name}/resolve/${encodeURIComponent(revision ?? 'main')}/${path!.split('/').map(encodeURIComponent).join('/')}`;
}

/** The checked spec. */
export function parseIngestSpec(input: unknown): IngestSpec {
  const spec = parseOrThrow(IngestSpec, input, 'spec');
  parseCorpusUri(spec.corpus);
  return spec;
}

/** What the job reads and writes outside its JobContext: S3 objects by URI. */
export interface IngestStorage {
  readObject(uri: string, field: string): Promise<Uint8Array>;
  writeObject(uri: string, bytes: Uint8Array, contentType: string): Promise<void>;
}

export interface ShardItem {
  readonly uri: string;
  readonly sha256: string;
  readonly documents: number;
  readonly bytes: number;
}

export interface IngestResult {
  readonly itemsUri: string;
  /** The shard list's key in the bucket: the Distributed Map's item reader reads it. */
  readonly itemsKey: string;
  readonly itemsSha256: string;
  readonly truthUri: string;
  readonly reportUri: string;
  readonly shards: number;
  /** Documents in the shards (real and injected). */
  readonly documents: number;
  /** Bytes of the shards. */
  readonly bytes: number;
  /** Lines or rows skipped while reading, all reasons. */
  readonly skipped: number;
  readonly truncated: number;
  readonly injected: InjectedCounts;
  /** The job's outputs, which a cache hit checks still exist. */
  readonly s3Outputs: { Bucket: string; Key: string }[];
}

export interface IngestProgress {
  readonly stage: 'read' | 'sample' | 'inject' | 'shards' | 'written';
  readonly [key: string]: unknown;
}

/** Reads, samples, injects and shards (module docstring, steps 2-5). */
export async function ingestCorpus(spec: IngestSpec, ctx: JobContext, storage: IngestStorage): Promise<IngestResult> {
  const started = performance.now();
  const source = parseCorpusUri(spec.corpus);

  // 2-3. Read, and sample.
  let documents: CorpusDocument[];
  let read: CorpusReadReport | undefined;
  let bySource: Record<string, number>;
  let debian: { candidates: Record<string, number>; empty: Record<string, number> } | undefined;
  let debianTruncated = 0;
  if (source.kind === 'debian') {
    const corpus = await readDebianCorpus({ sample: spec.sample, seed: spec.seed });
    documents = corpus.documents.map(({ id, text, url }) => {
      const cut = truncateUtf8(text, spec.maxDocumentBytes);
      if (cut.truncated) debianTruncated++;
      return url === undefined ? { id, text: cut.text } : { id, text: cut.text, url };
    });
    bySource = corpus.bySource;
    debian = { candidates: corpus.candidates, empty: corpus.empty };
  } else {
    const result =
      source.kind === 's3'
        ? await readCorpusBytes(await storage.readObject(source.uri, 'spec.corpus'), source.uri, {
            maxDocumentBytes: spec.maxDocumentBytes,
            field: 'spec.corpus',
          })
        : await readParquetDocuments(await asyncBufferFromUrl({ url: source.url }), { name: source.name, maxDocumentBytes: spec.maxDocumentBytes });
    read = result.report;
    ctx.progress({ stage: 'read', documents: result.documents.length, lines: read.lines, skipped: skippedTotal(read) });
    documents = spec.sample === null ? result.documents : sampleInOrder(result.documents, spec.sample, spec.seed);
    bySource = { [source.uri]: documents.length };
  }
  const realDocuments = documents.length;
  ctx.progress({ stage: 'sample', documents: realDocuments });

  // 4. Inject.
  let truth: InjectionTruth[] = [];
  let injected: InjectedCounts = { spam: 0, nearDuplicate: 0, contamination: 0 };
  let notes: string[] = [];
  if (spec.inject) {
    const items =
      spec.benchmarksUri === null ? [] : parseBenchmarkItems(await storage.readObject(spec.benchmarksUri, 'spec.benchmarksUri'), spec.benchmarksUri);
    const mixed = injectTestMaterial(documents, items, { seed: spec.seed + 1 });
    documents = mixed.documents;
    truth = mixed.truth;
    injected = mixed.counts;
    notes = mixed.notes;
    ctx.progress({ stage: 'inject', ...injected });
  }

  // 5. Shards, then the lists.
  const planned = planShards(documents, { shardDocuments: spec.shardDocuments, maxShardBytes: spec.maxShardBytes });
  ctx.progress({ stage: 'shards', shards: planned.length });
  const items: ShardItem[] = await pMap(
    planned,
    async (shard) => {
      const uri = shardKey(spec.shardPrefix, shard.sha256);
      await storage.writeObject(uri, shard.bytes, 'application/x-ndjson');
      return { uri, sha256: shard.sha256, documents: shard.documents, bytes: shard.bytes.length };
    },
    { concurrency: PUT_CONCURRENCY },
  );
  const bytes = items.reduce((sum, item) => sum + item.bytes, 0);
  const itemsOut = await ctx.putJson('items.json', items);
  // What the cache keys of the later steps read: the shard list's content, not its place.
  const itemsSha256 = sha256Hex(canonicalJson(items));
  // Bytes, not a string: an empty string body is one the SDK cannot size.
  const truthBytes = new TextEncoder().encode(truth.map((entry) => `${JSON.stringify(entry)}\n`).join(''));
  const truthOut = await ctx.putBytes('truth.jsonl', truthBytes, 'application/x-ndjson');
  const skipped = read ? skippedTotal(read) : 0;
  const truncatedCount = read ? read.truncated : debianTruncated;
  const reportOut = await ctx.putJson('ingest.json', {
    corpus: spec.corpus,
    spec,
    read: read ?? null,
    debian: debian ? { ...debian, truncated: debianTruncated } : null,
    bySource,
    realDocuments,
    injected,
    injectionNotes: notes,
    shards: items.length,
    documents: documents.length,
    bytes,
    seconds: Math.round(performance.now() - started) / 1000,
  });
  ctx.progress({ stage: 'written', shards: items.length, documents: documents.length });
  return {
    itemsUri: itemsOut.uri,
    itemsKey: itemsOut.Key,
    itemsSha256,
    truthUri: truthOut.uri,
    reportUri: reportOut.uri,
    shards: items.length,
    documents: documents.length,
    bytes,
    skipped,
    truncated: truncatedCount,
    injected,
    s3Outputs: [itemsOut, truthOut, reportOut].map(({ Bucket, Key }) => ({ Bucket, Key })),
  };
}

/** `sample` documents drawn by the seed, in their corpus order (all of them when there are fewer). */
export function sampleInOrder<T>(documents: readonly T[], sample: number, seed: number): T[] {
  if (sample >= documents.length) return [...documents];
  const random = seededRandom(seed);
  const indexes = Array.from({ length: documents.length }, (_, i) => i);
  // A partial Fisher-Yates: the first `sample` places are a uniform draw without replacement.
  for (let i = 0; i < sample; i++) {
    const j = i + Math.floor(random() * (indexes.length - i));
    [indexes[i], indexes[j]] = [indexes[j]!, indexes[i]!];
  }
  return indexes
    .slice(0, sample)
    .sort((a, b) => a - b)
    .map((i) => documents[i]!);
}

/** Benchmark items from JSONL; a bad line fails the job naming its number (items are curated data). */
export function parseBenchmarkItems(bytes: Uint8Array, uri: string): BenchmarkItem[] {
  const items: BenchmarkItem[] = [];
  new TextDecoder('utf-8', { fatal: false })
    .decode(bytes)
    .split('\n')
    .forEach((line, i) => {
      if (line.trim() === '') return;
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        throw new ConfigError(`spec.benchmarksUri line ${i + 1}`, line.slice(0, 80), `is not JSON (${uri})`);
      }
      items.push(parseOrThrow(BenchmarkItem, value, `spec.benchmarksUri line ${i + 1}`));
    });
  return items;
}
