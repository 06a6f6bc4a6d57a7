/**
 * `frontier run PIPELINE --plan`: a run's plan from its config, nothing run. The pipeline's state
 * machine is synthesized as for a local run, its definition walked along the path the pipeline's
 * plan model chooses (pipelines/steps/plan.ts), and what the walk counts is priced with the dated
 * table: state transitions, Lambda requests (each its least billed millisecond at its memory size,
 * the low end, or its timeout, the high end), Batch jobs (a minute each, the low end, or every
 * attempt at its timeout), Claude's calls (RunPlan.cost says which ends hold what). It also bounds
 * the largest state, and refuses a run past a hard limit, naming the field that drives it.
 */
import { evalsPlanModel } from '#pipelines/evals/plan.ts';
import { EVALS_PIPELINE } from '#pipelines/evals/stack.ts';
import { humanoidPlanModel } from '#pipelines/humanoid/plan.ts';
import { HUMANOID_PIPELINE } from '#pipelines/humanoid/stack.ts';
import { lmSftPlanModel } from '#pipelines/lm-sft/plan.ts';
import { LM_SFT_PIPELINE } from '#pipelines/lm-sft/stack.ts';
import { probePlanModel } from '#pipelines/probe/plan.ts';
import { PROBE_PIPELINE } from '#pipelines/probe/stack.ts';
import { saePlanModel } from '#pipelines/sae/plan.ts';
import { SAE_PIPELINE } from '#pipelines/sae/stack.ts';
import { selfPlayPlanModel } from '#pipelines/selfplay/plan.ts';
import { SELFPLAY_PIPELINE } from '#pipelines/selfplay/stack.ts';
import { videoPlanModel } from '#pipelines/video/plan.ts';
import { VIDEO_PIPELINE } from '#pipelines/video/stack.ts';
import { moleculesPlanModel } from '#pipelines/molecules/plan.ts';
import { MOLECULES_PIPELINE } from '#pipelines/molecules/stack.ts';
import type { RefineryConfig } from '#pipelines/refinery/config.ts';
import { refineryMaxShards, refineryPlanModel } from '#pipelines/refinery/plan.ts';
import { REFINERY_PIPELINE } from '#pipelines/refinery/stack.ts';
import { rewardsPlanModel } from '#pipelines/rewards/plan.ts';
import { REWARDS_PIPELINE } from '#pipelines/rewards/stack.ts';
import { MAX_SOURCES } from '#pipelines/video/config.ts';
import { MAX_SUITE_BENCHMARKS } from '#shared/evals/prepare.ts';
import { HISTORY_EVENT_BUDGET, HISTORY_EVENT_LIMIT } from '#pipelines/steps/history.ts';
import { type PayloadPart, type PlanClaude, type PlanCounts, type PlanModel, planCounts } from '#pipelines/steps/plan.ts';
import { MAX_JOB_RESULT_BYTES } from '#pipelines/steps/step.ts';
import { PIPELINE_META } from '#pipelines/steps/pipeline.ts';
import { costOf, formatUsd, type RunCost, type RunUsage } from '#shared/cost/usage.ts';
import { ConfigError } from '#shared/errors.ts';
import type { AslGraph } from '#pipelines/steps/history.ts';
import { TemplateResolver } from '../local/resolve.ts';
import { PAYLOAD_LIMIT_BYTES } from '../local/run-scope.ts';
import { loadFunctions, loadJobDefinitions, synthesize } from '../local/synthesis.ts';
import type { PipelineEntry } from '../registry.ts';
import { table, type Io } from './output.ts';
import type { MeasuredFigures } from './plan-measured.ts';

/** The job definitions of a pipeline's synthesized app, by their ARN there. */
export function jobDefinitionsOf(entry: PipelineEntry) {
  return synthesizedOf(entry).definitions;
}

/** The pipelines that have a plan model, and how to make it from a parsed config. */
/** What a plan may be told beyond the config. */
export interface PlanOptions {
  /** The run is one an upload starts (the trigger's defaults first). */
  readonly startedByUpload?: boolean;
  /** evals with benchmarks: null: how many benchmarks are registered. */
  readonly registeredBenchmarks?: number;
  /** video: whether an Anthropic key will be there (captioner auto). Default: whether ANTHROPIC_API_KEY is set here. */
  readonly claudeKey?: boolean;
  /** video with a list of sources: how many it lists. */
  readonly listedSources?: number;
  /** refinery: the ingested corpus's shards. */
  readonly shards?: number;
  /** molecules: the round whose batch is rejected (or times out), ending the loop. */
  readonly rejectAt?: number;
  /** rewards: Claude's usable candidates a generation. */
  readonly candidatesUsed?: number;
  /** Every fan-out item failing at the last Task on its path, and tolerated: the data's worst case for the counts. */
  readonly everyItemFails?: boolean;
  /** A rerun that finds the run cache's entry for its config (a stack that caches runs; shared/run-cache.ts). */
  readonly runCacheHit?: boolean;
}

/** The run cache's Choice: a stack that caches runs has it after its config check. */
const RUN_CACHED = 'run: Cached?';

/** Whether the pipeline caches whole runs (PipelineStack.cacheRuns): its definition has the run cache's Choice. */
export function cachesRuns(entry: PipelineEntry): boolean {
  return RUN_CACHED in synthesizedOf(entry).definition.States;
}

/** The model with the run cache's Choice taking the hit: the config check, then the stored output. */
function hittingRunCache(model: PlanModel): PlanModel {
  return {
    ...model,
    decide: (name, state, at) => (name === RUN_CACHED ? state.Choices![0]!.Next : model.decide(name, state, at)),
  };
}

const MODELS: Readonly<Record<string, (config: never, options: PlanOptions) => PlanModel>> = {
  [PROBE_PIPELINE]: probePlanModel as (config: never, options: PlanOptions) => PlanModel,
  [SELFPLAY_PIPELINE]: selfPlayPlanModel as (config: never, options: PlanOptions) => PlanModel,
  [EVALS_PIPELINE]: evalsPlanModel as (config: never, options: PlanOptions) => PlanModel,
  [LM_SFT_PIPELINE]: lmSftPlanModel as (config: never, options: PlanOptions) => PlanModel,
  [SAE_PIPELINE]: saePlanModel as (config: never, options: PlanOptions) => PlanModel,
  [HUMANOID_PIPELINE]: humanoidPlanModel as (config: never, options: PlanOptions) => PlanModel,
  [VIDEO_PIPELINE]: videoPlanModel as (config: never, options: PlanOptions) => PlanModel,
  [REFINERY_PIPELINE]: refineryPlanModel as (config: never, options: PlanOptions) => PlanModel,
  [MOLECULES_PIPELINE]: moleculesPlanModel as (config: never, options: PlanOptions) => PlanModel,
  [REWARDS_PIPELINE]: rewardsPlanModel as (config: never, options: PlanOptions) => PlanModel,
};

/** Where data decides part of a run's work: what decides it, and the options of each end of the range. */
export interface DataRange {
  readonly what: string;
  readonly low: PlanOptions;
  readonly high: PlanOptions;
}

const RANGES: Readonly<Record<string, (config: Record<string, unknown>, options: PlanOptions) => DataRange | undefined>> = {
  [REFINERY_PIPELINE]: (config, options) => {
    if (options.shards !== undefined) return undefined;
    const most = refineryMaxShards(config as unknown as RefineryConfig);
    return { what: `the corpus decides the shards: 1 to ${most.toLocaleString('en-US')}`, low: { shards: 1 }, high: { shards: most } };
  },
  [MOLECULES_PIPELINE]: (_config, options) =>
    options.rejectAt === undefined
      ? { what: 'the approver decides how many rounds run: the first batch rejected, to every batch approved', low: { rejectAt: 0 }, high: {} }
      : undefined,
  [REWARDS_PIPELINE]: (config, options) =>
    config.rewardFiles === undefined && options.candidatesUsed === undefined
      ? { what: `Claude decides how many of its candidates are usable: 1 to ${String(config.candidates)} a generation`, low: { candidatesUsed: 1 }, high: {} }
      : undefined,
};

/** The range data decides for this config and options, or undefined where the config decides everything. */
export function dataRange(entry: PipelineEntry, config: unknown, options: PlanOptions = {}): DataRange | undefined {
  return RANGES[entry.name]?.(config as Record<string, unknown>, options);
}

/** The options of the run's worst case: the high end where data decides, else the options as given. */
export function worstCase(entry: PipelineEntry, config: unknown, options: PlanOptions = {}): PlanOptions {
  const range = dataRange(entry, config, options);
  return range ? { ...options, ...range.high } : options;
}

export interface RunPlan {
  readonly pipeline: string;
  readonly counts: PlanCounts;
  /**
   * The low end: each Lambda its least billed millisecond, each Batch job its billed minute, at
   * spot, no Claude. The high end: each Lambda once at its timeout; each job every attempt Batch
   * makes (its definition's RetryStrategy) at its attempt timeout (the one its submit sets, from
   * the config, else its definition's), on demand; each Claude call at its max_tokens of output.
   * Lambda's retries on service errors (throttles, service exceptions) are left out.
   */
  readonly cost: { readonly low: RunCost; readonly high: RunCost };
  /** The same range step by step (the steps of `counts.steps`): they add up to `cost`. */
  readonly stepCost: Readonly<Record<string, { readonly low: RunCost; readonly high: RunCost }>>;
  /**
   * The largest state the run can hold, in bytes at most: the execution's input, the inline
   * Maps' result lists at their worst (every item failed or at its largest value), the parts the
   * pipeline's model names, and STEP_RESULTS_RESERVE for the steps' own results.
   */
  readonly payload: { readonly bytes: number; readonly parts: readonly PayloadPart[] };
  /** Each Batch job definition on the path: how many, and its timeout. */
  readonly jobs: readonly {
    readonly definition: string;
    readonly count: number;
    /** Each attempt's timeout: the one its submit sets, else its definition's. */
    readonly timeoutSeconds: number;
    /** Batch's attempts, each of which may run to the timeout. */
    readonly attempts: number;
    readonly platform: string;
  }[];
  /** The run's calls to Claude by step; the high end of the cost has each call at its max_tokens of output. */
  readonly claude: readonly PlanClaude[];
}

/** The number at a JSONPath of the run's state that the config decides: under `$.config`, or as the model says. */
function valueAt(config: unknown, path: string, model: PlanModel): number | undefined {
  if (path.startsWith('$.config.')) {
    let at: unknown = config;
    for (const key of path.slice('$.config.'.length).split('.')) at = (at as Record<string, unknown> | undefined)?.[key];
    return typeof at === 'number' ? at : undefined;
  }
  return model.valueAt?.(path);
}

export function hasPlanModel(pipeline: string): boolean {
  return pipeline in MODELS;
}

/**
 * What the steps' own results add to the largest state, beyond the parts a plan counts: each is
 * bounded by the pipeline's code (a job's result.json is refused over MAX_JOB_RESULT_BYTES, and
 * a step keeps a few URIs and figures of it); the end-to-end tests check the bound against the
 * largest state each run measured.
 */
export const STEP_RESULTS_RESERVE = MAX_JOB_RESULT_BYTES;

/** An upload's trigger in the execution input: its bucket, key (S3's 1,024 bytes at most), size, ETag and time. */
const TRIGGER_BYTES = 1400;

/** The synthesized app of a pipeline (its definition, functions and job definitions), once per process: a plan walks it many times over. */
const synthesized = new Map<
  string,
  { definition: AslGraph; functions: ReturnType<typeof loadFunctions>; definitions: ReturnType<typeof loadJobDefinitions> }
>();

export function synthesizedOf(entry: PipelineEntry) {
  let found = synthesized.get(entry.name);
  if (!found) {
    const resolver = new TemplateResolver(synthesize([entry]).stacks);
    const machine = resolver.resourcesOfType('AWS::StepFunctions::StateMachine').find((m) => m.resource.Metadata?.[PIPELINE_META] === entry.name);
    if (!machine) throw new ConfigError('pipeline', entry.name, 'has no state machine in the synthesized app');
    const definition = JSON.parse(String(resolver.resolve(machine.stack, machine.resource.Properties!.DefinitionString))) as AslGraph;
    found = { definition, functions: loadFunctions(resolver), definitions: loadJobDefinitions(resolver) };
    synthesized.set(entry.name, found);
  }
  return found;
}

/** The plan of a cold run of `entry` with `config` (already parsed by the pipeline's schema). */
export function planRun(entry: PipelineEntry, config: unknown, options: PlanOptions = {}): RunPlan {
  const model = MODELS[entry.name];
  if (!model) throw new ConfigError('--plan', entry.name, `no plan model for this pipeline yet (there is one for: ${Object.keys(MODELS).join(', ')})`);
  const { definition, functions, definitions } = synthesizedOf(entry);
  const cold = model(config as never, { claudeKey: Boolean(process.env.ANTHROPIC_API_KEY), ...options });
  const failing = options.everyItemFails && cold.withEveryItemFailing ? cold.withEveryItemFailing() : cold;
  const walked = options.runCacheHit ? hittingRunCache(failing) : failing;
  const counts = planCounts(definition, walked);
  // A rerun that hits the run cache makes none of the cold run's Claude calls.
  const claude = options.runCacheHit ? [] : (walked.claude?.() ?? []);
  const parts: PayloadPart[] = [
    { what: 'the execution input (the config)', bytes: Buffer.byteLength(JSON.stringify({ config })) + (options.startedByUpload ? TRIGGER_BYTES : 0) },
    ...Object.entries(counts.mapResults).map(([path, bytes]) => ({ what: `the result list at ${path}`, bytes })),
    ...(walked.payloadParts?.() ?? []),
    { what: "the steps' own results (reserve)", bytes: STEP_RESULTS_RESERVE },
  ];
  const jobOf = (arn: string) => {
    const def = definitions.get(arn);
    if (!def) throw new ConfigError('JobDefinition', arn, 'is not a job definition of the synthesized app');
    // The attempt timeout a submit sets (from the config, or a value the model knows) overrides the definition's.
    const set = counts.batchTimeouts[arn];
    const timeoutSeconds = typeof set === 'number' ? set : typeof set === 'string' ? (valueAt(config, set, walked) ?? def.timeoutSeconds) : def.timeoutSeconds;
    return { def, timeoutSeconds, attempts: def.attempts ?? 1 };
  };
  const jobs = Object.entries(counts.batchByDefinition).map(([arn, count]) => ({ ...jobOf(arn), count }));
  /** The usage of a share of the walk (the whole run, or one step): its states, invocations, jobs and Claude calls. */
  const usageOf = (
    share: { transitions: number; lambdaInvocations: number; lambdaByFunction: Record<string, number>; batchByDefinition: Record<string, number> },
    calls: readonly PlanClaude[],
    low: boolean,
  ): RunUsage => {
    let gbSeconds = 0;
    for (const [name, n] of Object.entries(share.lambdaByFunction)) {
      const fn = functions.get(name);
      // Low: Lambda's least billed time, 1 ms; high: each invocation at its timeout.
      gbSeconds += n * ((fn?.memoryMb ?? 128) / 1024) * (low ? 0.001 : (fn?.timeoutSeconds ?? 900));
    }
    return {
      transitions: share.transitions,
      lambda: { invocations: share.lambdaInvocations, billedMs: 0, gbSeconds },
      batch: Object.entries(share.batchByDefinition).flatMap(([arn, count]) => {
        const { def, timeoutSeconds, attempts } = jobOf(arn);
        return Array.from({ length: count }, () => ({
          job: def.name,
          platform: def.resources?.platform ?? 'FARGATE',
          ...(def.resources?.instanceType ? { instanceType: def.resources.instanceType } : {}),
          vcpus: def.resources?.vcpus ?? 0,
          memoryMiB: def.resources?.memoryMiB ?? 0,
          gpus: def.resources?.gpus ?? 0,
          // High: every attempt Batch makes (spot reclaims, failed pulls) runs to its timeout.
          seconds: low ? 0 : attempts * timeoutSeconds,
        }));
      }),
      // Claude at its most in the high end, every retry included: each request's output at its
      // max_tokens, its input at the most bytes the config lets its builder send (a token is at least
      // a byte), the cached prefix as a cache write.
      claude: low
        ? []
        : calls.map((c) => {
            const requests = c.calls.high * c.attempts;
            return {
              model: c.model,
              inputTokens: requests * (c.maxInput.bytes + c.maxInput.imageTokens),
              outputTokens: requests * c.maxOutputTokens,
              cacheReadTokens: 0,
              cacheWriteTokens: requests * c.maxInput.cachedBytes,
            };
          }),
    };
  };
  const stepCost = Object.fromEntries(
    Object.entries(counts.steps).map(([step, share]) => {
      const calls = claude.filter((c) => c.step === step);
      return [step, { low: costOf(usageOf(share, calls, true)), high: costOf(usageOf(share, calls, false)) }];
    }),
  );
  return {
    pipeline: entry.name,
    counts,
    payload: { bytes: parts.reduce((n, p) => n + p.bytes, 0), parts },
    claude,
    cost: { low: costOf(usageOf(counts, claude, true)), high: costOf(usageOf(counts, claude, false)) },
    stepCost,
    jobs: jobs.map(({ def, count, timeoutSeconds, attempts }) => ({
      definition: def.name,
      count,
      timeoutSeconds,
      attempts,
      platform: def.resources?.instanceType ?? def.resources?.platform ?? '',
    })),
  };
}

/** A plan's low end, where data decides part of the run (`plan` is then the high end). */
export interface PlanLowEnd {
  readonly what: string;
  readonly plan: RunPlan;
}

/** The plan of `config` as the CLI prints it: the high end of a data-decided range, with its low end. */
export function planWithRange(entry: PipelineEntry, config: unknown, options: PlanOptions = {}): { plan: RunPlan; low?: PlanLowEnd } {
  const range = dataRange(entry, config, options);
  if (!range) return { plan: planRun(entry, config, options) };
  return { plan: planRun(entry, config, { ...options, ...range.high }), low: { what: range.what, plan: planRun(entry, config, { ...options, ...range.low }) } };
}

export function printPlan(plan: RunPlan, io: Io, low?: PlanLowEnd, measured?: MeasuredFigures, failing?: RunPlan, rerun?: RunPlan): void {
  const c = plan.counts;
  io.out(`plan of a cold run of ${plan.pipeline} (nothing run; every cached step a miss, every item a success)`);
  if (rerun) {
    const r = rerun.counts;
    io.out(
      `a rerun of this config after a run of it succeeded ends from the run cache: ${r.transitions} state transitions, ${r.lambdaInvocations} Lambda invocation${r.lambdaInvocations === 1 ? '' : 's'}, ${r.batchJobs} Batch jobs, ${formatUsd(rerun.cost.low.lowUsd, rerun.cost.high.highUsd)}`,
    );
  }
  if (failing && failing.counts.transitions !== c.transitions) {
    const f = failing.counts;
    io.out(
      `if every fan-out item failed at the last Task on its path and the run went on: ${f.transitions} state transitions, ${f.historyEvents} history events, ${f.lambdaInvocations} Lambda invocations, ${f.batchJobs} Batch jobs (the failures' own path; the limits are checked on the plan below)`,
    );
  }
  if (low) {
    const l = low.plan.counts;
    io.out(`data decides part of it (${low.what}): below is the high end; the low end has`);
    io.out(
      `  ${l.transitions} state transitions, ${l.historyEvents} history events, ${l.lambdaInvocations} Lambda invocations, ${l.batchJobs} Batch jobs, cost from ${formatUsd(low.plan.cost.low.lowUsd, low.plan.cost.low.lowUsd)}`,
    );
  }
  io.out(`state transitions: ${c.transitions}`);
  io.out(`history events: ${c.historyEvents} of ${HISTORY_EVENT_LIMIT.toLocaleString('en-US')} (retries add 3 each)`);
  io.out(`Lambda invocations: ${c.lambdaInvocations}`);
  io.out(`Batch jobs: ${c.batchJobs}`);
  io.out('by step (the pipeline\'s own states, loops and Output as "(pipeline)"):');
  for (const line of table(
    Object.entries(c.steps).map(([step, n]) => ({
      step: step || '(pipeline)',
      transitions: n.transitions,
      'history events': n.historyEvents,
      Lambda: n.lambdaInvocations,
      jobs: n.batchJobs,
      cost: formatUsd(plan.stepCost[step]?.low.lowUsd ?? 0, plan.stepCost[step]?.high.highUsd ?? 0),
    })),
    ['step', 'transitions', 'history events', 'Lambda', 'jobs', 'cost'],
  ))
    io.out(`  ${line}`);
  io.out('Batch jobs by definition:');
  for (const line of table(
    plan.jobs.map((j) => {
      const seconds = measured?.jobSeconds[j.definition];
      return {
        job: j.definition,
        count: j.count,
        on: j.platform,
        expected: seconds === undefined ? 'not measured' : `${seconds.toFixed(1)} s`,
        'worst case': `${j.attempts} x ${j.timeoutSeconds} s`,
      };
    }),
    ['job', 'count', 'on', 'expected', 'worst case'],
  ))
    io.out(`  ${line}`);
  io.out(
    `largest state: ${plan.payload.bytes.toLocaleString('en-US')} bytes at most, of ${PAYLOAD_LIMIT_BYTES.toLocaleString('en-US')} (${plan.payload.parts.map((p) => `${p.what} ${p.bytes.toLocaleString('en-US')}`).join('; ')})`,
  );
  for (const call of plan.claude)
    io.out(
      `Claude, ${call.step}: ${call.calls.low === call.calls.high ? call.calls.high : `${call.calls.low}-${call.calls.high}`} calls to ${call.model} (${call.why}), in each of up to ${call.attempts} requests (retries) at most ${call.maxOutputTokens.toLocaleString('en-US')} output tokens and ${(call.maxInput.cachedBytes + call.maxInput.bytes + call.maxInput.imageTokens).toLocaleString('en-US')} input tokens (${call.maxInput.cachedBytes.toLocaleString('en-US')} of them the cached instructions; text at a token a byte, the most the config's data can take${call.maxInput.imageTokens ? `, images at ${call.maxInput.imageTokens.toLocaleString('en-US')}` : ''}; the API's own framing not counted)`,
    );
  const maps = Object.entries(c.mapWidths).filter(([, w]) => w > 0);
  if (maps.length) io.out(`Map widths: ${maps.map(([m, w]) => `${m} ${w}`).join(', ')}`);
  const calls = Object.entries(c.serviceCalls);
  if (calls.length) io.out(`service calls: ${calls.map(([k, n]) => `${k} ${n}`).join(', ')}`);
  io.out(
    `expected: ${
      measured
        ? `each job's seconds and the cost of ${measured.runs.length} earlier cold run${measured.runs.length === 1 ? '' : 's'} of this config in this data directory (median; measured on this machine, whose CPUs are not AWS's instances): ${formatUsd(measured.cost.lowUsd, measured.cost.highUsd)}`
        : 'not measured (no earlier cold run of this config in this data directory: run it once, and its seconds and cost are the expected figures of the next plan)'
    }`,
  );
  io.out(
    `cost on AWS: ${formatUsd(plan.cost.low.lowUsd, plan.cost.high.highUsd)} (low: each Lambda 1 ms and each job its billed minute, at spot; high: each Lambda once at its timeout, each job every Batch attempt at its timeout, on demand, every Claude request, retries included, at its max_tokens and its most input; Lambda retries on service errors left out; ${plan.cost.low.region} prices of ${plan.cost.low.pricesAsOf})`,
  );
}

/** A config field that drives a limit, as a count: how to read it, and a config with another count. */
interface LimitDriver {
  readonly field: string;
  value(config: Record<string, unknown>): number;
  with(config: Record<string, unknown>, value: number): Record<string, unknown>;
  /** The least value the schema allows. */
  readonly least: number;
  /** The field at a value, as a message says it. */
  say(value: number): string;
}

/** An array field, driven by its length (a shorter one keeps its first entries, a longer one repeats its last). */
const arrayDriver = (field: string, least = 1): LimitDriver => ({
  field,
  least,
  say: (n) => `${field} with ${n} entries`,
  value: (config) => ((config[field] as unknown[] | undefined) ?? []).length,
  with: (config, n) => {
    const list = (config[field] as unknown[] | undefined) ?? [];
    return { ...config, [field]: Array.from({ length: n }, (_, i) => list[Math.min(i, list.length - 1)]) };
  },
});
const numberDriver = (field: string, least: number): LimitDriver => ({
  field,
  least,
  say: (n) => `${field} ${n}`,
  value: (config) => Number(config[field]),
  with: (config, n) => ({ ...config, [field]: n }),
});
const nestedDriver = (outer: string, inner: LimitDriver): LimitDriver => ({
  field: `${outer}.${inner.field}`,
  least: inner.least,
  say: (n) => `${outer}.${inner.say(n)}`,
  value: (config) => inner.value((config[outer] ?? {}) as Record<string, unknown>),
  with: (config, n) => ({ ...config, [outer]: inner.with((config[outer] ?? {}) as Record<string, unknown>, n) }),
});

/** The config fields that drive each pipeline's plan towards a limit. */
const DRIVERS: Readonly<Record<string, readonly LimitDriver[]>> = {
  [PROBE_PIPELINE]: [arrayDriver('items'), numberDriver('padKiB', 0)],
  [SELFPLAY_PIPELINE]: [numberDriver('generations', 1)],
  [EVALS_PIPELINE]: [arrayDriver('benchmarks')],
  [HUMANOID_PIPELINE]: [nestedDriver('replay', arrayDriver('forward'))],
  [VIDEO_PIPELINE]: [nestedDriver('sources', numberDriver('videos', 1))],
  [REWARDS_PIPELINE]: [numberDriver('generations', 1), numberDriver('candidates', 1), arrayDriver('trainSeeds')],
  [MOLECULES_PIPELINE]: [numberDriver('rounds', 0)],
};

/** A hard limit of Step Functions, as a plan measures it. */
interface PlanLimit {
  readonly name: string;
  readonly planned: (plan: RunPlan) => number;
  readonly allowed: number;
  readonly unit: string;
  readonly why: string;
}

export const PLAN_LIMITS: readonly PlanLimit[] = [
  {
    name: 'history events',
    planned: (plan) => plan.counts.historyEvents,
    allowed: HISTORY_EVENT_BUDGET,
    unit: 'history events',
    why: `Step Functions fails an execution past ${HISTORY_EVENT_LIMIT.toLocaleString('en-US')} events; a tenth is left for retries`,
  },
  {
    name: 'payload',
    planned: (plan) => plan.payload.bytes,
    allowed: PAYLOAD_LIMIT_BYTES,
    unit: 'bytes of state',
    why: 'Step Functions fails a state whose input or output passes 256 KiB',
  },
];

export interface LimitBreach {
  readonly limit: string;
  readonly planned: number;
  readonly allowed: number;
  /** The config field that drives it, its value, and the largest value that fits (null: none does). */
  readonly driver?: { readonly field: string; readonly value: number; readonly largestFitting: number | null; readonly fitting?: string };
  readonly message: string;
}

/** The hard limits `config`'s plan breaks, each with the field that drives it and the largest value that fits. */
export function limitBreaches(entry: PipelineEntry, config: unknown, options: PlanOptions = {}, plan = planRun(entry, config, options)): LimitBreach[] {
  const breaches: LimitBreach[] = [];
  for (const limit of PLAN_LIMITS) {
    const planned = limit.planned(plan);
    if (planned <= limit.allowed) continue;
    // A value fits when the config with it is one the schema accepts and its plan keeps to the limit.
    const fits = (c: Record<string, unknown>) => entry.config.safeParse(c).success && limit.planned(planRun(entry, c, options)) <= limit.allowed;
    const base = config as Record<string, unknown>;
    // The first driver whose change alone brings the plan within the limit, searched by halving.
    let driver: LimitBreach['driver'];
    for (const d of DRIVERS[entry.name] ?? []) {
      const value = d.value(base);
      if (!(value > d.least)) continue;
      if (!fits(d.with(base, d.least))) {
        driver ??= { field: d.field, value, largestFitting: null };
        continue;
      }
      let lo = d.least;
      let hi = value;
      while (hi - lo > 1) {
        const mid = Math.floor((lo + hi) / 2);
        if (fits(d.with(base, mid))) lo = mid;
        else hi = mid;
      }
      driver = { field: d.field, value, largestFitting: lo, fitting: d.say(lo) };
      break;
    }
    const what = `its plan reaches ${planned.toLocaleString('en-US')} ${limit.unit}, over the ${limit.allowed.toLocaleString('en-US')} allowed (${limit.why})`;
    const fix = driver
      ? driver.largestFitting === null
        ? `; no value of ${driver.field} alone brings it within`
        : `; the largest that fits is ${driver.fitting}`
      : '; no single field of the config drives it';
    breaches.push({ limit: limit.name, planned, allowed: limit.allowed, ...(driver ? { driver } : {}), message: `${what}${fix}` });
  }
  return breaches;
}

/**
 * Refuses a run whose plan breaks a hard limit, before anything starts: the error names the
 * field that drives it (or the config) and the largest value that fits. Pipelines without a plan
 * model pass (their schemas bound them).
 */
export function refuseOverLimits(entry: PipelineEntry, config: unknown, options: PlanOptions = {}): RunPlan | undefined {
  if (!hasPlanModel(entry.name)) return undefined;
  const worst = worstCase(entry, config, options);
  const plan = planRun(entry, config, worst);
  const [breach] = limitBreaches(entry, config, worst, plan);
  if (breach) {
    throw new ConfigError(
      breach.driver ? `config.${breach.driver.field}` : 'config',
      breach.driver?.value ?? null,
      `is refused before the run starts: ${breach.message}`,
    );
  }
  return plan;
}

/**
 * What the CLI tells a plan beyond the config: evals with `benchmarks: null` plan for the largest
 * suite a run takes (the registry decides when the run starts); a video `list` plans for the most
 * sources a list may hold.
 */
export function planOptionsOf(entry: PipelineEntry, config: Record<string, unknown>): PlanOptions {
  if (entry.name === EVALS_PIPELINE && config.benchmarks === null) return { registeredBenchmarks: MAX_SUITE_BENCHMARKS };
  if (entry.name === VIDEO_PIPELINE && (config.sources as { kind?: string } | undefined)?.kind === 'list') return { listedSources: MAX_SOURCES };
  return {};
}
