/**
 * A linear policy (ars.ts) as an ONNX model, the format every policy of this pipeline crosses in,
 * whichever trainer made it: input `observation` (float32, batch x 103), output `action` (batch x
 * 29) = tanh(((observation - mean) / std) W^T + b). Encoded with onnx-proto (ONNX's protobuf schema),
 * opset 13, and read back by onnxruntime-node like any exported policy.
 */
import onnxProto from 'onnx-proto';
import type { LinearPolicy } from './ars.ts';

const { onnx } = onnxProto;
export const POLICY_INPUT = 'observation';
export const POLICY_OUTPUT = 'action';

function tensor(name: string, dims: number[], values: ArrayLike<number>) {
  return onnx.TensorProto.create({ name, dims, dataType: onnx.TensorProto.DataType.FLOAT, floatData: Array.from(values, (v) => Math.fround(v)) });
}

function valueInfo(name: string, dims: (number | string)[]) {
  return onnx.ValueInfoProto.create({
    name,
    type: {
      tensorType: {
        elemType: onnx.TensorProto.DataType.FLOAT,
        shape: { dim: dims.map((d) => (typeof d === 'string' ? { dimParam: d } : { dimValue: d })) },
      },
    },
  });
}

/** The ONNX bytes of a linear policy. */
export function linearPolicyOnnx(policy: LinearPolicy, docString = 'G1 joystick policy: tanh of a normalised linear map (ARS)'): Uint8Array {
  const { observationSize: n, actionSize: m } = policy;
  // W^T, observations x actions, so that a row of observations times it gives a row of actions.
  const transposed = new Float64Array(n * m);
  const bias = new Float64Array(m);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) transposed[j * m + i] = policy.weights[i * (n + 1) + j]!;
    bias[i] = policy.weights[i * (n + 1) + n]!;
  }
  const graph = onnx.GraphProto.create({
    name: 'linear_policy',
    node: [
      onnx.NodeProto.create({ opType: 'Sub', input: [POLICY_INPUT, 'mean'], output: ['centred'] }),
      onnx.NodeProto.create({ opType: 'Div', input: ['centred', 'std'], output: ['normalised'] }),
      onnx.NodeProto.create({ opType: 'MatMul', input: ['normalised', 'weights'], output: ['product'] }),
      onnx.NodeProto.create({ opType: 'Add', input: ['product', 'bias'], output: ['linear'] }),
      onnx.NodeProto.create({ opType: 'Tanh', input: ['linear'], output: [POLICY_OUTPUT] }),
    ],
    initializer: [tensor('mean', [n], policy.mean), tensor('std', [n], policy.std), tensor('weights', [n, m], transposed), tensor('bias', [m], bias)],
    input: [valueInfo(POLICY_INPUT, ['batch', n])],
    output: [valueInfo(POLICY_OUTPUT, ['batch', m])],
  });
  const model = onnx.ModelProto.create({
    irVersion: 7,
    opsetImport: [{ domain: '', version: 13 }],
    producerName: 'frontier-pipelines',
    docString,
    graph,
  });
  return onnx.ModelProto.encode(model).finish();
}
