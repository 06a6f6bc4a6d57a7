/**
 * The ASL pre-pass: runs on a synthesized state machine definition before the local engine
 * (aws-local-stepfunctions 3.0.0, patched) gets it.
 *
 * 1. Deep-copies the definition; the caller's object is never changed.
 * 2. Walks every state, into Map ItemProcessor/Iterator and Parallel Branches.
 * 3. Rejects, all at once, what the engine would silently ignore or run differently
 *    (JSONata, variables, Distributed Map, *Path timeouts, `$$.State`), with UnsupportedLocally.
 * 4. Gives every Task a TimeoutSeconds the engine's timer can hold (see below).
 * 5. Lists every Task, so the runtime can attach a local handler to each.
 * 6. Validates the definition with asl-validator.
 *
 * `ResultPath: "$"` (on a state or a Catch) is left alone: the engine patch makes it replace the
 * input as on AWS (unpatched, the engine writes a literal "$" key), and
 * test/unit/engine-patches.test.ts pins that.
 */
import { createRequire } from 'node:module';
import type { StateMachineDefinition } from 'aws-local-stepfunctions';
import { PipelineError, UnsupportedLocally } from '#shared/errors.ts';

/** AWS's Task timeout when TimeoutSeconds is absent: effectively none. */
export const AWS_DEFAULT_TASK_TIMEOUT_SECONDS = 99_999_999;

/**
 * The longest timeout the engine can run. It arms `setTimeout(seconds * 1000)`, and Node fires
 * any delay above 2^31 - 1 ms after 1 ms instead, so 99999999 (or CDK's Duration.days(30)) would
 * fail the Task with States.Timeout at once. 2,147,483 s is about 24.8 days.
 */
export const LOCAL_MAX_TIMEOUT_SECONDS = 2_147_483;

/** One Task state, found anywhere in the definition. */
export interface TaskRef {
  /** State names from the top level down to this Task, through each enclosing Map/Parallel. */
  path: string[];
  /** The state name: the key the engine looks the Task's local handler up by. */
  name: string;
  /** `Resource` as written (after the runtime's token resolution). */
  resource: string;
  /** The `Parameters` template, unevaluated; undefined when the state has none. */
  parameters: unknown;
  /**
   * `HeartbeatSeconds`, clamped to LOCAL_MAX_TIMEOUT_SECONDS for the runtime's own timer; undefined
   * when absent. The engine ignores heartbeats, so the runtime's callback waiter enforces them.
   */
  heartbeatSeconds: number | undefined;
  /**
   * The TimeoutSeconds written into the prepared definition; undefined when the Task reads its
   * timeout from the input (`TimeoutSecondsPath`): the engine applies it, clamped by the patch.
   */
  timeoutSeconds: number | undefined;
}

export interface PrepareAslOptions {
  /** Run asl-validator on the definition. Default true. */
  validate?: boolean;
  /**
   * Let asl-validator check JSONPath and intrinsic-function syntax. Default true. asl-path-validator
   * 0.16 rejects the `\\` escape (a backslash) inside an intrinsic string literal, which the
   * States Language allows; turn this off for a definition that needs one.
   */
  checkPaths?: boolean;
  /** Let asl-validator check that each Task `Resource` is an ARN. Default true. */
  checkArn?: boolean;
}

export interface PreparedAsl {
  /** The copy to hand to the engine. */
  asl: StateMachineDefinition;
  /** Every Task state, in definition order (depth first). */
  tasks: TaskRef[];
  /**
   * Task names that occur more than once. The engine keys local handlers by state name alone
   * (see below), so such Tasks would share one handler and the runtime must refuse to run them.
   * The States Language requires names unique in the whole state machine, so with `validate`
   * on, asl-validator already rejects these (DUPLICATE_STATE_NAMES); this list is for callers
   * that skip validation.
   */
  duplicateTaskNames: string[];
}

/** asl-validator rejected the definition. Each problem is one of its messages. */
export class InvalidStateMachineDefinition extends PipelineError {
  constructor(readonly problems: readonly string[]) {
    super(`state machine definition is invalid:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
  }
}

/**
 * State fields the engine does not implement, with what happens if they get through.
 * QueryLanguage, ProcessorConfig.Mode and `$$.State` are checked separately (they depend on values).
 */
const JSONATA_FIELD_REASON = 'a JSONata field; the local engine ignores it and passes the input through';
const ASSIGN_REASON = 'variables are not supported locally: the engine ignores Assign, then fails on $variable with States.Runtime';

const UNSUPPORTED_STATE_FIELDS: Readonly<Record<string, string>> = {
  Arguments: JSONATA_FIELD_REASON,
  Output: JSONATA_FIELD_REASON,
  Items: 'a JSONata Map field; the local engine ignores it and iterates over the input',
  Assign: ASSIGN_REASON,
  ItemReader: 'a Distributed Map field; the local engine ignores it and iterates over the input inline',
  ItemBatcher: 'a Distributed Map field; the local engine ignores it and runs one iteration per item',
  ResultWriter: 'a Distributed Map field; the local engine ignores it and returns the results inline',
  ToleratedFailurePercentage: 'a Distributed Map field; the local engine ignores it (any failed item fails the Map)',
  ToleratedFailurePercentagePath: 'a Distributed Map field; the local engine ignores it (any failed item fails the Map)',
  ToleratedFailureCount: 'a Distributed Map field; the local engine ignores it (any failed item fails the Map)',
  ToleratedFailureCountPath: 'a Distributed Map field; the local engine ignores it (any failed item fails the Map)',
  HeartbeatSecondsPath: 'the local runtime needs a fixed HeartbeatSeconds to run its heartbeat timer',
  // TimeoutSecondsPath is supported: the engine reads it from the state's input, and the project's
  // patch clamps the value to LOCAL_MAX_TIMEOUT_SECONDS (patches/aws-local-stepfunctions+3.0.0.patch).
};

/** Unsupported fields of a Catch entry and of a Choice rule. */
const UNSUPPORTED_RULE_FIELDS: Readonly<Record<'Catch' | 'Choices', Readonly<Record<string, string>>>> = {
  Catch: { Assign: ASSIGN_REASON, Output: JSONATA_FIELD_REASON },
  Choices: {
    Assign: ASSIGN_REASON,
    Output: JSONATA_FIELD_REASON,
    Condition: 'a JSONata Choice field; the local engine does not evaluate it',
  },
};

const JSONATA_REASON = 'JSONata is not run by the local engine (it returns the input unchanged); use JSONPath';
const CONTEXT_STATE_REASON = 'the local engine does not provide $$.State (Name, EnteredTime, RetryCount); the state would fail with States.Runtime';

/** `$$.State` and `$$.State.X`, but not `$$.StateMachine`. */
const CONTEXT_STATE_REFERENCE = /\$\$\.State\b/;

/** Fields holding sub-state-machines, walked as states of their own rather than scanned. */
const NESTED_MACHINE_FIELDS = new Set(['ItemProcessor', 'Iterator', 'Branches']);

type JsonObject = Record<string, unknown>;

interface AslValidationResult {
  isValid: boolean;
  errors: Array<{ 'Error code': string; Message: string }>;
}
type AslValidator = (definition: unknown, options: { checkPaths: boolean; checkArn: boolean }) => AslValidationResult;

// asl-validator 4 is CommonJS (module.exports = function) and ships no type declarations.
const validateWithAslValidator = createRequire(import.meta.url)('asl-validator') as AslValidator;

/**
 * Prepares a definition for the local engine: see the module comment for the steps.
 * Throws UnsupportedLocally listing every unsupported use, or InvalidStateMachineDefinition
 * listing every asl-validator message.
 */
export function prepareAsl(definition: StateMachineDefinition, opts: PrepareAslOptions = {}): PreparedAsl {
  const asl = structuredClone(definition) as StateMachineDefinition & JsonObject;
  const problems: string[] = [];
  const tasks: TaskRef[] = [];

  if (asl.QueryLanguage === 'JSONata') problems.push(`(state machine).QueryLanguage: ${JSONATA_REASON}`);
  if (typeof asl.TimeoutSeconds === 'number') {
    // The engine arms a setTimeout for the execution too; absent means no limit, as on AWS.
    asl.TimeoutSeconds = Math.min(asl.TimeoutSeconds, LOCAL_MAX_TIMEOUT_SECONDS);
  }

  walkStates(asl, [], (name, state, path) => {
    problems.push(...unsupportedUses(name, state));
    if (state.Type === 'Task') tasks.push(prepareTask(name, state, path));
  });

  if (problems.length > 0) {
    throw new UnsupportedLocally(
      `state machine uses what the local engine would ignore or run differently:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`,
    );
  }

  if (opts.validate ?? true) {
    // asl-validator writes a default QueryLanguage into every state, so it gets its own copy.
    const result = validateWithAslValidator(structuredClone(asl), {
      checkPaths: opts.checkPaths ?? true,
      checkArn: opts.checkArn ?? true,
    });
    if (!result.isValid) {
      throw new InvalidStateMachineDefinition(result.errors.map((error) => `${error['Error code']}: ${error.Message}`));
    }
  }

  return { asl, tasks, duplicateTaskNames: duplicates(tasks.map((task) => task.name)) };
}

/**
 * Calls `visit` for every state, depth first, with the names of its enclosing Map/Parallel
 * states. Tolerates a malformed definition (asl-validator reports it afterwards).
 */
function walkStates(machine: unknown, enclosing: string[], visit: (name: string, state: JsonObject, enclosing: string[]) => void): void {
  if (!isObject(machine) || !isObject(machine.States)) return;
  for (const [name, state] of Object.entries(machine.States)) {
    if (!isObject(state)) continue;
    visit(name, state, enclosing);
    const inner = [...enclosing, name];
    if (state.Type === 'Map') {
      walkStates(state.ItemProcessor, inner, visit);
      walkStates(state.Iterator, inner, visit);
    }
    if (state.Type === 'Parallel' && Array.isArray(state.Branches)) {
      for (const branch of state.Branches) walkStates(branch, inner, visit);
    }
  }
}

/** Every `StateName.Field: reason` for one state (its nested machines are visited on their own). */
function unsupportedUses(name: string, state: JsonObject): string[] {
  const found: string[] = [];
  if (state.QueryLanguage === 'JSONata') found.push(`${name}.QueryLanguage: ${JSONATA_REASON}`);
  for (const [field, reason] of Object.entries(UNSUPPORTED_STATE_FIELDS)) {
    if (field in state) found.push(`${name}.${field}: ${reason}`);
  }
  for (const field of ['ItemProcessor', 'Iterator']) {
    const processor = state[field];
    if (isObject(processor) && isObject(processor.ProcessorConfig) && processor.ProcessorConfig.Mode === 'DISTRIBUTED') {
      found.push(
        `${name}.${field}.ProcessorConfig.Mode: Distributed Map runs as an inline Map locally (no child executions, no S3 item reader or result writer)`,
      );
    }
  }
  for (const listField of ['Catch', 'Choices'] as const) {
    const rules = state[listField];
    if (!Array.isArray(rules)) continue;
    rules.forEach((rule: unknown, index) => {
      if (!isObject(rule)) return;
      for (const [field, reason] of Object.entries(UNSUPPORTED_RULE_FIELDS[listField])) {
        if (field in rule) found.push(`${name}.${listField}[${index}].${field}: ${reason}`);
      }
    });
  }
  for (const [field, value] of Object.entries(state)) {
    if (NESTED_MACHINE_FIELDS.has(field)) continue;
    for (const where of contextStateReferences(value, field, isPathField(field))) {
      found.push(`${name}.${where}: ${CONTEXT_STATE_REASON}`);
    }
  }
  return found;
}

/**
 * Dotted locations under `value` of path expressions that read `$$.State`. A string is a path
 * when its key ends in `.$` (payload templates, intrinsic functions) or names a path field
 * (InputPath, Variable, StringEqualsPath, ...); other strings are literal text.
 */
function contextStateReferences(value: unknown, where: string, isPath: boolean): string[] {
  if (typeof value === 'string') return isPath && CONTEXT_STATE_REFERENCE.test(value) ? [where] : [];
  if (Array.isArray(value)) {
    return value.flatMap((item, index) => contextStateReferences(item, `${where}[${index}]`, false));
  }
  if (isObject(value)) {
    return Object.entries(value).flatMap(([key, item]) => contextStateReferences(item, `${where}.${key}`, key.endsWith('.$') || isPathField(key)));
  }
  return [];
}

function isPathField(key: string): boolean {
  return key.endsWith('Path') || key === 'Variable';
}

/** Sets the Task's TimeoutSeconds in the copy and describes the Task for the runtime. */
function prepareTask(name: string, state: JsonObject, enclosing: string[]): TaskRef {
  // Without TimeoutSeconds the engine gives a Task 60 s (AWS: 99999999 s), which would fail long
  // Batch jobs and callbacks; larger values overflow its timer (LOCAL_MAX_TIMEOUT_SECONDS).
  const fromPath = typeof state.TimeoutSecondsPath === 'string' && state.TimeoutSeconds === undefined;
  const requested = typeof state.TimeoutSeconds === 'number' ? state.TimeoutSeconds : AWS_DEFAULT_TASK_TIMEOUT_SECONDS;
  const timeoutSeconds = fromPath ? undefined : Math.min(requested, LOCAL_MAX_TIMEOUT_SECONDS);
  if (timeoutSeconds !== undefined) state.TimeoutSeconds = timeoutSeconds;
  return {
    path: [...enclosing, name],
    name,
    resource: String(state.Resource),
    parameters: state.Parameters,
    heartbeatSeconds: typeof state.HeartbeatSeconds === 'number' ? Math.min(state.HeartbeatSeconds, LOCAL_MAX_TIMEOUT_SECONDS) : undefined,
    timeoutSeconds,
  };
}

/*
 * How the engine finds a Task's local handler (aws-local-stepfunctions 3.0.0,
 * build/main.node.esm.js, StateExecutor.executeTaskState):
 *   options.runOptions?.overrides?.taskResourceLocalHandlers?.[stateName]
 * The key is the bare state name. Map and Parallel run their sub-machines with the caller's
 * runOptions unchanged (MapStateAction.processItem, ParallelStateAction.processBranch), so a
 * nested Task is found by that same bare name: there is no scope in the key. A Task with no
 * handler is sent to AWS Lambda through the SDK (TaskStateAction.execute), so the runtime must
 * give every Task in `tasks` a handler.
 */

function duplicates(names: string[]): string[] {
  const seen = new Set<string>();
  const repeated = new Set<string>();
  for (const name of names) (seen.has(name) ? repeated : seen).add(name);
  return [...repeated];
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
