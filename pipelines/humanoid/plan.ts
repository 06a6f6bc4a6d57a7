/**
 * The humanoid's plan model (pipelines/steps/plan.ts): the trainer the config names, one replay
 * per forward speed of `replay.forward`, and publication unless the run continues a checkpoint.
 */
import { coldModel, type PlanModel } from '#pipelines/steps/plan.ts';
import type { HumanoidConfig } from './config.ts';

export function humanoidPlanModel(config: HumanoidConfig, options: { readonly startedByUpload?: boolean } = {}): PlanModel {
  return coldModel({
    pipeline: 'humanoid',
    startedByUpload: options.startedByUpload,
    mapItems: (name) => (name === 'replays: Items' ? config.replay.forward.length : undefined),
    decide(name, state) {
      if (name === 'Trainer?') return config.trainer === 'ppo' ? state.Choices![0]!.Next : state.Default;
      // Publication needs a run of its own: one that continues a checkpoint publishes nothing.
      if (name === 'Continued a checkpoint?') return config.checkpoint ? state.Choices![0]!.Next : state.Default;
      return undefined;
    },
  });
}
