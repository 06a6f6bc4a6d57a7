/**
 * The refinery's curate step: the documents that survived dedup and scored at or above the threshold, written as
 * content-addressed JSONL shards with a manifest (counts, hashes, the filter settings' hash, the
 * threshold, the model). It reads the scores and the filtered shards; it is the only compute step
 * a new threshold reruns.
 */
import pMap from 'p-map';
import { z } from 'zod';
import { readContentAddressed, writeContentAddressed, writeFile } from '../documents.ts';
import { ConfigError } from '../errors.ts';
import { canonicalJson, sha256Hex } from '../json.ts';
import { parseOrThrow } from '../schema.ts';
import { readDedupDoc, readShardDocuments } from './label-step.ts';
import { FILTERS, FilterConfig } from './filters.ts';
import { readMapResults } from './map-results.ts';
import { encodeJsonl, type ShardDocument } from './shard-refine.ts';

export interface CurateContext {
  readonly bucket: string;
  readonly pipeline: string;
}

const ScoreResult = z.object({ shard: z.string(), scoresUri: z.string(), documents: z.int(), seconds: z.number(), gbSeconds: z.number() }).loose();
const ScoresDoc = z.object({ shard: z.string(), ids: z.array(z.string()), scores: z.array(z.number()) }).loose();

export const CurateRequest = z
  .object({
    dedupUri: z.string(),
    threshold: z.number().min(0).max(5),
    modelSha256: z.string(),
    scores: z.unknown(),
    source: z.string(),
    sourceIdentity: z.string(),
    benchmarks: z.array(z.object({ name: z.string(), version: z.int(), dataSha256: z.string() }).strict()),
    filters: z.unknown(),
  })
  .strict();

export async function curateStep(ctx: CurateContext, raw: unknown) {
  const started = Date.now();
  const request = parseOrThrow(CurateRequest, raw, 'curate');
  const dedup = await readDedupDoc(request.dedupUri);
  const removed = new Set(dedup.removed.map((r) => r.id));
  const results = await readMapResults(request.scores, 'scores');
  if (results.failed > 0) throw new ConfigError('scores', results.failed, 'shards failed in the score stage: their documents have no score');
  const scored = results.outputs.map((o, i) => parseOrThrow(ScoreResult, (o as { result?: unknown }).result ?? o, `scores[${i}]`));
  const byShard = new Map(scored.map((s) => [s.shard, s]));
  const histogram = new Array<number>(51).fill(0);
  const keptHistogram = new Array<number>(51).fill(0);
  let scoring = { documents: 0, seconds: 0, gbSeconds: 0 };
  let dropped = 0;
  let duplicates = 0;
  // One output shard per filtered shard that keeps anything, so memory holds one shard at a time.
  const outputs = await pMap(
    dedup.shards,
    async (shard, s) => {
      const result = byShard.get(shard.keptSha256);
      if (!result) throw new ConfigError(`dedup.shards[${s}]`, shard.keptSha256, 'has no scores: the score stage did not cover it');
      const scores = parseOrThrow(ScoresDoc, await readContentAddressed(result.scoresUri, `scores[${s}]`, 'scores document'), `scores[${s}]`);
      const scoreOf = new Map(scores.ids.map((id, i) => [id, scores.scores[i]!]));
      const kept: ShardDocument[] = [];
      for (const document of await readShardDocuments(shard.keptUri, `dedup.shards[${s}].keptUri`)) {
        if (removed.has(document.id)) {
          duplicates++;
          continue;
        }
        const score = scoreOf.get(document.id);
        if (score === undefined) throw new ConfigError(`scores[${s}]`, document.id, 'has no score for this document');
        const bin = Math.max(0, Math.min(50, Math.floor(score * 10)));
        histogram[bin]!++;
        if (score >= request.threshold) {
          kept.push(document);
          keptHistogram[bin]!++;
        } else dropped++;
      }
      if (kept.length === 0) return undefined;
      const { bytes, sha256 } = encodeJsonl(kept);
      const written = await writeFile(ctx.bucket, `data/${ctx.pipeline}/refined/${sha256}.jsonl`, bytes, 'application/x-ndjson');
      return { uri: written.uri, sha256, documents: kept.length, bytes: bytes.length };
    },
    { concurrency: 4 },
  );
  const shards = outputs.filter((o) => o !== undefined);
  for (const s of scored)
    scoring = { documents: scoring.documents + s.documents, seconds: scoring.seconds + s.seconds, gbSeconds: scoring.gbSeconds + s.gbSeconds };
  const documents = shards.reduce((n, s) => n + s.documents, 0);
  const filters = parseOrThrow(FilterConfig, request.filters, 'filters');
  const manifest = {
    format: 'jsonl {id, text, url?}',
    lineage: {
      source: { uri: request.source, identity: request.sourceIdentity },
      benchmarks: request.benchmarks,
      filters: filters.enabled.map((name) => ({ name, version: FILTERS[name].version })),
      filterSettingsSha256: sha256Hex(canonicalJson(filters)),
    },
    threshold: request.threshold,
    model: request.modelSha256,
    dedup: request.dedupUri,
    documents,
    bytes: shards.reduce((n, s) => n + s.bytes, 0),
    shards,
    survivors: documents + dropped,
    belowThreshold: dropped,
    duplicatesSkipped: duplicates,
    scoreHistogram: histogram,
    keptHistogram,
    scoring,
    millis: Date.now() - started,
  };
  const written = await writeContentAddressed(ctx.bucket, `data/${ctx.pipeline}/manifests/`, manifest);
  return {
    manifestUri: written.uri,
    documents,
    belowThreshold: dropped,
    shards: shards.length,
    // The manifest only: the shards it lists are content-addressed beside it (a list of every
    // shard here would grow with the corpus).
    s3Outputs: [{ Bucket: written.Bucket, Key: written.Key }],
  };
}
