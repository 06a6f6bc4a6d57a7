/**
 * A run's plan (pipelines/steps/plan.ts, infra/cli/plan.ts) against what the local run counted:
 * the config decides the state transitions, the Lambda invocations and the Batch jobs of a cold
 * run, so the plan's must equal the run's exactly.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipelineNamed } from '#infra/cli/config.ts';
import { planRun } from '#infra/cli/plan.ts';
import { LocalRuntime } from '#infra/local/runtime.ts';
import { ProbeConfig } from '#pipelines/probe/config.ts';
import { PROBE_PIPELINE } from '#pipelines/probe/stack.ts';

describe('plan of a cold run against the local run', () => {
  let runtime: LocalRuntime;
  let dataDir: string;

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'fp-plan-'));
    runtime = await LocalRuntime.start({ dataDir, retryDelayMs: 1, pipelines: [pipelineNamed(PROBE_PIPELINE)] });
  });
  after(async () => {
    await runtime.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  // Items differ from config to config, so every run is cold (no item, no sum is cached).
  const configs = [
    { items: [2, 3] },
    { items: [11] },
    { items: [21, 22, 23, 24, 25, 26, 27], distributed: true },
    { items: Array.from({ length: 40 }, (_, i) => 100 + i) },
  ];
  for (const raw of configs) {
    it(`probe ${JSON.stringify(raw).slice(0, 60)}: transitions, invocations and jobs as the run counted`, async () => {
      const config = ProbeConfig.parse(raw);
      const plan = planRun(pipelineNamed(PROBE_PIPELINE), config);
      const record = await runtime.startExecution(PROBE_PIPELINE, { config }).done;
      assert.equal(record.status, 'SUCCEEDED', record.cause);
      assert.deepEqual(
        { transitions: plan.counts.transitions, lambdaInvocations: plan.counts.lambdaInvocations, batchJobs: plan.counts.batchJobs },
        { transitions: record.stats.statesEntered, lambdaInvocations: record.stats.lambdaInvocations, batchJobs: record.stats.batchJobs },
      );
      assert.equal(plan.counts.mapWidths['square: Items'], config.items.length);
      assert.ok(plan.counts.historyEvents > plan.counts.transitions * 2);
      assert.ok(plan.cost.low.lowUsd > 0 && plan.cost.low.lowUsd < plan.cost.high.highUsd);
    });
  }
});
