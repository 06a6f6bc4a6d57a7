/**
 * A checkpoint's policy.onnx as an actor for the CPU twin, run by onnxruntime-node, with the
 * policy contract checked on load: one input `observation` [batch, 103], the output `action`
 * [batch, 29].
 */
import * as ort from 'onnxruntime-node';
import { ConfigError } from '../errors.ts';
import { POLICY_INPUT, POLICY_OUTPUT } from './onnx-policy.ts';
import { ACTIONS, OBSERVATION_SIZE } from './task.ts';

/** A policy ready to act: one observation in, one action out. */
export interface OnnxActor {
  act(observation: Float64Array): Promise<Float32Array>;
  release(): Promise<void>;
}

/**
 * Loads policy.onnx's bytes as an actor, refusing (named by `source`) a model that onnxruntime
 * cannot load, or whose input or output is not the policy's: `observation` [batch, 103] in,
 * `action` [batch, 29] out, checked on a probe batch of two zero observations.
 */
export async function loadPolicyActor(bytes: Uint8Array, source: string): Promise<OnnxActor> {
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential' });
  } catch (error) {
    throw new ConfigError(source, `${bytes.byteLength} bytes`, `is not an ONNX model onnxruntime can load (${(error as Error).message})`);
  }
  const refuse = (why: string): never => {
    void session.release();
    throw new ConfigError(source, `inputs [${session.inputNames.join(', ')}], outputs [${session.outputNames.join(', ')}]`, why);
  };
  if (session.inputNames.length !== 1 || session.inputNames[0] !== POLICY_INPUT || session.outputNames[0] !== POLICY_OUTPUT) {
    refuse(`is not a policy: it must have one input "${POLICY_INPUT}" and the output "${POLICY_OUTPUT}"`);
  }
  const run = async (batch: number, data: Float32Array) =>
    (await session.run({ [POLICY_INPUT]: new ort.Tensor('float32', data, [batch, OBSERVATION_SIZE]) }))[POLICY_OUTPUT]!;
  try {
    const probe = await run(2, new Float32Array(2 * OBSERVATION_SIZE));
    if (probe.dims.length !== 2 || probe.dims[0] !== 2 || probe.dims[1] !== ACTIONS.size) {
      refuse(`is not a policy of the expected shape: a batch of 2 observations gave an output of shape [${probe.dims.join(', ')}], not [2, ${ACTIONS.size}]`);
    }
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    refuse(`is not a policy of the expected shape: it cannot act on observations of ${OBSERVATION_SIZE} numbers (${(error as Error).message})`);
  }
  const input = new Float32Array(OBSERVATION_SIZE);
  return {
    async act(observation) {
      input.set(observation);
      return (await run(1, input)).data as Float32Array;
    },
    release: () => session.release(),
  };
}
