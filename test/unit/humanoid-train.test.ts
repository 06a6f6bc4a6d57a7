/**
 * The CPU trainer (ARS over the CPU twin in worker threads): each iteration's figures, a run
 * reproducible from its seed, and a run resumed from a saved state continuing exactly as the
 * uninterrupted one (what a checkpoint resume relies on).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { emptyStats, zeroPolicy } from '#shared/humanoid/ars.ts';
import { RolloutPool } from '#shared/humanoid/rollouts.ts';
import { OBSERVATION_SIZE } from '#shared/humanoid/task.ts';
import { type TrainSettings, trainArs } from '#shared/humanoid/train-ars.ts';

const settings = (iterations: number): TrainSettings => ({
  directions: 2,
  topDirections: 1,
  stepSize: 0.02,
  noise: 0.03,
  iterations,
  rolloutSteps: 15,
  evaluations: 1,
  seed: 3,
});
const fresh = () => ({ policy: zeroPolicy(OBSERVATION_SIZE, 29), stats: emptyStats(OBSERVATION_SIZE), iteration: 0, steps: 0 });

describe('ARS trainer', () => {
  let pool: RolloutPool;
  before(() => {
    pool = new RolloutPool(2);
  });
  after(() => pool.close());

  it('records each iteration and resumes from a saved state as if never stopped', async () => {
    const whole = await trainArs(pool, fresh(), settings(3));
    assert.deepEqual(
      whole.history.map((f) => f.iteration),
      [1, 2, 3],
    );
    for (const f of whole.history) {
      assert.ok(f.steps > 0 && f.meanStepsUpright > 0 && f.meanStepsUpright <= 15);
      assert.ok(Number.isFinite(f.meanReturn) && Number.isFinite(f.meanForwardSpeed));
    }
    assert.ok(
      whole.state.policy.weights.some((w) => w !== 0),
      'the weights moved',
    );
    assert.equal(whole.state.stats.count, whole.state.steps);
    const first = await trainArs(pool, fresh(), settings(2));
    const resumed = await trainArs(pool, first.state, settings(3));
    assert.deepEqual(
      resumed.history.map((f) => f.iteration),
      [3],
    );
    const [a, b] = [whole.state.policy.weights, resumed.state.policy.weights];
    for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i]! - b[i]!) < 1e-12, `weight ${i}`);
    assert.equal(resumed.state.steps, whole.state.steps);
  });

  it('refuses bad settings, naming them', async () => {
    await assert.rejects(trainArs(pool, fresh(), { ...settings(1), rolloutSteps: 0 }), /train\.rolloutSteps: must be a positive integer \(got 0\)/);
    await assert.rejects(trainArs(pool, fresh(), { ...settings(1), topDirections: 3 }), /ars\.topDirections/);
  });
});
