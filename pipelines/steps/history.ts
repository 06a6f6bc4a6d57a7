/**
 * How many history events an execution of a state machine records, read from its definition
 * (Amazon States Language, JSONPath). A Standard execution holds at most 25,000 events and fails
 * when it would pass them, however far it got: a pipeline whose runs loop or fan out must bound
 * its config by what its definition records per loop and per item.
 *
 * What AWS records per state (the history of a Standard workflow):
 * - Task: Entered, Scheduled, Started, Succeeded (or Failed), Exited: 5; a `.sync` integration
 *   also records Submitted: 6.
 * - Pass, Choice, Wait, Succeed, Fail: Entered and Exited (a Fail ends its execution or iteration
 *   with one more: 2 in all, as the iteration's end event is counted by its Map).
 * - Map: Entered, Started, Succeeded, Exited, and per iteration Started and Succeeded (or
 *   Failed) around the iteration's own states.
 * - Parallel: Entered, Started, Succeeded, Exited around the branches' states.
 * - The execution: Started and Succeeded (or Failed).
 * A retried attempt adds Failed, Scheduled and Started again: 3 more per retry, which a caller
 * leaves room for (retries follow service errors, not the config).
 *
 * `pathEvents` takes the longest path through Next, Choice and Catch transitions (a cache hit
 * whose outputs are gone goes on to run the step; a caught failure runs its handler), so its
 * count is an upper bound of every run that takes no retry, not a typical run's.
 */
import { ConfigError } from '#shared/errors.ts';

export interface AslState {
  readonly Type: string;
  readonly Resource?: unknown;
  readonly Next?: string;
  readonly End?: boolean;
  readonly Default?: string;
  readonly Choices?: readonly { readonly Next: string }[];
  readonly Catch?: readonly { readonly Next: string }[];
  readonly Branches?: readonly AslGraph[];
  readonly ItemProcessor?: AslGraph;
  readonly Iterator?: AslGraph;
}

export interface AslGraph {
  readonly StartAt: string;
  readonly States: Readonly<Record<string, AslState>>;
}

/** Events of one execution's own start and end. */
export const EXECUTION_EVENTS = 2;

/** Standard workflows' hard limit of events per execution. */
export const HISTORY_EVENT_LIMIT = 25_000;

/**
 * The events a run may plan for: a tenth of the 25,000 is left for retries (each retried attempt
 * of a step records 3 more events).
 */
export const HISTORY_EVENT_BUDGET = Math.floor(HISTORY_EVENT_LIMIT * 0.9);

export interface PathOptions {
  /**
   * Iterations of each Map state on the path, by state name (inner Maps included). A Map the
   * path meets that is not named here is an error: its count is the caller's to model.
   */
  readonly mapItems: Readonly<Record<string, number>>;
  /** States where the path stops, not counted (a loop's head, to count one pass of its body). */
  readonly until?: readonly string[];
}

/** Events of a single state, its nested iterations and branches included, not what follows it. */
export function stateEvents(name: string, state: AslState, options: PathOptions): number {
  switch (state.Type) {
    case 'Task':
      return /\.sync(:\d+)?$/.test(typeof state.Resource === 'string' ? state.Resource : '') ? 6 : 5;
    case 'Pass':
    case 'Choice':
    case 'Wait':
    case 'Succeed':
    case 'Fail':
      return 2;
    case 'Parallel':
      return 4 + (state.Branches ?? []).reduce((sum, branch) => sum + pathEvents(branch, branch.StartAt, { mapItems: options.mapItems }), 0);
    case 'Map': {
      const items = options.mapItems[name];
      if (items === undefined) throw new ConfigError('mapItems', name, 'names no count for this Map state: say how many items it iterates over');
      const processor = state.ItemProcessor ?? state.Iterator;
      if (!processor) throw new ConfigError('Map', name, 'has no ItemProcessor');
      return 4 + items * (2 + pathEvents(processor, processor.StartAt, { mapItems: options.mapItems }));
    }
    default:
      throw new ConfigError('Type', state.Type, `state ${JSON.stringify(name)} has a type the history model does not know`);
  }
}

/** The most events a path from `from` to an end (or to one of `until`) records. */
export function pathEvents(graph: AslGraph, from: string, options: PathOptions): number {
  const until = new Set(options.until ?? []);
  const memo = new Map<string, number>();
  const visiting = new Set<string>();
  const walk = (name: string): number => {
    if (until.has(name)) return 0;
    const known = memo.get(name);
    if (known !== undefined) return known;
    const state = graph.States[name];
    if (!state) throw new ConfigError('state', name, 'is not a state of the definition');
    if (visiting.has(name)) throw new ConfigError('until', name, 'lies on a loop: name the loop head in `until` and count its body once');
    visiting.add(name);
    const next = [state.Next, state.Default, ...(state.Choices ?? []).map((c) => c.Next), ...(state.Catch ?? []).map((c) => c.Next)].filter(
      (n): n is string => n !== undefined,
    );
    const events = stateEvents(name, state, options) + Math.max(0, ...next.map(walk));
    visiting.delete(name);
    memo.set(name, events);
    return events;
  };
  return walk(from);
}
