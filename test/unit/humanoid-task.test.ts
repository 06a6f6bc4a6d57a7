/**
 * The task spec against upstream's: the observation adds up, and every weight and command range
 * that differs from upstream's is in the list of differences the report prints (the review found
 * such a list undercounted once).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  COMMANDS,
  OBSERVATION_LAYOUT,
  OBSERVATION_SIZE,
  REWARD_TERM_NAMES,
  REWARD_WEIGHTS,
  TIMING,
  UPSTREAM_COMMANDS,
  UPSTREAM_DIFFERENCES,
  UPSTREAM_REWARD_WEIGHTS,
} from '#shared/humanoid/task.ts';

describe('G1 task spec', () => {
  it('has upstream timing and a 103-number observation', () => {
    assert.equal(OBSERVATION_SIZE, 103);
    assert.deepEqual(
      OBSERVATION_LAYOUT.map(([name]) => name),
      ['linearVelocity', 'gyro', 'gravity', 'command', 'jointPositionOffset', 'jointVelocity', 'lastAction', 'phase'],
    );
    assert.equal(Math.round(TIMING.ctrlDt / TIMING.simDt), 10);
  });

  it('lists every weight and command range that differs from upstream', () => {
    const listed = new Set(UPSTREAM_DIFFERENCES.map((d) => d.what));
    const weights = (Object.keys(REWARD_WEIGHTS) as (keyof typeof REWARD_WEIGHTS)[]).filter((k) => REWARD_WEIGHTS[k] !== UPSTREAM_REWARD_WEIGHTS[k]);
    assert.deepEqual(weights, ['trackingLinVel', 'feetAirTime']);
    for (const k of weights) assert.ok(listed.has(`${REWARD_TERM_NAMES[k]} weight`), REWARD_TERM_NAMES[k]);
    const ranges = (['forward', 'lateral', 'yaw'] as const).filter((k) => COMMANDS[k].join() !== UPSTREAM_COMMANDS[k].join());
    assert.deepEqual(ranges, ['forward', 'lateral', 'yaw']);
    for (const k of ranges) assert.ok(listed.has(`${k} command range`), k);
    for (const d of UPSTREAM_DIFFERENCES) assert.notEqual(d.upstream, d.here, d.what);
  });
});
