/**
 * The sparse autoencoders' plan model (pipelines/steps/plan.ts): one SAE per point of the grid,
 * widths x ks.
 */
import { coldModel, type PlanModel } from '#pipelines/steps/plan.ts';
import type { SaeConfig } from './config.ts';

export function saePlanModel(config: SaeConfig, options: { readonly startedByUpload?: boolean } = {}): PlanModel {
  return coldModel({
    pipeline: 'sae',
    startedByUpload: options.startedByUpload,
    mapItems: (name) => (name === 'saes: Items' ? config.sae.widths.length * config.sae.ks.length : undefined),
  });
}
