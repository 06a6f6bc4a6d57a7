/**
 * The probe's plan model (pipelines/steps/plan.ts): its Maps iterate over the config's items, its
 * Choices follow the config's `distributed` and `approve`, and its negative items fail.
 */
import type { z } from 'zod';
import { coldModel, type PlanModel } from '#pipelines/steps/plan.ts';
import type { ProbeConfig } from './config.ts';

export function probePlanModel(config: z.output<typeof ProbeConfig>, options: { readonly startedByUpload?: boolean } = {}): PlanModel {
  const first = (state: { Choices?: readonly { Next: string }[] }) => state.Choices![0]!.Next;
  return coldModel({
    pipeline: 'probe',
    startedByUpload: options.startedByUpload,
    // prepare's output keeps the items (6 characters each at most: "-1000,"), its URIs and keys
    // (about 1,000 bytes) and the drill's padding. prepare is a cached step: on a hit the state
    // holds the entry's text, its parsed value and the restored result at once (on a miss, two
    // copies), and the text escapes the output's quotes: 4 copies bound it.
    payloadParts: () => [
      { what: "prepare's output (the items and padKiB of padding), 4 copies", bytes: 4 * (config.padKiB * 1024 + 6 * config.items.length + 1000) },
    ],
    mapItems: (name) => (name === 'square: Items' || name === 'recheck: Items' ? config.items.length : undefined),
    // The config decides which items fail: a negative one's square Lambda throws, and the fan-out
    // tolerates maxFailures of them (past that, the run fails there). The Distributed Map's
    // children fail on the same items; their runs are not walked as failing (a plan of a
    // distributed check with negative items counts them as succeeding).
    failsAt: (guard, at) => (guard === 'square: Item' && (config.items[at.items.at(-1)?.index ?? -1] ?? 0) < 0 ? 'square-item: Invoke' : undefined),
    tolerates: (step, failed) => step !== 'square' || failed <= config.maxFailures,
    decide(name, state) {
      switch (name) {
        case 'Squares':
          return config.items.length > 0 ? first(state) : state.Default;
        case 'Distributed check?':
          return config.distributed ? first(state) : state.Default;
        case 'Approval required?':
          return config.approve ? first(state) : state.Default;
        default:
          return undefined;
      }
    },
  });
}
