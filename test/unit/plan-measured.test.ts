/**
 * A plan's expected figures (infra/cli/plan-measured.ts): the earlier cold runs of the same config
 * in the data directory, each job's seconds and the run's cost as medians; runs that hit the cache,
 * failed, or ran another config do not count. The records are built here as the runtime writes them.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { pipelineNamed } from '#infra/cli/config.ts';
import { planWithRange, printPlan } from '#infra/cli/plan.ts';
import { measuredFigures } from '#infra/cli/plan-measured.ts';
import type { ExecutionRecord } from '#infra/local/execution-records.ts';
import { costOf, usageOfStats } from '#shared/cost/usage.ts';

const entry = pipelineNamed('probe');
const config = { items: [1, 2, 3] };
const job = (seconds: number) => ({ job: 'SumDefinitionFFE68BF6', platform: 'FARGATE' as const, vcpus: 1, memoryMiB: 2048, gpus: 0, seconds });

function record(
  name: string,
  startDate: string,
  jobs: number[],
  extra: Partial<ExecutionRecord> = {},
  stats: Partial<ExecutionRecord['stats']> = {},
): ExecutionRecord {
  return {
    executionArn: `arn:aws:states:us-east-1:000000000000:execution:probe:${name}`,
    name,
    stateMachineArn: 'arn:aws:states:us-east-1:000000000000:stateMachine:probe',
    pipeline: 'probe',
    status: 'SUCCEEDED',
    input: { config },
    startDate,
    stats: {
      statesEntered: 100,
      lambdaInvocations: 7,
      batchJobs: jobs.length,
      mapItemsDone: 3,
      mapItemsFailed: 0,
      largestState: { name: '', bytes: 0 },
      lambdaBilledMs: 70,
      lambdaGbSeconds: 0.01,
      batch: jobs.map(job),
      steps: {},
      ...stats,
    },
    ...extra,
  };
}

describe("a plan's expected figures", () => {
  const records = [
    record('a', '2026-12-01T10:00:00Z', [10]),
    // Two jobs in one run: their mean (30) is that run's figure.
    record('b', '2026-12-01T11:00:00Z', [20, 40]),
    record('c', '2026-12-01T12:00:00Z', [90]),
    // None of these count: a cached rerun, a failed run, another config (the schema's defaults filled in first), another pipeline, an old record.
    record('cached', '2026-12-01T13:00:00Z', [1], {}, { cacheHits: [{ step: 'sum', executionArn: 'x' }] }),
    record('failed', '2026-12-01T14:00:00Z', [5], { status: 'FAILED' }),
    record('other', '2026-12-01T15:00:00Z', [7], { input: { config: { items: [1, 2] } } }),
    record('lm', '2026-12-01T16:00:00Z', [7], { pipeline: 'lm-sft' }),
    // A record from before hits were kept by step: it cannot say it hit nothing.
    record('old', '2026-11-01T16:00:00Z', [7], {}, { steps: undefined }),
  ];

  it('takes the median over the cold runs of the same config, each job at its mean in a run', () => {
    const measured = measuredFigures(entry, { ...config, maxFailures: 0 }, records);
    assert.ok(measured);
    assert.deepEqual(measured.runs, ['a', 'b', 'c']);
    assert.equal(measured.jobSeconds.SumDefinitionFFE68BF6, 30);
    // Billed at least a minute a job: a 60 s, c 90 s, b 120 s (two jobs); c's is the median.
    const costs = records.slice(0, 3).map((r) => costOf(usageOfStats(r.stats)).highUsd);
    assert.ok(costs[0]! < costs[2]! && costs[2]! < costs[1]!);
    assert.ok(Math.abs(measured.cost.highUsd - costs[2]!) < 1e-15, `${measured.cost.highUsd} vs ${costs}`);
    assert.equal(measuredFigures(entry, { items: [9] }, records), undefined, 'no run of that config');
    assert.equal(measuredFigures(entry, { items: 'bad' }, records), undefined, 'a config the schema refuses has no figures');
  });

  it('prints them beside the worst case, and says when nothing was measured', () => {
    const { plan, low } = planWithRange(entry, config);
    const lines: string[] = [];
    const io = { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) };
    printPlan(plan, io, low, measuredFigures(entry, config, records));
    assert.ok(
      lines.some((l) => /SumDefinitionFFE68BF6\s+1\s+FARGATE\s+30\.0 s\s+\d+ x \d+ s/.test(l)),
      lines.join('\n'),
    );
    assert.ok(lines.some((l) => l.startsWith("expected: each job's seconds and the cost of 3 earlier cold runs of this config")));
    lines.length = 0;
    printPlan(plan, io, low, undefined);
    assert.ok(
      lines.some((l) => /SumDefinitionFFE68BF6\s+1\s+FARGATE\s+not measured/.test(l)),
      lines.join('\n'),
    );
    assert.ok(lines.some((l) => l.startsWith('expected: not measured')));
  });
});
