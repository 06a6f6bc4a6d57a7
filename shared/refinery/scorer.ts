/**
 * The refinery's quality classifier in TypeScript: loads the ONNX model that
 * batch-jobs/refinery-classifier trains and scores documents with onnxruntime-node on the CPU.
 *
 * The model's contract, checked when it loads: inputs `indices` int64 [batch, pairs] and
 * `weights` float32 [batch, pairs], output `score` float32 [batch] in [0, 5]; batch and pairs
 * dynamic. A 2-row probe also checks the table has `buckets` rows: the highest bucket must run,
 * and one past it must fail (onnxruntime bounds-checks Gather), so a model paired with the wrong
 * feature settings is refused at load instead of scoring garbage. Anything wrong raises
 * InvalidClassifierModel.
 *
 * Memory: documents are featurised and run `batchSize` at a time. A batch costs about
 * batchSize x pairs x (12 + 4 x dim) bytes in onnxruntime (int64 index, float32 weight, and the
 * gathered dim-wide rows before they are summed), pairs being the batch's most distinct words
 * (at most maxTokens): with the defaults (maxTokens 2,000, dim 16) at most about 150 KB per
 * document, so a batch of 64 stays under 10 MB whatever the documents' length.
 *
 * One thread by default: a scoring Lambda has about one core.
 */
import * as ort from 'onnxruntime-node';
import { ConfigError, PipelineError } from '../errors.ts';
import { checkFeatureSettings, DEFAULT_MAX_TOKENS, documentFeatures, type DocumentFeatures, type FeatureSettings } from './features.ts';

export const INDICES_INPUT = 'indices';
export const WEIGHTS_INPUT = 'weights';
export const SCORE_OUTPUT = 'score';
export const DEFAULT_BATCH_SIZE = 64;

/** A classifier model that cannot be used: unreadable, the wrong inputs, or the wrong settings. */
export class InvalidClassifierModel extends PipelineError {
  constructor(
    readonly source: string,
    readonly problem: string,
    options?: { cause?: unknown },
  ) {
    super(`${source}: not a usable refinery classifier: ${problem}`, options);
  }
}

/**
 * The settings a model was trained with: the job's result `features` ({buckets, maxTokens}).
 * maxTokens defaults to 2,000, the job's default; other fields (dim, say) are ignored.
 */
export interface ClassifierSettings {
  readonly buckets: number;
  readonly maxTokens?: number;
  readonly dim?: number;
}

export interface ClassifierOptions {
  /** Names the model in error messages (an S3 URI, say). */
  readonly name?: string;
  /** ORT intra-op threads; 1 unless the caller owns more than one core. */
  readonly intraOpNumThreads?: number;
}

/** A loaded model with the feature settings it was trained with. Call `release` when done. */
export interface Classifier {
  readonly session: ort.InferenceSession;
  readonly settings: FeatureSettings;
  readonly source: string;
  release(): Promise<void>;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Loads a model from its bytes (as read from S3) for the feature settings it was trained with
 * (the job's result `features`). Throws InvalidClassifierModel when the model breaks the contract
 * (module comment), ConfigError when the settings are out of range.
 */
export async function loadClassifier(modelBytes: Uint8Array, given: ClassifierSettings, options: ClassifierOptions = {}): Promise<Classifier> {
  const settings = checkFeatureSettings({ buckets: given.buckets, maxTokens: given.maxTokens ?? DEFAULT_MAX_TOKENS });
  const source = `${options.name ?? 'classifier'} (${modelBytes.byteLength} bytes)`;
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(modelBytes, {
      intraOpNumThreads: options.intraOpNumThreads ?? 1,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
    });
  } catch (error) {
    throw new InvalidClassifierModel(source, `onnxruntime cannot load it: ${messageOf(error)}`, { cause: error });
  }
  try {
    const inputs = [...session.inputNames].sort();
    if (inputs.join(',') !== [INDICES_INPUT, WEIGHTS_INPUT].sort().join(',')) {
      throw new InvalidClassifierModel(source, `has inputs [${session.inputNames.join(', ')}]; expected ${INDICES_INPUT} and ${WEIGHTS_INPUT}`);
    }
    if (!session.outputNames.includes(SCORE_OUTPUT)) {
      throw new InvalidClassifierModel(source, `has outputs [${session.outputNames.join(', ')}]; expected ${SCORE_OUTPUT}`);
    }
    await probe(source, session, settings.buckets);
  } catch (error) {
    await session.release().catch(() => undefined);
    throw error;
  }
  return { session, settings, source, release: () => session.release() };
}

async function runPairs(session: ort.InferenceSession, index: number, options: ort.InferenceSession.RunOptions = {}): Promise<Float32Array> {
  const { indices, weights } = toTensors([
    { indices: Int32Array.of(index), weights: Float32Array.of(1) },
    { indices: new Int32Array(0), weights: new Float32Array(0) },
  ]);
  const result = await session.run({ [INDICES_INPUT]: indices, [WEIGHTS_INPUT]: weights }, options);
  const score = result[SCORE_OUTPUT];
  if (!(score instanceof ort.Tensor) || score.type !== 'float32' || !(score.data instanceof Float32Array)) {
    throw new Error(`output ${SCORE_OUTPUT} is not a float32 tensor`);
  }
  if (score.dims.length !== 1 || score.dims[0] !== 2) throw new Error(`output ${SCORE_OUTPUT} has shape [${score.dims.join(', ')}]; expected [2]`);
  return score.data;
}

/** Runs the highest bucket (must work) and one past it (must fail: the table is that size). */
async function probe(source: string, session: ort.InferenceSession, buckets: number): Promise<void> {
  try {
    await runPairs(session, buckets - 1);
  } catch (error) {
    throw new InvalidClassifierModel(source, `a probe with bucket ${buckets - 1} failed (${messageOf(error)}); is buckets ${buckets} right for this model?`, {
      cause: error,
    });
  }
  let ranPastEnd = false;
  try {
    // Fatal-only logging: the expected failure would otherwise print an error line to the log.
    await runPairs(session, buckets, { logSeverityLevel: 4 });
    ranPastEnd = true;
  } catch {
    // Expected: the table has exactly `buckets` rows.
  }
  if (ranPastEnd) throw new InvalidClassifierModel(source, `its table has more than ${buckets} rows; it was trained with other feature settings`);
}

/** Documents' features as the model's inputs, padded with index 0 and weight 0 (at least 1 wide). */
export function toTensors(features: readonly DocumentFeatures[]): { indices: ort.Tensor; weights: ort.Tensor; pairs: number } {
  let pairs = 1;
  for (const f of features) pairs = Math.max(pairs, f.indices.length);
  const rows = features.length;
  const indices = new BigInt64Array(rows * pairs);
  // Written through a 32-bit view: every index is below 2^22, so the high word stays 0 on a
  // little-endian machine (all that Node runs on for Lambda: x86-64 and arm64).
  const low = new Int32Array(indices.buffer);
  const weights = new Float32Array(rows * pairs);
  for (let r = 0; r < rows; r++) {
    const f = features[r]!;
    for (let k = 0; k < f.indices.length; k++) low[2 * (r * pairs + k)] = f.indices[k]!;
    weights.set(f.weights, r * pairs);
  }
  return {
    indices: new ort.Tensor('int64', indices, [rows, pairs]),
    weights: new ort.Tensor('float32', weights, [rows, pairs]),
    pairs,
  };
}

export interface ScoreOptions {
  /** Documents per onnxruntime call; bounds memory (module comment). Default 64. */
  readonly batchSize?: number;
}

/** The classifier's score (0-5) of each text, in order. */
export async function scoreDocuments(classifier: Classifier, texts: readonly string[], options: ScoreOptions = {}): Promise<Float32Array> {
  const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new ConfigError('batchSize', batchSize, 'must be a positive integer');
  }
  const scores = new Float32Array(texts.length);
  for (let start = 0; start < texts.length; start += batchSize) {
    const batch = texts.slice(start, start + batchSize).map((text) => documentFeatures(text, classifier.settings));
    const { indices, weights } = toTensors(batch);
    const result = await classifier.session.run({ [INDICES_INPUT]: indices, [WEIGHTS_INPUT]: weights });
    const data = result[SCORE_OUTPUT]?.data;
    if (!(data instanceof Float32Array) || data.length !== batch.length) {
      throw new InvalidClassifierModel(classifier.source, `returned ${String(data?.length)} scores for ${batch.length} documents`);
    }
    scores.set(data, start);
  }
  return scores;
}

/** Keep (true) or drop each document: score >= threshold. */
export function keepDecisions(scores: Float32Array, threshold: number): boolean[] {
  return Array.from(scores, (score) => score >= threshold);
}
