/**
 * `frontier run PIPELINE --plan`: a run's plan from its config, nothing run. The pipeline's state
 * machine is synthesized as for a local run, its definition walked along the path the pipeline's
 * plan model chooses (pipelines/steps/plan.ts), and what the walk counts is priced with the dated
 * table: state transitions, Lambda requests (each at its memory size for a second, the low end,
 * or its timeout, the high end), Batch jobs (a minute each, the low end, or their timeouts).
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
import { HISTORY_EVENT_LIMIT } from '#pipelines/steps/history.ts';
import { type PlanCounts, type PlanModel, planCounts } from '#pipelines/steps/plan.ts';
import { PIPELINE_META } from '#pipelines/steps/pipeline.ts';
import { costOf, formatUsd, type RunCost, type RunUsage } from '#shared/cost/usage.ts';
import { ConfigError } from '#shared/errors.ts';
import type { AslGraph } from '#pipelines/steps/history.ts';
import { TemplateResolver } from '../local/resolve.ts';
import { loadFunctions, loadJobDefinitions, synthesize } from '../local/synthesis.ts';
import type { PipelineEntry } from '../registry.ts';
import { table, type Io } from './output.ts';

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
}

const MODELS: Readonly<Record<string, (config: never, options: PlanOptions) => PlanModel>> = {
  [PROBE_PIPELINE]: probePlanModel as (config: never, options: PlanOptions) => PlanModel,
  [SELFPLAY_PIPELINE]: selfPlayPlanModel as (config: never, options: PlanOptions) => PlanModel,
  [EVALS_PIPELINE]: evalsPlanModel as (config: never, options: PlanOptions) => PlanModel,
  [LM_SFT_PIPELINE]: lmSftPlanModel as (config: never, options: PlanOptions) => PlanModel,
  [SAE_PIPELINE]: saePlanModel as (config: never, options: PlanOptions) => PlanModel,
  [HUMANOID_PIPELINE]: humanoidPlanModel as (config: never, options: PlanOptions) => PlanModel,
  [VIDEO_PIPELINE]: videoPlanModel as (config: never, options: PlanOptions) => PlanModel,
};

export interface RunPlan {
  readonly pipeline: string;
  readonly counts: PlanCounts;
  /**
   * The low end: each Lambda its least billed millisecond, each Batch job its billed minute, at
   * spot. The high end: each Lambda and each job at its definition's timeout, on demand, once
   * (retries, and a timeout a job's submit sets from the config, are not in it).
   */
  readonly cost: { readonly low: RunCost; readonly high: RunCost };
  /** Each Batch job definition on the path: how many, and its timeout. */
  readonly jobs: readonly { readonly definition: string; readonly count: number; readonly timeoutSeconds: number; readonly platform: string }[];
}

export function hasPlanModel(pipeline: string): boolean {
  return pipeline in MODELS;
}

/** The plan of a cold run of `entry` with `config` (already parsed by the pipeline's schema). */
export function planRun(entry: PipelineEntry, config: unknown, options: PlanOptions = {}): RunPlan {
  const model = MODELS[entry.name];
  if (!model) throw new ConfigError('--plan', entry.name, `no plan model for this pipeline yet (there is one for: ${Object.keys(MODELS).join(', ')})`);
  const resolver = new TemplateResolver(synthesize([entry]).stacks);
  const machine = resolver.resourcesOfType('AWS::StepFunctions::StateMachine').find((m) => m.resource.Metadata?.[PIPELINE_META] === entry.name);
  if (!machine) throw new ConfigError('pipeline', entry.name, 'has no state machine in the synthesized app');
  const definition = JSON.parse(String(resolver.resolve(machine.stack, machine.resource.Properties!.DefinitionString))) as AslGraph;
  const counts = planCounts(definition, model(config as never, { claudeKey: Boolean(process.env.ANTHROPIC_API_KEY), ...options }));
  const functions = loadFunctions(resolver);
  const definitions = loadJobDefinitions(resolver);
  let gbSecondsLow = 0;
  let gbSecondsHigh = 0;
  for (const [name, n] of Object.entries(counts.lambdaByFunction)) {
    const fn = functions.get(name);
    const gb = (fn?.memoryMb ?? 128) / 1024;
    gbSecondsLow += n * gb * 0.001; // Lambda's least: 1 ms
    gbSecondsHigh += n * gb * (fn?.timeoutSeconds ?? 900);
  }
  const jobs = Object.entries(counts.batchByDefinition).map(([arn, count]) => {
    const def = definitions.get(arn);
    if (!def) throw new ConfigError('JobDefinition', arn, 'is not a job definition of the synthesized app');
    return { def, count };
  });
  const usage = (low: boolean): RunUsage => ({
    transitions: counts.transitions,
    lambda: { invocations: counts.lambdaInvocations, billedMs: 0, gbSeconds: low ? gbSecondsLow : gbSecondsHigh },
    batch: jobs.flatMap(({ def, count }) =>
      Array.from({ length: count }, () => ({
        job: def.name,
        platform: def.resources?.platform ?? 'FARGATE',
        ...(def.resources?.instanceType ? { instanceType: def.resources.instanceType } : {}),
        vcpus: def.resources?.vcpus ?? 0,
        memoryMiB: def.resources?.memoryMiB ?? 0,
        gpus: def.resources?.gpus ?? 0,
        seconds: low ? 0 : def.timeoutSeconds,
      })),
    ),
    claude: [],
  });
  return {
    pipeline: entry.name,
    counts,
    cost: { low: costOf(usage(true)), high: costOf(usage(false)) },
    jobs: jobs.map(({ def, count }) => ({
      definition: def.name,
      count,
      timeoutSeconds: def.timeoutSeconds,
      platform: def.resources?.instanceType ?? def.resources?.platform ?? '',
    })),
  };
}

export function printPlan(plan: RunPlan, io: Io): void {
  const c = plan.counts;
  io.out(`plan of a cold run of ${plan.pipeline} (nothing run; every cached step a miss, every item a success)`);
  io.out(`state transitions: ${c.transitions}`);
  io.out(`history events: ${c.historyEvents} of ${HISTORY_EVENT_LIMIT.toLocaleString('en-US')} (retries add 3 each)`);
  io.out(`Lambda invocations: ${c.lambdaInvocations}`);
  io.out(`Batch jobs: ${c.batchJobs}`);
  for (const line of table(
    plan.jobs.map((j) => ({ job: j.definition, count: j.count, on: j.platform, timeout: `${j.timeoutSeconds} s` })),
    ['job', 'count', 'on', 'timeout'],
  ))
    io.out(`  ${line}`);
  const maps = Object.entries(c.mapWidths).filter(([, w]) => w > 0);
  if (maps.length) io.out(`Map widths: ${maps.map(([m, w]) => `${m} ${w}`).join(', ')}`);
  const calls = Object.entries(c.serviceCalls);
  if (calls.length) io.out(`service calls: ${calls.map(([k, n]) => `${k} ${n}`).join(', ')}`);
  io.out(
    `cost on AWS: ${formatUsd(plan.cost.low.lowUsd, plan.cost.high.highUsd)} (low: each Lambda 1 ms and each job its billed minute, at spot; high: each at its definition's timeout, on demand, without retries; ${plan.cost.low.region} prices of ${plan.cost.low.pricesAsOf})`,
  );
}
