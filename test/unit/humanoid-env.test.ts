/**
 * The CPU twin of the G1 joystick task over mujoco-js: the observation's layout and upstream's
 * timing (the previous action, the phase before its advance), the reward as the weighted sum of
 * its terms, termination, instability counted as an ended episode, and commands outside the
 * trained ranges refused.
 */
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { checkCommand, G1Env, type RewardTerm } from '#shared/humanoid/env.ts';
import { compileG1, type G1Sim } from '#shared/humanoid/model.ts';
import { COMMANDS, REWARD_WEIGHTS, TIMING } from '#shared/humanoid/task.ts';
import { seededRandom } from '#shared/random.ts';

const TOL = 1e-9;
function close(a: number, b: number, tol: number, what: string): void {
  assert.ok(Math.abs(a - b) <= tol, `${what}: ${a} vs ${b}`);
}
const fixed = { forward: 0.5, lateral: 0, yaw: 0 };

describe('G1 environment (CPU twin)', () => {
  let sim: G1Sim;
  before(async () => {
    sim = await compileG1({ timestep: TIMING.simDt });
  });

  it('observes the keyframe as upstream lays it out', () => {
    const env = new G1Env(sim, seededRandom(1), { noiseLevel: 0, pushes: false, randomReset: false, command: fixed });
    const obs = env.reset();
    assert.equal(obs.length, 103);
    // Upright: gravity straight down in the pelvis IMU's frame; no joint offsets or velocities.
    for (const [i, v] of [0, 0, -1].entries()) close(obs[6 + i]!, v, TOL, `gravity[${i}]`);
    assert.deepEqual(Array.from(obs.slice(9, 12)), [0.5, 0, 0]);
    for (let i = 12; i < 99; i++) close(obs[i]!, 0, TOL, `obs[${i}]`);
    // The phase: [cos left, cos right, sin left, sin right], the feet half a cycle apart.
    const phase = Array.from(obs.slice(99));
    for (const [i, v] of [1, -1, 0, 0].entries()) close(phase[i]!, v, 1e-12, `phase[${i}]`);
  });

  it('carries the previous action and the phase before its advance, as upstream', () => {
    const env = new G1Env(sim, seededRandom(1), { noiseLevel: 0, pushes: false, randomReset: false, command: fixed });
    env.reset();
    const a1 = Float64Array.from({ length: 29 }, (_, i) => ((i % 5) - 2) / 10);
    const a2 = Float64Array.from({ length: 29 }, (_, i) => ((i % 3) - 1) / 10);
    const first = env.step(a1).observation;
    assert.deepEqual(Array.from(first.slice(70, 99)), new Array(29).fill(0));
    close(first[99]!, 1, 1e-12, 'phase unchanged in the first step');
    const second = env.step(a2).observation;
    assert.deepEqual(Array.from(second.slice(70, 99)), Array.from(a1));
    // One advance of 2 pi ctrlDt times the mean gait frequency (1.375 Hz without a random reset).
    close(Math.atan2(second[101]!, second[99]!), 2 * Math.PI * TIMING.ctrlDt * 1.375, 1e-9, 'left phase');
  });

  it('sums weight x term x ctrlDt, and ends an episode whose torso turns over', () => {
    const env = new G1Env(sim, seededRandom(3), { noiseLevel: 0, pushes: false, randomReset: false, command: fixed });
    env.reset();
    let last: ReturnType<G1Env['step']> | undefined;
    for (let i = 0; i < 200; i++) {
      last = env.step(new Float64Array(29));
      let sum = 0;
      for (const [term, weight] of Object.entries(REWARD_WEIGHTS)) sum += weight * last.terms[term as RewardTerm];
      close(last.reward, sum * TIMING.ctrlDt, 1e-12, `reward at step ${i}`);
      for (const term of ['trackingLinVel', 'trackingAngVel', 'feetPhase'] as const) {
        assert.ok(last.terms[term] >= 0 && last.terms[term] <= 1, `${term} ${last.terms[term]}`);
      }
      if (last.done) break;
    }
    // Held at the keyframe with no action the robot cannot balance: it falls within 2 s.
    assert.equal(last?.ended, 'upside-down');
    assert.equal(last?.terms.termination, 1);
    assert.ok(last!.reward < -1.5, `the termination penalty (-2) dominates: ${last?.reward}`);
  });

  it('is the same episode from the same seed, with noise, pushes and a random reset', () => {
    const run = (seed: number) => {
      const env = new G1Env(sim, seededRandom(seed));
      const trace = [...env.reset()];
      const policy = seededRandom(99);
      for (let i = 0; i < 30; i++) {
        const r = env.step(Float64Array.from({ length: 29 }, () => 0.2 * (2 * policy() - 1)));
        trace.push(r.reward, ...r.observation);
        if (r.done) break;
      }
      return trace;
    };
    const [a, b, c] = [run(5), run(5), run(6)];
    assert.equal(a.length, b.length);
    for (const [i, x] of a.entries()) close(x, b[i]!, TOL, `trace[${i}]`);
    assert.notDeepEqual(a.slice(0, 103), c.slice(0, 103));
    for (const x of a) assert.ok(Number.isFinite(x));
  });

  it('adds a survival bonus while the episode goes on, and only then', () => {
    const options = { noiseLevel: 0, pushes: false, randomReset: false, command: fixed };
    const plain = new G1Env(sim, seededRandom(1), options);
    plain.reset();
    const plainRewards: number[] = [];
    let ended = false;
    for (let i = 0; i < 200 && !ended; i++) {
      const r = plain.step(new Float64Array(29));
      plainRewards.push(r.reward);
      ended = r.done;
    }
    assert.ok(ended);
    const bonus = new G1Env(sim, seededRandom(1), { ...options, survivalBonus: 5 });
    bonus.reset();
    for (const [i, reward] of plainRewards.entries()) {
      const r = bonus.step(new Float64Array(29));
      close(r.reward, reward + (r.done ? 0 : 5 * TIMING.ctrlDt), 1e-9, `step ${i}`);
    }
    assert.throws(() => new G1Env(sim, seededRandom(1), { survivalBonus: -1 }), /survivalBonus: must be a number >= 0 \(got -1\)/);
  });

  it('ends an unstable step as an episode, its terms zero but termination', () => {
    const env = new G1Env(sim, seededRandom(1), { noiseLevel: 0, pushes: false, randomReset: false, command: fixed });
    env.reset();
    (sim.data.qvel as Float64Array)[6] = 1e30;
    const r = env.step(new Float64Array(29));
    assert.equal(r.ended, 'unstable');
    assert.ok(Object.entries(r.terms).every(([k, v]) => (k === 'termination' ? v === 1 : v === 0)));
    close(r.reward, REWARD_WEIGHTS.termination * TIMING.ctrlDt, 1e-12, 'reward');
    // The next episode starts clean.
    assert.ok(env.reset().every(Number.isFinite));
  });

  it('refuses a command outside the trained ranges and an action of the wrong size, naming them', () => {
    assert.throws(
      () => checkCommand({ forward: 3, lateral: 0, yaw: 0 }),
      /^ConfigError: command\.forward: must be within the trained range \[0, 2\.5\] \(got 3\)$/,
    );
    assert.throws(() => checkCommand({ forward: 1, lateral: Number.NaN, yaw: 0 }), /command\.lateral: must be within the trained range/);
    assert.deepEqual(checkCommand({ forward: COMMANDS.forward[1], lateral: 0, yaw: 0 }), { forward: 2.5, lateral: 0, yaw: 0 });
    assert.throws(() => new G1Env(sim, seededRandom(1), { command: { forward: -1, lateral: 0, yaw: 0 } }), /command\.forward/);
    const env = new G1Env(sim, seededRandom(1));
    env.reset();
    assert.throws(() => env.step(new Float64Array(12)), /action: must have 29 numbers \(got 12\)/);
  });
});
