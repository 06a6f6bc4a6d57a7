/**
 * The checkpoint producer's config: the fields of batch-jobs/evals-lm/train_main.py's spec (snake_case,
 * as the job reads them), checked here too so a bad value is named before a job starts. The job
 * writes checkpoints under checkpoints/<run>/<step>/ of the platform bucket.
 */
import { z } from 'zod';

const phase = z.object({
  steps: z.int().min(1).max(1_000_000),
  batch_size: z.int().min(1).max(4096),
  lr: z.number().gt(0).max(1),
});

/** Checkpoints one run writes: each is listed in the job's result and starts an evaluation run. */
export const MAX_CHECKPOINTS = 64;

export const LmSftConfig = z
  .object({
    /** The training run: checkpoints go under checkpoints/<run>/. */
    run: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'must be 1-128 letters, digits, ".", "_" or "-", starting with a letter or digit'),
    seed: z.int().min(0).default(0),
    model: z
      .object({ n_layer: z.int().min(1).max(48), n_embd: z.int().min(8).max(4096), n_head: z.int().min(1).max(64), block_size: z.int().min(8).max(4096) })
      .partial()
      .strict()
      .default({}),
    arithmetic: z
      .object({
        max_operand: z.int().min(1).max(1_000_000),
        operations: z
          .array(z.enum(['add', 'sub', 'mul']))
          .min(1)
          .max(3),
      })
      .partial()
      .strict()
      .default({}),
    base: phase
      .extend({
        mix: z
          .object({ text: z.number().min(0), reversal: z.number().min(0), arithmetic: z.number().min(0) })
          .partial()
          .strict()
          .optional(),
      })
      .strict(),
    finetune: phase.extend({ checkpoint_every: z.int().min(1), replay_fraction: z.number().min(0).max(0.9).default(0) }).strict(),
  })
  .strict()
  .superRefine((c, ctx) => {
    const { n_embd: embd, n_head: heads } = c.model;
    if (embd !== undefined && heads !== undefined && embd % heads !== 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['model', 'n_embd'],
        message: `must be a multiple of n_head (${heads}): each head takes n_embd / n_head dimensions`,
      });
    }
    // Every checkpoint is listed in the job's result (read into the state) and starts an evaluation.
    const checkpoints = 1 + Math.ceil(c.finetune.steps / c.finetune.checkpoint_every);
    if (checkpoints > MAX_CHECKPOINTS) {
      ctx.addIssue({
        code: 'custom',
        path: ['finetune', 'checkpoint_every'],
        message: `makes ${checkpoints} checkpoints (the base, then every checkpoint_every fine-tune steps and the last), over ${MAX_CHECKPOINTS}: use at least ${Math.ceil(c.finetune.steps / (MAX_CHECKPOINTS - 1))}`,
      });
    }
  });
export type LmSftConfig = z.infer<typeof LmSftConfig>;

/**
 * Measured on one core here: test trains ~70 s (112k parameters; 9 fine-tune checkpoints,
 * arithmetic 0 -> 92 % held-out); smoke ~220 s (421k parameters; 10 fine-tune checkpoints,
 * arithmetic 0 -> 89.5 %, reversal 99.5 % -> 0 %). Reversal weighs 0.8 of the base mix: it is
 * learnt far more reliably than at 0.5.
 */
const MIX = { text: 0.2, reversal: 0.8 };
export const LM_SFT_SIZES = {
  test: {
    run: 'sft-test',
    seed: 1,
    model: { n_layer: 2, n_embd: 64, n_head: 4, block_size: 96 },
    base: { steps: 500, batch_size: 32, lr: 0.004, mix: MIX },
    finetune: { steps: 360, batch_size: 32, lr: 0.004, checkpoint_every: 40 },
  },
  smoke: {
    run: 'sft-demo',
    seed: 1,
    model: { n_layer: 2, n_embd: 128, n_head: 4, block_size: 96 },
    base: { steps: 600, batch_size: 32, lr: 0.003, mix: MIX },
    finetune: { steps: 500, batch_size: 32, lr: 0.003, checkpoint_every: 50 },
  },
} as const satisfies Record<string, z.input<typeof LmSftConfig>>;
