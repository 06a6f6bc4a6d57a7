/**
 * What a run on AWS used, read back from AWS: the execution's history (and its Distributed Map
 * children's) and the Batch job descriptions, in the shape the local counters have
 * (usage.ts), so `runs show --target aws` and the run's cost line (run-report.ts) price both the
 * same way.
 *
 * - State transitions: every `*StateEntered` event.
 * - Lambda: each invocation, through the optimized integration (`TaskScheduled` with resource type
 *   `lambda`; behind a task token, the invoke ends at `TaskSubmitted`, and the wait after it is
 *   not Lambda time) or a function ARN as the resource (`LambdaFunctionScheduled`). The history has no
 *   billed duration: the time from the task's start to its end is used, rounded up to the
 *   millisecond, an upper bound of what Lambda bills (it includes the integration's own latency).
 *   The memory size is the function's configuration now. Claude tokens: the response's
 *   `claudeUsage` (CLAUDE_USAGE_FIELD).
 * - Batch: every job the history submitted (`TaskSubmitted` output's JobId), described by Batch:
 *   each attempt's seconds from its start to its stop, the platform and the resources the job
 *   ran with; the instance type of an EC2 job from the job definition of the synthesized app
 *   whose logical id starts its name (CloudFormation names a definition `<logical id>-<suffix>`).
 *   Batch keeps a job's description for at least 7 days after it ends: older jobs are listed as
 *   not found.
 * - By step (a state's name before ': '), as the local counters keep them: each step's share of
 *   the above, the cache entries it stored (`<step>: Cache store` entered) and its cache hits
 *   (`<step>: Restore` entered: the entry's computing execution is in its input, at
 *   _step.lookup.Item.executionId; the run cache's `run: Restore`, at _run.hit.executionId), so `awsCacheSaving` prices what the hits saved from the
 *   histories of the runs that computed them.
 */
import pMap from 'p-map';
import { cacheHitOf } from '../run-cache.ts';
import { type BatchClient, DescribeJobsCommand, type JobDetail } from '@aws-sdk/client-batch';
import { GetFunctionConfigurationCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import { GetExecutionHistoryCommand, type HistoryEvent, ListExecutionsCommand, type SFNClient } from '@aws-sdk/client-sfn';
import {
  addClaude,
  addUsage,
  type BatchJobUsage,
  type CacheSaving,
  cacheSaving,
  claudeUsageOf,
  EMPTY_USAGE,
  emptyStepUsage,
  type RunUsage,
  type StepUsage,
  stepOfState,
  usageOfStep,
} from './usage.ts';

export interface AwsUsageClients {
  readonly sfn: SFNClient;
  readonly batch: BatchClient;
  readonly lambda: LambdaClient;
}

/** A cache hit: the step, and the execution that computed the entry. */
export interface CacheHit {
  readonly step: string;
  readonly executionArn: string;
}

export interface AwsRunUsage {
  readonly usage: RunUsage;
  /** The same figures by step, children included. */
  readonly steps: Readonly<Record<string, StepUsage>>;
  readonly cacheHits: readonly CacheHit[];
  /** Steps whose figures miss a Batch job Batch no longer describes: their cost is not known. */
  readonly incompleteSteps: readonly string[];
  /** Distributed Map child executions read. */
  readonly children: number;
  /** What could not be read or priced, one line each. */
  readonly notes: readonly string[];
}

/** What the synthesized app says of a job definition by its logical id (the instance type an EC2 job is sized for). */
export type JobDefinitionLookup = (definitionName: string) => { readonly name: string; readonly instanceType?: string } | undefined;

/**
 * The lookup over an app's job definitions, each by its logical id: CloudFormation names a
 * definition `<logical id>-<suffix>`.
 */
export function jobDefinitionLookup(definitions: readonly { readonly name: string; readonly instanceType?: string }[]): JobDefinitionLookup {
  return (name) => {
    const def = definitions.find((d) => name === d.name || name.startsWith(`${d.name}-`));
    return def ? { name: def.name, ...(def.instanceType ? { instanceType: def.instanceType } : {}) } : undefined;
  };
}

const DESCRIBE_JOBS_AT_ONCE = 100;
/** Child executions read at once (GetExecutionHistory is rate-limited per account). */
const CHILDREN_AT_ONCE = 8;

/** The usage of one execution and its Distributed Map children. */
export async function awsRunUsage(
  executionArn: string,
  clients: AwsUsageClients,
  lookup: JobDefinitionLookup,
  /** Functions' memory sizes already read (shared across the runs a saving reads). */
  memory = new Map<string, number | undefined>(),
): Promise<AwsRunUsage> {
  const notes: string[] = [];
  const steps: Record<string, StepUsage> = {};
  const cacheHits: CacheHit[] = [];
  const incompleteSteps = new Set<string>();
  let children = 0;
  const read = async (arn: string) => usageOfHistory(await historyOf(clients.sfn, arn), clients, lookup, memory, notes);
  const add = (r: Awaited<ReturnType<typeof read>>) => {
    for (const [name, step] of Object.entries(r.steps)) steps[name] = addStepUsage(steps[name], step);
    cacheHits.push(...r.cacheHits);
    for (const step of r.incompleteSteps) incompleteSteps.add(step);
  };
  const parent = await read(executionArn);
  add(parent);
  // A Distributed Map's children (thousands, for the refinery's shards), read a few at a time: a
  // child that cannot be read (throttled past the SDK's retries) is a note, not the end of it.
  let pending = parent.mapRuns;
  while (pending.length) {
    const childArns = (await pMap(pending, (mapRunArn) => childExecutions(clients.sfn, mapRunArn), { concurrency: CHILDREN_AT_ONCE })).flat();
    const results = await pMap(
      childArns,
      (arn) =>
        read(arn).catch((error: Error) => {
          notes.push(`child execution ${arn}: not read (${error.name}: ${error.message}); not priced`);
          return undefined;
        }),
      { concurrency: CHILDREN_AT_ONCE },
    );
    children += childArns.length;
    pending = [];
    for (const r of results) {
      if (!r) continue;
      add(r);
      pending.push(...r.mapRuns);
    }
  }
  // The run's figures are its steps' (every state, invocation, job and token belongs to one).
  const usage = Object.values(steps).reduce((sum, step) => addUsage(sum, usageOfStep(step)), EMPTY_USAGE);
  return { usage, steps, cacheHits, incompleteSteps: [...incompleteSteps], children, notes };
}

function addStepUsage(a: StepUsage | undefined, b: StepUsage): StepUsage {
  if (!a) return b;
  return {
    transitions: a.transitions + b.transitions,
    lambdaInvocations: a.lambdaInvocations + b.lambdaInvocations,
    lambdaBilledMs: a.lambdaBilledMs + b.lambdaBilledMs,
    lambdaGbSeconds: a.lambdaGbSeconds + b.lambdaGbSeconds,
    batch: [...a.batch, ...b.batch],
    stores: a.stores + b.stores,
    claude: addClaude(a.claude ?? [], b.claude ?? []),
  };
}

/**
 * What a run's cache hits saved (shared/cost/usage.ts cacheSaving), each hit priced from the
 * history of the run that computed its entry, read once per run. A run that cannot be read (its
 * history is gone: Step Functions keeps a standard execution's for 90 days) is a note, and its
 * hits are not priced.
 */
export async function awsCacheSaving(
  hits: readonly CacheHit[],
  clients: AwsUsageClients,
  lookup: JobDefinitionLookup,
): Promise<{ saving: CacheSaving; notes: string[] }> {
  const notes: string[] = [];
  const computing = [...new Set(hits.map((h) => h.executionArn))];
  const memory = new Map<string, number | undefined>();
  const read = await pMap(
    computing,
    (arn) =>
      awsRunUsage(arn, clients, lookup, memory).then(
        (r) => {
          // A step missing a job Batch has forgotten (7 days) is not priced: its saving is not known.
          for (const note of r.notes) notes.push(`cache hits on entries of ${arn}: ${note}`);
          const known = Object.fromEntries(Object.entries(r.steps).filter(([step]) => !r.incompleteSteps.includes(step)));
          return [arn, known] as const;
        },
        (error: Error) => {
          notes.push(`cache hits on entries of ${arn}: that run could not be read (${error.name}: ${error.message}); not priced`);
          return [arn, undefined] as const;
        },
      ),
    { concurrency: CHILDREN_AT_ONCE },
  );
  const byArn = new Map(read);
  return { saving: cacheSaving(hits, (arn) => byArn.get(arn)), notes };
}

async function historyOf(sfn: SFNClient, executionArn: string): Promise<HistoryEvent[]> {
  const events: HistoryEvent[] = [];
  let nextToken: string | undefined;
  do {
    const page = await sfn.send(new GetExecutionHistoryCommand({ executionArn, nextToken, maxResults: 1000, includeExecutionData: true }));
    events.push(...(page.events ?? []));
    nextToken = page.nextToken;
  } while (nextToken);
  return events;
}

async function childExecutions(sfn: SFNClient, mapRunArn: string): Promise<string[]> {
  const arns: string[] = [];
  let nextToken: string | undefined;
  do {
    const page = await sfn.send(new ListExecutionsCommand({ mapRunArn, nextToken, maxResults: 1000 }));
    arns.push(...(page.executions ?? []).map((e) => e.executionArn!).filter(Boolean));
    nextToken = page.nextToken;
  } while (nextToken);
  return arns;
}

const parse = (text: string | undefined): unknown => {
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

async function usageOfHistory(
  events: readonly HistoryEvent[],
  clients: AwsUsageClients,
  lookup: JobDefinitionLookup,
  memory: Map<string, number | undefined>,
  notes: string[],
): Promise<{ steps: Record<string, StepUsage>; cacheHits: CacheHit[]; incompleteSteps: string[]; mapRuns: string[] }> {
  const byId = new Map(events.map((e) => [e.id!, e]));
  /**
   * The state an event belongs to: the `*StateEntered` event its chain starts from (a retried
   * task's attempts chain through the ones before, 3 events each, so no fixed number of hops).
   */
  const stateOf = (e: HistoryEvent): string => {
    let at: HistoryEvent | undefined = e;
    for (let hops = 0; at && hops <= events.length; hops++) {
      if (at.type?.endsWith('StateEntered')) return at.stateEnteredEventDetails?.name ?? '';
      at = byId.get(at.previousEventId ?? -1);
    }
    return '';
  };
  const steps: Record<string, StepUsage> = {};
  const stepOf = (state: string): StepUsage => {
    const name = stepOfState(state);
    steps[name] ??= emptyStepUsage();
    return steps[name];
  };
  const cacheHits: CacheHit[] = [];
  /** The event a task's events chain back to: its TaskScheduled or LambdaFunctionScheduled. */
  const scheduledOf = (e: HistoryEvent): HistoryEvent | undefined => {
    let at: HistoryEvent | undefined = e;
    for (let hops = 0; at && hops < 4; hops++) {
      if (at.type === 'TaskScheduled' || at.type === 'LambdaFunctionScheduled') return at;
      at = byId.get(at.previousEventId ?? -1);
    }
    return undefined;
  };
  const lambdaRuns: { fn: string; ms: number; state: string }[] = [];
  /** Each submitted Batch job's state, in the order submitted. */
  const jobStates = new Map<string, string>();
  const incompleteSteps = new Set<string>();
  const mapRuns: string[] = [];
  const started = new Map<number, number>();
  /** Scheduled events whose invocation is counted (a token task's is, at its TaskSubmitted). */
  const counted = new Set<number>();
  for (const e of events) {
    if (e.type?.endsWith('StateEntered')) {
      const name = e.stateEnteredEventDetails?.name ?? '';
      const step = stepOf(name);
      step.transitions += 1;
      if (name.endsWith(': Cache store')) step.stores += 1;
      if (name.endsWith(': Restore')) {
        const hit = cacheHitOf(name, parse(e.stateEnteredEventDetails?.input));
        if (hit) cacheHits.push(hit);
      }
    }
    if (e.type === 'MapRunStarted' && e.mapRunStartedEventDetails?.mapRunArn) mapRuns.push(e.mapRunStartedEventDetails.mapRunArn);
    if (e.type === 'TaskStarted' || e.type === 'LambdaFunctionStarted') {
      const scheduled = scheduledOf(e);
      if (scheduled?.id !== undefined && e.timestamp) started.set(scheduled.id, e.timestamp.getTime());
    }
    if (e.type === 'TaskSubmitted' && e.taskSubmittedEventDetails?.resourceType === 'batch') {
      const jobId = (parse(e.taskSubmittedEventDetails.output) as { JobId?: string } | undefined)?.JobId;
      if (jobId) jobStates.set(jobId, stateOf(e));
    }
    // A Lambda's invocation ends with its task, except behind a task token: there the invoke ends
    // when the task is submitted (TaskSubmitted holds its response), and the wait that follows
    // (an approver's decision) is not Lambda time.
    const ended = ['TaskSucceeded', 'TaskFailed', 'TaskTimedOut', 'LambdaFunctionSucceeded', 'LambdaFunctionFailed', 'LambdaFunctionTimedOut'];
    const tokenInvoke = e.type === 'TaskSubmitted' && e.taskSubmittedEventDetails?.resourceType === 'lambda';
    if (!tokenInvoke && !ended.includes(e.type ?? '')) continue;
    const scheduled = scheduledOf(e);
    if (!scheduled || counted.has(scheduled.id!)) continue;
    const fn =
      scheduled.type === 'LambdaFunctionScheduled'
        ? scheduled.lambdaFunctionScheduledEventDetails?.resource
        : scheduled.taskScheduledEventDetails?.resourceType === 'lambda'
          ? (parse(scheduled.taskScheduledEventDetails.parameters) as { FunctionName?: string } | undefined)?.FunctionName
          : undefined;
    if (!fn) continue;
    counted.add(scheduled.id!);
    const from = started.get(scheduled.id!);
    const ms = from !== undefined && e.timestamp ? Math.max(1, Math.ceil(e.timestamp.getTime() - from)) : 1;
    const state = stateOf(scheduled);
    lambdaRuns.push({ fn, ms, state });
    const output = tokenInvoke
      ? (parse(e.taskSubmittedEventDetails?.output) as { Payload?: unknown } | undefined)?.Payload
      : e.type === 'TaskSucceeded'
        ? (parse(e.taskSucceededEventDetails?.output) as { Payload?: unknown } | undefined)?.Payload
        : e.type === 'LambdaFunctionSucceeded'
          ? parse(e.lambdaFunctionSucceededEventDetails?.output)
          : undefined;
    const used = claudeUsageOf(output);
    if (used.length) {
      const step = stepOf(state);
      step.claude = addClaude(step.claude ?? [], used);
    }
  }
  for (const run of lambdaRuns) {
    if (!memory.has(run.fn)) {
      const config = await clients.lambda.send(new GetFunctionConfigurationCommand({ FunctionName: run.fn })).catch((error: Error) => {
        notes.push(`Lambda ${run.fn}: its memory size could not be read (${error.name}); priced at 128 MB`);
        return undefined;
      });
      memory.set(run.fn, config?.MemorySize);
    }
    const step = stepOf(run.state);
    step.lambdaInvocations += 1;
    step.lambdaBilledMs += run.ms;
    step.lambdaGbSeconds += (run.ms / 1000) * ((memory.get(run.fn) ?? 128) / 1024);
  }
  const jobIds = [...jobStates.keys()];
  for (let i = 0; i < jobIds.length; i += DESCRIBE_JOBS_AT_ONCE) {
    const ids = jobIds.slice(i, i + DESCRIBE_JOBS_AT_ONCE);
    const described = (await clients.batch.send(new DescribeJobsCommand({ jobs: ids }))).jobs ?? [];
    for (const id of ids.filter((id) => !described.some((j) => j.jobId === id))) {
      notes.push(`Batch job ${id}: not found (Batch keeps a job's description for 7 days after it ends); not priced`);
      incompleteSteps.add(stepOfState(jobStates.get(id) ?? ''));
    }
    for (const job of described) stepOf(jobStates.get(job.jobId ?? '') ?? '').batch.push(jobUsage(job, lookup, notes));
  }
  return {
    steps,
    cacheHits,
    incompleteSteps: [...incompleteSteps],
    mapRuns,
  };
}

/** One described job: its attempts' seconds and what it ran with. */
export function jobUsage(job: JobDetail, lookup: JobDefinitionLookup, notes: string[]): BatchJobUsage {
  const attempts = job.attempts ?? [];
  let ms = attempts.reduce((n, a) => n + (a.startedAt && a.stoppedAt ? Math.max(0, a.stoppedAt - a.startedAt) : 0), 0);
  if (!attempts.length && job.startedAt && job.stoppedAt) ms = Math.max(0, job.stoppedAt - job.startedAt);
  const requirement = (type: string) => Number(job.container?.resourceRequirements?.find((r) => r.type === type)?.value ?? 0);
  const platform = job.platformCapabilities?.includes('FARGATE') ? 'FARGATE' : 'EC2';
  const definitionName = (job.jobDefinition ?? '').replace(/^.*:job-definition\//, '').replace(/:\d+$/, '');
  const known = lookup(definitionName);
  if (platform === 'EC2' && !known?.instanceType)
    notes.push(`Batch job ${job.jobId} (${definitionName}): its instance type is not known from the synthesized app; not priced`);
  return {
    job: known?.name ?? definitionName,
    platform,
    ...(known?.instanceType ? { instanceType: known.instanceType } : {}),
    vcpus: requirement('VCPU') || (job.container?.vcpus ?? 0),
    memoryMiB: requirement('MEMORY') || (job.container?.memory ?? 0),
    gpus: requirement('GPU'),
    seconds: ms / 1000,
  };
}
