/**
 * The pipelines this app deploys and runs. Each entry names its stack, its config schema
 * and sizes, and builds its stack from the platform's resources. The first entry is the
 * default of `frontier run`.
 */
import type { Stack, StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import type { z } from 'zod';
import type { PlatformResources } from './platform-stack.ts';
import { PROBE_PIPELINE, ProbeStack } from '../pipelines/probe/stack.ts';
import { PROBE_SMOKE, ProbeConfig } from '../pipelines/probe/config.ts';
import { SELFPLAY_PIPELINE, SelfPlayLeagueStack } from '../pipelines/selfplay/stack.ts';
import { SELFPLAY_SIZES, SelfPlayConfig } from '../pipelines/selfplay/config.ts';
import { EVALS_PIPELINE, EvalsStack } from '../pipelines/evals/stack.ts';
import { EvalsConfig } from '../pipelines/evals/config.ts';
import { LM_SFT_PIPELINE, LmSftStack } from '../pipelines/lm-sft/stack.ts';
import { LM_SFT_SIZES, LmSftConfig } from '../pipelines/lm-sft/config.ts';
import { MOLECULES_PIPELINE, MolecularDiscoveryStack } from '../pipelines/molecules/stack.ts';
import { MOLECULES_SIZES, MoleculesConfig } from '../pipelines/molecules/config.ts';
import { REWARDS_PIPELINE, RewardSearchStack } from '../pipelines/rewards/stack.ts';
import { REWARDS_SIZES, RewardsConfig } from '../pipelines/rewards/config.ts';
import { REFINERY_PIPELINE, RefineryStack } from '../pipelines/refinery/stack.ts';
import { REFINERY_SIZES, RefineryConfig } from '../pipelines/refinery/config.ts';
import { SAE_PIPELINE, SaeStack } from '../pipelines/sae/stack.ts';
import { SAE_SIZES, SaeConfig } from '../pipelines/sae/config.ts';
import { VIDEO_PIPELINE, VideoStack } from '../pipelines/video/stack.ts';
import { VIDEO_SIZES, VideoConfig } from '../pipelines/video/config.ts';
import { HUMANOID_PIPELINE, HumanoidStack } from '../pipelines/humanoid/stack.ts';
import { HUMANOID_SIZES, HumanoidConfig } from '../pipelines/humanoid/config.ts';

export interface PipelineEntry {
  /** Name used by the CLI and in S3 prefixes. */
  readonly name: string;
  /** CloudFormation stack id: `cdk deploy <stackId>` deploys this pipeline alone. */
  readonly stackId: string;
  readonly description: string;
  /** The execution input's `config`. */
  readonly config: z.ZodType;
  /** Config of `--smoke` runs (and of runs given no config). */
  readonly smoke: Record<string, unknown>;
  /** Config of full-size runs. Default: the smoke config. */
  readonly full?: Record<string, unknown>;
  /** A hint printed after a successful local run (what to look at next). */
  readonly afterRun?: string;
  /** Other named sizes (`--size NAME`), e.g. test or local. */
  readonly sizes?: Readonly<Record<string, Record<string, unknown>>>;
  /**
   * Runs untrusted code in the sandbox network (pipelines/steps/sandbox-network.ts), whose
   * interface endpoints bill by the hour while the stack is deployed. The context flag
   * `frontier:sandbox=false` leaves such pipelines out of the app. Default: false.
   */
  readonly sandboxed?: boolean;
  create(scope: Construct, id: string, props: StackProps & { resources: PlatformResources }): Stack;
}

export const PIPELINES: readonly PipelineEntry[] = [
  {
    name: SELFPLAY_PIPELINE,
    stackId: 'SelfPlayLeague',
    description: 'Connect Four self-play league: PPO on GPU, match fan-out, joint Elo, champion arena',
    config: SelfPlayConfig,
    smoke: SELFPLAY_SIZES.smoke,
    full: SELFPLAY_SIZES.full,
    sizes: SELFPLAY_SIZES,
    afterRun: 'report: npx frontier artifacts show selfplay-champion (report.html); play the champion: npx frontier serve, then open the arena URL it prints',
    create: (scope, id, props) => new SelfPlayLeagueStack(scope, id, props),
  },
  {
    name: EVALS_PIPELINE,
    stackId: 'EvalsEveryCheckpoint',
    description: 'Evaluate every checkpoint: upload trigger, cached benchmark suite, release guard, leaderboard',
    config: EvalsConfig,
    // Runs start from checkpoint uploads; from the CLI, name one: --config '{"checkpoint":"s3://.../manifest.json"}'.
    smoke: {},
    create: (scope, id, props) => new EvalsStack(scope, id, props),
  },
  {
    name: LM_SFT_PIPELINE,
    stackId: 'LmSft',
    description: 'Checkpoint producer: a small GPT trained as a base model, then fine-tuned on arithmetic, uploading checkpoints',
    config: LmSftConfig,
    smoke: LM_SFT_SIZES.smoke,
    sizes: LM_SFT_SIZES,
    afterRun: 'its checkpoints started evaluations: npx frontier artifacts show leaderboard-<run> (leaderboard.html)',
    create: (scope, id, props) => new LmSftStack(scope, id, props),
  },
  {
    name: MOLECULES_PIPELINE,
    stackId: 'MolecularDiscovery',
    description: 'Closed-loop molecular discovery: Tanimoto GP surrogate, GFN2-xTB oracle on the CPU queue, approval of every batch by email',
    config: MoleculesConfig,
    smoke: MOLECULES_SIZES.smoke,
    sizes: MOLECULES_SIZES,
    afterRun:
      'report: npx frontier artifacts show molecular-discovery (report.html); each batch waits for approval: open the link in its email (.local/outbox)',
    create: (scope, id, props) => new MolecularDiscoveryStack(scope, id, props),
  },
  {
    name: REWARDS_PIPELINE,
    stackId: 'RewardSearch',
    description: 'Reward design by Claude: MountainCar reward functions trained with PPO in sandboxes, graded outside them, the winner against two baselines',
    config: RewardsConfig,
    smoke: REWARDS_SIZES.smoke,
    sizes: REWARDS_SIZES,
    afterRun: 'report: npx frontier artifacts show reward-search (report.html, reward.py)',
    sandboxed: true,
    create: (scope, id, props) => new RewardSearchStack(scope, id, props),
  },
  {
    name: REFINERY_PIPELINE,
    stackId: 'CorpusRefinery',
    description: 'Pretraining-corpus refinery: filters, dedup and decontamination on a fan-out; Claude labels distilled into a cheap ONNX classifier',
    config: RefineryConfig,
    smoke: REFINERY_SIZES.smoke,
    full: REFINERY_SIZES.full,
    sizes: REFINERY_SIZES,
    afterRun:
      'report: npx frontier artifacts show refined-corpus (report.html, corpus-manifest.json); a new threshold reruns only curate: --config \'{"threshold":2}\'',
    create: (scope, id, props) => new RefineryStack(scope, id, props),
  },
  {
    name: SAE_PIPELINE,
    stackId: 'SparseAutoencoders',
    description: 'Sparse autoencoders on a language model: one cached harvest, a grid of TopK SAEs in parallel, features labelled and scored for detection',
    config: SaeConfig,
    smoke: SAE_SIZES.smoke,
    full: SAE_SIZES.full,
    sizes: SAE_SIZES,
    afterRun: 'report: npx frontier artifacts show sae (report.html, grid.json); a new grid reruns no harvest: --config \'{"sae":{"ks":[8,32]}}\'',
    create: (scope, id, props) => new SaeStack(scope, id, props),
  },
  {
    name: VIDEO_PIPELINE,
    stackId: 'VideoCuration',
    description: 'Video-dataset curation: scene cuts on the CPU queue, scoring and captions on the GPU queue, kept clips published with CC BY attribution',
    config: VideoConfig,
    smoke: VIDEO_SIZES.smoke,
    full: VIDEO_SIZES.full,
    sizes: VIDEO_SIZES,
    afterRun:
      'report: npx frontier artifacts show video-report (report.html); the clips: npx frontier artifacts show video-clips (clips.jsonl, ATTRIBUTION.txt); a stricter threshold reruns no Batch job: --config \'{"curate":{"minAesthetic":6}}\'',
    create: (scope, id, props) => new VideoStack(scope, id, props),
  },
  {
    name: HUMANOID_PIPELINE,
    stackId: 'HumanoidLocomotion',
    description: 'Humanoid locomotion: the Unitree G1 trained by ARS on CPU (or Brax PPO over MJX on GPU), every checkpoint replayed and filmed as it lands',
    config: HumanoidConfig,
    smoke: HUMANOID_SIZES.smoke,
    full: HUMANOID_SIZES.full,
    sizes: HUMANOID_SIZES,
    afterRun:
      'report: npx frontier artifacts show g1-run-policy (report.html, policy.onnx, film-*.mp4); continue training without publishing: npx frontier run humanoid --checkpoint s3://.../checkpoint.json',
    create: (scope, id, props) => new HumanoidStack(scope, id, props),
  },
  {
    // The platform's probe: a fixture using every step kind. Deploying it verifies an account's
    // setup without a GPU.
    name: PROBE_PIPELINE,
    stackId: 'FrontierProbe',
    description: 'Platform probe: every step kind on a few numbers (fixture)',
    config: ProbeConfig,
    smoke: PROBE_SMOKE,
    create: (scope, id, props) => new ProbeStack(scope, id, props),
  },
];

export const PLATFORM_STACK_ID = 'FrontierPlatform';
