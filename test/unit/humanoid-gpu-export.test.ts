/**
 * The GPU job's policy export (batch-jobs/humanoid-gpu/checkpoints.py) read by what reads every
 * checkpoint here: make_fixture.py exports a policy of the real sizes (103 -> 512 -> 256 -> 128 ->
 * 58, swish, Brax's normaliser, tanh of the location half) from seeded weights with its numpy
 * reference's actions; onnxruntime-node, through must act the same to 1e-4
 * (float32 through two different kernels: never compared bit for bit). JAX is not installed
 * here, so the training itself is not run: this checks the contract the replays depend on.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { loadPolicyActor } from '#shared/humanoid/policy-actor.ts';

const python = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

describe("the GPU job's ONNX export", () => {
  it('acts, under onnxruntime-node, as its numpy reference does', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fp-humanoid-gpu-'));
    try {
      const jobDir = join(REPO_ROOT, 'batch-jobs', 'humanoid-gpu');
      const made = spawnSync(python, [join(jobDir, 'make_fixture.py'), dir], {
        cwd: jobDir,
        encoding: 'utf8',
        env: { ...process.env, PYTHONPATH: join(REPO_ROOT, 'batch-jobs', 'common') },
      });
      assert.equal(made.status, 0, made.stderr);
      const expected = JSON.parse(readFileSync(join(dir, 'expected.json'), 'utf8')) as { observations: number[][]; actions: number[][] };
      const actor = await loadPolicyActor(readFileSync(join(dir, 'policy.onnx')), 'fixture policy.onnx');
      try {
        let worst = 0;
        for (const [row, observation] of expected.observations.entries()) {
          const action = await actor.act(Float64Array.from(observation));
          assert.equal(action.length, 29);
          for (let i = 0; i < 29; i++) worst = Math.max(worst, Math.abs(action[i]! - expected.actions[row]![i]!));
        }
        assert.ok(worst < 1e-4, `largest difference ${worst}`);
        // Not a degenerate policy: its actions spread over (-1, 1).
        const all = expected.actions.flat();
        assert.ok(Math.max(...all) - Math.min(...all) > 0.5);
      } finally {
        await actor.release();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
