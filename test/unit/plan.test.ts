/**
 * The plan walker (pipelines/steps/plan.ts) on small definitions counted by hand: one path chosen
 * by the model, each state counted, Maps per item, Distributed Map items outside the history.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AslGraph } from '#pipelines/steps/history.ts';
import { coldModel, planCounts, type PlanModel } from '#pipelines/steps/plan.ts';

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

  it("walks a failing item's branch up to the state that fails, then its Catch path; the tolerance decides the rest", () => {
    // A fan-out as pipelines/steps/fan-out.ts builds it: a guard Parallel with a Catch per item.
    const fanOut: AslGraph = {
      StartAt: 'sq: Items',
      States: {
        'sq: Items': {
          Type: 'Map',
          ItemProcessor: {
            StartAt: 'sq: Item',
            States: {
              'sq: Item': {
                Type: 'Parallel',
                Branches: [
                  {
                    StartAt: 'Lookup',
                    States: {
                      Lookup: { Type: 'Task', Resource: 'arn:aws:states:::dynamodb:getItem', Next: 'Call' },
                      Call: { ...lambda, Next: 'Shape' },
                      Shape: { Type: 'Pass', Next: 'Store' },
                      Store: { Type: 'Task', Resource: 'arn:aws:states:::dynamodb:putItem', Next: 'Ok' },
                      Ok: { Type: 'Pass', End: true },
                    },
                  },
                ],
                Catch: [{ Next: 'sq: Failure' }],
                Next: 'sq: Item done',
              },
              'sq: Item done': { Type: 'Pass', End: true },
              'sq: Failure': { Type: 'Pass', Next: 'sq: Store cause' },
              'sq: Store cause': { Type: 'Task', Resource: 'arn:aws:states:::aws-sdk:s3:putObject', Next: 'sq: Item failed' },
              'sq: Item failed': { Type: 'Pass', End: true },
            },
          } as AslGraph,
          Next: 'sq: Failures?',
        },
        'sq: Failures?': { Type: 'Choice', Choices: [{ Next: 'sq: Within tolerance?' }], Default: 'Done' },
        'sq: Within tolerance?': { Type: 'Choice', Choices: [{ Next: 'sq: Too many failures' }], Default: 'Done' },
        'sq: Too many failures': { Type: 'Fail' },
        Done: { ...lambda, End: true },
      },
    };
    const items = [5, -1, 7, -2];
    const spec = (maxFailures: number) => ({
      pipeline: 'test',
      mapItems: () => items.length,
      failsAt: (_guard: string, at: { items: readonly { index: number }[] }) => (items[at.items.at(-1)!.index]! < 0 ? 'Call' : undefined),
      tolerates: (_step: string, failed: number) => failed <= maxFailures,
    });
    // Success: Map + 4 x (Parallel, Lookup, Call, Shape, Store, Ok, Item done) + Failures? + Done.
    const none = planCounts(fanOut, coldModel({ pipeline: 'test', mapItems: () => items.length }));
    assert.equal(none.transitions, 1 + 4 * 7 + 2);
    // Two fail at Call: each walks Parallel, Lookup, Call, then Failure, Store cause, Item failed (6).
    const tolerated = planCounts(fanOut, coldModel(spec(2)));
    assert.equal(tolerated.transitions, 1 + 2 * 7 + 2 * 6 + 3);
    assert.equal(tolerated.lambdaInvocations, 4 + 1);
    assert.deepEqual(tolerated.serviceCalls, { 'dynamodb:getItem': 4, 'dynamodb:putItem': 2, 's3:putObject': 2 });
    // Past the tolerance the run fails there: no Done.
    const refused = planCounts(fanOut, coldModel(spec(1)));
    assert.equal(refused.transitions, 1 + 2 * 7 + 2 * 6 + 3);
    assert.equal(refused.lambdaInvocations, 4);
    // Every item failing at the last Task on its path (Store), tolerated.
    const failing = planCounts(fanOut, coldModel(spec(0)).withEveryItemFailing!());
    assert.equal(failing.transitions, 1 + 4 * (5 + 3) + 3);
    assert.equal(failing.lambdaInvocations, 4 + 1);
    // A state not on the branch's path is refused.
    assert.throws(() => planCounts(fanOut, coldModel({ ...spec(4), failsAt: () => 'Nowhere' })), /failsAt: .*Nowhere/);
  });
});
