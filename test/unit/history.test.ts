/**
 * The history model (pipelines/steps/history.ts) on small definitions whose events are counted by
 * hand from what a Standard execution records per state.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '#shared/errors.ts';
import { type AslGraph, pathEvents } from '#pipelines/steps/history.ts';

const lambda = { Type: 'Task', Resource: 'arn:aws:states:::lambda:invoke' };

describe('history events of a definition', () => {
  it('counts tasks, .sync jobs, passes and choices along the longest path', () => {
    const graph: AslGraph = {
      StartAt: 'A',
      States: {
        A: { Type: 'Pass', Next: 'Hit?' },
        'Hit?': { Type: 'Choice', Choices: [{ Next: 'Short' }], Default: 'Job' },
        Short: { Type: 'Pass', End: true },
        Job: { Type: 'Task', Resource: 'arn:aws:states:::batch:submitJob.sync', Next: 'Read', Catch: [{ Next: 'Failed' }] },
        Read: { ...lambda, End: true },
        Failed: { Type: 'Fail' },
      },
    };
    // Pass 2 + Choice 2 + .sync task 6 + the longer of Read (5) and Failed (2).
    assert.equal(pathEvents(graph, 'A', { mapItems: {} }), 2 + 2 + 6 + 5);
    assert.equal(pathEvents(graph, 'A', { mapItems: {}, until: ['Job'] }), 2 + 2 + 2, 'stops before Job; Short is the other branch');
  });

  it('counts a Map per item and a Parallel around its branches', () => {
    const item: AslGraph = {
      StartAt: 'Both',
      States: {
        Both: {
          Type: 'Parallel',
          Branches: [
            { StartAt: 'X', States: { X: { ...lambda, End: true } } },
            { StartAt: 'Y', States: { Y: { Type: 'Pass', End: true } } },
          ],
          End: true,
        },
      },
    };
    const graph: AslGraph = { StartAt: 'Items', States: { Items: { Type: 'Map', ItemProcessor: item, End: true } } };
    const perItem = 2 + (4 + 5 + 2);
    assert.equal(pathEvents(graph, 'Items', { mapItems: { Items: 0 } }), 4);
    assert.equal(pathEvents(graph, 'Items', { mapItems: { Items: 3 } }), 4 + 3 * perItem);
  });

  it('refuses a Map without a count and a loop without a stop, naming them', () => {
    const graph: AslGraph = {
      StartAt: 'Items',
      States: {
        Items: { Type: 'Map', ItemProcessor: { StartAt: 'P', States: { P: { Type: 'Pass', End: true } } }, Next: 'More?' },
        'More?': { Type: 'Choice', Choices: [{ Next: 'Items' }], Default: 'Done' },
        Done: { Type: 'Succeed' },
      },
    };
    assert.throws(
      () => pathEvents(graph, 'Items', { mapItems: {} }),
      (e: unknown) => e instanceof ConfigError && e.field === 'mapItems' && /Items/.test(e.message),
    );
    assert.throws(
      () => pathEvents(graph, 'Items', { mapItems: { Items: 1 } }),
      (e: unknown) => e instanceof ConfigError && e.field === 'until',
    );
    assert.equal(pathEvents(graph, 'Items', { mapItems: { Items: 1 }, until: ['More?'] }), 4 + 2 + 2);
  });
});
