/**
 * The corpus refinery: config and sizes.
 *
 * A run reads a corpus (`debian:` the local default, a JSONL or Parquet file in the platform
 * bucket, or a FineWeb sample by hf:// URI on AWS), shards it, filters, deduplicates and
 * decontaminates every shard, labels a stratified sample with Claude (or takes a labels file),
 * trains a cheap classifier on the labels, scores every surviving document and keeps those at
 * or above `threshold`. Each value below is part of the cache key of the steps that read it, so
 * a new threshold reruns only the curate step and the report.
 */
import { z } from 'zod';
import { DEFAULT_CLAUDE_MODEL } from '#shared/clients/anthropic.ts';
import { BENCHMARK_NAME } from '#shared/evals/benchmarks.ts';
import { DEFAULT_DECONTAMINATION_NGRAM, MAX_DECONTAMINATION_NGRAM } from '#shared/refinery/decontaminate.ts';
import { FilterConfig } from '#shared/refinery/filters.ts';
import { ModelPrice } from '#shared/refinery/llm-cost.ts';
import { MAX_S3_URI_CHARS } from '#shared/schema.ts';

/** What a shard Lambda holds: a document longer than this is truncated at ingest (counted). */
export const MAX_DOCUMENT_BYTES = 1_000_000;
/** Shards a run may have: the Distributed Map reads them from S3, the global dedup step reads one buffer each. */
export const MAX_SHARDS = 5_000;

/** `debian:`, `s3://bucket/key.(jsonl|jsonl.gz|parquet)` or `hf://datasets/<owner>/<name>/<path>.parquet`. */
export const CorpusUri = z
  .string()
  .max(MAX_S3_URI_CHARS)
  .regex(
    /^(debian:|s3:\/\/[^/]+\/.+\.(jsonl|jsonl\.gz|parquet)|hf:\/\/datasets\/[^/]+\/[^/]+\/.+\.parquet)$/,
    'must be debian:, s3://bucket/key.jsonl (or .jsonl.gz, .parquet) or hf://datasets/<owner>/<name>/<path>.parquet',
  );

/** A classifier's input size: hashed n-gram buckets, a power of two. */
const buckets = z
  .int()
  .min(2 ** 10)
  .max(2 ** 22)
  .refine((n) => (n & (n - 1)) === 0, 'must be a power of two');

export const RefineryConfig = z
  .object({
    corpus: CorpusUri.default('debian:'),
    /** Documents sampled from the corpus (seeded, before injection); null: all of it. */
    sample: z.int().min(1).max(10_000_000).nullable().default(null),
    seed: z
      .int()
      .min(0)
      .max(2 ** 30)
      .default(0),
    /** Mix in test material with known labels (spam, near-duplicates, contamination) to measure every filter. */
    inject: z.boolean().default(true),
    /** Documents per shard, the unit of the fan-out and of its cache. */
    shardDocuments: z.int().min(10).max(20_000).default(500),
    /** A longer document (UTF-8 bytes) is truncated at ingest and counted. */
    maxDocumentBytes: z.int().min(1_000).max(MAX_DOCUMENT_BYTES).default(MAX_DOCUMENT_BYTES),
    /** Every filter's rules and thresholds; `{}` is FineWeb's setup. */
    filters: FilterConfig.prefault({}),
    decontamination: z
      .object({
        /** Word n-gram length (GPT-3: 13; the reference implementation: 12). */
        ngram: z.int().min(1).max(MAX_DECONTAMINATION_NGRAM).default(DEFAULT_DECONTAMINATION_NGRAM),
        /**
         * Also index n-grams wholly inside a prompt. On by default: a benchmark's question is the
         * item even when its answer is reformatted or absent ("Q: ... A: 7" breaks every n-gram
         * that spans question and answer); off, only answers and question-to-answer n-grams count.
         */
        indexPrompt: z.boolean().default(true),
        /** Benchmarks of the evals registry to check against; null: every registered one. */
        benchmarks: z.array(z.string().regex(BENCHMARK_NAME)).max(50).nullable().default(null),
        /**
         * Extra sets by name: JSONL files of {id, prompt, answer} rows at
         * decontamination/<name>.jsonl in the platform bucket (named, not by URI, so that the
         * config stays small).
         */
        extra: z
          .array(z.string().regex(/^[a-z0-9][a-z0-9-]{0,39}$/, 'must be 1-40 lowercase letters, digits or "-"'))
          .max(5)
          .default([]),
      })
      .strict()
      .prefault({}),
    labels: z
      .object({
        /** Documents labelled (a stratified sample of the survivors). */
        sample: z.int().min(20).max(20_000).default(2_000),
        /** The Claude model; part of the label step's cache key. */
        model: z.string().min(1).max(100).default(DEFAULT_CLAUDE_MODEL),
        /** Requests in flight at once. */
        concurrency: z.int().min(1).max(64).default(8),
        /** Characters of each document the labeler sees (FineWeb-Edu: 1,000). */
        maxChars: z.int().min(100).max(20_000).default(1_000),
        /**
         * Labels from a file instead of Claude (`--labels-file`: the CLI uploads it to
         * data/refinery/label-files/<sha256>.jsonl), named by its sha256.
         */
        fileSha256: z
          .string()
          .regex(/^[0-9a-f]{64}$/, 'must be a sha256, 64 hex digits')
          .nullable()
          .default(null),
        /** Prices (USD per million tokens) for a model the price table does not list, or to override it. */
        price: ModelPrice.nullable().default(null),
      })
      .strict()
      .prefault({}),
    classifier: z
      .object({
        /**
         * lasso: an L1-regularised linear regression over the hashed word-presence features with a
         * relaxed refit, its penalty chosen by cross-validation on the training labels (the default:
         * few hundred labels of a rule carried by a limited set of words). mlp: the embedding bag
         * with a hidden layer (dim, epochs), for labels whose signal is spread over many words.
         */
        model: z.enum(['lasso', 'mlp']).default('lasso'),
        buckets: buckets.default(2 ** 18),
        /** Width of the mlp model's embedding rows (the lasso ignores it). */
        dim: z.int().min(2).max(256).default(16),
        /** Passes of the mlp model over the labels (the lasso ignores it). */
        epochs: z.int().min(1).max(500).default(40),
        heldOutFraction: z.number().min(0.05).max(0.5).default(0.2),
      })
      .strict()
      .prefault({}),
    /** Keep documents whose predicted score (0-5) is at least this. */
    threshold: z.number().min(0).max(5).default(3),
  })
  .strict();
export type RefineryConfig = z.output<typeof RefineryConfig>;

/**
 * Sizes. test: 400 documents of the local corpus (about a quarter survive the filters), 120
 * labels at most. smoke: about 5,000
 * documents, 1,000 labels. local: the whole local corpus. full: a FineWeb sample on AWS.
 */
export const REFINERY_SIZES = {
  test: { sample: 400, shardDocuments: 100, labels: { sample: 120, concurrency: 8 }, classifier: { epochs: 60 } },
  smoke: { sample: 5_000, shardDocuments: 500, labels: { sample: 1_000, concurrency: 16 } },
  local: { shardDocuments: 1_000, labels: { sample: 2_000, concurrency: 16 } },
  full: {
    corpus: 'hf://datasets/HuggingFaceFW/fineweb/sample/10BT/000_00000.parquet',
    sample: 300_000,
    inject: false,
    shardDocuments: 2_000,
    labels: { sample: 5_000, concurrency: 32 },
  },
} as const satisfies Record<string, z.input<typeof RefineryConfig>>;
