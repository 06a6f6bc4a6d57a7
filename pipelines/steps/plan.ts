/**
 * A run's plan, read from its state machine's definition without running anything: one path
 * through the states, chosen by the pipeline's model of its config, counted state by state.
 *
 * The walker is generic: it enters a state, counts it, and asks the pipeline's `decide` where a
 * Choice goes and its `mapItems` how many items a Map iterates over (both may depend on which
 * item of an enclosing Map the walk is in). What it counts is what billing and the limits see:
 * - state transitions (every state entered, Map iterations' and Parallel branches' states
 *   included): what Step Functions Standard bills, and what a local run counts;
 * - history events (history.ts's per-state figures, the execution's own two included): what the
 *   25,000-event limit bounds;
 * - Lambda invocations by function, Batch jobs by job definition, and the other service calls
 *   (DynamoDB, S3) by service and action, as the Task states name them;
 * - each Map's width, the widest per Map state.
 *
 * A pipeline's model (pipelines/<name>/plan.ts) says, for a config, how its Choices go on a cold
 * run and how wide its Maps are; where data decides (a failed item, an early stop) the model walks
 * each end of the range separately.
 */
import { stepOfState } from '#shared/cost/usage.ts';
import { ConfigError } from '#shared/errors.ts';
import { type AslGraph, type AslState, EXECUTION_EVENTS, stateEvents } from './history.ts';

/** Where the walk is: the enclosing Maps' states and item indexes, outermost first. */
export interface WalkContext {
  readonly items: readonly { readonly map: string; readonly index: number }[];
}

export interface PlanModel {
  /** The Next of a Choice state on this walk. */
  decide(name: string, state: AslState, at: WalkContext): string;
  /** The items a Map state iterates over on this walk. */
  mapItems(name: string, state: AslState, at: WalkContext): number;
  /**
   * The most bytes one item's record takes in an inline Map's result list, where it may be more
   * than a fan-out's record (S3_RECORD_BYTES): a larger inline value or failure item.
   */
  recordBytes?(name: string, state: AslState): number | undefined;
  /** The parts of the state the config drives beyond the config and the Maps' result lists. */
  payloadParts?(): readonly PayloadPart[];
  /** The run's calls to Claude, by step (none when absent). */
  claude?(): readonly PlanClaude[];
  /** A value the run's state holds at `path` that the config decides, outside `$.config` (a job's timeout handed on by a step). */
  valueAt?(path: string): number | undefined;
  /**
   * Where an iteration guarded by a Parallel with a Catch (a fan-out's `<step>: Item`) fails on
   * this walk: the name of the state in its branch that fails (a Task), or undefined when the
   * iteration succeeds. The walk enters the branch's states up to that one, then the Catch's Next.
   */
  failsAt?(guard: string, at: WalkContext): string | undefined;
  /** The same model with every fan-out item failing at the last Task on its path, and tolerated (data's worst case). */
  withEveryItemFailing?(): PlanModel;
}

/** What `failsAt` returns for an item that fails at the last Task on its branch's path. */
export const LAST_TASK = '<the last Task on the path>';

/**
 * A step's calls to Claude: how many (a range where the data decides: documents that survive,
 * features that activate), and the most output tokens each may take (its max_tokens). Input
 * tokens are the data's (documents, windows, the search's history): runs show counts them after
 * the run, from the API's usage fields. Retries are not in the count.
 */
export interface PlanClaude {
  readonly step: string;
  readonly model: string;
  readonly calls: { readonly low: number; readonly high: number };
  readonly maxOutputTokens: number;
  /** Requests one call sends at most, retries included (the high cost bound pays each at maxOutputTokens). */
  readonly attempts: number;
  /** The most input one request sends (requestInput over the request its builder makes of the worst data the config allows). */
  readonly maxInput: PlanClaudeInput;
  readonly why: string;
}

/**
 * The most input tokens of one request. Text is counted in UTF-8 bytes, which bound its tokens
 * from above (a token is at least one byte of text): the cached prefix (the system block marked
 * for the prompt cache, priced as a cache write in the high bound, the dearest way to send it)
 * and the rest (the messages and the output format's schema). Not counted: the API's own framing
 * of a request (the roles, and the instructions it adds for a structured output), whose size
 * Anthropic does not publish.
 */
export interface PlanClaudeInput {
  readonly cachedBytes: number;
  readonly bytes: number;
  /** The images' most tokens (video contact sheets). */
  readonly imageTokens: number;
}

const utf8 = (text: string) => Buffer.byteLength(text, 'utf8');

/**
 * The input of a Messages API request as its builder makes it (`system` blocks, `messages` of
 * text and image blocks, `output_config.format`), each image at `tokensPerImage`.
 */
export function requestInput(params: unknown, tokensPerImage = 0): PlanClaudeInput {
  const p = params as {
    system?: string | readonly { text?: string; cache_control?: unknown }[];
    messages?: readonly { content: string | readonly { type: string; text?: string }[] }[];
    output_config?: { format?: unknown };
  };
  let cachedBytes = 0;
  let bytes = 0;
  let images = 0;
  if (typeof p.system === 'string') bytes += utf8(p.system);
  else
    for (const block of p.system ?? []) {
      if (block.cache_control) cachedBytes += utf8(block.text ?? '');
      else bytes += utf8(block.text ?? '');
    }
  for (const message of p.messages ?? []) {
    if (typeof message.content === 'string') bytes += utf8(message.content);
    else
      for (const block of message.content) {
        if (block.type === 'image') images += 1;
        else bytes += utf8(block.text ?? '');
      }
  }
  if (p.output_config?.format !== undefined) bytes += utf8(JSON.stringify(p.output_config.format));
  return { cachedBytes, bytes, imageTokens: images * tokensPerImage };
}

/** A UTF-16 unit that takes 3 bytes in UTF-8 (the most any unit takes: a 4-byte character is 2 units). */
export const WIDEST_UNIT = '\u0800';

/** A part of the state whose size the config decides, in bytes at most. */
export interface PayloadPart {
  readonly what: string;
  readonly bytes: number;
}

/**
 * The most bytes a fan-out's record takes, failed or not, with a failure's `item` of up to 40
 * bytes: a success is `{ok: true, uri}` (a URI of at most about 220 characters: s3://, a bucket
 * of at most 63, runs/<pipeline>/<execution of at most 80>/<step>/items/<uuid>.json) or
 * `{ok: true, value}` with a value the pipeline bounds; a failure is `{ok: false, error,
 * causeUri, item}`, with an Error of at most 256 characters (AWS's limit; an error name, not
 * escaped) and its cause's URI: about 510 with the punctuation. A model says more where its
 * failure items are larger, or less where a fan-out keeps no item.
 */
export const S3_RECORD_BYTES = 600;

/** A fan-out's record without a failure item (about 510 bytes at most, see S3_RECORD_BYTES). */
export const S3_RECORD_BYTES_NO_ITEM = 560;

/** The counts of a walk, or of one step's share of it. */
export interface PlanStepCounts {
  transitions: number;
  historyEvents: number;
  lambdaInvocations: number;
  /** By function ARN or name, as the Task names it. */
  lambdaByFunction: Record<string, number>;
  batchJobs: number;
  /** By job definition, as the Task names it. */
  batchByDefinition: Record<string, number>;
}

export interface PlanCounts extends PlanStepCounts {
  /**
   * A job's attempt timeout set at submit, by job definition: a number, or the JSONPath the
   * Task reads it from (`$.config.jobTimeoutSeconds`). Absent: the definition's own.
   */
  batchTimeouts: Record<string, number | string>;
  /** Direct service integrations, by `service:action` (dynamodb:getItem, s3:headObject, ...). */
  serviceCalls: Record<string, number>;
  /** The widest iteration of each Map state. */
  mapWidths: Record<string, number>;
  /**
   * The result lists inline Maps write into the state, by ResultPath: the most bytes over the
   * walk (a Map in a loop writes the same path each time), twice where a state takes the whole
   * list as an input (a step copies its inputs into its scratch, so the state holds it twice).
   */
  mapResults: Record<string, number>;
  /**
   * The same counts by step (a state's name before ': ', '' for the pipeline's own states, as the
   * runtime's counters and the AWS reader keep them), in the order the walk first entered each.
   */
  steps: Record<string, PlanStepCounts>;
}

/** The counts of the step `name` belongs to, made on first use. */
function stepCounts(counts: PlanCounts, name: string): PlanStepCounts {
  const step = stepOfState(name);
  counts.steps[step] ??= { transitions: 0, historyEvents: 0, lambdaInvocations: 0, lambdaByFunction: {}, batchJobs: 0, batchByDefinition: {} };
  return counts.steps[step];
}

const LAMBDA_INVOKE = /^arn:aws[\w-]*:states:::lambda:invoke(\.waitForTaskToken)?$/;
const LAMBDA_ARN = /^arn:aws[\w-]*:lambda:/;
const BATCH_SYNC = /^arn:aws[\w-]*:states:::batch:submitJob(\.sync)?$/;
const SDK = /^arn:aws[\w-]*:states:::(?:aws-sdk:)?([\w-]+):([\w-]+)(?:\.\w+)?$/;

const bump = (counts: Record<string, number>, key: string, by = 1) => {
  counts[key] = (counts[key] ?? 0) + by;
};

/** Counts at zero; the execution's own events from `historyEvents` on. */
const emptyCounts = (historyEvents = 0): PlanCounts => ({
  transitions: 0,
  historyEvents,
  lambdaInvocations: 0,
  lambdaByFunction: {},
  batchJobs: 0,
  batchByDefinition: {},
  batchTimeouts: {},
  serviceCalls: {},
  mapWidths: {},
  mapResults: {},
  steps: {},
});

/** The counts of one execution of `graph` along the path `model` chooses. */
export function planCounts(graph: AslGraph, model: PlanModel): PlanCounts {
  // The exact JSONPaths the definition reads somewhere (a Parameters value `"key.$": "$.steps.x"`).
  const read = new Set([...JSON.stringify(graph).matchAll(/"[^"]*\.\$":"(\$[^"]*)"/g)].map((m) => m[1]!));
  const counts = emptyCounts(EXECUTION_EVENTS);
  walk(graph, model, { items: [] }, counts);
  for (const path of Object.keys(counts.mapResults)) if (read.has(path)) counts.mapResults[path]! *= 2;
  return counts;
}

const MAX_STATES_ON_A_PATH = 1_000_000;

/**
 * Walks `graph` from its start; with `failAt`, up to and including that state, where the walk
 * stops as the state fails (returning true). A failed Task is counted as entered and invoked.
 */
function walk(graph: AslGraph, model: PlanModel, at: WalkContext, counts: PlanCounts, failAt?: string, visited?: string[]): boolean {
  let name: string | undefined = graph.StartAt;
  let steps = 0;
  while (name !== undefined) {
    const state: AslState | undefined = graph.States[name];
    if (!state) throw new ConfigError('state', name, 'is not a state of the definition');
    if (++steps > MAX_STATES_ON_A_PATH) throw new ConfigError('decide', name, 'the walk loops: the model never leaves this loop');
    const step = stepCounts(counts, name);
    const events = state.Type === 'Map' || state.Type === 'Parallel' ? 4 : stateEvents(name, state, { mapItems: {} });
    counts.transitions += 1;
    counts.historyEvents += events;
    step.transitions += 1;
    step.historyEvents += events;
    if (state.Type === 'Task') countTask(state, counts, step);
    visited?.push(name);
    if (name === failAt) return true;
    if (state.Type === 'Parallel' && state.Catch?.length) {
      const said = model.failsAt?.(name, at);
      if (said !== undefined) {
        const [branch] = state.Branches ?? [];
        // The last Task on the path: a walk of the branch on scratch counts, its states in order.
        const path: string[] = [];
        if (said === LAST_TASK && branch) walk(branch, model, at, emptyCounts(), undefined, path);
        const fails = said === LAST_TASK ? path.filter((n) => branch?.States[n]?.Type === 'Task').at(-1) : said;
        if (!branch || fails === undefined || !walk(branch, model, at, counts, fails))
          throw new ConfigError('failsAt', fails, `is not a state on the path of the Parallel state ${JSON.stringify(name)}'s branch`);
        name = state.Catch[0]!.Next;
        continue;
      }
    }
    if (state.Type === 'Map') {
      const items = model.mapItems(name, state, at);
      if (!Number.isInteger(items) || items < 0) throw new ConfigError('mapItems', items, `of the Map state ${JSON.stringify(name)} must be a count of items`);
      counts.mapWidths[name] = Math.max(counts.mapWidths[name] ?? 0, items);
      const processor = state.ItemProcessor ?? state.Iterator;
      if (!processor) throw new ConfigError('Map', name, 'has no ItemProcessor');
      // A Distributed Map's iterations are child executions with histories of their own: they
      // are billed, but they do not count against the parent's 25,000 events.
      const distributed = (processor as { ProcessorConfig?: { Mode?: string } }).ProcessorConfig?.Mode === 'DISTRIBUTED';
      const resultPath: string | null | undefined = (state as { ResultPath?: string | null }).ResultPath;
      if (!distributed && resultPath !== null) {
        const record = model.recordBytes?.(name, state) ?? S3_RECORD_BYTES;
        const path = resultPath ?? '$';
        counts.mapResults[path] = Math.max(counts.mapResults[path] ?? 0, items * record);
      }
      for (let index = 0; index < items; index++) {
        const before = counts.historyEvents;
        const stepsBefore = new Map(Object.entries(counts.steps).map(([k, v]) => [k, v.historyEvents]));
        counts.historyEvents += 2;
        step.historyEvents += 2;
        walk(processor, model, { items: [...at.items, { map: name, index }] }, counts);
        if (distributed) {
          // The children's events are in their own histories, not the parent's, step by step too.
          counts.historyEvents = before;
          for (const [k, v] of Object.entries(counts.steps)) v.historyEvents = stepsBefore.get(k) ?? 0;
        }
      }
    }
    if (state.Type === 'Parallel') for (const branch of state.Branches ?? []) walk(branch, model, at, counts);
    if (state.Type === 'Choice') {
      const next: string = model.decide(name, state, at);
      const allowed: string[] = [state.Default, ...(state.Choices ?? []).map((c) => c.Next)].filter((n): n is string => n !== undefined);
      if (!allowed.includes(next)) throw new ConfigError('decide', next, `is not a branch of the Choice state ${JSON.stringify(name)} (${allowed.join(', ')})`);
      name = next;
      continue;
    }
    if (state.Type === 'Succeed' || state.Type === 'Fail' || state.End) return false;
    name = state.Next;
  }
  return false;
}

function countTask(state: AslState, counts: PlanCounts, step: PlanStepCounts): void {
  const resource = typeof state.Resource === 'string' ? state.Resource : '';
  const parameters = ((state as { Parameters?: Record<string, unknown> }).Parameters ?? {}) as Record<string, unknown>;
  if (LAMBDA_INVOKE.test(resource) || LAMBDA_ARN.test(resource)) {
    counts.lambdaInvocations += 1;
    step.lambdaInvocations += 1;
    bump(counts.lambdaByFunction, String(parameters.FunctionName ?? resource));
    bump(step.lambdaByFunction, String(parameters.FunctionName ?? resource));
  } else if (BATCH_SYNC.test(resource)) {
    counts.batchJobs += 1;
    step.batchJobs += 1;
    const definition = String(parameters.JobDefinition ?? 'unknown');
    bump(counts.batchByDefinition, definition);
    bump(step.batchByDefinition, definition);
    const timeout = (parameters.Timeout ?? {}) as { AttemptDurationSeconds?: number; 'AttemptDurationSeconds.$'?: string };
    const set = timeout.AttemptDurationSeconds ?? timeout['AttemptDurationSeconds.$'];
    if (set !== undefined) counts.batchTimeouts[definition] = set;
  } else {
    const sdk = SDK.exec(resource);
    bump(counts.serviceCalls, sdk ? `${sdk[1]}:${sdk[2]}` : resource);
  }
}

/** What a pipeline's cold-run model says beyond the rules every pipeline shares (see coldModel). */
export interface ColdModelSpec {
  /** The pipeline, for errors. */
  readonly pipeline: string;
  /** The width of a Map state at this point of the walk, or undefined for a Map the spec does not know. */
  mapItems(name: string, at: WalkContext): number | undefined;
  /** The Next of a Choice the shared rules do not cover, or undefined. */
  decide?(name: string, state: AslState, at: WalkContext): string | undefined;
  /** A run an upload started (the trigger's defaults); the CLI's runs are not. */
  readonly startedByUpload?: boolean;
  /** As PlanModel.recordBytes. */
  recordBytes?(name: string, state: AslState): number | undefined;
  /** As PlanModel.payloadParts. */
  payloadParts?(): readonly PayloadPart[];
  /** As PlanModel.claude. */
  claude?(): readonly PlanClaude[];
  /** As PlanModel.valueAt. */
  valueAt?(path: string): number | undefined;
  /** As PlanModel.failsAt: the state where this fan-out item fails, or undefined (default: every item succeeds). */
  failsAt?(guard: string, at: WalkContext): string | undefined;
  /** Whether the fan-out `step` tolerates `failures` failed items (default: it does). */
  tolerates?(step: string, failures: number): boolean;
}

/**
 * A cold run's model: the rules the platform's step helpers share, then the pipeline's spec.
 * - `<step>: Cached?` misses; a cached step's `<step>: Check outputs` Map runs only after a hit: 0.
 * - `<step>: Outputs listed?` and `<step>: Result fits?`: either branch enters one state; the
 *   listed and the fitting branch are taken.
 * - a fan-out's `<step>: Empty?` holds when its `<step>: Items` Map just iterated over nothing;
 *   `<step>: Failures?` holds when the spec's `failsAt` failed one of its items (by default none
 *   fails), and `<step>: Within tolerance?` as the spec's `tolerates` says (by default it does).
 * - `Started by upload?` as the spec says (default: not).
 * - `run: Complete?` (the run cache's store) holds unless a fan-out's items failed; `run: Cached?` misses.
 */
export function coldModel(spec: ColdModelSpec): PlanModel {
  const lastWidth = new Map<string, number>();
  /** Failed items of each fan-out's latest iteration over its items, by step. */
  const failures = new Map<string, number>();
  const first = (state: AslState) => state.Choices![0]!.Next;
  return {
    ...(spec.recordBytes ? { recordBytes: spec.recordBytes.bind(spec) } : {}),
    ...(spec.payloadParts ? { payloadParts: spec.payloadParts.bind(spec) } : {}),
    ...(spec.claude ? { claude: spec.claude.bind(spec) } : {}),
    ...(spec.valueAt ? { valueAt: spec.valueAt.bind(spec) } : {}),
    withEveryItemFailing: () => coldModel({ ...spec, failsAt: () => LAST_TASK, tolerates: () => true }),
    failsAt(guard, at) {
      const state = spec.failsAt?.(guard, at);
      const step = /^(.+): Item$/.exec(guard)?.[1];
      if (state !== undefined && step !== undefined) failures.set(step, (failures.get(step) ?? 0) + 1);
      return state;
    },
    decide(name, state, at) {
      const own = spec.decide?.(name, state, at);
      if (own !== undefined) return own;
      const step = /^(.+): (Cached\?|Outputs listed\?|Result fits\?|Empty\?|Failures\?|Within tolerance\?)$/.exec(name);
      switch (step?.[2]) {
        case 'Cached?':
        case 'Result fits?':
          return state.Default!;
        case 'Failures?':
          return (failures.get(step[1]!) ?? 0) > 0 ? first(state) : state.Default!;
        case 'Within tolerance?':
          // The first Choice rule is "more failed than tolerated": it goes to the Fail state.
          return (spec.tolerates?.(step[1]!, failures.get(step[1]!) ?? 0) ?? true) ? state.Default! : first(state);
        case 'Outputs listed?':
          return first(state);
        case 'Empty?':
          return lastWidth.get(`${step[1]}: Items`) === 0 ? first(state) : state.Default!;
      }
      if (name === 'Started by upload?') return spec.startedByUpload ? first(state) : state.Default!;
      // A run whose fan-outs tolerated failed items is partial: its run cache entry is not stored.
      if (name === 'run: Complete?') return [...failures.values()].some((n) => n > 0) ? first(state) : state.Default!;
      throw new ConfigError('Choice', name, `${spec.pipeline}'s plan model does not say where this Choice state goes`);
    },
    mapItems(name, _state, at) {
      if (name.endsWith(': Check outputs')) return 0;
      const items = spec.mapItems(name, at);
      if (items === undefined) throw new ConfigError('Map', name, `${spec.pipeline}'s plan model does not say how many items this Map state iterates over`);
      lastWidth.set(name, items);
      const fanOut = /^(.+): Items$/.exec(name)?.[1];
      if (fanOut !== undefined) failures.set(fanOut, 0);
      return items;
    },
  };
}
