/**
 * Distributed Map, which the local engine would silently run as an inline Map over the
 * state input (ignoring ItemReader, ResultWriter and the failure tolerance). The runtime
 * lowers each DISTRIBUTED Map state to a Task of its own before the engine sees it, and runs
 * it as Step Functions does: items read from S3 (ItemReader, JSON), one child run per item
 * with ItemSelector applied, MaxConcurrency, ToleratedFailurePercentage/Count (and their
 * Path forms), and results written to S3 by ResultWriter (manifest.json, SUCCEEDED_0.json,
 * FAILED_0.json).
 *
 * The lowering and the tolerance rule are pure; `prepareDistributedMaps` builds the engines
 * for the item processors and `runDistributedMap` is the lowered Task's handler.
 */
import { GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { StateMachine, type StateMachineDefinition } from 'aws-local-stepfunctions';
import { randomUUID } from 'node:crypto';
import { UnsupportedLocally } from '#shared/errors.ts';
import { prepareAsl, type TaskRef } from './asl-prepass.ts';
import { TaskError } from './lambda-host.ts';
import { LOCAL_ACCOUNT } from './resolve.ts';
import { watchEvents, type DataLimitError, type RunScope } from './run-scope.ts';
import type { EmitRuntimeEvent } from './runtime-events.ts';

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

/** A lowered map, ready to run: an engine for its item processor, and one for its ItemSelector. */
export type LocalDistributedMap = DistributedMapDef & { engine: StateMachine; selector?: StateMachine };

/** The Pass state that applies a Distributed Map's ItemSelector to each item. */
const ITEM_SELECTOR_STATE = 'Item selector (local)';

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

/** Engines for the lowered maps, and the Tasks of their item processors (which need handlers too). */
export function prepareDistributedMaps(maps: Map<string, DistributedMapDef>): { distributed: Map<string, LocalDistributedMap>; tasks: TaskRef[] } {
  const distributed = new Map<string, LocalDistributedMap>();
  const tasks: TaskRef[] = [];
  for (const [name, map] of maps) {
    const sub = prepareAsl(map.processor);
    tasks.push(...sub.tasks);
    // ItemSelector is evaluated by a one-Pass machine, with the Map's input as `$` and the
    // item in `$$.Map.Item`; its output is the child run's input, as on AWS.
    const selector =
      map.itemSelector === undefined
        ? undefined
        : new StateMachine(
            { StartAt: ITEM_SELECTOR_STATE, States: { [ITEM_SELECTOR_STATE]: { Type: 'Pass', Parameters: map.itemSelector as never, End: true } } },
            { validationOptions: { noValidate: true } },
          );
    distributed.set(name, { ...map, engine: new StateMachine(sub.asl, { validationOptions: { noValidate: true } }), selector });
  }
  return { distributed, tasks };
}

/** What a Distributed Map run needs beyond its execution's scope. */
export interface DistributedMapDeps {
  readonly s3: S3Client;
  readonly emit: EmitRuntimeEvent;
}

type ItemResult =
  | { Index: number; Input: unknown; Status: 'SUCCEEDED'; Output: unknown }
  | { Index: number; Input: unknown; Status: 'FAILED'; Error: string; Cause: string };

/**
 * A Distributed Map, as Step Functions runs it: items from S3 (or the state), one child run
 * per item, the failure tolerance, and the results written to S3 by its ResultWriter.
 */
export async function runDistributedMap(stateName: string, input: DistributedMapInput, scope: RunScope, deps: DistributedMapDeps): Promise<unknown> {
  const { s3, emit } = deps;
  const map = scope.machine.distributed.get(stateName)!;
  let items: unknown;
  if (input.reader) {
    try {
      const object = await s3.send(new GetObjectCommand({ Bucket: input.reader.Bucket, Key: input.reader.Key }));
      items = JSON.parse(await object.Body!.transformToString());
    } catch (error) {
      throw new TaskError(
        'States.ItemReaderFailed',
        `${stateName}: cannot read items from s3://${input.reader.Bucket}/${input.reader.Key}: ${(error as Error).message}`,
      );
    }
  } else {
    items = input.items;
  }
  if (!Array.isArray(items)) throw new TaskError('States.ItemReaderFailed', `${stateName}: the items are not a JSON array`);
  const mapRunId = randomUUID();
  const mapRunArn = `${scope.record.executionArn.replace(':execution:', ':mapRun:')}/${stateName.replace(/[^A-Za-z0-9_-]/g, '-')}:${mapRunId}`;
  const results: ItemResult[] = [];
  let next = 0;
  // Child runs at once: the map's MaxConcurrency, bounded as inline Maps are locally.
  const width = Math.min(map.maxConcurrency, 40, Math.max(items.length, 1));
  const worker = async () => {
    for (let index = next++; index < items.length && !scope.ended; index = next++) {
      const value = items[index];
      let childInput: unknown = value;
      try {
        if (map.selector) {
          childInput = await map.selector.run(input.input as never, { context: { ...scope.context, Map: { Item: { Index: index, Value: value } } } as never })
            .result;
        }
        // Each child is an execution of its own on AWS: its own id, name and input.
        const childContext = {
          ...scope.context,
          Execution: {
            Id: `${mapRunArn}:${index}`,
            Name: String(index),
            Input: childInput,
            StartTime: new Date().toISOString(),
            RoleArn: `arn:aws:iam::${LOCAL_ACCOUNT}:role/local`,
          },
        };
        const child = map.engine.run(childInput as never, { overrides: scope.overrides as never, context: childContext as never });
        scope.children.add(child);
        // A child state over 256 KiB fails that child, as it fails a child execution on AWS.
        let limit: DataLimitError | undefined;
        const watching = watchEvents(child, scope.record, emit, (error) => {
          limit ??= error;
          child.abort();
        });
        const output = await child.result
          .finally(() => scope.children.delete(child))
          .catch((error: Error) => {
            throw limit ?? error;
          });
        await watching;
        if (limit) throw limit;
        results.push({ Index: index, Input: childInput, Status: 'SUCCEEDED', Output: output });
        scope.record.stats.mapItemsDone++;
        emit('mapItem', { executionArn: scope.record.executionArn, state: stateName, index, ok: true });
      } catch (error) {
        const cause = ((error as { cause?: Error }).cause ?? error) as Error;
        results.push({ Index: index, Input: childInput, Status: 'FAILED', Error: cause.name, Cause: cause.message });
        scope.record.stats.mapItemsFailed++;
        emit('mapItem', { executionArn: scope.record.executionArn, state: stateName, index, ok: false });
      }
    }
  };
  await Promise.all(Array.from({ length: width }, worker));
  results.sort((a, b) => a.Index - b.Index);
  const failed = results.filter((r) => r.Status === 'FAILED');
  let output: unknown = results.map((r) => (r.Status === 'SUCCEEDED' ? r.Output : { Error: r.Error, Cause: r.Cause }));
  if (input.writer) {
    const prefix = `${input.writer.Prefix ? `${input.writer.Prefix.replace(/\/+$/, '')}/` : ''}${mapRunId}/`;
    const put = async (name: string, body: unknown) => {
      const text = JSON.stringify(body);
      await s3.send(new PutObjectCommand({ Bucket: input.writer!.Bucket, Key: `${prefix}${name}`, Body: text, ContentType: 'application/json' }));
      return { Key: `${prefix}${name}`, Size: Buffer.byteLength(text) };
    };
    const entry = (r: ItemResult) => ({
      ExecutionArn: `${mapRunArn}:${r.Index}`,
      Input: JSON.stringify(r.Input),
      Name: String(r.Index),
      Status: r.Status,
      ...(r.Status === 'SUCCEEDED' ? { Output: JSON.stringify(r.Output) } : { Error: r.Error, Cause: r.Cause }),
    });
    const succeededFile = await put('SUCCEEDED_0.json', results.filter((r) => r.Status === 'SUCCEEDED').map(entry));
    const failedFile = await put('FAILED_0.json', failed.map(entry));
    const manifest = await put('manifest.json', {
      DestinationBucket: input.writer.Bucket,
      MapRunArn: mapRunArn,
      ResultFiles: { FAILED: [failedFile], PENDING: [], SUCCEEDED: [succeededFile] },
    });
    output = { MapRunArn: mapRunArn, ResultWriterDetails: { Bucket: input.writer.Bucket, Key: manifest.Key } };
  }
  const pct = input.toleratedFailurePercentage ?? map.toleratedFailurePercentage;
  const count = input.toleratedFailureCount ?? map.toleratedFailureCount;
  if (exceedsTolerance(failed.length, results.length, pct, count)) {
    throw new TaskError(
      'States.ExceedToleratedFailureThreshold',
      `${stateName}: ${failed.length} of ${results.length} items failed, over the tolerated ${pct !== undefined ? `${pct} %` : ''}${pct !== undefined && count !== undefined ? ' or ' : ''}${count !== undefined ? `${count} items` : ''}${pct === undefined && count === undefined ? 'none' : ''}`,
    );
  }
  return output;
}
