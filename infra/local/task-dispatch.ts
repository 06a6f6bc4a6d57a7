/**
 * Task dispatch: which local handler runs a Task state, as a table from the Task's resource to
 * a handler. A resource no route takes is refused when the state machine is loaded, so an
 * unsupported Task fails at start, not halfway through a run. The routes:
 * - a Lambda function's ARN or name (the optimized form with no `lambda:invoke`), in-process;
 * - `lambda:invoke`, and `lambda:invoke.waitForTaskToken` through the callback layer;
 * - `batch:submitJob.sync`, the job's entrypoint as a child process;
 * - direct S3 and DynamoDB integrations (`aws-sdk:<service>:<action>`, `dynamodb:<action>`);
 * - a Distributed Map, lowered to a Task of its own (distributed-map.ts).
 */
import { addClaude, claudeUsageOf } from '#shared/cost/usage.ts';
import { jsonByteLength } from '#shared/json.ts';
import type { TaskRef } from './asl-prepass.ts';
import type { BatchHost, LocalJobDefinition } from './batch-host.ts';
import { TASK_TOKEN_MARKER, type CallbackRegistry } from './callbacks.ts';
import { DISTRIBUTED_MAP_RESOURCE, runDistributedMap, type DistributedMapInput } from './distributed-map.ts';
import { TaskError, type LocalFunction } from './lambda-host.ts';
import { DataLimitError, PAYLOAD_LIMIT_BYTES, type RunScope, stepStats } from './run-scope.ts';
import type { EmitRuntimeEvent } from './runtime-events.ts';
import { callSdk, sdkIntegration, type SdkClients } from './sdk-tasks.ts';

/** What the task handlers reach outside their execution. */
export interface TaskDeps {
  readonly functions: ReadonlyMap<string, LocalFunction>;
  readonly jobDefinitions: ReadonlyMap<string, LocalJobDefinition>;
  readonly batch: BatchHost;
  readonly callbacks: CallbackRegistry;
  readonly clients: SdkClients;
  readonly emit: EmitRuntimeEvent;
  /** Invokes a function by name or ARN, as Lambda would. */
  invokeFunction(nameOrArn: string, event: unknown): Promise<unknown>;
}

export type TaskHandler = (input: unknown) => Promise<unknown>;

export interface TaskRoute {
  /**
   * Whether the task's own result is held to the 256 KiB limit here, before the engine sees
   * it; every state's output is checked again when the state exits (run-scope.ts).
   */
  readonly checked: boolean;
  /** The handler of one Task state, for one execution. */
  handler(task: TaskRef, scope: RunScope, deps: TaskDeps): TaskHandler;
}

/**
 * Invokes a function for a run and adds its billed duration to the run's record: the
 * invocation's milliseconds rounded up to 1 ms, and those seconds times its memory size in GiB,
 * as Lambda bills (failed invocations are billed too).
 */
function invokeBilled(scope: RunScope, deps: TaskDeps, state: string, nameOrArn: string, payload: unknown): Promise<unknown> {
  const started = performance.now();
  return deps
    .invokeFunction(nameOrArn, payload)
    .then((out) => {
      const claude = claudeUsageOf(out);
      if (claude.length) {
        scope.record.stats.claude = addClaude(scope.record.stats.claude ?? [], claude);
        const step = stepStats(scope.record, state);
        step.claude = addClaude(step.claude ?? [], claude);
      }
      return out;
    })
    .finally(() => {
      const ms = Math.max(1, Math.ceil(performance.now() - started));
      const gbSeconds = (ms / 1000) * ((deps.functions.get(nameOrArn)?.memoryMb ?? 128) / 1024);
      const stats = scope.record.stats;
      stats.lambdaBilledMs = (stats.lambdaBilledMs ?? 0) + ms;
      stats.lambdaGbSeconds = (stats.lambdaGbSeconds ?? 0) + gbSeconds;
      const step = stepStats(scope.record, state);
      step.lambdaInvocations += 1;
      step.lambdaBilledMs += ms;
      step.lambdaGbSeconds += gbSeconds;
    });
}

const lambdaFunction: TaskRoute = {
  checked: true,
  handler: (task, scope, deps) => (input) => {
    scope.record.stats.lambdaInvocations++;
    return invokeBilled(scope, deps, task.name, task.resource, input);
  },
};

const lambdaInvoke: TaskRoute = {
  checked: true,
  handler: (task, scope, deps) => (input) => {
    const { FunctionName, Payload } = input as { FunctionName: string; Payload: unknown };
    scope.record.stats.lambdaInvocations++;
    return invokeBilled(scope, deps, task.name, FunctionName, Payload).then((out) => ({ ExecutedVersion: '$LATEST', Payload: out, StatusCode: 200 }));
  },
};

const lambdaInvokeWaitForTaskToken: TaskRoute = {
  checked: true,
  handler: (task, scope, deps) => async (input) => {
    const { record } = scope;
    const { token, done } = deps.callbacks.register(record.executionArn, {
      timeoutSeconds: task.timeoutSeconds,
      heartbeatSeconds: task.heartbeatSeconds,
    });
    // The token may be settled (timeout, abort, a fast callback) before we await it below.
    done.catch(() => undefined);
    const withToken = JSON.parse(JSON.stringify(input).split(TASK_TOKEN_MARKER).join(token)) as { FunctionName: string; Payload: unknown };
    record.stats.lambdaInvocations++;
    // Register first, then invoke: a handler may call back before invoke returns.
    await invokeBilled(scope, deps, task.name, withToken.FunctionName, withToken.Payload).catch((error: Error) => {
      // The Lambda's failure is the task's, unless the token was already answered or timed out.
      deps.callbacks.failIfPending(token, error.name, error.message);
    });
    return done;
  },
};

const batchSubmitJobSync: TaskRoute = {
  checked: false,
  handler: (task, scope, deps) => async (input) => {
    const p = input as {
      JobName: string;
      JobQueue: string;
      JobDefinition: string;
      ContainerOverrides?: { Environment?: { Name: string; Value: string }[] };
      Timeout?: { AttemptDurationSeconds?: unknown };
    };
    const def = deps.jobDefinitions.get(p.JobDefinition);
    if (!def) throw new TaskError('Batch.ClientException', `job definition ${p.JobDefinition} does not exist`);
    const overrides = Object.fromEntries((p.ContainerOverrides?.Environment ?? []).map((e) => [e.Name, e.Value]));
    // The submit's timeout replaces the definition's, as on AWS, which refuses one under 60 s.
    const timeout = p.Timeout?.AttemptDurationSeconds;
    if (timeout !== undefined && (!Number.isInteger(timeout) || (timeout as number) < 60)) {
      throw new TaskError(
        'Batch.ClientException',
        `Timeout.AttemptDurationSeconds: must be an integer of at least 60 seconds (got ${JSON.stringify(timeout)})`,
      );
    }
    scope.record.stats.batchJobs++;
    const resources = def.resources ?? { platform: 'FARGATE' as const, vcpus: 0, memoryMiB: 0, gpus: 0 };
    const run = await deps.batch.run(def, p.JobName, overrides, timeout as number | undefined, (seconds) => {
      const usage = { job: def.name, ...resources, seconds };
      scope.record.stats.batch = [...(scope.record.stats.batch ?? []), usage];
      stepStats(scope.record, task.name).batch.push(usage);
    });
    return {
      JobId: run.jobId,
      JobName: p.JobName,
      JobQueue: p.JobQueue,
      JobDefinition: p.JobDefinition,
      Status: 'SUCCEEDED',
      Container: { ExitCode: 0, LogStreamName: run.logFile },
      Attempts: [{ Container: { ExitCode: 0 } }],
    };
  },
};

const sdkCall: TaskRoute = {
  checked: true,
  handler: (task, _scope, deps) => {
    const sdk = sdkIntegration(task.resource)!;
    return (input) => callSdk(deps.clients, sdk.service, sdk.action, input as Record<string, unknown>);
  },
};

const distributedMap: TaskRoute = {
  checked: false,
  handler: (task, scope, deps) => (input) => runDistributedMap(task.name, input as DistributedMapInput, scope, { s3: deps.clients.s3, emit: deps.emit }),
};

/** The routes named by their exact resource ARN. */
const ROUTES = new Map<string, TaskRoute>([
  [DISTRIBUTED_MAP_RESOURCE, distributedMap],
  ['arn:aws:states:::lambda:invoke', lambdaInvoke],
  ['arn:aws:states:::lambda:invoke.waitForTaskToken', lambdaInvokeWaitForTaskToken],
  ['arn:aws:states:::batch:submitJob.sync', batchSubmitJobSync],
]);

/** The route that runs a Task's resource, or undefined if the local runtime cannot run it. */
export function taskRoute(resource: string, functions: ReadonlyMap<string, LocalFunction>): TaskRoute | undefined {
  const exact = ROUTES.get(resource);
  if (exact) return exact;
  if (functions.has(resource)) return lambdaFunction;
  if (sdkIntegration(resource) !== undefined) return sdkCall;
  return undefined;
}

/** The handler of one Task state, for one execution (its resource was checked at load). */
export function taskHandler(task: TaskRef, scope: RunScope, deps: TaskDeps): TaskHandler {
  const route = taskRoute(task.resource, deps.functions)!;
  const handle = route.handler(task, scope, deps);
  return route.checked ? (input) => withinPayloadLimit(task.name, handle(input)) : handle;
}

async function withinPayloadLimit(state: string, result: Promise<unknown>): Promise<unknown> {
  const out = await result;
  const bytes = jsonByteLength(out);
  if (bytes > PAYLOAD_LIMIT_BYTES) throw new DataLimitError(state, bytes);
  return out;
}
