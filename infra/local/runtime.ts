/**
 * The embedded runtime: the synthesized state machines, run on one machine.
 *
 * It synthesizes the CDK app in-process, takes each pipeline's ASL from the template (tokens
 * resolved to local names), and runs it with aws-local-stepfunctions. Lambda tasks run the
 * same handler modules in worker threads with the template's environment; Batch tasks run the
 * job's entrypoint as a child process; direct DynamoDB and S3 states go through the real SDK to
 * dynalite and s3rver; task tokens, heartbeats and timeouts are kept by a callback layer; S3
 * object events are matched against the synthesized EventBridge rules; email goes to the
 * outbox as .eml files; the approval API is served on loopback by the same handler as on AWS.
 */
import './polyfill.ts';
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { StateMachine, type StateMachineDefinition } from 'aws-local-stepfunctions';
import { EventEmitter } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { BatchJob } from '#pipelines/steps/batch-job.ts';
import { REPO_ROOT, type CodeVersion } from '#pipelines/steps/code-version.ts';
import { META, PipelineFunction } from '#pipelines/steps/function.ts';
import { PIPELINE_META } from '#pipelines/steps/pipeline.ts';
import { UnknownPipelineError, UnsupportedLocally } from '#shared/errors.ts';
import { jsonByteLength } from '#shared/json.ts';
import { resetClients } from '#shared/clients/aws.ts';
import { buildApp } from '../build-app.ts';
import type { PipelineEntry } from '../registry.ts';
import { prepareAsl, type TaskRef } from './asl-prepass.ts';
import { ApiError, startAwsApi } from './aws-api.ts';
import { BatchHost, type LocalSandbox, type LocalJobDefinition } from './batch-host.ts';
import { CallbackError, CallbackRegistry, TASK_TOKEN_MARKER } from './callbacks.ts';
import { lockDataDir, startDynalite, startS3rver, type Listening, type S3Emulator, type S3NotificationEvent } from './emulators.ts';
import { matchesPattern } from './event-pattern.ts';
import { startHttpApi } from './http-api.ts';
import { LambdaHost, TaskError, type LocalFunction } from './lambda-host.ts';
import { LOCAL_ACCOUNT, LOCAL_KEY, LOCAL_REGION, TemplateResolver, type SynthStack } from './resolve.ts';
import { callSdk, sdkIntegration } from './sdk-tasks.ts';
import { provision } from './provision.ts';
import { DISTRIBUTED_MAP_RESOURCE, exceedsTolerance, lowerDistributedMaps, type DistributedMapDef, type DistributedMapInput } from './distributed-map.ts';
import { writeEml } from './outbox.ts';

/** Step Functions' limit on a state's input or output. */
export const PAYLOAD_LIMIT_BYTES = 256 * 1024;

export interface RuntimeOptions {
  /** Data directory. Default: `.local/` in the repository. */
  readonly dataDir?: string;
  /** Fixed ports: DynamoDB = base, S3 = base+1, AWS API = base+2, approval API = base+3. Default: any free ports. */
  readonly portBase?: number;
  /** Batch jobs at once. Default: the number of cores. */
  readonly jobConcurrency?: number;
  /** Replace every Retry wait with this many milliseconds (tests). */
  readonly retryDelayMs?: number;
  /** The pipelines to run. Default: every registered pipeline. */
  readonly pipelines?: readonly PipelineEntry[];
}

export type ExecutionStatus = 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'TIMED_OUT' | 'ABORTED';

export interface ExecutionRecord {
  executionArn: string;
  name: string;
  stateMachineArn: string;
  pipeline: string;
  status: ExecutionStatus;
  input: unknown;
  output?: unknown;
  error?: string;
  cause?: string;
  startDate: string;
  stopDate?: string;
  stats: { statesEntered: number; lambdaInvocations: number; batchJobs: number; mapItemsDone: number; mapItemsFailed: number };
}

export interface LocalResources {
  tables: string[];
  buckets: string[];
}

export interface RuntimeEvents {
  stateEntered: { executionArn: string; state: string };
  mapItem: { executionArn: string; state: string; index: number; ok: boolean };
  jobProgress: { jobName: string; progress: unknown };
  email: { file: string };
  /** The EventBridge event built for an S3 object created in a bucket with notifications on. */
  objectCreated: Record<string, unknown>;
  executionDone: ExecutionRecord;
}

interface LocalMachine {
  readonly pipeline: string;
  readonly arn: string;
  readonly asl: StateMachineDefinition;
  readonly engine: StateMachine;
  readonly tasks: TaskRef[];
  /** Lowered Distributed Maps by state name, each with an engine for its item processor. */
  readonly distributed: Map<string, DistributedMapDef & { engine: StateMachine; selector?: StateMachine }>;
}

export interface Execution {
  readonly executionArn: string;
  readonly record: ExecutionRecord;
  /** Settles when the execution ends, with its final record (it never rejects). */
  readonly done: Promise<ExecutionRecord>;
  abort(): void;
}

/** The Pass state that applies a Distributed Map's ItemSelector to each item. */
const ITEM_SELECTOR_STATE = 'Item selector (local)';

/** What the task handlers of one execution share. */
interface RunScope {
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

/** A non-catchable error, as AWS treats States.DataLimitExceeded (States.ALL does not match it). */
class DataLimitError extends TaskError {
  readonly isCatchable = false;
  readonly isRetryable = false;
  constructor(state: string, bytes: number) {
    super(
      'States.DataLimitExceeded',
      `The state "${state}" produced ${bytes} bytes, over the ${PAYLOAD_LIMIT_BYTES}-byte (256 KiB) limit of Step Functions; pass large data as S3 URIs`,
    );
  }
}

export class LocalRuntime extends EventEmitter {
  readonly dataDir: string;
  readonly outboxDir: string;
  private readonly machines = new Map<string, LocalMachine>();
  private readonly functions = new Map<string, LocalFunction>();
  private readonly jobDefinitions = new Map<string, LocalJobDefinition>();
  private readonly secrets = new Map<string, string>();
  private readonly rules: { pattern: Record<string, unknown>; targets: { arn: string; input?: unknown }[] }[] = [];
  private readonly eventBridgeBuckets = new Set<string>();
  private readonly versionedBuckets = new Set<string>();
  private readonly executions = new Map<string, Execution>();
  private readonly callbacks = new CallbackRegistry();
  private readonly closers: (() => Promise<void> | void)[] = [];
  private readonly pendingEvents = new Set<Promise<unknown>>();
  private stopping = false;
  private lambda!: LambdaHost;
  private batch!: BatchHost;
  private s3!: S3Client;
  private dynamodb!: DynamoDBClient;
  /** Local names of the tables and of the buckets with EventBridge notifications (the platform's). */
  readonly resources: LocalResources = { tables: [], buckets: [] };
  /** Base URL of the approval API on loopback. */
  approvalApiUrl = '';
  endpoints: Record<string, string> = {};
  /** Milliseconds spent synthesizing and preparing the state machines. */
  readonly timings: Record<string, number> = {};

  private constructor(private readonly options: RuntimeOptions) {
    super();
    this.dataDir = options.dataDir ?? join(REPO_ROOT, '.local');
    this.outboxDir = join(this.dataDir, 'outbox');
  }

  static async start(options: RuntimeOptions = {}): Promise<LocalRuntime> {
    const runtime = new LocalRuntime(options);
    try {
      await runtime.boot();
    } catch (error) {
      await runtime.stop();
      throw error;
    }
    return runtime;
  }

  /** Pipelines this runtime can run, by name. */
  pipelines(): string[] {
    return [...this.machines.keys()];
  }

  private async boot(): Promise<void> {
    const t0 = performance.now();
    const unlock = lockDataDir(this.dataDir);
    this.closers.push(unlock);
    for (const sub of ['executions', 'outbox', 'jobs']) mkdirSync(join(this.dataDir, sub), { recursive: true });
    const base = this.options.portBase ?? 0;
    const port = (offset: number) => (base ? base + offset : 0);

    const dynamo = await startDynalite(join(this.dataDir, 'dynamodb'), port(0));
    this.closers.push(() => dynamo.close());
    const s3: S3Emulator = await startS3rver(join(this.dataDir, 's3'), port(1));
    this.closers.push(() => s3.close());
    const aws = await startAwsApi(port(2), {
      sfn: (action, body) => this.sfnApi(action, body),
      secrets: (action, body) => this.secretsApi(action, body),
      sendEmail: (body) => this.sendEmail(body),
    });
    this.closers.push(() => aws.close());
    this.endpoints = {
      AWS_ENDPOINT_URL_DYNAMODB: dynamo.url,
      AWS_ENDPOINT_URL_S3: s3.url,
      AWS_ENDPOINT_URL_SFN: aws.url,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: aws.url,
      AWS_ENDPOINT_URL_SESV2: aws.url,
    };
    const baseEnv: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/tmp',
      LANG: process.env.LANG ?? 'C.UTF-8',
      TZ: 'UTC',
      AWS_REGION: LOCAL_REGION,
      AWS_DEFAULT_REGION: LOCAL_REGION,
      AWS_ACCESS_KEY_ID: LOCAL_KEY,
      AWS_SECRET_ACCESS_KEY: LOCAL_KEY,
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      ...this.endpoints,
    };
    // This process (the CLI, a test) reaches the emulators through the same variables.
    Object.assign(process.env, baseEnv, { PATH: process.env.PATH });
    resetClients();
    this.s3 = new S3Client({ forcePathStyle: true, endpoint: s3.url, region: LOCAL_REGION, credentials: { accessKeyId: LOCAL_KEY, secretAccessKey: LOCAL_KEY } });
    this.dynamodb = new DynamoDBClient({ endpoint: dynamo.url, region: LOCAL_REGION, credentials: { accessKeyId: LOCAL_KEY, secretAccessKey: LOCAL_KEY } });
    // Claude: the real API when ANTHROPIC_API_KEY is set here, or the tests' fake server through
    // ANTHROPIC_BASE_URL; Lambdas only (a job never gets the key).
    const anthropic = Object.fromEntries(
      ['ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL'].flatMap((name) => (process.env[name] ? [[name, process.env[name]!]] : [])),
    );
    this.lambda = new LambdaHost({ ...baseEnv, ...anthropic });
    this.closers.push(() => this.lambda.stop());
    this.batch = new BatchHost(join(this.dataDir, 'jobs'), baseEnv, this.options.jobConcurrency, (jobName, progress) =>
      this.emit('jobProgress', { jobName, progress }),
    );
    this.closers.push(() => this.batch.stop());

    const t1 = performance.now();
    const { stacks, codeVersions } = synthesize(this.options.pipelines);
    const t2 = performance.now();
    saveCodeVersions(this.dataDir, codeVersions);
    const resolver = new TemplateResolver(stacks);

    // The approval API: served on loopback by the handler the template routes to.
    const http = await startHttpApi(port(3), resolver, (fnArn, event) => this.invokeFunction(fnArn, event));
    this.closers.push(() => http.server.close());
    this.approvalApiUrl = http.server.url;
    for (const apiId of http.apiIds) {
      resolver.rewrite(`https://${apiId}.execute-api.${LOCAL_REGION}.amazonaws.com/`, `${http.server.url}/`);
      resolver.rewrite(`https://${apiId}.execute-api.${LOCAL_REGION}.amazonaws.com`, http.server.url);
    }

    const provisioned = await provision(resolver, { dynamodb: this.dynamodb, s3: this.s3 }, this.dataDir);
    this.resources.tables.push(...provisioned.tables);
    this.resources.buckets.push(...provisioned.eventBridgeBuckets);
    for (const b of provisioned.eventBridgeBuckets) this.eventBridgeBuckets.add(b);
    for (const b of provisioned.versionedBuckets) this.versionedBuckets.add(b);
    for (const [arn, value] of provisioned.secrets) this.secrets.set(arn, value);
    writeFileSync(join(this.dataDir, 'resources.json'), JSON.stringify(this.resources, null, 2));
    this.loadFunctionsAndJobs(resolver);
    this.loadRules(resolver);
    this.loadMachines(resolver);
    s3.onEvent((event) => this.onS3Event(event));
    this.timings.emulatorsMs = t1 - t0;
    this.timings.synthMs = t2 - t1;
    this.timings.prepareMs = performance.now() - t2;
  }

  private loadFunctionsAndJobs(resolver: TemplateResolver): void {
    for (const { stack, logicalId, resource } of resolver.resourcesOfType('AWS::Lambda::Function')) {
      const entry = resource.Metadata?.[META.entry];
      if (typeof entry !== 'string') continue; // CDK's own helper functions: never invoked by a pipeline
      const props = (resource.Properties ?? {}) as { Environment?: { Variables?: unknown }; Timeout?: number; MemorySize?: number };
      const name = resolver.refOf(stack, logicalId, resource);
      const env = (resolver.resolve(stack, props.Environment?.Variables ?? {}) ?? {}) as Record<string, unknown>;
      const fn: LocalFunction = {
        name,
        arn: resolver.attrOf(stack, logicalId, resource, 'Arn')!,
        entry: join(REPO_ROOT, entry),
        handler: String(resource.Metadata?.[META.handler] ?? 'handler'),
        environment: Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)])),
        timeoutSeconds: props.Timeout ?? 3,
        memoryMb: props.MemorySize ?? 128,
      };
      this.functions.set(fn.name, fn);
      this.functions.set(fn.arn, fn);
    }
    for (const { stack, logicalId, resource } of resolver.resourcesOfType('AWS::Batch::JobDefinition')) {
      const jobDir = resource.Metadata?.[META.jobDir];
      if (typeof jobDir !== 'string') continue;
      const props = resolver.resolve(stack, resource.Properties ?? {}) as {
        ContainerProperties?: { Environment?: { Name: string; Value: string }[] };
        Timeout?: { AttemptDurationSeconds?: number };
      };
      const arn = resolver.refOf(stack, logicalId, resource);
      this.jobDefinitions.set(arn, {
        arn,
        name: logicalId,
        jobDir,
        command: resource.Metadata?.[META.jobCommand] as string[],
        environment: Object.fromEntries((props.ContainerProperties?.Environment ?? []).map((e) => [e.Name, String(e.Value)])),
        timeoutSeconds: props.Timeout?.AttemptDurationSeconds ?? 7200,
        ...(resource.Metadata?.[META.jobSandbox] ? { sandbox: resource.Metadata[META.jobSandbox] as LocalSandbox } : {}),
      });
    }
  }

  private loadRules(resolver: TemplateResolver): void {
    for (const { stack, resource } of resolver.resourcesOfType('AWS::Events::Rule')) {
      const props = resolver.resolve(stack, resource.Properties ?? {}) as {
        EventPattern?: Record<string, unknown>;
        State?: string;
        Targets?: { Arn: string; Input?: string }[];
      };
      if (!props.EventPattern || props.State === 'DISABLED') continue;
      this.rules.push({
        pattern: props.EventPattern,
        targets: (props.Targets ?? []).map((t) => ({ arn: t.Arn, input: t.Input ? JSON.parse(t.Input) : undefined })),
      });
    }
  }

  private loadMachines(resolver: TemplateResolver): void {
    for (const { stack, logicalId, resource } of resolver.resourcesOfType('AWS::StepFunctions::StateMachine')) {
      const pipeline = resource.Metadata?.[PIPELINE_META];
      if (typeof pipeline !== 'string') continue;
      const definition = JSON.parse(String(resolver.resolve(stack, resource.Properties!.DefinitionString))) as StateMachineDefinition;
      const lowered = lowerDistributedMaps(definition);
      const prepared = prepareAsl(lowered.asl);
      if (prepared.duplicateTaskNames.length) {
        // Local handlers are keyed by state name: two Tasks of one name would share one.
        throw new UnsupportedLocally(`${pipeline}: Task names used twice: ${prepared.duplicateTaskNames.join(', ')}`);
      }
      const tasks = [...prepared.tasks];
      const distributed = new Map<string, DistributedMapDef & { engine: StateMachine; selector?: StateMachine }>();
      for (const [name, map] of lowered.maps) {
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
      for (const task of tasks) this.checkTaskSupported(pipeline, task);
      this.machines.set(pipeline, {
        pipeline,
        arn: resolver.refOf(stack, logicalId, resource),
        asl: prepared.asl,
        engine: new StateMachine(prepared.asl, { validationOptions: { noValidate: true } }),
        tasks,
        distributed,
      });
    }
  }

  private checkTaskSupported(pipeline: string, task: TaskRef): void {
    const r = task.resource;
    const known =
      this.functions.has(r) ||
      /^arn:aws:states:::lambda:invoke(\.waitForTaskToken)?$/.test(r) ||
      r === 'arn:aws:states:::batch:submitJob.sync' ||
      r === DISTRIBUTED_MAP_RESOURCE ||
      sdkIntegration(r) !== undefined;
    if (!known) {
      throw new UnsupportedLocally(`${pipeline}: state "${task.name}" uses ${r}, which the local runtime cannot run`);
    }
  }

  /** Starts an execution of a pipeline (by name or state machine ARN). */
  startExecution(pipelineOrArn: string, input: unknown, options: { name?: string } = {}): Execution {
    if (this.stopping) throw new ApiError('ServiceUnavailable', 'the local runtime is stopping', 503);
    const machine = this.machines.get(pipelineOrArn) ?? [...this.machines.values()].find((m) => m.arn === pipelineOrArn);
    if (!machine) throw new UnknownPipelineError(pipelineOrArn, this.pipelines());
    const name = options.name ?? randomUUID();
    if (!/^[0-9A-Za-z_-]{1,80}$/.test(name)) throw new ApiError('InvalidName', `execution name "${name}" must be 1-80 of [0-9A-Za-z_-]`);
    const executionArn = `${machine.arn.replace(':stateMachine:', ':execution:')}:${name}`;
    if (this.executions.has(executionArn) || existsSync(this.recordFile(executionArn))) {
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
      stats: { statesEntered: 0, lambdaInvocations: 0, batchJobs: 0, mapItemsDone: 0, mapItemsFailed: 0 },
    };
    this.persist(record);
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
    for (const t of machine.tasks) scope.handlers[t.name] = this.taskHandler(t, scope);
    scope.overrides = {
      taskResourceLocalHandlers: scope.handlers,
      ...(this.options.retryDelayMs !== undefined ? { retryIntervalOverrides: retryOverrides(machine.tasks, this.options.retryDelayMs) } : {}),
    };
    const run = machine.engine.run(input as never, { overrides: scope.overrides as never, context: scope.context as never });
    const endRun = () => {
      scope.ended = true;
      for (const child of scope.children) child.abort();
    };
    const watch = this.watchEvents(run, record, (error) => {
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
          record.status = failure ? 'FAILED' : error.name === 'ExecutionAbortedError' ? 'ABORTED' : error.name === 'ExecutionTimeoutError' ? 'TIMED_OUT' : 'FAILED';
          record.error = cause.name;
          record.cause = cause.message;
        },
      )
      .then(async () => {
        endRun();
        await watch;
        this.callbacks.sweep(executionArn);
        record.stopDate = new Date().toISOString();
        this.persist(record);
        this.emit('executionDone', record);
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
    this.executions.set(executionArn, execution);
    return execution;
  }

  /**
   * Follows a run's event log (an execution's, or a Distributed Map child's): states entered
   * and Map items for progress, and every state's output against the 256 KiB limit.
   */
  private watchEvents(run: { eventLogs: AsyncGenerator<unknown> }, record: ExecutionRecord, onLimit: (error: DataLimitError) => void): Promise<void> {
    const executionArn = record.executionArn;
    return (async () => {
      for await (const event of run.eventLogs) {
        const e = event as { type: string; state?: { name: string; output?: unknown }; parentState?: { name: string }; index?: number };
        if (e.type === 'StateEntered' && e.state) {
          record.stats.statesEntered++;
          this.emit('stateEntered', { executionArn, state: e.state.name });
        } else if (e.type === 'StateExited' && e.state && e.state.output !== undefined) {
          const bytes = jsonByteLength(e.state.output);
          if (bytes > PAYLOAD_LIMIT_BYTES) onLimit(new DataLimitError(e.state.name, bytes));
        } else if ((e.type === 'MapIterationSucceeded' || e.type === 'MapIterationFailed') && e.parentState) {
          const ok = e.type === 'MapIterationSucceeded';
          if (ok) record.stats.mapItemsDone++;
          else record.stats.mapItemsFailed++;
          this.emit('mapItem', { executionArn, state: e.parentState.name, index: e.index ?? -1, ok });
        }
      }
    })().catch(() => undefined);
  }

  /** The handler of one Task state, for one execution. */
  private taskHandler(task: TaskRef, scope: RunScope): (input: unknown) => Promise<unknown> {
    const { record } = scope;
    const r = task.resource;
    if (r === DISTRIBUTED_MAP_RESOURCE) return (input) => this.runDistributedMap(task.name, input as DistributedMapInput, scope);
    const checked = async (result: Promise<unknown>) => {
      const out = await result;
      const bytes = jsonByteLength(out);
      if (bytes > PAYLOAD_LIMIT_BYTES) throw new DataLimitError(task.name, bytes);
      return out;
    };
    if (this.functions.has(r)) {
      return (input) => {
        record.stats.lambdaInvocations++;
        return checked(this.invokeFunction(r, input));
      };
    }
    if (r === 'arn:aws:states:::lambda:invoke') {
      return (input) => {
        const { FunctionName, Payload } = input as { FunctionName: string; Payload: unknown };
        record.stats.lambdaInvocations++;
        return checked(this.invokeFunction(FunctionName, Payload).then((out) => ({ ExecutedVersion: '$LATEST', Payload: out, StatusCode: 200 })));
      };
    }
    if (r === 'arn:aws:states:::lambda:invoke.waitForTaskToken') {
      return async (input) => {
        const { token, done } = this.callbacks.register(record.executionArn, {
          timeoutSeconds: task.timeoutSeconds,
          heartbeatSeconds: task.heartbeatSeconds,
        });
        // The token may be settled (timeout, abort, a fast callback) before we await it below.
        done.catch(() => undefined);
        const withToken = JSON.parse(JSON.stringify(input).split(TASK_TOKEN_MARKER).join(token)) as { FunctionName: string; Payload: unknown };
        record.stats.lambdaInvocations++;
        // Register first, then invoke: a handler may call back before invoke returns.
        await this.invokeFunction(withToken.FunctionName, withToken.Payload).catch((error: Error) => {
          // The Lambda's failure is the task's, unless the token was already answered or timed out.
          this.callbacks.failIfPending(token, error.name, error.message);
        });
        return checked(done);
      };
    }
    if (r === 'arn:aws:states:::batch:submitJob.sync') {
      return async (input) => {
        const p = input as {
          JobName: string;
          JobQueue: string;
          JobDefinition: string;
          ContainerOverrides?: { Environment?: { Name: string; Value: string }[] };
          Timeout?: { AttemptDurationSeconds?: unknown };
        };
        const def = this.jobDefinitions.get(p.JobDefinition);
        if (!def) throw new TaskError('Batch.ClientException', `job definition ${p.JobDefinition} does not exist`);
        const overrides = Object.fromEntries((p.ContainerOverrides?.Environment ?? []).map((e) => [e.Name, e.Value]));
        // The submit's timeout replaces the definition's, as on AWS, which refuses one under 60 s.
        const timeout = p.Timeout?.AttemptDurationSeconds;
        if (timeout !== undefined && (!Number.isInteger(timeout) || (timeout as number) < 60)) {
          throw new TaskError('Batch.ClientException', `Timeout.AttemptDurationSeconds: must be an integer of at least 60 seconds (got ${JSON.stringify(timeout)})`);
        }
        record.stats.batchJobs++;
        const run = await this.batch.run(def, p.JobName, overrides, timeout as number | undefined);
        return {
          JobId: run.jobId,
          JobName: p.JobName,
          JobQueue: p.JobQueue,
          JobDefinition: p.JobDefinition,
          Status: 'SUCCEEDED',
          Container: { ExitCode: 0, LogStreamName: run.logFile },
          Attempts: [{ Container: { ExitCode: 0 } }],
        };
      };
    }
    const sdk = sdkIntegration(r)!;
    return (input) => checked(callSdk({ s3: this.s3, dynamodb: this.dynamodb }, sdk.service, sdk.action, input as Record<string, unknown>));
  }

  /**
   * A Distributed Map, as Step Functions runs it: items from S3 (or the state), one child run
   * per item, the failure tolerance, and the results written to S3 by its ResultWriter.
   */
  private async runDistributedMap(stateName: string, input: DistributedMapInput, scope: RunScope): Promise<unknown> {
    const map = scope.machine.distributed.get(stateName)!;
    let items: unknown;
    if (input.reader) {
      try {
        const object = await this.s3.send(new GetObjectCommand({ Bucket: input.reader.Bucket, Key: input.reader.Key }));
        items = JSON.parse(await object.Body!.transformToString());
      } catch (error) {
        throw new TaskError('States.ItemReaderFailed', `${stateName}: cannot read items from s3://${input.reader.Bucket}/${input.reader.Key}: ${(error as Error).message}`);
      }
    } else {
      items = input.items;
    }
    if (!Array.isArray(items)) throw new TaskError('States.ItemReaderFailed', `${stateName}: the items are not a JSON array`);
    const mapRunId = randomUUID();
    const mapRunArn = `${scope.record.executionArn.replace(':execution:', ':mapRun:')}/${stateName.replace(/[^A-Za-z0-9_-]/g, '-')}:${mapRunId}`;
    const results: ({ Index: number; Input: unknown; Status: 'SUCCEEDED'; Output: unknown } | { Index: number; Input: unknown; Status: 'FAILED'; Error: string; Cause: string })[] = [];
    let next = 0;
    // Child runs at once: the map's MaxConcurrency, bounded as inline Maps are locally.
    const width = Math.min(map.maxConcurrency, 40, Math.max(items.length, 1));
    const worker = async () => {
      for (let index = next++; index < items.length && !scope.ended; index = next++) {
        const value = items[index];
        let childInput: unknown = value;
        try {
          if (map.selector) {
            childInput = await map.selector.run(input.input as never, { context: { ...scope.context, Map: { Item: { Index: index, Value: value } } } as never }).result;
          }
          // Each child is an execution of its own on AWS: its own id, name and input.
          const childContext = {
            ...scope.context,
            Execution: { Id: `${mapRunArn}:${index}`, Name: String(index), Input: childInput, StartTime: new Date().toISOString(), RoleArn: `arn:aws:iam::${LOCAL_ACCOUNT}:role/local` },
          };
          const child = map.engine.run(childInput as never, { overrides: scope.overrides as never, context: childContext as never });
          scope.children.add(child);
          // A child state over 256 KiB fails that child, as it fails a child execution on AWS.
          let limit: DataLimitError | undefined;
          const watching = this.watchEvents(child, scope.record, (error) => {
            limit ??= error;
            child.abort();
          });
          const output = await child.result.finally(() => scope.children.delete(child)).catch((error: Error) => {
            throw limit ?? error;
          });
          await watching;
          if (limit) throw limit;
          results.push({ Index: index, Input: childInput, Status: 'SUCCEEDED', Output: output });
          scope.record.stats.mapItemsDone++;
          this.emit('mapItem', { executionArn: scope.record.executionArn, state: stateName, index, ok: true });
        } catch (error) {
          const cause = ((error as { cause?: Error }).cause ?? error) as Error;
          results.push({ Index: index, Input: childInput, Status: 'FAILED', Error: cause.name, Cause: cause.message });
          scope.record.stats.mapItemsFailed++;
          this.emit('mapItem', { executionArn: scope.record.executionArn, state: stateName, index, ok: false });
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
        await this.s3.send(new PutObjectCommand({ Bucket: input.writer!.Bucket, Key: `${prefix}${name}`, Body: text, ContentType: 'application/json' }));
        return { Key: `${prefix}${name}`, Size: Buffer.byteLength(text) };
      };
      const entry = (r: (typeof results)[number]) => ({
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

  /** Invokes a function by name or ARN, as Lambda would. */
  invokeFunction(nameOrArn: string, event: unknown): Promise<unknown> {
    const fn = this.functions.get(nameOrArn);
    if (!fn) return Promise.reject(new TaskError('Lambda.ResourceNotFoundException', `Function not found: ${nameOrArn}`));
    return this.lambda.invoke(fn, event);
  }

  /** The cached steps of a pipeline and the code version each is keyed with today. */
  cachedSteps(pipeline: string): { step: string; codeVersion: string }[] {
    const machine = this.machines.get(pipeline);
    if (!machine) throw new UnknownPipelineError(pipeline, this.pipelines());
    const found: { step: string; codeVersion: string }[] = [];
    const walk = (states: Record<string, unknown>) => {
      for (const [name, state] of Object.entries(states)) {
        const st = state as { Parameters?: { Item?: { codeVersion?: { S?: string } } }; ItemProcessor?: { States: Record<string, unknown> }; Iterator?: { States: Record<string, unknown> }; Branches?: { States: Record<string, unknown> }[] };
        const m = /^(.+): Cache store$/.exec(name);
        if (m && st.Parameters?.Item?.codeVersion?.S) found.push({ step: m[1]!, codeVersion: st.Parameters.Item.codeVersion.S });
        if (st.ItemProcessor) walk(st.ItemProcessor.States);
        if (st.Iterator) walk(st.Iterator.States);
        for (const b of st.Branches ?? []) walk(b.States);
      }
    };
    walk(machine.asl.States as Record<string, unknown>);
    return found;
  }

  /** Lambda invocations and Batch jobs since the runtime started. */
  counters(): { lambdaInvocations: number; batchJobs: number } {
    return { lambdaInvocations: this.lambda.invocations, batchJobs: this.batch.jobsRun };
  }

  // ---- S3 events through the synthesized EventBridge rules ----

  private onS3Event(event: S3NotificationEvent): void {
    for (const record of event.Records) {
      if (!record.eventName.startsWith('ObjectCreated')) continue;
      const bucket = record.s3.bucket.name;
      if (!this.eventBridgeBuckets.has(bucket)) continue;
      const publishing = this.publishObjectCreated(bucket, record);
      this.pendingEvents.add(publishing);
      void publishing.finally(() => this.pendingEvents.delete(publishing));
    }
  }

  private async publishObjectCreated(bucket: string, record: S3NotificationEvent['Records'][number]): Promise<void> {
    const o = { ...record.s3.object };
    // s3rver's Copy events carry no ETag; S3's always do.
    if (!o.eTag) o.eTag = (await this.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: o.key })).catch(() => undefined))?.ETag;
    // s3rver keeps no versions; on a versioned bucket every PUT gets a new version id, as on S3.
    if (!o.versionId && this.versionedBuckets.has(bucket)) o.versionId = randomUUID().replace(/-/g, '');
    const event = {
        version: '0',
        id: randomUUID(),
        'detail-type': 'Object Created',
        source: 'aws.s3',
        account: LOCAL_ACCOUNT,
        time: record.eventTime ?? new Date().toISOString(),
        region: LOCAL_REGION,
        resources: [`arn:aws:s3:::${bucket}`],
        detail: {
          version: '0',
          bucket: { name: bucket },
          object: { key: o.key, size: o.size, etag: o.eTag?.replace(/"/g, ''), ...(o.versionId ? { 'version-id': o.versionId } : {}), sequencer: o.sequencer },
          'request-id': randomUUID(),
          requester: LOCAL_ACCOUNT,
          reason: record.eventName.split(':')[1] ?? 'PutObject',
        },
      };
    this.emit('objectCreated', event);
    await this.deliverEvent(event);
  }

  /**
   * Delivers an EventBridge event to every matching rule's targets, as EventBridge would:
   * at least once (tests call this again to redeliver), retried on failure.
   */
  deliverEvent(event: Record<string, unknown>): Promise<unknown[]> {
    const deliveries: Promise<unknown>[] = [];
    for (const rule of this.rules) {
      if (!matchesPattern(rule.pattern, event)) continue;
      for (const target of rule.targets) {
        deliveries.push(this.withRetries(() => this.invokeFunction(target.arn, target.input ?? event), 3));
      }
    }
    const all = Promise.allSettled(deliveries).then((results) =>
      results.map((r) => (r.status === 'fulfilled' ? r.value : { error: String((r.reason as Error)?.message) })),
    );
    this.pendingEvents.add(all);
    void all.finally(() => this.pendingEvents.delete(all));
    return all;
  }

  /** Settles when every event delivery in flight has finished. */
  async eventsSettled(): Promise<void> {
    while (this.pendingEvents.size) await Promise.allSettled([...this.pendingEvents]);
  }

  /**
   * Waits until no event delivery is in flight and no execution is running. A run's uploads may
   * start other runs (a training job's checkpoints start evaluations), so it loops until both
   * are quiet at once.
   */
  async idle(): Promise<void> {
    for (;;) {
      await this.eventsSettled();
      const running = [...this.executions.values()].filter((e) => e.record.status === 'RUNNING');
      if (!running.length && !this.pendingEvents.size) return;
      await Promise.allSettled(running.map((e) => e.done));
    }
  }

  private async withRetries<T>(fn: () => Promise<T>, attempts: number): Promise<T> {
    for (let i = 1; ; i++) {
      try {
        return await fn();
      } catch (error) {
        if (i >= attempts) throw error;
        await new Promise((r) => setTimeout(r, 50 * i));
      }
    }
  }

  // ---- the AWS API served on loopback ----

  private async sfnApi(action: string, body: Record<string, unknown>): Promise<unknown> {
    const wrap = (fn: () => void) => {
      try {
        fn();
        return {};
      } catch (error) {
        if (error instanceof CallbackError) throw new ApiError(error.name, error.message);
        throw error;
      }
    };
    switch (action) {
      case 'StartExecution': {
        const arn = String(body.stateMachineArn);
        const machine = [...this.machines.values()].find((m) => m.arn === arn);
        if (!machine) throw new ApiError('StateMachineDoesNotExist', `State Machine Does Not Exist: '${arn}'`);
        let input: unknown;
        try {
          input = JSON.parse(String(body.input ?? '{}'));
        } catch (error) {
          throw new ApiError('InvalidExecutionInput', `Invalid State Machine Execution Input: '${(error as Error).message}'`);
        }
        const name = body.name === undefined ? undefined : String(body.name);
        if (name !== undefined) {
          // As Step Functions: the same name and input as a running execution returns that execution.
          const existing = this.executionRecord(`${arn.replace(':stateMachine:', ':execution:')}:${name}`);
          if (existing?.status === 'RUNNING' && JSON.stringify(existing.input) === JSON.stringify(input)) {
            return { executionArn: existing.executionArn, startDate: Date.parse(existing.startDate) / 1000 };
          }
        }
        const execution = this.startExecution(arn, input, { name });
        return { executionArn: execution.executionArn, startDate: Date.parse(execution.record.startDate) / 1000 };
      }
      case 'DescribeExecution': {
        const record = this.executionRecord(String(body.executionArn));
        if (!record) throw new ApiError('ExecutionDoesNotExist', `Execution Does Not Exist: '${body.executionArn}'`);
        return {
          executionArn: record.executionArn,
          stateMachineArn: record.stateMachineArn,
          name: record.name,
          status: record.status,
          startDate: Date.parse(record.startDate) / 1000,
          ...(record.stopDate ? { stopDate: Date.parse(record.stopDate) / 1000 } : {}),
          input: JSON.stringify(record.input),
          ...(record.output !== undefined ? { output: JSON.stringify(record.output) } : {}),
          ...(record.error ? { error: record.error, cause: record.cause } : {}),
        };
      }
      case 'SendTaskSuccess': {
        let output: unknown;
        try {
          output = JSON.parse(String(body.output));
        } catch (error) {
          throw new ApiError('InvalidOutput', `Invalid task output: '${(error as Error).message}'`);
        }
        return wrap(() => this.callbacks.sendSuccess(String(body.taskToken), output));
      }
      case 'SendTaskFailure':
        return wrap(() => this.callbacks.sendFailure(String(body.taskToken), String(body.error ?? ''), String(body.cause ?? '')));
      case 'SendTaskHeartbeat':
        return wrap(() => this.callbacks.sendHeartbeat(String(body.taskToken)));
      default:
        throw new ApiError('UnknownOperationException', `the local Step Functions API has no ${action}`);
    }
  }

  private async secretsApi(action: string, body: Record<string, unknown>): Promise<unknown> {
    if (action !== 'GetSecretValue') throw new ApiError('UnknownOperationException', `the local Secrets Manager has no ${action}`);
    const id = String(body.SecretId);
    const value = this.secrets.get(id) ?? [...this.secrets.entries()].find(([arn]) => arn.endsWith(`:secret:${id}`))?.[1];
    if (value === undefined) throw new ApiError('ResourceNotFoundException', `Secrets Manager can't find the specified secret: ${id}`);
    return { ARN: id, Name: id.split(':').pop(), SecretString: value, VersionId: 'local', VersionStages: ['AWSCURRENT'] };
  }

  private async sendEmail(body: Record<string, unknown>): Promise<{ MessageId: string }> {
    const file = writeEml(this.outboxDir, body);
    this.emit('email', { file });
    return { MessageId: file.split('/').pop()!.replace(/\.eml$/, '') };
  }

  // ---- executions ----

  private recordFile(executionArn: string): string {
    return join(this.dataDir, 'executions', `${executionArn.split(':').slice(-2).join('__')}.json`);
  }

  private persist(record: ExecutionRecord): void {
    // Write then rename, so `frontier runs` in another process never reads half a record.
    const file = this.recordFile(record.executionArn);
    writeFileSync(`${file}.tmp`, JSON.stringify(record, null, 2));
    renameSync(`${file}.tmp`, file);
  }

  executionRecord(executionArn: string): ExecutionRecord | undefined {
    const live = this.executions.get(executionArn);
    if (live) return live.record;
    const file = this.recordFile(executionArn);
    return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as ExecutionRecord) : undefined;
  }

  execution(executionArn: string): Execution | undefined {
    return this.executions.get(executionArn);
  }

  /** Task tokens waiting for a callback (never shown to users; tests and the CLI count them). */
  pendingCallbacks(executionArn?: string): number {
    return this.callbacks.pending(executionArn).length;
  }

  async stop(): Promise<void> {
    // No new executions; let event deliveries in flight finish; then end what still runs.
    this.stopping = true;
    await this.eventsSettled();
    for (const execution of this.executions.values()) {
      if (execution.record.status === 'RUNNING') execution.abort();
    }
    await Promise.allSettled([...this.executions.values()].map((e) => e.done));
    for (const close of this.closers.reverse()) {
      try {
        await close();
      } catch {
        /* closing is best effort */
      }
    }
    this.closers.length = 0;
  }
}

/** Every execution record under a data directory, newest first (the CLI's `runs`). */
export function listExecutionRecords(dataDir = join(REPO_ROOT, '.local')): ExecutionRecord[] {
  const dir = join(dataDir, 'executions');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as ExecutionRecord)
    .sort((a, b) => (a.startDate < b.startDate ? 1 : -1));
}

const synthesized = new Map<readonly PipelineEntry[] | undefined, { stacks: SynthStack[]; codeVersions: CodeVersion[] }>();

/**
 * Synthesizes the app in-process, bundling skipped (handlers run from source). Once per
 * process: a runtime restarted in the same process (tests, the CLI) reuses the templates.
 */
export function synthesize(pipelines?: readonly PipelineEntry[]): { stacks: SynthStack[]; codeVersions: CodeVersion[] } {
  let result = synthesized.get(pipelines);
  if (!result) {
    result = synthesizeNow(pipelines);
    synthesized.set(pipelines, result);
  }
  return result;
}

function synthesizeNow(pipelines: readonly PipelineEntry[] | undefined): { stacks: SynthStack[]; codeVersions: CodeVersion[] } {
  const outdir = mkdtempSync(join(tmpdir(), 'frontier-synth-'));
  try {
    const { app } = buildApp({
      outdir,
      skipBundling: true,
      nag: false,
      fastSynth: true,
      env: { account: LOCAL_ACCOUNT, region: LOCAL_REGION },
      pipelines,
    });
    const assembly = app.synth();
    const codeVersions = app.node
      .findAll()
      .filter((c): c is PipelineFunction | BatchJob => c instanceof PipelineFunction || c instanceof BatchJob)
      .map((c) => c.codeVersion);
    return { stacks: assembly.stacks.map((s) => ({ stackName: s.stackName, template: s.template })), codeVersions };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

/**
 * Keeps the components of every code version synthesized here, so `cache explain` can name
 * the files that changed between the version a cache entry was made with and today's.
 */
function saveCodeVersions(dataDir: string, versions: CodeVersion[]): void {
  const dir = join(dataDir, 'code-versions');
  mkdirSync(dir, { recursive: true });
  for (const v of versions) {
    const file = join(dir, `${v.hash}.json`);
    if (!existsSync(file)) writeFileSync(file, JSON.stringify(v.components, null, 1));
  }
}

function retryOverrides(tasks: TaskRef[], ms: number): Record<string, number> {
  return Object.fromEntries(tasks.map((t) => [t.name, ms]));
}
