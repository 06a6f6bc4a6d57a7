/**
 * The embedded runtime: the synthesized state machines, run on one machine.
 *
 * It synthesizes the CDK app in-process, takes each pipeline's ASL from the template (tokens
 * resolved to local names), and runs it with aws-local-stepfunctions. Lambda tasks run the
 * same handler modules in worker threads with the template's environment; Batch tasks run the
 * job's entrypoint as a child process; direct DynamoDB and S3 states go through the real SDK to
 * dynalite and s3rver; task tokens, heartbeats and timeouts are kept by a callback layer; S3
 * object events are matched against the synthesized EventBridge rules (a failed delivery goes to
 * the target's dead-letter queue, queues.ts); email goes to the outbox as .eml files; the approval
 * API is served on loopback by the same handler as on AWS. The stacks' outputs, resolved, are in
 * `<dataDir>/outputs.json`, as CloudFormation lists a deployed stack's.
 *
 * This class boots the emulators and hosts and wires the parts together; each part has its
 * own module: synthesis.ts (synthesis, template loading), executions.ts (one execution),
 * task-dispatch.ts (which handler runs a Task), distributed-map.ts, s3-events.ts, sfn-api.ts
 * (the Step Functions API on loopback) and execution-records.ts (records on disk).
 */
import './polyfill.ts';
import { EventEmitter } from 'node:events';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { UnknownPipelineError } from '#shared/errors.ts';
import { resetClients } from '#shared/clients/aws.ts';
import type { PipelineEntry } from '../registry.ts';
import { ApiError, secretsManagerApi, sesSendEmail, startAwsApi } from './aws-api.ts';
import { BatchHost } from './batch-host.ts';
import { CallbackRegistry } from './callbacks.ts';
import { lockDataDir, publishLiveRuntime, startDynalite, startS3rver } from './emulators.ts';
import { newLocalCredentials } from './sigv4.ts';
import { ExecutionRecordStore, type ExecutionRecord } from './execution-records.ts';
import { launchExecution, type Execution, type ExecutionDeps } from './executions.ts';
import { startHttpApi } from './http-api.ts';
import { LambdaHost, TaskError, type LocalFunction } from './lambda-host.ts';
import { baseEnvironment, claudeEnvironment, localClients, localEndpoints } from './local-env.ts';
import { provision } from './provision.ts';
import { LocalQueues, loadQueues } from './queues.ts';
import { LOCAL_REGION, LOCAL_SQS_URL, TemplateResolver } from './resolve.ts';
import type { EmitRuntimeEvent } from './runtime-events.ts';
import { S3EventDelivery } from './s3-events.ts';
import { sfnApi } from './sfn-api.ts';
import { cachedStepsOf, loadFunctions, loadJobDefinitions, loadMachines, loadRules, saveCodeVersions, synthesize, type LocalMachine } from './synthesis.ts';

export { PAYLOAD_LIMIT_BYTES } from './run-scope.ts';
export { listExecutionRecords, type ExecutionRecord, type ExecutionStatus } from './execution-records.ts';
export type { Execution } from './executions.ts';
export type { RuntimeEvents } from './runtime-events.ts';
export { synthesize } from './synthesis.ts';

/** Where a running runtime keeps its stacks' resolved outputs, for the CLI's commands that run beside it. */
export const OUTPUTS_FILE = 'outputs.json';

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
  /** CDK context over cdk.json's, as `cdk deploy -c key=value` gives it (e.g. `{ approvalSignIn: false }`). Default: none. */
  readonly context?: Record<string, unknown>;
}

export interface LocalResources {
  tables: string[];
  buckets: string[];
}

export class LocalRuntime extends EventEmitter {
  readonly dataDir: string;
  readonly outboxDir: string;
  private machines = new Map<string, LocalMachine>();
  private functions = new Map<string, LocalFunction>();
  private readonly secrets = new Map<string, string>();
  private readonly executions = new Map<string, Execution>();
  private readonly records: ExecutionRecordStore;
  private readonly callbacks = new CallbackRegistry();
  private readonly closers: (() => Promise<void> | void)[] = [];
  private stopping = false;
  private lambda!: LambdaHost;
  private batch!: BatchHost;
  /** What running an execution needs; set once boot has loaded the machines. */
  private executionDeps!: ExecutionDeps;
  /** S3 events through the EventBridge rules; set once boot has loaded the rules. */
  private s3Events: S3EventDelivery | undefined;
  /** The app's SQS queues; set once boot has loaded the templates. */
  private queues: LocalQueues | undefined;
  /** Each stack's outputs, resolved, by stack name. */
  private outputs: Record<string, Record<string, string>> = {};
  private readonly emitEvent: EmitRuntimeEvent = (name, payload) => void this.emit(name, payload);
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
    this.records = new ExecutionRecordStore(this.dataDir);
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
    // A runtime that ended without stopping left its outputs behind: never read them as this one's.
    rmSync(join(this.dataDir, OUTPUTS_FILE), { force: true });
    for (const sub of ['executions', 'outbox', 'jobs']) mkdirSync(join(this.dataDir, sub), { recursive: true });
    const base = this.options.portBase ?? 0;
    const port = (offset: number) => (base ? base + offset : 0);

    // This start's credentials: every loopback service takes only requests signed with them.
    const credentials = newLocalCredentials();
    const dynamo = await startDynalite(join(this.dataDir, 'dynamodb'), port(0), credentials);
    this.closers.push(() => dynamo.close());
    const s3 = await startS3rver(join(this.dataDir, 's3'), port(1), credentials);
    this.closers.push(() => s3.close());
    const aws = await startAwsApi(port(2), credentials, {
      sfn: sfnApi({
        callbacks: this.callbacks,
        hasStateMachine: (arn) => [...this.machines.values()].some((m) => m.arn === arn),
        executionRecord: (executionArn) => this.executionRecord(executionArn),
        startExecution: (arn, input, options) => this.startExecution(arn, input, options),
      }),
      secrets: secretsManagerApi(this.secrets),
      sendEmail: sesSendEmail(this.outboxDir, (file) => this.emitEvent('email', { file })),
      sqs: async (action, body) => {
        if (!this.queues) throw new ApiError('ServiceUnavailable', 'the local runtime is still starting', 503);
        return this.queues.handle(action, body);
      },
      invoke: (functionName, event) => this.invokeFunction(functionName, event),
    });
    this.closers.push(() => aws.close());
    this.endpoints = localEndpoints({ dynamodb: dynamo.url, s3: s3.url, awsApi: aws.url });
    const baseEnv = baseEnvironment(this.endpoints, credentials);
    // The CLI's read commands (approvals, artifacts) reach this runtime while it runs.
    this.closers.push(publishLiveRuntime(this.dataDir, { endpoints: this.endpoints, credentials }));
    // This process (the CLI, a test) reaches the emulators through the same variables.
    Object.assign(process.env, baseEnv, { PATH: process.env.PATH });
    resetClients();
    const clients = localClients({ dynamodb: dynamo.url, s3: s3.url }, credentials);
    this.lambda = new LambdaHost({ ...baseEnv, ...claudeEnvironment() });
    this.closers.push(() => this.lambda.stop());
    this.batch = new BatchHost(join(this.dataDir, 'jobs'), baseEnv, this.options.jobConcurrency, (jobName, progress) =>
      this.emitEvent('jobProgress', { jobName, progress }),
    );
    this.closers.push(() => this.batch.stop());

    const t1 = performance.now();
    const { stacks, codeVersions } = synthesize(this.options.pipelines, this.options.context);
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
    resolver.rewrite(LOCAL_SQS_URL, `${aws.url}/`);
    this.queues = new LocalQueues(join(this.dataDir, 'queues'), loadQueues(resolver));
    this.outputs = resolveOutputs(stacks, resolver);
    // Only while this runtime runs: the values (loopback ports) are this start's.
    writeFileSync(join(this.dataDir, OUTPUTS_FILE), JSON.stringify(this.outputs, null, 2));
    this.closers.push(() => rmSync(join(this.dataDir, OUTPUTS_FILE), { force: true }));

    const provisioned = await provision(resolver, clients, this.dataDir);
    this.resources.tables.push(...provisioned.tables);
    this.resources.buckets.push(...provisioned.eventBridgeBuckets);
    for (const [arn, value] of provisioned.secrets) this.secrets.set(arn, value);
    writeFileSync(join(this.dataDir, 'resources.json'), JSON.stringify(this.resources, null, 2));
    const invokeFunction = (nameOrArn: string, event: unknown) => this.invokeFunction(nameOrArn, event);
    this.functions = loadFunctions(resolver);
    const jobDefinitions = loadJobDefinitions(resolver);
    const s3Events = new S3EventDelivery({
      s3: clients.s3,
      rules: loadRules(resolver),
      eventBridgeBuckets: new Set(provisioned.eventBridgeBuckets),
      versionedBuckets: new Set(provisioned.versionedBuckets),
      emit: this.emitEvent,
      invokeFunction,
      deadLetter: (queueArn, body, attributes) => void this.queues!.sendByArn(queueArn, body, attributes),
    });
    this.s3Events = s3Events;
    this.machines = loadMachines(resolver, this.functions);
    this.executionDeps = {
      functions: this.functions,
      jobDefinitions,
      batch: this.batch,
      callbacks: this.callbacks,
      clients,
      emit: this.emitEvent,
      invokeFunction,
      records: this.records,
      live: this.executions,
      retryDelayMs: this.options.retryDelayMs,
    };
    s3.onEvent((event) => s3Events.onS3Event(event));
    this.timings.emulatorsMs = t1 - t0;
    this.timings.synthMs = t2 - t1;
    this.timings.prepareMs = performance.now() - t2;
  }

  /** Starts an execution of a pipeline (by name or state machine ARN). */
  startExecution(pipelineOrArn: string, input: unknown, options: { name?: string } = {}): Execution {
    if (this.stopping) throw new ApiError('ServiceUnavailable', 'the local runtime is stopping', 503);
    const machine = this.machines.get(pipelineOrArn) ?? [...this.machines.values()].find((m) => m.arn === pipelineOrArn);
    if (!machine) throw new UnknownPipelineError(pipelineOrArn, this.pipelines());
    return launchExecution(this.executionDeps, machine, input, options.name);
  }

  /** Invokes a function by name or ARN, as Lambda would. */
  invokeFunction(nameOrArn: string, event: unknown): Promise<unknown> {
    const fn = this.functions.get(nameOrArn);
    if (!fn) return Promise.reject(new TaskError('Lambda.ResourceNotFoundException', `Function not found: ${nameOrArn}`));
    return this.lambda.invoke(fn, event);
  }

  /** A stack's outputs, resolved to local values (a queue's URL on the loopback API, a function's local name). */
  stackOutputs(stackName: string): Record<string, string> {
    return this.outputs[stackName] ?? {};
  }

  /** The cached steps of a pipeline and the code version each is keyed with today. */
  cachedSteps(pipeline: string): { step: string; codeVersion: string }[] {
    const machine = this.machines.get(pipeline);
    if (!machine) throw new UnknownPipelineError(pipeline, this.pipelines());
    return cachedStepsOf(machine.asl);
  }

  /** Lambda invocations and Batch jobs since the runtime started. */
  counters(): { lambdaInvocations: number; batchJobs: number } {
    return { lambdaInvocations: this.lambda.invocations, batchJobs: this.batch.jobsRun };
  }

  /**
   * Delivers an EventBridge event to every matching rule's targets, as EventBridge would:
   * at least once (tests call this again to redeliver), retried on failure.
   */
  deliverEvent(event: Record<string, unknown>): Promise<unknown[]> {
    return this.s3Events?.deliver(event) ?? Promise.resolve([]);
  }

  /** Settles when every event delivery in flight has finished. */
  async eventsSettled(): Promise<void> {
    await this.s3Events?.settled();
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
      if (!running.length && !this.s3Events?.busy) return;
      await Promise.allSettled(running.map((e) => e.done));
    }
  }

  // ---- executions ----

  executionRecord(executionArn: string): ExecutionRecord | undefined {
    return this.executions.get(executionArn)?.record ?? this.records.read(executionArn);
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

/** Each stack's outputs, resolved; an output the runtime cannot resolve is left out. */
function resolveOutputs(stacks: readonly { stackName: string; template: { Outputs?: Record<string, { Value: unknown }> } }[], resolver: TemplateResolver) {
  const outputs: Record<string, Record<string, string>> = {};
  for (const { stackName, template } of stacks) {
    const resolved: Record<string, string> = {};
    for (const [key, output] of Object.entries(template.Outputs ?? {})) {
      try {
        resolved[key] = String(resolver.resolve(stackName, output.Value));
      } catch {
        // An import no local stack exports: not needed to run anything here.
      }
    }
    outputs[stackName] = resolved;
  }
  return outputs;
}
