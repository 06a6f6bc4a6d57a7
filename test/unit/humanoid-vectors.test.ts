/**
 * The shared test vectors (batch-jobs/humanoid-gpu/test-vectors.json): the CPU twin, regenerating them
 * now, gives the committed numbers (the GPU image checks its MJX environment against the same
 * file: batch-jobs/humanoid-gpu/test_vectors.py). Compared to 1e-6, not bit for bit: MuJoCo's
 * WebAssembly build is deterministic, but the file must survive a rounding change in a library.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { generateTestVectors, TEST_VECTORS_FILE, type TestVectors } from '#shared/humanoid/test-vectors.ts';
import { OBSERVATION_SIZE, REWARD_TERM_NAMES, REWARD_WEIGHTS, TIMING } from '#shared/humanoid/task.ts';

const close = (a: readonly number[], b: readonly number[], what: string, tolerance = 1e-6) => {
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i]! - b[i]!) <= tolerance * Math.max(1, Math.abs(b[i]!)), `${what}[${i}]: ${a[i]} vs ${b[i]}`);
};

describe('shared test vectors', () => {
  it('the CPU twin gives the committed numbers', async () => {
    const committed = JSON.parse(readFileSync(TEST_VECTORS_FILE, 'utf8')) as TestVectors;
    const now = await generateTestVectors();
    assert.equal(now.vectors.length, committed.vectors.length);
    for (const [i, v] of now.vectors.entries()) {
      const c = committed.vectors[i]!;
      assert.equal(v.name, c.name);
      close(v.before.qpos, c.before.qpos, `${v.name} before.qpos`);
      close(v.observationBefore, c.observationBefore, `${v.name} observationBefore`);
      assert.equal(v.observationBefore.length, OBSERVATION_SIZE);
      close(v.after.qpos, c.after.qpos, `${v.name} after.qpos`);
      close(v.after.qvel, c.after.qvel, `${v.name} after.qvel`);
      close(v.after.observation, c.after.observation, `${v.name} after.observation`);
      close(Object.values(v.after.terms), Object.values(c.after.terms), `${v.name} terms`);
      assert.equal(v.after.done, c.after.done);
    }
  });

  it('each reward is the sum of weight x term x ctrlDt, the terms named as upstream names them', () => {
    const committed = JSON.parse(readFileSync(TEST_VECTORS_FILE, 'utf8')) as TestVectors;
    for (const v of committed.vectors) {
      let reward = 0;
      for (const [term, weight] of Object.entries(REWARD_WEIGHTS)) {
        const name = REWARD_TERM_NAMES[term as keyof typeof REWARD_WEIGHTS];
        assert.ok(name in v.after.terms, `${v.name}: ${name}`);
        reward += weight * v.after.terms[name]!;
      }
      assert.ok(Math.abs(reward * TIMING.ctrlDt - v.after.reward) < 1e-12, v.name);
    }
    // The vectors exercise the task: several terms move between them.
    const varying = Object.keys(committed.vectors[0]!.after.terms).filter((k) => new Set(committed.vectors.map((v) => v.after.terms[k])).size > 1);
    assert.ok(varying.length >= 8, varying.join(', '));
  });
});
