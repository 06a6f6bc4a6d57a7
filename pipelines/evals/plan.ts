/**
 * The evaluations' plan model (pipelines/steps/plan.ts): one item per benchmark of the suite. A
 * config that names its benchmarks decides the suite; one that takes every registered benchmark
 * (benchmarks: null) leaves it to the registry when the run starts, so the plan asks for the count.
 */
import { ConfigError } from '#shared/errors.ts';
import { coldModel, type PlanModel, S3_RECORD_BYTES } from '#pipelines/steps/plan.ts';
import type { EvalsConfig } from './config.ts';

export function evalsPlanModel(config: EvalsConfig, options: { readonly registeredBenchmarks?: number; readonly startedByUpload?: boolean } = {}): PlanModel {
  const suite = config.benchmarks?.length ?? options.registeredBenchmarks;
  if (suite === undefined) {
    throw new ConfigError('benchmarks', null, 'the suite is every benchmark registered when the run starts: name them in config.benchmarks to plan the run');
  }
  return coldModel({
    pipeline: 'evals',
    startedByUpload: options.startedByUpload,
    // A record of the fan-out: a failure keeps its benchmark's name (at most 41 characters).
    recordBytes: () => S3_RECORD_BYTES + 40,
    mapItems: (name) => (name === 'evaluate: Items' ? suite : undefined),
  });
}
