/**
 * What a run used, and what that cost: the figures the cost model prices (issue: plan and cost).
 *
 * A run's usage is counted where it happens: Step Functions state transitions (every state
 * entered, Map iterations and Distributed Map children included), each Lambda invocation's billed
 * duration at its memory size, each Batch job's seconds on its platform (Fargate: vCPUs and
 * memory; EC2: the GPU instance type), and Claude tokens as the API's usage fields report them.
 * `costOf` prices a usage with a price table (prices.ts) as a low/high range: Batch on EC2 is
 * low at the spot discount the table gives and high on demand; everything else is one figure.
 */
import { CONFIG_STEP, RUN_STEP } from '../table.ts';
import { type ClaudePrice, PRICES, type PriceTable } from './prices.ts';

export interface LambdaUsage {
  readonly invocations: number;
  /** Sum over invocations of the duration rounded up to the millisecond, as Lambda bills. */
  readonly billedMs: number;
  /** Sum over invocations of billed seconds x memory (GiB). */
  readonly gbSeconds: number;
}

export interface BatchJobUsage {
  /** The job definition's name (the construct's logical id locally). */
  readonly job: string;
  readonly platform: 'FARGATE' | 'EC2';
  /** EC2 only: the GPU instance type the job is sized for. */
  readonly instanceType?: string;
  readonly vcpus: number;
  readonly memoryMiB: number;
  readonly gpus: number;
  readonly seconds: number;
}

/** One step's share of a run's counters (infra/local/execution-records.ts, stats.steps). */
export interface StepUsage {
  transitions: number;
  lambdaInvocations: number;
  lambdaBilledMs: number;
  lambdaGbSeconds: number;
  batch: BatchJobUsage[];
  /** The cache entries the step stored: one per computation. */
  stores: number;
  /** Claude tokens by model, from the API's usage fields (absent in older records). */
  claude?: ClaudeUsage[];
}

/** The step a state belongs to: its name's part before ': ', or '' for the pipeline's own states. */
export function stepOfState(name: string): string {
  const at = name.indexOf(': ');
  return at > 0 ? name.slice(0, at) : '';
}

export function emptyStepUsage(): StepUsage {
  return { transitions: 0, lambdaInvocations: 0, lambdaBilledMs: 0, lambdaGbSeconds: 0, batch: [], stores: 0 };
}

/** A step's counters as a usage (to price with costOf). */
export function usageOfStep(step: StepUsage): RunUsage {
  return {
    transitions: step.transitions,
    lambda: { invocations: step.lambdaInvocations, billedMs: step.lambdaBilledMs, gbSeconds: step.lambdaGbSeconds },
    batch: step.batch,
    claude: step.claude ?? [],
  };
}

/**
 * Where a Lambda that called Claude says what the calls used: a `claudeUsage` list at the top of
 * its response, one entry per model, summed from the API's usage fields (failed attempts
 * included). The runtime adds it to the run's counters; on AWS it is in the execution history.
 */
export const CLAUDE_USAGE_FIELD = 'claudeUsage';

/** The `claudeUsage` of a Lambda's response, checked; [] when it has none. */
export function claudeUsageOf(response: unknown): ClaudeUsage[] {
  const list = (response as Record<string, unknown> | null | undefined)?.[CLAUDE_USAGE_FIELD];
  if (!Array.isArray(list)) return [];
  const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);
  return list
    .filter((u): u is Record<string, unknown> => !!u && typeof u === 'object' && typeof (u as { model?: unknown }).model === 'string')
    .map((u) => ({
      model: String(u.model),
      inputTokens: count(u.inputTokens),
      outputTokens: count(u.outputTokens),
      cacheReadTokens: count(u.cacheReadTokens),
      cacheWriteTokens: count(u.cacheWriteTokens),
    }));
}

/** The `claudeUsage` field a Lambda's response carries: `usage` (the API's usage fields summed) for `model`. */
export function claudeUsageField(
  model: string,
  usage: { readonly inputTokens: number; readonly outputTokens: number; readonly cacheReadTokens: number; readonly cacheWriteTokens: number },
): { [CLAUDE_USAGE_FIELD]: ClaudeUsage[] } {
  const { inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens } = usage;
  return { [CLAUDE_USAGE_FIELD]: [{ model, inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens }] };
}

/** Claude usages summed by model. */
export function addClaude(a: readonly ClaudeUsage[], b: readonly ClaudeUsage[]): ClaudeUsage[] {
  return addUsage({ ...EMPTY_USAGE, claude: a }, { ...EMPTY_USAGE, claude: b }).claude as ClaudeUsage[];
}

export interface ClaudeUsage {
  readonly model: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cacheReadTokens: number;
  readonly cacheWriteTokens: number;
}

export interface RunUsage {
  readonly transitions: number;
  readonly lambda: LambdaUsage;
  readonly batch: readonly BatchJobUsage[];
  readonly claude: readonly ClaudeUsage[];
}

export interface CostLine {
  readonly item: string;
  readonly quantity: number;
  readonly unit: string;
  readonly lowUsd: number;
  readonly highUsd: number;
}

export interface RunCost {
  readonly lowUsd: number;
  readonly highUsd: number;
  readonly lines: readonly CostLine[];
  /** Usage the table has no price for (a Claude model it does not list): left out of the sums. */
  readonly unpriced: readonly string[];
  readonly region: string;
  readonly pricesAsOf: string;
}

export const EMPTY_USAGE: RunUsage = { transitions: 0, lambda: { invocations: 0, billedMs: 0, gbSeconds: 0 }, batch: [], claude: [] };

const HOUR = 3600;
const MILLION = 1_000_000;

/** The usage of a run priced with `table`: each line, the sums, and what had no price. */
export function costOf(usage: RunUsage, table: PriceTable = PRICES): RunCost {
  const lines: CostLine[] = [];
  const unpriced: string[] = [];
  const line = (item: string, quantity: number, unit: string, low: number, high = low) => {
    if (quantity > 0) lines.push({ item, quantity, unit, lowUsd: low, highUsd: high });
  };
  const p = table.aws;
  line('Step Functions state transitions', usage.transitions, 'transitions', usage.transitions * p.stepFunctionsPerTransition.usd);
  line('Lambda requests', usage.lambda.invocations, 'requests', usage.lambda.invocations * p.lambdaPerRequest.usd);
  line('Lambda compute', usage.lambda.gbSeconds, 'GB-seconds', usage.lambda.gbSeconds * p.lambdaPerGbSecond.usd);
  const byKind = new Map<string, { seconds: number; low: number; high: number; unit: string }>();
  for (const run of usage.batch) {
    // Fargate and EC2 (Linux) bill by the second with a one-minute minimum.
    const job = { ...run, seconds: Math.max(run.seconds, table.batchMinimumSeconds) };
    let key: string;
    let low: number;
    let high: number;
    if (job.platform === 'FARGATE') {
      key = `Batch on Fargate (${job.vcpus} vCPU, ${job.memoryMiB / 1024} GiB)`;
      const perHour = job.vcpus * p.fargatePerVcpuHour.usd + (job.memoryMiB / 1024) * p.fargatePerGbHour.usd;
      low = high = (job.seconds / HOUR) * perHour;
    } else {
      const type = job.instanceType ?? '';
      const price = table.ec2[type];
      if (!price) {
        unpriced.push(`Batch job ${job.job}: EC2 instance type ${JSON.stringify(type)} has no price in the table`);
        continue;
      }
      key = `Batch on EC2 ${type}`;
      high = (job.seconds / HOUR) * price.onDemandPerHour.usd;
      low = high * (1 - price.spotDiscountMax);
    }
    const k = byKind.get(key) ?? { seconds: 0, low: 0, high: 0, unit: 'job-seconds' };
    k.seconds += job.seconds;
    k.low += low;
    k.high += high;
    byKind.set(key, k);
  }
  for (const [item, k] of byKind) line(item, k.seconds, k.unit, k.low, k.high);
  for (const use of usage.claude) {
    const price: ClaudePrice | undefined = table.claude[use.model];
    if (!price) {
      unpriced.push(`Claude model ${JSON.stringify(use.model)} has no price in the table`);
      continue;
    }
    const usd =
      (use.inputTokens * price.inputPerMTok +
        use.outputTokens * price.outputPerMTok +
        use.cacheReadTokens * price.cacheReadPerMTok +
        use.cacheWriteTokens * price.cacheWrite5mPerMTok) /
      MILLION;
    line(`Claude ${use.model}`, use.inputTokens + use.outputTokens + use.cacheReadTokens + use.cacheWriteTokens, 'tokens', usd);
  }
  const sum = (f: (l: CostLine) => number) => lines.reduce((a, l) => a + f(l), 0);
  return { lowUsd: sum((l) => l.lowUsd), highUsd: sum((l) => l.highUsd), lines, unpriced, region: table.region, pricesAsOf: table.asOf };
}

/** Two usages added (a run and its Distributed Map children, or the steps of a plan). */
export function addUsage(a: RunUsage, b: RunUsage): RunUsage {
  const claude = new Map<string, ClaudeUsage>();
  for (const c of [...a.claude, ...b.claude]) {
    const was = claude.get(c.model);
    claude.set(
      c.model,
      was
        ? {
            model: c.model,
            inputTokens: was.inputTokens + c.inputTokens,
            outputTokens: was.outputTokens + c.outputTokens,
            cacheReadTokens: was.cacheReadTokens + c.cacheReadTokens,
            cacheWriteTokens: was.cacheWriteTokens + c.cacheWriteTokens,
          }
        : c,
    );
  }
  return {
    transitions: a.transitions + b.transitions,
    lambda: {
      invocations: a.lambda.invocations + b.lambda.invocations,
      billedMs: a.lambda.billedMs + b.lambda.billedMs,
      gbSeconds: a.lambda.gbSeconds + b.lambda.gbSeconds,
    },
    batch: [...a.batch, ...b.batch],
    claude: [...claude.values()],
  };
}

/** "$0.0123" for small sums, "$12.34" for larger; a range as "low-high" when they differ. */
export function formatUsd(low: number, high = low): string {
  const one = (x: number) => (x === 0 ? '$0' : x < 0.01 ? `$${x.toPrecision(2)}` : `$${x.toFixed(2)}`);
  return Math.abs(high - low) < 1e-12 ? one(low) : `${one(low)}-${one(high)}`;
}

/** The counters a local execution record keeps (infra/local/execution-records.ts), as a usage. */
export function usageOfStats(stats: {
  readonly statesEntered: number;
  readonly lambdaInvocations: number;
  readonly lambdaBilledMs?: number;
  readonly lambdaGbSeconds?: number;
  readonly batch?: readonly BatchJobUsage[];
  readonly claude?: readonly ClaudeUsage[];
}): RunUsage {
  return {
    transitions: stats.statesEntered,
    lambda: { invocations: stats.lambdaInvocations, billedMs: stats.lambdaBilledMs ?? 0, gbSeconds: stats.lambdaGbSeconds ?? 0 },
    batch: stats.batch ?? [],
    claude: stats.claude ?? [],
  };
}

export interface CacheSaving {
  readonly hits: number;
  /** Hits whose computing run's counters were found (an older record has none by step). */
  readonly priced: number;
  readonly lowUsd: number;
  readonly highUsd: number;
}

/**
 * What a run's cache hits saved: for each hit, the cost of that step in the run that computed
 * the entry, divided by the computations that step made there (a fan-out's item step stores one
 * entry per item). A rerun that hits every entry a cold run stored saves that run's cost of
 * those steps, exactly. A hit on the run cache (shared/run-cache.ts) saves what the run that
 * stored it paid for every step but its config check.
 */
export function cacheSaving(
  hits: readonly { readonly step: string; readonly executionArn: string }[],
  stepsOf: (executionArn: string) => Readonly<Record<string, StepUsage>> | undefined,
  table: PriceTable = PRICES,
): CacheSaving {
  let lowUsd = 0;
  let highUsd = 0;
  let priced = 0;
  for (const hit of hits) {
    const steps = stepsOf(hit.executionArn);
    if (hit.step === RUN_STEP) {
      // A run cache hit skipped the whole run but its config check: what the run that stored the
      // entry paid for every other step (its run-cache states are bookkeeping both runs make).
      if (!steps?.[RUN_STEP]?.stores) continue;
      for (const [name, usage] of Object.entries(steps)) {
        if (name === RUN_STEP || name === CONFIG_STEP) continue;
        const cost = costOf(usageOfStep(usage), table);
        lowUsd += cost.lowUsd;
        highUsd += cost.highUsd;
      }
      priced += 1;
      continue;
    }
    const step = steps?.[hit.step];
    if (!step || step.stores === 0) continue;
    const cost = costOf(usageOfStep(step), table);
    lowUsd += cost.lowUsd / step.stores;
    highUsd += cost.highUsd / step.stores;
    priced += 1;
  }
  return { hits: hits.length, priced, lowUsd, highUsd };
}
