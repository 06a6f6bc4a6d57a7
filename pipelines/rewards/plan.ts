/**
 * The reward search's plan model (pipelines/steps/plan.ts): `generations` generations (one with
 * reward files), each training every candidate on every training seed (then grading it), and the
 * final: the winner and both baselines on every final training seed. Claude decides how many of
 * its candidates are usable: the cold plan has all of them, `candidatesUsed` fewer (the low end
 * of the range has one a generation).
 */
import { coldModel, type PlanModel, requestInput, S3_RECORD_BYTES_NO_ITEM, WIDEST_UNIT } from '#pipelines/steps/plan.ts';
import { MOUNTAINCAR_TASK } from '#shared/rewards/loop.ts';
import { buildProposeParams, MAX_FEEDBACK_CHARS, MAX_SOURCE_CHARS, PROPOSE_MAX_TOKENS, PROPOSE_RETRIES } from '#shared/rewards/propose.ts';
import type { RewardsConfig } from './config.ts';

export interface RewardsPlanOptions {
  readonly startedByUpload?: boolean;
  /** Usable candidates a generation; default: all the config asks for. */
  readonly candidatesUsed?: number;
}

/** The final trains the winner and the two baselines. */
const FINALISTS = 3;

export function rewardsPlanModel(config: RewardsConfig, options: RewardsPlanOptions = {}): PlanModel {
  const candidates = config.rewardFiles ? config.rewardFiles.length : (options.candidatesUsed ?? config.candidates);
  const generations = config.rewardFiles ? 1 : config.generations;
  let generation = 0;
  let final = false;
  return coldModel({
    // A record of the fan-out: the runs' records keep no failure item.
    recordBytes: () => S3_RECORD_BYTES_NO_ITEM,
    pipeline: 'rewards',
    startedByUpload: options.startedByUpload,
    // Each training job's attempt timeout: the run's trainTimeoutSeconds, handed on by propose.
    valueAt: (path) => (path === '$.timeoutSeconds' ? config.trainTimeoutSeconds : undefined),
    // Claude writes each generation's candidates in one call (reward files ask nothing).
    claude: () =>
      config.rewardFiles
        ? []
        : [
            {
              step: 'propose',
              model: config.model,
              calls: { low: generations, high: generations },
              maxOutputTokens: PROPOSE_MAX_TOKENS,
              attempts: PROPOSE_RETRIES + 1,
              maxInput: requestInput(buildProposeParams(worstProposal(config))),
              why: 'one per generation',
            },
          ],
    mapItems(name) {
      if (name !== 'runs: Items') return undefined;
      return final ? FINALISTS * config.finalTrainSeeds.length : candidates * config.trainSeeds.length;
    },
    decide(name, state) {
      const rules = (state.Choices ?? []).map((c) => c.Next);
      switch (name) {
        case 'Search or final?':
          if (final) return rules[0];
          generation += 1;
          return state.Default;
        case 'More generations?':
          if (generation >= generations) {
            final = true;
            return rules[0];
          }
          return state.Default;
        default:
          return undefined;
      }
    },
  });
}

/**
 * The largest proposal request a config allows: the last generation's history at its most, the
 * previous generation's candidates and the best older one (shared/rewards/loop.ts feedbackFrom),
 * each with the longest source, every seed failed with the longest failure the prompt shows, a
 * verdict and a curve at their most, every character 3 bytes in UTF-8.
 */
function worstProposal(config: RewardsConfig) {
  const wide = (units: number) => WIDEST_UNIT.repeat(units);
  const seeds = config.trainSeeds.map((seed) => ({ seed, success: null, error: wide(MAX_FEEDBACK_CHARS) }));
  return {
    task: MOUNTAINCAR_TASK,
    generation: config.generations,
    candidates: config.candidates,
    model: config.model,
    history: Array.from({ length: config.candidates + 1 }, (_, i) => ({
      generation: config.generations - 1,
      name: `${'c'.repeat(36)}${String(i).padStart(4, '0')}`,
      source: wide(MAX_SOURCE_CHARS),
      perSeedSuccess: seeds,
      meanSuccess: null,
      curve: wide(MAX_FEEDBACK_CHARS),
      verdict: wide(MAX_FEEDBACK_CHARS),
    })),
  };
}
