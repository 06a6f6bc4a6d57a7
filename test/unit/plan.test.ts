/**
 * The plan walker (pipelines/steps/plan.ts) on small definitions counted by hand: one path chosen
 * by the model, each state counted, Maps per item, Distributed Map items outside the history.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AslGraph } from '#pipelines/steps/history.ts';
import { planCounts, type PlanModel } from '#pipelines/steps/plan.ts';

const lambda = { Type: 'Task', Resource: 'arn:aws:states:::lambda:invoke', Parameters: { FunctionName: 'fn-a' } };
const job = { Type: 'Task', Resource: 'arn:aws:states:::batch:submitJob.sync', Parameters: { JobDefinition: 'def-1' } };

const graph = (mode?: string): AslGraph => ({
  StartAt: 'Hit?',
  States: {
    'Hit?': { Type: 'Choice', Choices: [{ Next: 'Done' }], Default: 'Items' },
    Items: {
      Type: 'Map',
      ItemProcessor: {
        ...(mode ? { ProcessorConfig: { Mode: mode } } : {}),
        StartAt: 'Call',
        States: { Call: { ...lambda, Next: 'Store' }, Store: { Type: 'Task', Resource: 'arn:aws:states:::aws-sdk:dynamodb:putItem', End: true } },
      } as AslGraph,
      Next: 'Job',
    },
    Job: { ...job, Next: 'Done' },
    Done: { Type: 'Succeed' },
  },
});

const model = (hit: boolean, items: number): PlanModel => ({
  decide: (_name, state) => (hit ? state.Choices![0]!.Next : state.Default!),
  mapItems: () => items,
});

describe('plan walker', () => {
  it('counts one path: transitions, history events, invocations, jobs and service calls', () => {
    const cold = planCounts(graph(), model(false, 3));
    // Choice, Map, 3 x (Call, Store), Job, Done.
    assert.equal(cold.transitions, 1 + 1 + 3 * 2 + 1 + 1);
    // Execution 2 + Choice 2 + Map 4 + 3 x (2 + 5 + 5) + .sync 6 + Succeed 2.
    assert.equal(cold.historyEvents, 2 + 2 + 4 + 3 * 12 + 6 + 2);
    assert.deepEqual(cold.lambdaByFunction, { 'fn-a': 3 });
    assert.deepEqual(cold.batchByDefinition, { 'def-1': 1 });
    assert.deepEqual(cold.serviceCalls, { 'dynamodb:putItem': 3 });
    assert.deepEqual(cold.mapWidths, { Items: 3 });
    const hit = planCounts(graph(), model(true, 3));
    assert.equal(hit.transitions, 2);
    assert.equal(hit.batchJobs, 0);
  });

  it("leaves a Distributed Map's items out of the parent's history, not out of its transitions", () => {
    const inline = planCounts(graph(), model(false, 10));
    const distributed = planCounts(graph('DISTRIBUTED'), model(false, 10));
    assert.equal(distributed.transitions, inline.transitions);
    assert.equal(distributed.historyEvents, inline.historyEvents - 10 * 12);
  });

  it('refuses a branch the Choice does not have, a bad item count, and a walk that never ends', () => {
    assert.throws(() => planCounts(graph(), { decide: () => 'Elsewhere', mapItems: () => 1 }), /decide: .*not a branch of the Choice state "Hit\?".*Elsewhere/);
    assert.throws(
      () => planCounts(graph(), { ...model(false, 0), mapItems: () => -1 }),
      /mapItems: of the Map state "Items" must be a count of items \(got -1\)/,
    );
    const loop: AslGraph = {
      StartAt: 'Again?',
      States: { 'Again?': { Type: 'Choice', Choices: [{ Next: 'Again?' }], Default: 'End' }, End: { Type: 'Succeed' } },
    };
    assert.throws(() => planCounts(loop, { decide: (_n, s) => s.Choices![0]!.Next, mapItems: () => 0 }), /the walk loops/);
  });
});
