/**
 * The refinery's score step (one shard, in the scoring fan-out): every document of a filtered
 * shard scored by the classifier (scorer.ts, onnxruntime-node), the scores written beside the
 * shard, and what the scoring cost in Lambda GB-seconds measured (wall time of the invocation's
 * work x the function's memory), so the report can compare it with the LLM's cost per document.
 * Documents that dedup removed are scored too (5-10 % more work): the scores then stay cached
 * when only the dedup changes. Apart from curate-step.ts so that only this function ships
 * onnxruntime-node.
 */
import { z } from 'zod';
import { readObjectBytes } from '../clients/aws.ts';
import { writeContentAddressed } from '../documents.ts';
import { ConfigError } from '../errors.ts';
import { sha256Hex } from '../json.ts';
import { parseOrThrow } from '../schema.ts';
import { readShardDocuments } from './label-step.ts';
import { documentExtract } from './labels.ts';
import { loadClassifier, scoreDocuments } from './scorer.ts';

export interface ScoreContext {
  readonly bucket: string;
  readonly pipeline: string;
  /** The function's memory in MB (for GB-seconds). */
  readonly memoryMb?: number;
}

export const ScoreShardRequest = z
  .object({
    shard: z.object({ uri: z.string(), sha256: z.string().regex(/^[0-9a-f]{64}$/) }).strict(),
    modelUri: z.string(),
    modelSha256: z.string().regex(/^[0-9a-f]{64}$/),
    settings: z.object({ buckets: z.int(), maxTokens: z.int() }).strict(),
    /** The labeler's extract length: the model scores what it was trained on, each document's start. */
    maxChars: z.int().min(1),
  })
  .strict();

const sessions = new Map<string, Awaited<ReturnType<typeof loadClassifier>>>();

export async function scoreShardStep(ctx: ScoreContext, raw: unknown) {
  const started = performance.now();
  const request = parseOrThrow(ScoreShardRequest, raw, 'score');
  let session = sessions.get(request.modelSha256);
  if (!session) {
    const bytes = await readObjectBytes(request.modelUri, 'modelUri');
    if (sha256Hex(bytes) !== request.modelSha256) throw new ConfigError('modelUri', request.modelUri, `does not hash to ${request.modelSha256}`);
    session = await loadClassifier(bytes, request.settings, { name: request.modelUri });
    sessions.clear();
    sessions.set(request.modelSha256, session);
  }
  const documents = await readShardDocuments(request.shard.uri, 'shard.uri');
  const scores = await scoreDocuments(
    session,
    documents.map((d) => documentExtract(d.text, request.maxChars)),
    { batchSize: 64 },
  );
  const doc = {
    shard: request.shard.sha256,
    model: request.modelSha256,
    ids: documents.map((d) => d.id),
    scores: Array.from(scores, (s: number) => Math.round(s * 1e4) / 1e4),
  };
  const written = await writeContentAddressed(ctx.bucket, `data/${ctx.pipeline}/scores/`, doc);
  const seconds = (performance.now() - started) / 1000;
  const memoryMb = ctx.memoryMb ?? 1024;
  return {
    shard: request.shard.sha256,
    scoresUri: written.uri,
    documents: documents.length,
    seconds,
    gbSeconds: (seconds * memoryMb) / 1024,
    s3Outputs: [{ Bucket: written.Bucket, Key: written.Key }],
  };
}
