/**
 * The corpus refinery's plan model (pipelines/steps/plan.ts): the filter and score Distributed
 * Maps run one child per shard. The corpus decides how many documents there are (a sample's
 * count, plus the injected test material, or the whole corpus), so the shards are an option;
 * without it the plan is a range, from one shard to refineryMaxShards.
 */
import { coldModel, type PlanModel, requestInput } from '#pipelines/steps/plan.ts';
import { labelRequestParams } from '#shared/refinery/labels.ts';
import { DEFAULT_MAX_ATTEMPTS } from '#shared/claude-requests.ts';
import { ConfigError } from '#shared/errors.ts';
import { MAX_SHARDS, type RefineryConfig } from './config.ts';

export interface RefineryPlanOptions {
  readonly startedByUpload?: boolean;
  /** Shards of the ingested corpus. */
  readonly shards?: number;
}

/**
 * The most shards a config can make: a sample's documents (at most `sample`, with injection at
 * most 5 % spam and 5 % near-duplicates more, at least 8 and 5: shared/refinery/inject.ts; a
 * contaminated document takes a real one's place), in shards of `shardDocuments`; the whole
 * corpus's otherwise, which ingest bounds at MAX_SHARDS.
 */
export function refineryMaxShards(config: RefineryConfig): number {
  if (config.sample === null) return MAX_SHARDS;
  const documents = config.inject ? Math.ceil(config.sample * 1.1) + 13 : config.sample;
  return Math.min(MAX_SHARDS, Math.ceil(documents / config.shardDocuments));
}

export function refineryPlanModel(config: RefineryConfig, options: RefineryPlanOptions = {}): PlanModel {
  const shards = options.shards;
  if (shards === undefined) throw new ConfigError('shards', null, 'the corpus decides how many shards a run has: give their count to plan the run');
  const { labels } = config;
  return coldModel({
    pipeline: 'refinery',
    startedByUpload: options.startedByUpload,
    // One call per sampled survivor (fewer when fewer survive the filters); none with a labels file.
    claude: () =>
      labels.fileSha256 === null
        ? [
            {
              step: 'label',
              model: labels.model,
              calls: { low: 0, high: labels.sample },
              maxOutputTokens: 1024,
              attempts: DEFAULT_MAX_ATTEMPTS,
              // The rubric, and an extract of maxChars code points of 4 bytes each (the most UTF-8 takes).
              maxInput: requestInput(labelRequestParams('\u{10000}'.repeat(labels.maxChars), { model: labels.model, maxChars: labels.maxChars })),
              why: 'one per sampled document that survives',
            },
          ]
        : [],
    mapItems: (name) => (name === 'filter: Items' || name === 'score: Items' ? shards : undefined),
  });
}
