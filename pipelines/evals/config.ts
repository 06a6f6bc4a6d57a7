/**
 * The evaluation pipeline's config. A run started by an upload gets the defaults (the checkpoint
 * comes from the event); a run from the CLI names the checkpoint's manifest. Null means "from the
 * registry": the suite is every registered benchmark, the guard the registry's guard settings.
 */
import { z } from 'zod';
import { MAX_S3_URI_CHARS } from '#shared/schema.ts';
import { BENCHMARK_NAME } from '#shared/evals/benchmarks.ts';

export const EvalsConfig = z
  .object({
    /** s3://<bucket>/checkpoints/<run>/<step>/manifest.json; null when started by the upload. */
    checkpoint: z
      .string()
      .regex(/^s3:\/\/[^/]+\/checkpoints\/[^/]+\/\d+\/manifest\.json$/, 'must be s3://<bucket>/checkpoints/<run>/<step>/manifest.json')
      .max(MAX_S3_URI_CHARS)
      .nullable()
      .default(null),
    /** The benchmarks to evaluate; null: every registered one. */
    benchmarks: z.array(z.string().regex(BENCHMARK_NAME)).min(1).max(64).nullable().default(null),
    /** Guard overrides; null: the registry's guard settings. */
    target: z.string().regex(BENCHMARK_NAME).nullable().default(null),
    guard: z.string().regex(BENCHMARK_NAME).nullable().default(null),
    marginPoints: z.number().min(0).max(100).nullable().default(null),
    /** Generation budget per prompt (the demo's answers are at most 6 characters). */
    maxNewTokens: z.int().min(1).max(1024).default(8),
    /** Example generations kept per result. */
    examples: z.int().min(0).max(50).default(5),
  })
  .strict();
export type EvalsConfig = z.infer<typeof EvalsConfig>;

/** What an upload-started run uses: everything from the event and the registry. */
export const EVALS_TRIGGER_CONFIG = EvalsConfig.parse({});
