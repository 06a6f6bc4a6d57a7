/**
 * The gait start (shared/humanoid/gait.ts) and the trainer's search along its basis: the gait's
 * weights are linear in its numbers (what searching a basis relies on), the start marches where
 * the balance controller stands still, a search along the basis never leaves its span, and the
 * progress objective ranks a rollout that stays up over any that falls, then by speed.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Matrix, solve } from 'ml-matrix';
import { act, emptyStats, type LinearPolicy } from '#shared/humanoid/ars.ts';
import { balancePolicy } from '#shared/humanoid/balance.ts';
import { G1Env } from '#shared/humanoid/env.ts';
import { GAIT_DIRECTIONS, type GaitParameters, gaitDelta, gaitStart, MARCH } from '#shared/humanoid/gait.ts';
import { type G1Sim, compileG1 } from '#shared/humanoid/model.ts';
import { RolloutPool, type RolloutResult } from '#shared/humanoid/rollouts.ts';
import { TIMING } from '#shared/humanoid/task.ts';
import { PROGRESS_WEIGHT, rolloutScore, trainArs } from '#shared/humanoid/train-ars.ts';
import { seededRandom } from '#shared/random.ts';

let sim: G1Sim;
let balance: LinearPolicy;

before(async () => {
  sim = await compileG1({ timestep: TIMING.simDt });
  balance = balancePolicy(sim).policy;
});
after(() => sim.dispose());

/** Each foot's highest point (m) over the first `steps` control steps, and the step it was reached. */
function footPeaks(policy: LinearPolicy, steps: number): { left: [number, number]; right: [number, number]; lasted: number } {
  const { mujoco, model, data } = sim;
  const env = new G1Env(sim, seededRandom(0), { noiseLevel: 0, pushes: false, randomReset: false, command: { forward: 0.5, lateral: 0, yaw: 0 } });
  const site = (name: string) => mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE.value, name);
  const [left, right] = [site('left_foot'), site('right_foot')];
  const peaks = { left: [0, 0] as [number, number], right: [0, 0] as [number, number], lasted: 0 };
  let observation = env.reset();
  const action = new Float64Array(env.actionSize);
  for (let t = 0; t < steps; t++) {
    act(policy, policy.weights, observation, action);
    const result = env.step(action);
    observation = result.observation;
    peaks.lasted = t + 1;
    const xpos = data.site_xpos as Float64Array;
    for (const [foot, id] of [
      ['left', left],
      ['right', right],
    ] as const) {
      if (xpos[3 * id + 2]! > peaks[foot][0]) peaks[foot] = [xpos[3 * id + 2]!, t];
    }
    if (result.done) break;
  }
  return peaks;
}

describe('gait start', () => {
  it("is linear in the gait's numbers, so a search along its basis is a search of gaits", () => {
    const other: GaitParameters = {
      cos: [0.1, -0.05, 0.02, 0, 0.03, 0.01],
      sin: [-0.2, 0.04, 0, 0.1, 0.05, -0.02],
      offset: [0.05, 0.1, -0.03, 0.02, -0.04, 0],
      velocityReference: 0.4,
      hipPitchOnSpeed: 0.25,
      hipPitchOnVelocity: -0.1,
      hipRollOnVelocity: 0.2,
    };
    const scaled = (p: GaitParameters, k: number): GaitParameters => ({
      cos: p.cos.map((v) => k * v),
      sin: p.sin.map((v) => k * v),
      offset: p.offset.map((v) => k * v),
      velocityReference: k * p.velocityReference,
      hipPitchOnSpeed: k * p.hipPitchOnSpeed,
      hipPitchOnVelocity: k * p.hipPitchOnVelocity,
      hipRollOnVelocity: k * p.hipRollOnVelocity,
    });
    const sum = (p: GaitParameters, q: GaitParameters): GaitParameters => ({
      cos: p.cos.map((v, i) => v + q.cos[i]!),
      sin: p.sin.map((v, i) => v + q.sin[i]!),
      offset: p.offset.map((v, i) => v + q.offset[i]!),
      velocityReference: p.velocityReference + q.velocityReference,
      hipPitchOnSpeed: p.hipPitchOnSpeed + q.hipPitchOnSpeed,
      hipPitchOnVelocity: p.hipPitchOnVelocity + q.hipPitchOnVelocity,
      hipRollOnVelocity: p.hipRollOnVelocity + q.hipRollOnVelocity,
    });
    const whole = gaitDelta(balance, sum(scaled(MARCH, 2), scaled(other, -3)));
    const [a, b] = [gaitDelta(balance, MARCH), gaitDelta(balance, other)];
    const largest = Math.max(...whole.map(Math.abs));
    for (let i = 0; i < whole.length; i++) assert.ok(Math.abs(whole[i]! - (2 * a[i]! - 3 * b[i]!)) <= 1e-9 * largest, `weight ${i}`);
    const start = gaitStart(balance);
    assert.equal(start.basis.length, GAIT_DIRECTIONS.length);
    assert.ok(!GAIT_DIRECTIONS.includes('cos.knee'), "the march's knee amplitude is held");
  });

  it('marches: each foot lifts in turn, where the balance controller keeps both on the floor', () => {
    const standing = footPeaks(balance, 60);
    assert.equal(standing.lasted, 60);
    const floor = Math.max(standing.left[0], standing.right[0]);
    const marching = footPeaks(gaitStart(balance).policy, 60);
    // Measured: the left foot 3.0 cm above the standing height at step 3, the right 4.6 cm at step 21.
    assert.ok(marching.left[0] > floor + 0.02, `left foot at most ${marching.left[0]} m against ${floor} m standing`);
    assert.ok(marching.right[0] > floor + 0.02, `right foot at most ${marching.right[0]} m against ${floor} m standing`);
    assert.ok(marching.left[1] < marching.right[1], 'the left foot (phase 0) swings first');
  });

  it('searches only along its basis, and ranks rollouts by staying up, then by speed', async () => {
    const start = gaitStart(balance);
    const pool = new RolloutPool(2);
    try {
      const trained = await trainArs(
        pool,
        { policy: start.policy, stats: emptyStats(balance.observationSize), iteration: 0, steps: 0 },
        {
          directions: 3,
          topDirections: 2,
          stepSize: 0.02,
          noise: 0.03,
          iterations: 2,
          rolloutSteps: 40,
          evaluations: 1,
          seed: 5,
          normaliserIterations: 0,
          basis: start.basis,
          objective: 'progress',
          env: { noiseLevel: 0, pushes: false, randomReset: false, command: { forward: 0.5, lateral: 0, yaw: 0 } },
        },
      );
      const moved = trained.state.policy.weights.map((w, i) => w - start.policy.weights[i]!);
      assert.ok(
        moved.some((v) => v !== 0),
        'the search moved the weights',
      );
      // The move in the basis's coordinates (least squares) reproduces it: it never left the span.
      const B = new Matrix(start.basis.map((b) => Array.from(b))).transpose();
      const coordinates = solve(B.transpose().mmul(B), B.transpose().mmul(Matrix.columnVector(Array.from(moved))));
      const residual = B.mmul(coordinates)
        .sub(Matrix.columnVector(Array.from(moved)))
        .abs()
        .max();
      assert.ok(residual <= 1e-9 * Math.max(...moved.map(Math.abs)), `residual ${residual}`);
      assert.deepEqual(trained.state.policy.mean, start.policy.mean, "the controller's normaliser holds");
    } finally {
      await pool.close();
    }
    const rollout = (steps: number, forwardSpeed: number, ended: string | null = null): RolloutResult => ({ return: 0, steps, ended, forwardSpeed });
    assert.equal(rolloutScore(rollout(500, 0.1), 500, 'progress'), 1 + PROGRESS_WEIGHT * 0.1);
    assert.equal(rolloutScore(rollout(250, 2, 'upside-down'), 500, 'progress'), -0.5);
    assert.ok(rolloutScore(rollout(500, -0.09), 500, 'progress') > rolloutScore(rollout(499, 3, 'feet-touch'), 500, 'progress'));
    assert.equal(rolloutScore({ ...rollout(500, 0.1), return: 12.5 }, 500), 12.5, "return: the task's reward");
  });
});
