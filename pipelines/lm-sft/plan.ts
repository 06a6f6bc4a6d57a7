/** The fine-tuning producer's plan model (pipelines/steps/plan.ts): no Map, no Choice of its own. */
import { coldModel, type PlanModel } from '#pipelines/steps/plan.ts';

export function lmSftPlanModel(_config: unknown, options: { readonly startedByUpload?: boolean } = {}): PlanModel {
  return coldModel({ pipeline: 'lm-sft', startedByUpload: options.startedByUpload, mapItems: () => undefined });
}
