/**
 * The balance controller ARS starts from: the Riccati solver against the Riccati recursion and a
 * closed form, and the controller on the twin: a standing equilibrium, a stable closed loop, and
 * its ONNX export replayed for all 500 steps upright at each speed the replays command.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Matrix, solve } from 'ml-matrix';
import { act, zeroPolicy } from '#shared/humanoid/ars.ts';
import { balancePolicy, lqrGain, solveDare, spectralRadius } from '#shared/humanoid/balance.ts';
import { type G1Sim, compileG1 } from '#shared/humanoid/model.ts';
import { linearPolicyOnnx } from '#shared/humanoid/onnx-policy.ts';
import { loadPolicyActor } from '#shared/humanoid/policy-actor.ts';
import { replay } from '#shared/humanoid/replay.ts';
import { OBSERVATION_SIZE, TIMING } from '#shared/humanoid/task.ts';

describe('Riccati solver', () => {
  it('matches the scalar closed form', () => {
    // p = q + a^2 p - a^2 b^2 p^2 / (r + b^2 p): with a 1.2, b 1, q 1, r 1, b^2 p^2 + (r - a^2 r - q b^2) p - q r = 0.
    const [a, b, q, r] = [1.2, 1, 1, 1];
    const [qa, qb, qc] = [b * b, r - a * a * r - q * b * b, -q * r];
    const expected = (-qb + Math.sqrt(qb * qb - 4 * qa * qc)) / (2 * qa);
    const p = solveDare(new Matrix([[a]]), new Matrix([[b]]), new Matrix([[q]]), new Matrix([[r]])).get(0, 0);
    assert.ok(Math.abs(p - expected) < 1e-9 * expected, `${p} vs ${expected}`);
  });

  it('matches the Riccati recursion run to convergence on an unstable system, and its gain stabilises it', () => {
    const A = new Matrix([
      [1.05, 0.1, 0, 0.02],
      [0, 0.98, 0.2, 0],
      [0.03, 0, 1.1, 0.1],
      [0, -0.1, 0, 0.9],
    ]);
    const B = new Matrix([
      [0, 0.1],
      [0.1, 0],
      [0, 0.05],
      [0.2, 0.1],
    ]);
    const Q = Matrix.diag([1, 2, 3, 4]);
    const R = Matrix.diag([0.5, 1]);
    let P = Q.clone();
    for (let k = 0; k < 20_000; k++) {
      const btp = B.transpose().mmul(P);
      const K = solve(R.clone().add(btp.mmul(B)), btp.mmul(A));
      P = Q.clone().add(
        A.transpose()
          .mmul(P)
          .mmul(A.clone().sub(B.mmul(K))),
      );
    }
    const doubled = solveDare(A, B, Q, R);
    const scale = P.clone().abs().max();
    assert.ok(doubled.clone().sub(P).abs().max() < 1e-8 * scale, 'the doubling solution equals the recursion');
    assert.ok(spectralRadius(A) > 1, 'the open loop is unstable');
    assert.ok(spectralRadius(A.clone().sub(B.mmul(lqrGain(A, B, Q, R)))) < 1, 'the closed loop is stable');
  });
});

describe('balance controller on the twin', () => {
  let sim: G1Sim;
  before(async () => {
    sim = await compileG1({ timestep: TIMING.simDt });
  });
  after(() => sim.dispose());

  it('finds a standing equilibrium and a stable closed loop, and is reproducible', () => {
    const first = balancePolicy(sim);
    assert.ok(first.residual < 1e-3, `the free base needs ${first.residual} N at the pose`);
    assert.ok(first.closedLoopRadius <= 1 + 1e-6, `closed-loop spectral radius ${first.closedLoopRadius}`);
    assert.equal(first.policy.weights.length, (OBSERVATION_SIZE + 1) * 29);
    const second = balancePolicy(sim);
    for (let i = 0; i < first.policy.weights.length; i++) assert.ok(Math.abs(first.policy.weights[i]! - second.policy.weights[i]!) < 1e-9, `weight ${i}`);
  });

  it('stands for all 500 replay steps at each replay speed through its ONNX export, where a zero policy falls', async () => {
    const { policy } = balancePolicy(sim);
    const actor = await loadPolicyActor(linearPolicyOnnx(policy), 'balance policy.onnx');
    try {
      for (const forward of [0.5, 1.5, 2.5]) {
        const result = await replay(sim, (o) => actor.act(o), { command: { forward, lateral: 0, yaw: 0 }, filmEvery: 100 });
        assert.equal(result.metrics.stepsUpright, TIMING.replaySteps, `at ${forward} m/s: ${JSON.stringify(result.metrics)}`);
        assert.equal(result.metrics.fell, false);
      }
    } finally {
      await actor.release();
    }
    const zero = zeroPolicy(OBSERVATION_SIZE, 29);
    const out = new Float64Array(29);
    const fallen = await replay(sim, (o) => act(zero, zero.weights, o, out), { command: { forward: 0.5, lateral: 0, yaw: 0 }, filmEvery: 100 });
    assert.ok(fallen.metrics.stepsUpright < 100, `a zero policy stood ${fallen.metrics.stepsUpright} steps`);
  });
});
