/**
 * The league's plan model (pipelines/steps/plan.ts): the loop runs `generations` times (the
 * first generation enters the loop directly; `More generations?` follows each one), and
 * generation g plays its snapshot against the g + 1 players before it (leagueMatches).
 */
import { coldModel, type PlanModel, S3_RECORD_BYTES } from '#pipelines/steps/plan.ts';
import type { SelfPlayConfig } from './config.ts';

export function selfPlayPlanModel(config: SelfPlayConfig, options: { readonly startedByUpload?: boolean } = {}): PlanModel {
  let generation = 0;
  let checks = 0;
  return coldModel({
    // A record of the fan-out: a failure keeps its pair's id (two player ids of at most 64 characters).
    recordBytes: () => S3_RECORD_BYTES + 140,
    pipeline: 'selfplay',
    startedByUpload: options.startedByUpload,
    mapItems(name) {
      if (name !== 'matches: Items') return undefined;
      generation += 1;
      return generation + 1;
    },
    decide(name, state) {
      if (name !== 'More generations?') return undefined;
      checks += 1;
      return checks < config.generations ? state.Choices![0]!.Next : state.Default;
    },
  });
}
