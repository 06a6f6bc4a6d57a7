/**
 * Distributed Map, which the local engine would silently run as an inline Map over the
 * state input (ignoring ItemReader, ResultWriter and the failure tolerance). The runtime
 * lowers each DISTRIBUTED Map state to a Task of its own before the engine sees it, and runs
 * it as Step Functions does: items read from S3 (ItemReader, JSON), one child run per item
 * with ItemSelector applied, MaxConcurrency, ToleratedFailurePercentage/Count (and their
 * Path forms), and results written to S3 by ResultWriter (manifest.json, SUCCEEDED_0.json,
 * FAILED_0.json).
 */
import type { StateMachineDefinition } from 'aws-local-stepfunctions';
import { UnsupportedLocally } from '#shared/errors.ts';

/** The Task resource a lowered Distributed Map becomes; only this runtime handles it. */
export const DISTRIBUTED_MAP_RESOURCE = 'arn:aws:states:::local:distributedMap';

type State = Record<string, unknown> & { Type: string };

export interface DistributedMapDef {
  readonly stateName: string;
  /** The item processor, as a standalone definition (lowered itself, recursively). */
  readonly processor: StateMachineDefinition;
  readonly itemSelector?: unknown;
  readonly maxConcurrency: number;
  readonly toleratedFailurePercentage?: number;
  readonly toleratedFailureCount?: number;
}

/** What the lowered Task's Parameters evaluate to at run time. */
export interface DistributedMapInput {
  reader?: { Bucket: string; Key: string };
  writer?: { Bucket: string; Prefix?: string };
  items?: unknown[];
  input: unknown;
  toleratedFailurePercentage?: number;
  toleratedFailureCount?: number;
}

const UNSUPPORTED = ['ItemBatcher', 'Label'] as const;

/** Lowers every DISTRIBUTED Map (at any depth) to a Task; returns the maps by state name. */
export function lowerDistributedMaps(definition: StateMachineDefinition): { asl: StateMachineDefinition; maps: Map<string, DistributedMapDef> } {
  const maps = new Map<string, DistributedMapDef>();
  const asl = lowerStates(structuredClone(definition) as unknown as { States: Record<string, State> }, maps) as unknown as StateMachineDefinition;
  return { asl, maps };
}

function lowerStates(def: { States: Record<string, State> }, maps: Map<string, DistributedMapDef>): { States: Record<string, State> } {
  for (const [name, state] of Object.entries(def.States)) {
    for (const key of ['ItemProcessor', 'Iterator'] as const) {
      if (state[key]) lowerStates(state[key] as { States: Record<string, State> }, maps);
    }
    for (const branch of (state.Branches as { States: Record<string, State> }[] | undefined) ?? []) lowerStates(branch, maps);
    const processor = state.ItemProcessor as { ProcessorConfig?: { Mode?: string }; StartAt: string; States: Record<string, State> } | undefined;
    if (state.Type !== 'Map' || processor?.ProcessorConfig?.Mode !== 'DISTRIBUTED') continue;
    const bad = UNSUPPORTED.filter((f) => f in state);
    const reader = state.ItemReader as { Resource?: string; ReaderConfig?: { InputType?: string }; Parameters?: Record<string, unknown> } | undefined;
    if (reader && (!/:::s3:getObject$/.test(String(reader.Resource)) || (reader.ReaderConfig?.InputType ?? 'JSON') !== 'JSON')) {
      bad.push('ItemReader (only s3:getObject of a JSON array runs locally)' as never);
    }
    const readerConfig = (reader?.ReaderConfig ?? {}) as Record<string, unknown>;
    for (const field of Object.keys(readerConfig)) if (field !== 'InputType') bad.push(`ItemReader.ReaderConfig.${field}` as never);
    const writerConfig = (state.ResultWriter as { WriterConfig?: unknown } | undefined)?.WriterConfig;
    if (writerConfig !== undefined) bad.push('ResultWriter.WriterConfig' as never);
    if (bad.length) throw new UnsupportedLocally(`Distributed Map "${name}": ${bad.join(', ')} cannot run locally`);
    const writer = state.ResultWriter as { Parameters?: Record<string, unknown> } | undefined;
    const parameters: Record<string, unknown> = { 'input.$': '$' };
    if (reader) parameters.reader = reader.Parameters ?? {};
    else parameters['items.$'] = state.ItemsPath ?? '$';
    if (writer) parameters.writer = writer.Parameters ?? {};
    if (state.ToleratedFailurePercentagePath) parameters['toleratedFailurePercentage.$'] = state.ToleratedFailurePercentagePath;
    if (state.ToleratedFailureCountPath) parameters['toleratedFailureCount.$'] = state.ToleratedFailureCountPath;
    const { ProcessorConfig: _config, ...standalone } = processor;
    maps.set(name, {
      stateName: name,
      processor: standalone as unknown as StateMachineDefinition,
      itemSelector: state.ItemSelector ?? state.Parameters,
      maxConcurrency: typeof state.MaxConcurrency === 'number' && state.MaxConcurrency > 0 ? state.MaxConcurrency : 1000,
      toleratedFailurePercentage: state.ToleratedFailurePercentage as number | undefined,
      toleratedFailureCount: state.ToleratedFailureCount as number | undefined,
    });
    const task: State = { Type: 'Task', Resource: DISTRIBUTED_MAP_RESOURCE, Parameters: parameters };
    for (const keep of ['Comment', 'InputPath', 'ResultSelector', 'ResultPath', 'OutputPath', 'Retry', 'Catch', 'Next', 'End']) {
      if (keep in state) task[keep] = state[keep];
    }
    def.States[name] = task;
  }
  return def;
}

/**
 * Whether the failures exceed the map's tolerance. With neither threshold set no failure is
 * tolerated; with one or both, the run fails as soon as either is exceeded.
 */
export function exceedsTolerance(failed: number, total: number, pct: number | undefined, count: number | undefined): boolean {
  if (failed === 0) return false;
  if (pct === undefined && count === undefined) return true;
  return (count !== undefined && failed > count) || (pct !== undefined && (failed / Math.max(total, 1)) * 100 > pct);
}
