/**
 * Humanoid locomotion: config and sizes.
 *
 * A run trains the Unitree G1 on the joystick task (shared/humanoid/task.ts): ARS over the CPU
 * twin on the CPU queue (`ars`, locally and on AWS), or Brax PPO over MuJoCo MJX on the GPU queue
 * (`ppo`, AWS only). Either writes checkpoints of one format; each checkpoint's upload fires
 * replays at the replay commands while training goes on, and the run's report updates. A run
 * from a checkpoint (`checkpoint`: `frontier run humanoid --checkpoint URI`) continues that
 * training and never publishes; any other run publishes the artifact `g1-run-policy`.
 */
import { z } from 'zod';
import { ARS_STARTS, MAX_CHECKPOINTS } from '#shared/humanoid/checkpoint.ts';
import { COMMANDS, TIMING } from '#shared/humanoid/task.ts';
import { TRAIN_OBJECTIVES } from '#shared/humanoid/train-ars.ts';
import { MAX_S3_URI_CHARS } from '#shared/schema.ts';

/** Replay commands a run may list: each is a replay job per checkpoint. */
export const MAX_REPLAY_COMMANDS = 6;

const count = (min: number, max: number) => z.int().min(min).max(max);

/** A forward speed to replay at (m/s), within the trained range; lateral and yaw are 0. */
const forwardSpeed = z
  .number()
  .min(COMMANDS.forward[0], `must be within the trained range [${COMMANDS.forward.join(', ')}] m/s`)
  .max(COMMANDS.forward[1], `must be within the trained range [${COMMANDS.forward.join(', ')}] m/s`);

export const HumanoidConfig = z
  .object({
    /** ars: CPU queue (local and AWS); ppo: GPU queue, Brax PPO over MJX (AWS only). */
    trainer: z.enum(['ars', 'ppo']).default('ars'),
    seed: count(0, 2 ** 30).default(0),
    /**
     * A checkpoint.json (s3://) to continue from: the run trains on from it and publishes
     * nothing. null: a new run, published as `g1-run-policy`.
     */
    checkpoint: z
      .string()
      .max(MAX_S3_URI_CHARS)
      .regex(/^s3:\/\/[^/]+\/.+\/checkpoint\.json$/, "must be the s3:// URI of a checkpoint's checkpoint.json")
      .nullable()
      .default(null),
    ars: z
      .object({
        iterations: count(1, 100_000).default(300),
        /**
         * Where a new run starts: `gait`, the balance controller marching in place, searched only
         * along its gait's 21 directions (shared/humanoid/gait.ts); `balance`, the LQR balance
         * controller (shared/humanoid/balance.ts: it stands for all 500 steps before any search),
         * searched along every weight; both with the controller's normaliser held; `zero`, a zero
         * policy with the normaliser learnt from the first `normaliserIterations` iterations.
         */
        start: z.enum(ARS_STARTS).default('gait'),
        /**
         * What rollouts are ranked by: `progress`, staying up first, then forward speed; `return`,
         * the task's reward (upstream's), which ranks a march below standing still.
         */
        objective: z.enum(TRAIN_OBJECTIVES).default('progress'),
        /** Directions per iteration (N); two rollouts each. */
        directions: count(1, 1_024).default(32),
        /** The best directions kept (b). */
        topDirections: count(1, 1_024).default(16),
        /**
         * alpha and nu. For the gait start they are in the gait's units (radians of a joint's
         * reference): 0.02 and 0.03. For the balance start set 0.002 each: the paper's 0.02 and
         * 0.0075 moved the controller's gains enough that it fell within 5 iterations (measured:
         * steps upright 500 -> 87). The zero start's figures in the README were measured with the
         * paper's 0.02 and 0.0075.
         */
        stepSize: z.number().positive().max(10).default(0.02),
        noise: z.number().positive().max(10).default(0.03),
        rolloutSteps: count(1, TIMING.episodeSteps).default(500),
        evaluations: count(1, 64).default(4),
        checkpointEvery: count(1, 100_000).default(25),
        /**
         * Iterations whose states update the observation normaliser, after which it holds (null:
         * every iteration, the paper's V2). 1: measured here, a normaliser that kept moving undid
         * the updates of 32 directions. Only for the zero start: the balance start's normaliser is its own.
         */
        normaliserIterations: count(1, 100_000).nullable().default(1),
        /** Rollout threads; null: one per core of the job. */
        workers: count(1, 64).nullable().default(null),
        /** The job's vCPUs on AWS (the CPU queue). */
        vcpus: count(1, 64).default(16),
      })
      .strict()
      .prefault({}),
    /** What the CPU trainer's episodes are like (upstream's: noise 1, pushes, random resets, no bonus, sampled commands). */
    env: z
      .object({
        noiseLevel: z.number().min(0).max(10).default(0),
        pushes: z.boolean().default(false),
        randomReset: z.boolean().default(false),
        survivalBonus: z.number().min(0).max(100).default(5),
        /** A fixed forward speed to train at (m/s); null: upstream's sampled commands. */
        forward: forwardSpeed.nullable().default(0.5),
      })
      .strict()
      .prefault({}),
    ppo: z
      .object({
        terrain: z.enum(['flat', 'rough']).default('flat'),
        numTimesteps: count(1_000_000, 10_000_000_000).default(150_000_000),
        numEnvs: count(1, 65_536).default(8_192),
        batchSize: count(1, 65_536).default(256),
        numMinibatches: count(1, 1_024).default(32),
        unrollLength: count(1, 1_000).default(20),
        numUpdatesPerBatch: count(1, 64).default(4),
        discounting: z.number().positive().max(1).default(0.97),
        learningRate: z.number().positive().max(1).default(3e-4),
        entropyCost: z.number().min(0).max(1).default(0.005),
        clippingEpsilon: z.number().positive().max(1).default(0.2),
        maxGradNorm: z.number().positive().max(100).default(1),
        numEvals: count(1, 1_000).default(20),
        checkpointEverySteps: count(100_000, 10_000_000_000).default(10_000_000),
      })
      .strict()
      .prefault({}),
    replay: z
      .object({
        /** Forward speeds (m/s) each checkpoint is replayed at. */
        forward: z.array(forwardSpeed).min(1).max(MAX_REPLAY_COMMANDS).default([0.5, 1.5, 2.5]),
        steps: count(1, 10_000).default(TIMING.replaySteps),
        /** A film frame every this many control steps (2: 25 frames a second). */
        filmEvery: count(1, 100).default(2),
      })
      .strict()
      .prefault({}),
  })
  .strict()
  .superRefine((config, ctx) => {
    const a = config.ars;
    if (a.topDirections > a.directions) {
      ctx.addIssue({ code: 'custom', path: ['ars', 'topDirections'], message: `${a.topDirections} exceeds ars.directions (${a.directions})` });
    }
    const arsCheckpoints = Math.ceil(a.iterations / a.checkpointEvery);
    if (config.trainer === 'ars' && arsCheckpoints > MAX_CHECKPOINTS) {
      ctx.addIssue({
        code: 'custom',
        path: ['ars', 'checkpointEvery'],
        message: `${a.checkpointEvery} makes ${arsCheckpoints} checkpoints of ${a.iterations} iterations, over the ${MAX_CHECKPOINTS} a run may write`,
      });
    }
    const p = config.ppo;
    const ppoCheckpoints = Math.ceil(p.numTimesteps / p.checkpointEverySteps);
    if (config.trainer === 'ppo' && ppoCheckpoints > MAX_CHECKPOINTS) {
      ctx.addIssue({
        code: 'custom',
        path: ['ppo', 'checkpointEverySteps'],
        message: `${p.checkpointEverySteps} makes ${ppoCheckpoints} checkpoints of ${p.numTimesteps} steps, over the ${MAX_CHECKPOINTS} a run may write`,
      });
    }
  });
export type HumanoidConfig = z.output<typeof HumanoidConfig>;

/**
 * Sizes. test: a few iterations and one short replay (the end-to-end test). smoke: under 10
 * minutes on 2 cores (measured: 190 s). local: about an hour on 2 cores (measured from the gait
 * start: 800 iterations in 3,389 s). full: Brax PPO, 150M steps on one GPU.
 */
export const HUMANOID_SIZES = {
  test: {
    ars: { iterations: 4, directions: 4, topDirections: 2, rolloutSteps: 60, evaluations: 2, checkpointEvery: 2, workers: 2 },
    replay: { forward: [0.5], steps: 50 },
  },
  smoke: { ars: { iterations: 60, directions: 16, topDirections: 8, checkpointEvery: 15 } },
  local: { ars: { iterations: 800, checkpointEvery: 25 } },
  full: { trainer: 'ppo' },
} as const satisfies Record<string, z.input<typeof HumanoidConfig>>;

/** The config of a replay started by a checkpoint's upload: the default replays. */
export const HUMANOID_TRIGGER_CONFIG = HumanoidConfig.parse({});
