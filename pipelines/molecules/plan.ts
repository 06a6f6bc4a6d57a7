/**
 * The molecular discovery's plan model (pipelines/steps/plan.ts): round 0 measures the sample,
 * each of `rounds` rounds after it twice `batchSize` (the surrogate's exploit and explore picks),
 * in oracle jobs of `oracle.chunkSize` molecules. The approver decides how far the loop goes: the
 * cold plan has every batch approved and none measured before; `rejectAt` ends the loop at that
 * round's approval (what a reject or a timeout does), the low end of the range.
 */
import { coldModel, type PlanModel } from '#pipelines/steps/plan.ts';
import type { MoleculesConfig } from './config.ts';

export interface MoleculesPlanOptions {
  readonly startedByUpload?: boolean;
  /** The round whose batch the approver rejects (or lets time out), ending the loop; default: none. */
  readonly rejectAt?: number;
}

/** Molecules a round sends to the oracle: the sample in round 0, the surrogate's picks after. */
export const moleculesToMeasure = (config: MoleculesConfig, round: number): number => (round === 0 ? config.sampleSize : 2 * config.batchSize);

export function moleculesPlanModel(config: MoleculesConfig, options: MoleculesPlanOptions = {}): PlanModel {
  let round = -1;
  const rejected = () => options.rejectAt !== undefined && round >= options.rejectAt;
  return coldModel({
    pipeline: 'molecules',
    startedByUpload: options.startedByUpload,
    mapItems: (name) => (name === 'oracle: Items' ? Math.ceil(moleculesToMeasure(config, round) / config.oracle.chunkSize) : undefined),
    decide(name, state) {
      const rules = (state.Choices ?? []).map((c) => c.Next);
      switch (name) {
        case 'Anything to measure?':
          round += 1;
          return rules[1];
        case 'Approved?':
          return rejected() ? state.Default : rules[1];
        case 'More rounds?':
          return rejected() || round >= config.rounds ? rules[0] : state.Default;
        default:
          return undefined;
      }
    },
  });
}
