/**
 * The probe's plan model (pipelines/steps/plan.ts): how its Choices go on a cold run of a config,
 * and how wide its Maps are. Every item squares (a cold plan assumes no failure), every cached
 * step misses, and the steps that list outputs are prepare (the data file), sum (summary.json)
 * and publish (the manifest).
 */
import type { AslState } from '#pipelines/steps/history.ts';
import type { PlanModel } from '#pipelines/steps/plan.ts';
import type { ProbeConfig } from './config.ts';
import type { z } from 'zod';

type Config = z.output<typeof ProbeConfig>;

const LISTS_OUTPUTS = new Set(['prepare', 'sum', 'publish']);

/** The branch a Choice takes when `rule` (the first of its Choices) holds, or its Default. */
const branch = (state: AslState, takeFirstRule: boolean): string => (takeFirstRule ? state.Choices![0]!.Next : state.Default!);

export function probePlanModel(config: Config, options: { readonly startedByUpload?: boolean } = {}): PlanModel {
  return {
    decide(name, state) {
      const step = /^(.+): (Cached\?|Outputs listed\?|Result fits\?)$/.exec(name);
      if (step?.[2] === 'Cached?') return branch(state, false);
      if (step?.[2] === 'Outputs listed?') return branch(state, LISTS_OUTPUTS.has(step[1]!));
      if (step?.[2] === 'Result fits?') return branch(state, false);
      switch (name) {
        case 'Started by upload?':
          return branch(state, options.startedByUpload === true);
        case 'square: Empty?':
          return branch(state, config.items.length === 0);
        case 'square: Failures?':
          return branch(state, false);
        case 'Squares':
          return branch(state, config.items.length > 0);
        case 'Distributed check?':
          return branch(state, config.distributed);
        case 'Approval required?':
          return branch(state, config.approve);
        default:
          throw new Error(`the probe's plan model does not know the Choice state ${JSON.stringify(name)}`);
      }
    },
    mapItems(name) {
      if (name === 'square: Items' || name === 'recheck: Items') return config.items.length;
      if (name.endsWith(': Check outputs')) return 0; // only after a cache hit, which a cold plan has none of
      throw new Error(`the probe's plan model does not know the Map state ${JSON.stringify(name)}`);
    },
  };
}
