/**
 * The corpus refinery's plan model (pipelines/steps/plan.ts): the filter and score Distributed
 * Maps run one child per shard. The corpus decides how many documents there are (a sample's
 * count, plus the injected test material, or the whole corpus), so the shards are an option;
 * without it the plan is a range, from one shard to MAX_SHARDS (ingest refuses more).
 */
import { coldModel, type PlanModel } from '#pipelines/steps/plan.ts';
import { ConfigError } from '#shared/errors.ts';
import type { RefineryConfig } from './config.ts';

export interface RefineryPlanOptions {
  readonly startedByUpload?: boolean;
  /** Shards of the ingested corpus. */
  readonly shards?: number;
}

export function refineryPlanModel(_config: RefineryConfig, options: RefineryPlanOptions = {}): PlanModel {
  const shards = options.shards;
  if (shards === undefined) throw new ConfigError('shards', null, 'the corpus decides how many shards a run has: give their count to plan the run');
  return coldModel({
    pipeline: 'refinery',
    startedByUpload: options.startedByUpload,
    mapItems: (name) => (name === 'filter: Items' || name === 'score: Items' ? shards : undefined),
  });
}
