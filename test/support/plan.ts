/**
 * The check every pipeline's end-to-end test makes of its cold run: the plan of the same config
 * (infra/cli/plan.ts) counted the same state transitions, Lambda invocations and Batch jobs, in
 * total and step by step, and its largest state stayed within the plan's bound.
 */
import assert from 'node:assert/strict';
import { pipelineNamed } from '#infra/cli/config.ts';
import { type PlanOptions, planRun } from '#infra/cli/plan.ts';
import type { ExecutionRecord } from '#infra/local/runtime.ts';

export function assertPlanMatchesRun(pipeline: string, config: unknown, record: ExecutionRecord, options: PlanOptions = {}): void {
  const plan = planRun(pipelineNamed(pipeline), config, options);
  assert.deepEqual(
    { transitions: plan.counts.transitions, lambdaInvocations: plan.counts.lambdaInvocations, batchJobs: plan.counts.batchJobs },
    { transitions: record.stats.statesEntered, lambdaInvocations: record.stats.lambdaInvocations, batchJobs: record.stats.batchJobs },
    `the plan of ${pipeline}'s cold run against the run's own counters`,
  );
  // And step by step: each step's states, invocations and jobs, as the runtime's counters keep them.
  const byStep = (counts: Record<string, { transitions: number; lambdaInvocations: number; batchJobs: number }>) =>
    Object.fromEntries(Object.entries(counts).map(([step, n]) => [step, [n.transitions, n.lambdaInvocations, n.batchJobs]]));
  assert.deepEqual(
    byStep(plan.counts.steps),
    byStep(
      Object.fromEntries(
        Object.entries(record.stats.steps ?? {}).map(([step, n]) => [
          step,
          { transitions: n.transitions, lambdaInvocations: n.lambdaInvocations, batchJobs: n.batch.length },
        ]),
      ),
    ),
    `the plan of ${pipeline}'s cold run against the run's counters by step: [transitions, Lambda invocations, Batch jobs]`,
  );
  // The plan's largest state is a bound: the run's largest state measured stays within it.
  const { largestState } = record.stats;
  assert.ok(
    largestState.bytes <= plan.payload.bytes,
    `${pipeline}: the largest state measured, ${largestState.bytes} bytes (${largestState.name}), passes the plan's bound of ${plan.payload.bytes}`,
  );
}
