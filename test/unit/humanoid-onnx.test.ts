/**
 * The linear policy's ONNX export, run by onnxruntime-node: its actions agree with the policy's
 * own (float64 in TypeScript, float32 in ONNX: to 1e-5) on observations of the real environment.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as ort from 'onnxruntime-node';
import { act, zeroPolicy } from '#shared/humanoid/ars.ts';
import { G1Env } from '#shared/humanoid/env.ts';
import { compileG1 } from '#shared/humanoid/model.ts';
import { linearPolicyOnnx, POLICY_INPUT, POLICY_OUTPUT } from '#shared/humanoid/onnx-policy.ts';
import { OBSERVATION_SIZE, TIMING } from '#shared/humanoid/task.ts';
import { seededRandom } from '#shared/random.ts';

describe('linear policy as ONNX', () => {
  it('gives the actions the policy gives, to float32 precision', async () => {
    const random = seededRandom(8);
    const policy = zeroPolicy(OBSERVATION_SIZE, 29);
    for (let i = 0; i < policy.weights.length; i++) policy.weights[i] = 0.3 * (2 * random() - 1);
    for (let j = 0; j < OBSERVATION_SIZE; j++) {
      policy.mean[j] = 0.1 * (2 * random() - 1);
      policy.std[j] = 0.5 + random();
    }
    const session = await ort.InferenceSession.create(linearPolicyOnnx(policy), { intraOpNumThreads: 1 });
    assert.deepEqual([session.inputNames, session.outputNames], [[POLICY_INPUT], [POLICY_OUTPUT]]);
    // A batch of observations from the environment, the policy acting.
    const sim = await compileG1({ timestep: TIMING.simDt });
    const env = new G1Env(sim, seededRandom(2));
    const observations: Float64Array[] = [env.reset()];
    const action = new Float64Array(29);
    for (let t = 0; t < 7; t++) {
      const r = env.step(act(policy, policy.weights, observations.at(-1)!, action));
      observations.push(r.observation);
    }
    sim.dispose();
    const batch = new Float32Array(observations.length * OBSERVATION_SIZE);
    observations.forEach((o, b) => {
      batch.set(o, b * OBSERVATION_SIZE);
    });
    const out = await session.run({ [POLICY_INPUT]: new ort.Tensor('float32', batch, [observations.length, OBSERVATION_SIZE]) });
    const onnxActions = out[POLICY_OUTPUT]!.data as Float32Array;
    assert.deepEqual(out[POLICY_OUTPUT]!.dims, [observations.length, 29]);
    let worst = 0;
    for (const [b, o] of observations.entries()) {
      const own = act(policy, policy.weights, o, new Float64Array(29));
      for (let i = 0; i < 29; i++) worst = Math.max(worst, Math.abs(own[i]! - onnxActions[b * 29 + i]!));
    }
    assert.ok(worst < 1e-5, `largest difference ${worst}`);
  });
});
