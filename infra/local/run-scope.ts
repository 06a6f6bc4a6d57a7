/**
 * What the runs of one execution share: its scope (record, machine, task handlers, context),
 * and the watcher of a run's event log, which counts states and Map items for progress and
 * holds every state's output to Step Functions' 256 KiB limit, as AWS does.
 */
import { jsonByteLength } from '#shared/json.ts';
import { emptyStepUsage, type StepUsage, stepOfState } from '#shared/cost/usage.ts';
import { cacheHitOf } from '#shared/run-cache.ts';
import type { ExecutionRecord } from './execution-records.ts';
import { TaskError } from './lambda-host.ts';
import type { EmitRuntimeEvent } from './runtime-events.ts';
import type { LocalMachine } from './synthesis.ts';

/** Step Functions' limit on a state's input or output. */
export const PAYLOAD_LIMIT_BYTES = 256 * 1024;

/** A non-catchable error, as AWS treats States.DataLimitExceeded (States.ALL does not match it). */
export class DataLimitError extends TaskError {
  readonly isCatchable = false;
  readonly isRetryable = false;
  constructor(state: string, bytes: number) {
    super(
      'States.DataLimitExceeded',
      `The state "${state}" produced ${bytes} bytes, over the ${PAYLOAD_LIMIT_BYTES}-byte (256 KiB) limit of Step Functions; pass large data as S3 URIs`,
    );
  }
}

/** What the task handlers of one execution share. */
export interface RunScope {
  readonly record: ExecutionRecord;
  readonly machine: LocalMachine;
  /** Set when the execution is aborted or has ended: Distributed Maps start no more child runs. */
  ended: boolean;
  /** Child runs of Distributed Maps in flight, aborted with their parent. */
  readonly children: Set<{ abort(): void }>;
  readonly handlers: Record<string, (input: unknown) => Promise<unknown>>;
  overrides: Record<string, unknown>;
  readonly context: Record<string, unknown>;
}

/** The record's counters of the step `name` belongs to, made on first use. */
export function stepStats(record: ExecutionRecord, name: string): StepUsage {
  record.stats.steps ??= {};
  const step = stepOfState(name);
  record.stats.steps[step] ??= emptyStepUsage();
  return record.stats.steps[step];
}

/**
 * A state entered, by step: one transition; a `<step>: Cache store` is one computation; a
 * `<step>: Restore` is a hit on an entry another execution computed (its id is in the entry the
 * lookup read, at _step.lookup.Item.executionId; the run cache's `run: Restore` has it at
 * _run.hit.executionId). Restore, not Cache hit: a hit whose S3 outputs
 * are gone recomputes the step and never restores, so it saved nothing.
 */
function countStepState(record: ExecutionRecord, state: { name: string; input?: unknown }): void {
  const step = stepStats(record, state.name);
  step.transitions += 1;
  if (state.name.endsWith(': Cache store')) step.stores += 1;
  const hit = cacheHitOf(state.name, state.input);
  if (hit) record.stats.cacheHits = [...(record.stats.cacheHits ?? []), hit];
}

/**
 * Follows a run's event log (an execution's, or a Distributed Map child's): states entered
 * and Map items for progress, and every state's output against the 256 KiB limit.
 */
export function watchEvents(
  run: { eventLogs: AsyncGenerator<unknown> },
  record: ExecutionRecord,
  emit: EmitRuntimeEvent,
  onLimit: (error: DataLimitError) => void,
): Promise<void> {
  const executionArn = record.executionArn;
  return (async () => {
    for await (const event of run.eventLogs) {
      const e = event as { type: string; state?: { name: string; output?: unknown }; parentState?: { name: string }; index?: number };
      if (e.type === 'StateEntered' && e.state) {
        record.stats.statesEntered++;
        countStepState(record, e.state as { name: string; input?: unknown });
        emit('stateEntered', { executionArn, state: e.state.name });
      } else if (e.type === 'StateExited' && e.state && e.state.output !== undefined) {
        const bytes = jsonByteLength(e.state.output);
        if (bytes > record.stats.largestState.bytes) record.stats.largestState = { name: e.state.name, bytes };
        if (bytes > PAYLOAD_LIMIT_BYTES) onLimit(new DataLimitError(e.state.name, bytes));
      } else if ((e.type === 'MapIterationSucceeded' || e.type === 'MapIterationFailed') && e.parentState) {
        const ok = e.type === 'MapIterationSucceeded';
        if (ok) record.stats.mapItemsDone++;
        else record.stats.mapItemsFailed++;
        emit('mapItem', { executionArn, state: e.parentState.name, index: e.index ?? -1, ok });
      }
    }
  })().catch(() => undefined);
}
