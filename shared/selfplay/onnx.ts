/**
 * An ONNX network as a Connect Four `Policy` (shared/selfplay/match.ts), run with onnxruntime-node on the
 * CPU.
 *
 * The contract a snapshot must meet, checked when it loads: exactly one input, float32
 * [batch, 126] (the observation of shared/selfplay/connect4.ts), exactly one output, float32 [batch, 7]
 * (one logit per column), the batch dimension dynamic. Names are free: they are read from the
 * session. The check reads the session's metadata and then runs a 2-row probe, which also catches
 * what metadata cannot show (a symbolic last dimension, a graph that fails at run time). Anything
 * wrong, including a file that is not a model at all, raises InvalidPolicyModel naming the file.
 *
 * One thread by default: a match Lambda has about one core, and measured on a shared 2-core
 * machine, extra ORT threads only fought with whatever else ran.
 */
import { readFile } from 'node:fs/promises';
import * as ort from 'onnxruntime-node';
import { COLS, OBSERVATION_SIZE } from '#shared/selfplay/connect4.ts';
import { NotFoundError } from '#shared/errors.ts';
import { selectFromLogits, type MoveContext, type Policy } from '#shared/selfplay/match.ts';
import { InvalidPolicyModel } from '#shared/selfplay/errors.ts';

export interface OnnxPolicyOptions {
  /** The policy's name in match results (a snapshot id, for example). */
  readonly name: string;
  /** ORT intra-op threads; 1 unless the caller owns more than one core. */
  readonly intraOpNumThreads?: number;
}

/** A loaded network. Call `release` when done, or the native session lives until exit. */
export interface OnnxPolicy extends Policy {
  /** The file path, or the name and size of the bytes it was loaded from: used in error messages. */
  readonly source: string;
  readonly inputName: string;
  readonly outputName: string;
  release(): Promise<void>;
}

/**
 * Loads a policy from a file path or from the model's bytes (as read from S3). Throws
 * InvalidPolicyModel when the model is unreadable or breaks the contract (module comment), and
 * NotFoundError when the path does not exist.
 */
export async function loadOnnxPolicy(pathOrBytes: string | Uint8Array, options: OnnxPolicyOptions): Promise<OnnxPolicy> {
  const source = typeof pathOrBytes === 'string' ? pathOrBytes : `${options.name} (${pathOrBytes.byteLength} bytes)`;
  const bytes = typeof pathOrBytes === 'string' ? await readModelFile(pathOrBytes) : pathOrBytes;
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(bytes, {
      intraOpNumThreads: options.intraOpNumThreads ?? 1,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
    });
  } catch (error) {
    throw new InvalidPolicyModel(source, `onnxruntime cannot load it: ${messageOf(error)}`, { cause: error });
  }
  try {
    checkMetadata(source, session);
    await probe(source, session);
  } catch (error) {
    await session.release().catch(() => undefined);
    throw error;
  }
  return new OnnxSessionPolicy(options.name, source, session);
}

async function readModelFile(path: string): Promise<Uint8Array> {
  try {
    return await readFile(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new NotFoundError(`${path}: no such ONNX model file`);
    throw error;
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Checks one tensor's metadata against [batch, width] float32; symbolic dims are left to the probe. */
function checkTensor(source: string, role: 'input' | 'output', meta: ort.InferenceSession.ValueMetadata, width: number): void {
  const what = `${role} "${meta.name}"`;
  if (!meta.isTensor) throw new InvalidPolicyModel(source, `${what} is not a tensor; expected float32 [batch, ${width}]`);
  if (meta.type !== 'float32') throw new InvalidPolicyModel(source, `${what} is ${meta.type}; expected float32 [batch, ${width}]`);
  const shape = meta.shape;
  if (shape.length === 0) return; // shape not recorded in the model: the probe decides
  if (shape.length !== 2) {
    throw new InvalidPolicyModel(source, `${what} has shape [${shape.join(', ')}]; expected [batch, ${width}]`);
  }
  const [batch, last] = shape;
  if (typeof last === 'number' && last !== width) {
    throw new InvalidPolicyModel(source, `${what} has last dimension ${last}; expected ${width} (shape [${shape.join(', ')}])`);
  }
  // A fixed batch size would break lock-step play, which sends every live game in one call.
  if (typeof batch === 'number' && batch > 0) {
    throw new InvalidPolicyModel(source, `${what} has a fixed batch dimension ${batch}; export it dynamic (e.g. dynamic_axes)`);
  }
}

function checkMetadata(source: string, session: ort.InferenceSession): void {
  if (session.inputNames.length !== 1) {
    throw new InvalidPolicyModel(source, `has ${session.inputNames.length} inputs (${session.inputNames.join(', ')}); expected exactly one`);
  }
  if (session.outputNames.length !== 1) {
    throw new InvalidPolicyModel(source, `has ${session.outputNames.length} outputs (${session.outputNames.join(', ')}); expected exactly one`);
  }
  // Older bindings have no metadata; the probe then does all the checking.
  const input = session.inputMetadata?.[0];
  const output = session.outputMetadata?.[0];
  if (input) checkTensor(source, 'input', input, OBSERVATION_SIZE);
  if (output) checkTensor(source, 'output', output, COLS);
}

/** Runs two empty-board rows through the model: it must return 2 x 7 float32 logits. */
async function probe(source: string, session: ort.InferenceSession): Promise<void> {
  const rows = 2;
  const observations = new Float32Array(rows * OBSERVATION_SIZE);
  for (let k = 0; k < rows; k++) observations.fill(1, k * OBSERVATION_SIZE + 84, (k + 1) * OBSERVATION_SIZE); // plane 2: every cell empty
  let output: ort.OnnxValue | undefined;
  try {
    const result = await session.run({ [session.inputNames[0]]: new ort.Tensor('float32', observations, [rows, OBSERVATION_SIZE]) });
    output = result[session.outputNames[0]];
  } catch (error) {
    throw new InvalidPolicyModel(source, `a probe inference on [${rows}, ${OBSERVATION_SIZE}] failed: ${messageOf(error)}`, { cause: error });
  }
  if (!(output instanceof ort.Tensor) || output.type !== 'float32') {
    throw new InvalidPolicyModel(source, `the probe's output is not a float32 tensor`);
  }
  if (output.dims.length !== 2 || output.dims[0] !== rows || output.dims[1] !== COLS) {
    throw new InvalidPolicyModel(source, `the probe's output has shape [${output.dims.join(', ')}]; expected [${rows}, ${COLS}]`);
  }
}

class OnnxSessionPolicy implements OnnxPolicy {
  readonly inputName: string;
  readonly outputName: string;
  // Input tensors are thin views over the caller's observation buffer, one per batch size: the
  // runner reuses one buffer for the whole match, so a view made once serves every later ply
  // (ORT reads the data when `run` is called, not when the tensor is made).
  private tensorSource: Float32Array | undefined;
  private readonly tensors = new Map<number, ort.Tensor>();

  constructor(
    readonly name: string,
    readonly source: string,
    private readonly session: ort.InferenceSession,
  ) {
    this.inputName = session.inputNames[0];
    this.outputName = session.outputNames[0];
  }

  private inputTensor(observations: Float32Array, count: number): ort.Tensor {
    if (observations !== this.tensorSource) {
      this.tensors.clear();
      this.tensorSource = observations;
    }
    let tensor = this.tensors.get(count);
    if (!tensor) {
      tensor = new ort.Tensor('float32', observations.subarray(0, count * OBSERVATION_SIZE), [count, OBSERVATION_SIZE]);
      this.tensors.set(count, tensor);
    }
    return tensor;
  }

  async act(observations: Float32Array, legal: Uint8Array, count: number, out: Int32Array, context: MoveContext): Promise<void> {
    if (count === 0) return;
    const result = await this.session.run({ [this.inputName]: this.inputTensor(observations, count) });
    const logits = result[this.outputName].data;
    if (!(logits instanceof Float32Array) || logits.length !== count * COLS) {
      throw new InvalidPolicyModel(this.source, `returned ${logits.length} logits for ${count} rows; expected ${count * COLS}`);
    }
    selectFromLogits(logits, legal, count, out, context.mode, context.random, context.masked);
  }

  release(): Promise<void> {
    this.tensors.clear();
    this.tensorSource = undefined;
    return this.session.release();
  }
}
