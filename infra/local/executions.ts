/**
 * Starting one execution of a state machine, as Step Functions would: the name checked and
 * never reused, the record persisted, the engine run with a local handler per Task and the
 * `$$` context AWS provides, every state's output held to 256 KiB, and at the end the status
 * (SUCCEEDED, FAILED, TIMED_OUT, ABORTED), the task tokens swept and the record persisted again.
 */
import { randomUUID } from 'node:crypto';
import type { TaskRef } from './asl-prepass.ts';
import { ApiError } from './aws-api.ts';
import { TASK_TOKEN_MARKER } from './callbacks.ts';
import type { ExecutionRecord, ExecutionRecordStore } from './execution-records.ts';
import type { TaskError } from './lambda-host.ts';
import { LOCAL_ACCOUNT } from './resolve.ts';
import { writeLocalRunCost } from './run-report.ts';
import { watchEvents, type RunScope } from './run-scope.ts';
import type { LocalMachine } from './synthesis.ts';
import { taskHandler, type TaskDeps } from './task-dispatch.ts';

export interface Execution {
  readonly executionArn: string;
  readonly record: ExecutionRecord;
  /** Settles when the execution ends, with its final record (it never rejects). */
  readonly done: Promise<ExecutionRecord>;
  abort(): void;
}

export interface ExecutionDeps extends TaskDeps {
  readonly records: ExecutionRecordStore;
  /** The executions this runtime started, by ARN; the new one joins them. */
  readonly live: Map<string, Execution>;
  /** Replace every Retry wait with this many milliseconds (tests). */
  readonly retryDelayMs: number | undefined;
}

/** Starts an execution of a machine; the name defaults to a fresh UUID, as on AWS. */
export function launchExecution(deps: ExecutionDeps, machine: LocalMachine, input: unknown, executionName?: string): Execution {
  const name = executionName ?? randomUUID();
  if (!/^[0-9A-Za-z_-]{1,80}$/.test(name)) throw new ApiError('InvalidName', `execution name "${name}" must be 1-80 of [0-9A-Za-z_-]`);
  const executionArn = `${machine.arn.replace(':stateMachine:', ':execution:')}:${name}`;
  if (deps.live.has(executionArn) || deps.records.has(executionArn)) {
    throw new ApiError('ExecutionAlreadyExists', `Execution Already Exists: '${executionArn}'`);
  }
  const startDate = new Date().toISOString();
  const record: ExecutionRecord = {
    executionArn,
    name,
    stateMachineArn: machine.arn,
    pipeline: machine.pipeline,
    status: 'RUNNING',
    input,
    startDate,
    stats: {
      statesEntered: 0,
      lambdaInvocations: 0,
      batchJobs: 0,
      mapItemsDone: 0,
      mapItemsFailed: 0,
      largestState: { name: '', bytes: 0 },
      lambdaBilledMs: 0,
      lambdaGbSeconds: 0,
      batch: [],
    },
  };
  deps.records.persist(record);
  let failure: TaskError | undefined;
  const scope: RunScope = {
    record,
    machine,
    ended: false,
    children: new Set(),
    handlers: {},
    overrides: {},
    context: {
      Execution: { Id: executionArn, Name: name, Input: input, StartTime: startDate, RoleArn: `arn:aws:iam::${LOCAL_ACCOUNT}:role/local` },
      StateMachine: { Id: machine.arn, Name: machine.arn.split(':').pop() },
      Task: { Token: TASK_TOKEN_MARKER },
    },
  };
  for (const t of machine.tasks) scope.handlers[t.name] = taskHandler(t, scope, deps);
  scope.overrides = {
    taskResourceLocalHandlers: scope.handlers,
    ...(deps.retryDelayMs !== undefined ? { retryIntervalOverrides: retryOverrides(machine.tasks, deps.retryDelayMs) } : {}),
  };
  const run = machine.engine.run(input as never, { overrides: scope.overrides as never, context: scope.context as never });
  const endRun = () => {
    scope.ended = true;
    for (const child of scope.children) child.abort();
  };
  const watch = watchEvents(run, record, deps.emit, (error) => {
    if (!failure) {
      failure = error;
      run.abort();
    }
  });
  const done = run.result
    .then(
      (output) => {
        record.status = 'SUCCEEDED';
        record.output = output;
      },
      (error: Error & { cause?: Error }) => {
        const cause = failure ?? (error.cause as Error | undefined) ?? error;
        record.status = failure
          ? 'FAILED'
          : error.name === 'ExecutionAbortedError'
            ? 'ABORTED'
            : error.name === 'ExecutionTimeoutError'
              ? 'TIMED_OUT'
              : 'FAILED';
        record.error = cause.name;
        record.cause = cause.message;
      },
    )
    .then(async () => {
      endRun();
      await watch;
      deps.callbacks.sweep(executionArn);
      record.stopDate = new Date().toISOString();
      // Never fails the ending: what went wrong is in record.runCost.error.
      if (record.status === 'SUCCEEDED') await writeLocalRunCost(deps.clients.s3, record, (arn) => deps.records.read(arn)).catch(() => undefined);
      deps.records.persist(record);
      deps.emit('executionDone', record);
      return record;
    });
  const execution: Execution = {
    executionArn,
    record,
    done,
    abort: () => {
      endRun();
      run.abort();
    },
  };
  deps.live.set(executionArn, execution);
  return execution;
}

function retryOverrides(tasks: TaskRef[], ms: number): Record<string, number> {
  return Object.fromEntries(tasks.map((t) => [t.name, ms]));
}
