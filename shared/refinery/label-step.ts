/**
 * The refinery's label step: a stratified sample of the documents that survived the filters,
 * decontamination and dedup, labelled 0-5 by Claude (labels.ts: the rubric prompt-cached,
 * structured output, concurrent requests, retries honouring retry-after), or the labels of a
 * labels file. The labels (with each document's text, which the classifier trains on) go to one
 * content-addressed JSONL file; the run's figures (label distribution, failures by reason, token
 * usage and what it cost) to a summary document.
 *
 * Strata: a document's source, the part of its id before the first ':' (`python-doc`, `man`,
 * `fortune`, `mix` in the local corpus), else its URL's host, else one stratum.
 */
import { claudeUsageField } from '#shared/cost/usage.ts';
import { z } from 'zod';
import pMap from 'p-map';
import { readObjectBytes } from '../clients/aws.ts';
import { readContentAddressed, writeContentAddressed } from '../documents.ts';
import { sha256Hex } from '../json.ts';
import { parseOrThrow } from '../schema.ts';
import { writeFile } from '../documents.ts';
import { resolveApiKey } from '../rewards/propose.ts';
import { documentExtract, type Label, labelDocuments, labelerClient, parseLabelsFile, RUBRIC_VERSION, stratifiedSample } from './labels.ts';
import { costPerDocument, llmCostUsd, ModelPrice, modelPrice } from './llm-cost.ts';
import { MissingApiKeyError } from '../rewards/errors.ts';
import { decodeShard } from './shards.ts';
import type { ShardDocument } from './shard-refine.ts';

export interface LabelContext {
  readonly bucket: string;
  readonly pipeline: string;
  readonly anthropicSecretArn?: string;
  readonly env?: NodeJS.ProcessEnv;
}

/** What the dedup document holds that the later steps read. */
export const DedupDoc = z
  .object({
    removed: z.array(z.object({ id: z.string(), keptId: z.string(), kind: z.enum(['exact', 'near']) })),
    shards: z.array(z.object({ shard: z.string(), keptUri: z.string(), keptSha256: z.string(), removalsUri: z.string() }).loose()),
  })
  .loose();
export type DedupDoc = z.infer<typeof DedupDoc>;

export async function readDedupDoc(uri: string): Promise<DedupDoc> {
  return parseOrThrow(DedupDoc, await readContentAddressed(uri, 'dedupUri', 'dedup document'), 'dedup');
}

/** A filtered shard's documents. */
export async function readShardDocuments(uri: string, field: string): Promise<ShardDocument[]> {
  return decodeShard(await readObjectBytes(uri, field)).documents;
}

export function stratumOf(document: { id: string; url?: string }): string {
  const colon = document.id.indexOf(':');
  if (colon > 0 && colon <= 40) return document.id.slice(0, colon);
  if (document.url) {
    try {
      return new URL(document.url).host || 'all';
    } catch {
      return 'all';
    }
  }
  return 'all';
}

export const LabelRequest = z
  .object({
    dedupUri: z.string(),
    seed: z.int(),
    labels: z
      .object({
        sample: z.int().min(1),
        model: z.string().min(1),
        concurrency: z.int().min(1).max(64),
        maxChars: z.int().min(1),
        fileSha256: z.string().nullable(),
        price: ModelPrice.nullable().optional(),
      })
      .loose(),
  })
  .strict();

/** Where the CLI puts a labels file given with --labels-file. */
export function labelFileKey(pipeline: string, sha256: string): string {
  return `data/${pipeline}/label-files/${sha256}.jsonl`;
}

export async function labelStep(ctx: LabelContext, raw: unknown) {
  const started = Date.now();
  const request = parseOrThrow(LabelRequest, raw, 'label');
  const dedup = await readDedupDoc(request.dedupUri);
  const removed = new Set(dedup.removed.map((r) => r.id));
  // The survivors by id, with their shard: ids and strata first, texts only of the sample.
  const survivors: { id: string; stratum: string; shard: number }[] = [];
  await pMap(
    dedup.shards,
    async (shard, s) => {
      for (const document of await readShardDocuments(shard.keptUri, `dedup.shards[${s}].keptUri`)) {
        if (!removed.has(document.id)) survivors.push({ id: document.id, stratum: stratumOf(document), shard: s });
      }
    },
    { concurrency: 8 },
  );
  survivors.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const byId = new Map(survivors.map((d) => [d.id, d]));
  const settings = request.labels;

  let labels: Label[];
  let summary: Record<string, unknown>;
  // What Claude's calls used, for the run's counters (shared/cost/usage.ts).
  let claudeUsage: ReturnType<typeof claudeUsageField> | undefined;
  let wanted: string[];
  const file = settings.fileSha256 ? `s3://${ctx.bucket}/${labelFileKey(ctx.pipeline, settings.fileSha256)}` : null;
  if (file) {
    const fromFile = parseLabelsFile((await readObjectBytes(file, 'labels.file')).toString('utf8'), 'labels.file');
    const known = fromFile.filter((l) => byId.has(l.id));
    labels = known;
    wanted = known.map((l) => l.id);
    summary = { source: 'file', file, inFile: fromFile.length, unknownIds: fromFile.length - known.length };
  } else {
    wanted = stratifiedSample(survivors, Math.min(settings.sample, survivors.length), request.seed);
    summary = {};
    labels = [];
  }
  const texts = await textsOf(dedup, wanted, byId);
  if (!file) {
    // An unpriced model fails here, before any request is paid for.
    modelPrice(settings.model, settings.price ?? undefined);
    const apiKey = await resolveApiKey(ctx.env ?? process.env, ctx.anthropicSecretArn).catch((error: Error) => {
      throw new MissingApiKeyError(
        `${error.message.replace(/, or evaluate reward functions from files instead$/, '')}; or label from a file: npx frontier run refinery --labels-file FILE (JSONL {id, score, reason})`,
        { cause: error },
      );
    });
    const run = await labelDocuments(
      labelerClient(apiKey),
      wanted.map((id) => ({ id, text: texts.get(id)! })),
      { model: settings.model, concurrency: settings.concurrency, maxChars: settings.maxChars },
    );
    labels = run.labels;
    claudeUsage = claudeUsageField(settings.model, run.usage);
    const price = settings.price ?? undefined;
    const unlabelledByReason: Record<string, number> = {};
    for (const u of run.unlabelled) unlabelledByReason[u.reason] = (unlabelledByReason[u.reason] ?? 0) + 1;
    summary = {
      source: 'claude',
      model: settings.model,
      rubricVersion: RUBRIC_VERSION,
      requests: run.requests,
      retries: run.retries,
      maxInFlight: run.maxInFlight,
      concurrency: settings.concurrency,
      usage: run.usage,
      costUsd: llmCostUsd(run.usage, settings.model, price),
      costPerDocumentUsd:
        run.labels.length + run.unlabelled.length > 0 ? costPerDocument(run.usage, settings.model, run.labels.length + run.unlabelled.length, price) : 0,
      unlabelled: run.unlabelled.length,
      unlabelledByReason,
      unlabelledExamples: run.unlabelled.slice(0, 10),
    };
  }
  const distribution: Record<string, number> = {};
  for (const l of labels) distribution[l.score] = (distribution[l.score] ?? 0) + 1;
  const strata: Record<string, { survivors: number; labelled: number }> = {};
  for (const d of survivors) {
    strata[d.stratum] ??= { survivors: 0, labelled: 0 };
    strata[d.stratum]!.survivors++;
  }
  for (const l of labels) strata[byId.get(l.id)!.stratum]!.labelled++;
  // The classifier learns from what the labeler saw, the document's first maxChars characters,
  // and scores the same extract of every document (score-step.ts).
  const body = Buffer.from(
    labels
      .map((l) => `${JSON.stringify({ id: l.id, score: l.score, reason: l.reason, text: documentExtract(texts.get(l.id)!, settings.maxChars) })}\n`)
      .join(''),
    'utf8',
  );
  const labelsSha256 = sha256Hex(body);
  const labelsFile = await writeFile(ctx.bucket, `data/${ctx.pipeline}/labels/${labelsSha256}.jsonl`, body, 'application/x-ndjson');
  const summaryDoc = await writeContentAddressed(ctx.bucket, `data/${ctx.pipeline}/label-summary/`, {
    ...summary,
    survivors: survivors.length,
    sampled: wanted.length,
    labelled: labels.length,
    distribution,
    strata,
    labelsUri: labelsFile.uri,
    millis: Date.now() - started,
  });
  return {
    labelsUri: labelsFile.uri,
    labelsSha256,
    summaryUri: summaryDoc.uri,
    labelled: labels.length,
    sampled: wanted.length,
    s3Outputs: [
      { Bucket: labelsFile.Bucket, Key: labelsFile.Key },
      { Bucket: summaryDoc.Bucket, Key: summaryDoc.Key },
    ],
    ...(claudeUsage ?? {}),
  };
}

/** The texts of the wanted ids, read from the shards that hold them. */
async function textsOf(dedup: DedupDoc, wanted: readonly string[], byId: Map<string, { shard: number }>): Promise<Map<string, string>> {
  const wantedSet = new Set(wanted);
  const shards = [...new Set(wanted.map((id) => byId.get(id)!.shard))];
  const texts = new Map<string, string>();
  await pMap(
    shards,
    async (s) => {
      for (const document of await readShardDocuments(dedup.shards[s]!.keptUri, `dedup.shards[${s}].keptUri`)) {
        if (wantedSet.has(document.id)) texts.set(document.id, document.text);
      }
    },
    { concurrency: 8 },
  );
  return texts;
}
