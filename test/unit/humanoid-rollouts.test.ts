/**
 * Rollouts of a linear policy in the CPU twin: in-process and in worker threads the same seed
 * gives the same episode, and the observation sums for the normaliser come back with it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { zeroPolicy } from '#shared/humanoid/ars.ts';
import { compileG1, type G1Sim } from '#shared/humanoid/model.ts';
import { RolloutPool, rollout } from '#shared/humanoid/rollouts.ts';
import { OBSERVATION_SIZE, TIMING } from '#shared/humanoid/task.ts';
import { seededRandom } from '#shared/random.ts';

describe('G1 rollouts', () => {
  let sim: G1Sim;
  let pool: RolloutPool;
  before(async () => {
    sim = await compileG1({ timestep: TIMING.simDt });
    pool = new RolloutPool(2);
  });
  after(async () => {
    await pool.close();
    sim.dispose();
  });

  it('gives the same episode from the same seed in-process and in a worker', async () => {
    const policy = zeroPolicy(OBSERVATION_SIZE, 29);
    const random = seededRandom(4);
    for (let i = 0; i < policy.weights.length; i++) policy.weights[i] = 0.02 * (2 * random() - 1);
    const request = { weights: policy.weights, mean: policy.mean, std: policy.std, seed: 11, steps: 60, collectStats: true };
    const [here, there, other] = [rollout(sim, request), await pool.run(request), await pool.run({ ...request, seed: 12 })];
    assert.ok(here.steps > 0 && here.steps <= 60);
    assert.equal(there.steps, here.steps);
    assert.ok(Math.abs(there.return - here.return) < 1e-9, `${there.return} vs ${here.return}`);
    assert.ok(Math.abs(there.forwardSpeed - here.forwardSpeed) < 1e-9);
    assert.notEqual(other.return, here.return);
    assert.equal(here.stats?.count, here.steps);
    assert.equal(there.stats?.count, here.steps);
    assert.ok(Number.isFinite(here.forwardSpeed));
  });

  it('runs more rollouts than workers, each answered', async () => {
    const policy = zeroPolicy(OBSERVATION_SIZE, 29);
    const results = await Promise.all(
      [1, 2, 3, 4, 5].map((seed) => pool.run({ weights: policy.weights, mean: policy.mean, std: policy.std, seed, steps: 20 })),
    );
    assert.equal(results.length, 5);
    for (const r of results) assert.ok(r.steps > 0 && Number.isFinite(r.return));
  });
});
