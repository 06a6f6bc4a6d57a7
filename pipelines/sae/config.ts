/**
 * Sparse autoencoders on a language model: config and sizes.
 *
 * A run trains (or, on AWS, loads) a language model, harvests its residual stream at one layer
 * once, trains a grid of TopK sparse autoencoders on that harvest in parallel, labels a sample of
 * the chosen SAE's features (Claude, or the non-LLM top-tokens explainer) and scores each label
 * for detection against a mismatched-label control. Each value is part of the cache key of the
 * steps that read it: a new `sae` grid reruns no harvest; a new `labels.model` reruns only the
 * labels and their scores.
 */
import { z } from 'zod';
import { DEFAULT_CLAUDE_MODEL } from '#shared/clients/anthropic.ts';

/** Layers of the Hugging Face models the pipeline knows (GPT-NeoX configs), so a bad layer fails before any job. */
export const KNOWN_HF_LAYERS: Readonly<Record<string, number>> = {
  'EleutherAI/pythia-70m': 6,
  'EleutherAI/pythia-70m-deduped': 6,
  'EleutherAI/pythia-160m': 12,
  'EleutherAI/pythia-160m-deduped': 12,
  'EleutherAI/pythia-410m': 24,
};

/**
 * SAEs a grid may hold: a Map of Batch jobs, each a cached step, and every one's weights a file
 * of the published artifact (whose file list is part of the publish step's cache key).
 */
export const MAX_SAES = 18;

const artifactName = z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'must be 1-63 lowercase letters, digits or "-"');
const count = (min: number, max: number) => z.int().min(min).max(max);

export const LocalLm = z
  .object({
    kind: z.literal('local'),
    /** Transformer blocks. */
    layers: count(1, 12).default(4),
    /** Residual stream width, the SAEs' input size. */
    width: count(16, 1024).default(128),
    heads: count(1, 16).default(4),
    /** Tokens per window: the context the model sees, and the harvest's window. */
    context: count(16, 1024).default(128),
    /** Tokenizer vocabulary: bytes, a begin token and the corpus's most frequent word pieces. */
    vocab: count(257, 65_536).default(2_048),
    steps: count(1, 1_000_000).default(2_000),
    batchSize: count(1, 1_024).default(16),
    learningRate: z.number().positive().max(1).default(3e-3),
  })
  .strict();

export const HfLm = z
  .object({
    kind: z.literal('hf'),
    /** A GPT-NeoX model on the Hugging Face Hub (Pythia), read in the GPU job on AWS. */
    model: z
      .string()
      .max(100)
      .regex(/^[A-Za-z0-9][\w.-]*\/[\w.-]+$/, 'must be <owner>/<name>')
      .default('EleutherAI/pythia-70m'),
    /** A commit or tag of the model's repository (Pythia: step143000 is the final checkpoint). */
    revision: z
      .string()
      .max(100)
      .regex(/^[\w.-]+$/)
      .default('main'),
    /** Tokens per window of the harvest (Pythia was trained on 2,048). */
    context: count(16, 2_048).default(256),
  })
  .strict();

export const SaeConfig = z
  .object({
    /** The text: an artifact of JSONL shards with a manifest (the refinery's `refined-corpus`, or any such corpus). */
    corpus: z
      .object({
        artifact: artifactName.default('refined-corpus'),
        /** A version of it; null: the latest. */
        version: z.int().min(1).nullable().default(null),
      })
      .strict()
      .prefault({}),
    seed: count(0, 2 ** 30).default(0),
    lm: z.discriminatedUnion('kind', [LocalLm, HfLm]).prefault({ kind: 'local' }),
    /** The residual stream after this block (0-based) is what the SAEs read. */
    layer: count(0, 63).default(2),
    harvest: z
      .object({
        /** Tokens run through the model once (training and held-out windows together). */
        tokens: count(1_000, 100_000_000).default(1_000_000),
        /** Every n-th window is held out: loss recovered and detection are measured on those. */
        heldOutEvery: count(2, 100).default(10),
      })
      .strict()
      .prefault({}),
    sae: z
      .object({
        /** Latents of each SAE; the grid is widths x ks. */
        widths: z.array(count(16, 262_144)).min(1).max(6).default([1_024, 2_048, 4_096]),
        /** Latents kept per token (TopK). */
        ks: z.array(count(1, 1_024)).min(1).max(6).default([8, 16, 24, 32, 48, 64]),
        /** Passes over the harvest's training tokens. */
        epochs: z.number().min(0.01).max(100).default(1),
        batchSize: count(64, 131_072).default(4_096),
        /** Adam's learning rate; null: 2e-4 / sqrt(width / 2^14), sparsify's rule. */
        learningRate: z.number().positive().max(1).nullable().default(null),
        /** AuxK's weight (0: off) and size (null: half the residual width). */
        auxkCoef: z
          .number()
          .min(0)
          .max(1)
          .default(1 / 32),
        auxk: count(1, 262_144).nullable().default(null),
        /** Tokens without firing after which a latent counts as dead (the reference: 10,000,000). */
        deadTokens: count(1_000, 100_000_000).default(10_000_000),
        /** What loss recovered compares against: the layer's residual zeroed (SAELens) or replaced by its mean. */
        ablation: z.enum(['zero', 'mean']).default('zero'),
      })
      .strict()
      .prefault({}),
    labels: z
      .object({
        /**
         * claude: Claude writes each label and predicts detection. top-tokens: the feature's
         * top tokens are its label and detection matches them (no model call). auto: claude when
         * the platform's Anthropic key is set, else top-tokens (resolved before any cached step).
         */
        explainer: z.enum(['auto', 'claude', 'top-tokens']).default('auto'),
        /** The Claude model; part of the labels' cache key. */
        model: z.string().min(1).max(100).default(DEFAULT_CLAUDE_MODEL),
        /**
         * Which SAE is labelled: the best loss recovered among those with L0 at most this. 16:
         * sparser codes read better (the local grid's detection gap was 0.10 at L0 64, 0.12 at
         * 32 and 0.18 at 16, for 99.3, 99.0 and 98.4 % of the loss recovered).
         */
        targetL0: count(1, 1_024).default(16),
        /** Features labelled (a seeded sample of those that fire often enough). */
        features: count(2, 1_000).default(40),
        /** A feature needs this many activating held-out windows to be sampled. */
        minActivating: count(2, 10_000).default(20),
        /** Windows shown to the explainer (top, across quantiles, and non-activating). */
        explainExamples: count(4, 100).default(40),
        /** Held-out windows scored for detection, half activating and half not. */
        detectExamples: count(4, 100).default(40),
        /** Tokens in each shown window. */
        windowTokens: count(4, 128).default(32),
        /** Requests in flight at once. */
        concurrency: count(1, 64).default(8),
      })
      .strict()
      .prefault({}),
  })
  .strict()
  .superRefine((config, ctx) => {
    const layers = config.lm.kind === 'local' ? config.lm.layers : KNOWN_HF_LAYERS[config.lm.model];
    if (layers !== undefined && config.layer >= layers) {
      const model = config.lm.kind === 'local' ? `the local model (lm.layers ${layers})` : config.lm.model;
      ctx.addIssue({ code: 'custom', path: ['layer'], message: `${config.layer} does not exist: ${model} has layers 0 to ${layers - 1}` });
    }
    const saes = config.sae.widths.length * config.sae.ks.length;
    if (saes > MAX_SAES) {
      ctx.addIssue({
        code: 'custom',
        path: ['sae', 'ks'],
        message: `${config.sae.widths.length} widths x ${config.sae.ks.length} ks make ${saes} SAEs, over the ${MAX_SAES} a grid may hold`,
      });
    }
    const smallest = Math.min(...config.sae.widths);
    config.sae.ks.forEach((k, i) => {
      if (k > smallest)
        ctx.addIssue({ code: 'custom', path: ['sae', 'ks', i], message: `k ${k} exceeds width ${smallest} (sae.widths): a token keeps k of width latents` });
    });
    if (config.lm.kind === 'local' && config.sae.auxk !== null && config.sae.auxk > smallest) {
      ctx.addIssue({ code: 'custom', path: ['sae', 'auxk'], message: `${config.sae.auxk} exceeds width ${smallest} (sae.widths)` });
    }
    if (config.lm.kind === 'local' && config.harvest.tokens < config.lm.context * config.harvest.heldOutEvery) {
      ctx.addIssue({
        code: 'custom',
        path: ['harvest', 'tokens'],
        message: `${config.harvest.tokens} tokens make fewer than ${config.harvest.heldOutEvery} windows of ${config.lm.context}: no held-out window`,
      });
    }
    if (config.labels.detectExamples % 2) {
      ctx.addIssue({ code: 'custom', path: ['labels', 'detectExamples'], message: `${config.labels.detectExamples} must be even (half activating, half not)` });
    }
  });
export type SaeConfig = z.output<typeof SaeConfig>;

/**
 * Sizes. test: a tiny model and 2 x 2 SAEs on a few thousand tokens. smoke: a small model, 2 x 3
 * SAEs. local: the local model and the full grid of 18 (3 widths x 6 ks). full: Pythia-70m on AWS.
 */
export const SAE_SIZES = {
  test: {
    lm: { kind: 'local', layers: 2, width: 32, heads: 2, context: 32, vocab: 512, steps: 60, batchSize: 16 },
    layer: 1,
    harvest: { tokens: 8_192, heldOutEvery: 4 },
    sae: { widths: [128, 256], ks: [4, 16], epochs: 4, batchSize: 512, deadTokens: 2_000 },
    labels: { features: 8, minActivating: 4, explainExamples: 12, detectExamples: 8, windowTokens: 16 },
  },
  smoke: {
    lm: { kind: 'local', layers: 2, width: 64, heads: 2, context: 64, vocab: 2_048, steps: 300 },
    layer: 1,
    harvest: { tokens: 131_072 },
    sae: { widths: [512, 1_024], ks: [16, 32, 64], epochs: 2, batchSize: 1_024, deadTokens: 50_000 },
    labels: { features: 24 },
  },
  // The refinery's whole local corpus keeps about 230 documents, some 310,000 tokens at this
  // vocabulary: the harvest takes 262,144 of them and each SAE makes 4 passes.
  local: { lm: { kind: 'local', steps: 1_200 }, harvest: { tokens: 262_144 }, sae: { epochs: 4, deadTokens: 200_000 } },
  full: {
    lm: { kind: 'hf', model: 'EleutherAI/pythia-70m', revision: 'main' },
    layer: 3,
    // 4M tokens x 512 floats: 8 GiB of activations, what the SAE job's 30 GiB holds beside the model.
    harvest: { tokens: 4_000_000 },
    sae: { widths: [4_096, 8_192, 16_384], ks: [8, 16, 24, 32, 48, 64], batchSize: 8_192 },
    labels: { features: 100, concurrency: 16 },
  },
} as const satisfies Record<string, z.input<typeof SaeConfig>>;
