/**
 * A plan's expected figures, from the runs this data directory measured (issue: plan and cost):
 * the earlier cold runs of the same pipeline at the same config, succeeded, with no cache hit
 * (a hit skips work, so its seconds are not the config's). A config whose work also depends on
 * the environment (`explainer: auto` and whether a Claude key is set) is compared as the config. Each job's expected seconds are the
 * median, over those runs, of its mean seconds in a run; the expected cost is the median of
 * their costs. Measured here: a GPU job measured on this machine's CPU runs differently on AWS,
 * and the plan says where the figures come from and how many runs they are.
 */
import type { ExecutionRecord } from '../local/execution-records.ts';
import { canonicalJson } from '#shared/json.ts';
import { costOf, type RunCost, usageOfStats } from '#shared/cost/usage.ts';
import type { PipelineEntry } from '../registry.ts';

export interface MeasuredFigures {
  /** The runs the figures come from, oldest first. */
  readonly runs: readonly string[];
  /** Each job definition's expected seconds a job (the median over the runs of its mean in each). */
  readonly jobSeconds: Readonly<Record<string, number>>;
  /** The median of the runs' costs (low and high each). */
  readonly cost: Pick<RunCost, 'lowUsd' | 'highUsd'>;
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

/** The config as its schema fills it in, canonical; undefined for one the schema refuses. */
function canonicalConfig(entry: PipelineEntry, config: unknown): string | undefined {
  const parsed = entry.config.safeParse(config);
  return parsed.success ? canonicalJson(parsed.data) : undefined;
}

/** The figures of the earlier cold runs of `config`, or undefined when there is none. */
export function measuredFigures(entry: PipelineEntry, config: unknown, records: readonly ExecutionRecord[]): MeasuredFigures | undefined {
  const want = canonicalConfig(entry, config);
  if (want === undefined) return undefined;
  const runs = records
    .filter(
      (r) =>
        r.pipeline === entry.name &&
        r.status === 'SUCCEEDED' &&
        // A record from before hits were recorded by step (no `steps`) cannot say it hit nothing.
        r.stats.steps !== undefined &&
        !(r.stats.cacheHits ?? []).length &&
        canonicalConfig(entry, (r.input as { config?: unknown } | undefined)?.config) === want,
    )
    .sort((a, b) => (a.startDate < b.startDate ? -1 : 1));
  if (!runs.length) return undefined;
  const perJob = new Map<string, number[]>();
  for (const run of runs) {
    const byJob = new Map<string, number[]>();
    for (const job of run.stats.batch ?? []) byJob.set(job.job, [...(byJob.get(job.job) ?? []), job.seconds]);
    for (const [job, seconds] of byJob) perJob.set(job, [...(perJob.get(job) ?? []), seconds.reduce((a, s) => a + s, 0) / seconds.length]);
  }
  const costs = runs.map((r) => costOf(usageOfStats(r.stats)));
  return {
    runs: runs.map((r) => r.name),
    jobSeconds: Object.fromEntries([...perJob].map(([job, means]) => [job, median(means)])),
    cost: { lowUsd: median(costs.map((c) => c.lowUsd)), highUsd: median(costs.map((c) => c.highUsd)) },
  };
}
