/**
 * The video pipeline's Lambda steps. Each takes a zod-checked request, reads and writes S3
 * (documents content-addressed under data/video/), and returns a small record: URIs, hashes and
 * counts, never a list whose length the sources decide.
 *
 * - sources: the source list (the generator's, a list in S3, or Blender's films) checked entry by
 *   entry; the accepted ones become the Distributed Map's items, the refused ones are kept with
 *   their reasons. `captions.captioner: auto` is resolved here (claude with a key, else none).
 * - curate: every source's outcome read back (its clips and scores, or why it was refused or
 *   failed), and the curation rules applied (curate.ts).
 * - caption-plan: the kept clips without a caption by this captioner and model (captions are
 *   cached per clip, so a stricter threshold, which keeps a subset, captions nothing).
 * - caption-claude: Claude's vision input over each such clip's contact sheet.
 * - caption-store: the VLM job's captions stored per clip.
 * - package: the artifact's files: the kept clips, manifest.jsonl and ATTRIBUTION.txt.
 */
import { claudeUsageField } from '#shared/cost/usage.ts';
import pMap from 'p-map';
import { z } from 'zod';
import { HeadObjectCommand } from '@aws-sdk/client-s3';
import { readObjectBytes, s3Client } from '../clients/aws.ts';
import { MAX_ARTIFACT_FILES } from '../artifacts.ts';
import { parseS3Uri } from '../s3uri.ts';
import { type S3Written, writeFile } from '../documents.ts';
import { ConfigError, errorName, NoSuchKey } from '../errors.ts';
import { canonicalJson, sha256Hex } from '../json.ts';
import { readMapResults } from '../refinery/map-results.ts';
import { MissingApiKeyError } from '../rewards/errors.ts';
import { resolveApiKey } from '../rewards/propose.ts';
import { hasApiKey, readJson, type StepContext, s3Out, stepHandler, writeJson } from '../pipeline-steps.ts';
import { parseOrThrow } from '../schema.ts';
import { anthropicClient } from '../claude-requests.ts';
import { BLENDER_FILMS } from './blender.ts';
import { CAPTION_PROMPT_VERSION, type CaptionItem, captionClips } from './caption.ts';
import { type ClipScore, type Curated, type CutClip, type CutDrop, curate, type SourceOutcome } from './curate.ts';
import { attributionText, type LicenceRecord } from './licence.ts';
import { videoFigures, videoMetrics, videoReportHtml } from './report.ts';
import { TruthDocument, type TruthFigures, truthFigures } from './truth.ts';
import { type AcceptedSource, checkSources, type RefusedSource } from './sources.ts';

export type VideoStepContext = StepContext;

/** A step's Lambda handler (shared/pipeline-steps.ts). */
export const videoHandler = stepHandler;

async function writeText(ctx: VideoStepContext, folder: string, name: string, body: string, contentType: string): Promise<S3Written & { sha256: string }> {
  const sha256 = sha256Hex(body);
  const written = await writeFile(ctx.bucket, `data/${ctx.pipeline}/${folder}/${sha256}/${name}`, body, contentType);
  return { ...written, sha256 };
}

// ---------------------------------------------------------------------------------------------
// sources

export const SOURCES_FORMAT = 'video-sources-v1';

export const SourcesRequest = z
  .object({
    sources: z.discriminatedUnion('kind', [
      z.object({ kind: z.literal('generated') }).loose(),
      z.object({ kind: z.literal('blender') }).strict(),
      z.object({ kind: z.literal('list'), uri: z.string().startsWith('s3://') }).strict(),
    ]),
    /** The generator's sources.json, for kind generated. */
    generatedUri: z.string().startsWith('s3://').nullable(),
    captioner: z.enum(['auto', 'vlm', 'claude', 'none']),
  })
  .strict();

export interface SourcesDocument {
  readonly format: typeof SOURCES_FORMAT;
  readonly accepted: readonly AcceptedSource[];
  readonly refused: readonly RefusedSource[];
}

export async function sourcesStep(ctx: VideoStepContext, raw: unknown) {
  const request = parseOrThrow(SourcesRequest, raw, 'sources');
  let list: unknown;
  if (request.sources.kind === 'generated') {
    if (!request.generatedUri) throw new ConfigError('generatedUri', null, "the generator's sources.json is needed for sources.kind generated");
    list = await readJson(request.generatedUri, 'generatedUri');
  } else if (request.sources.kind === 'list') {
    list = await readJson(request.sources.uri, 'sources.uri');
  } else {
    list = BLENDER_FILMS;
  }
  const listed = checkSources(list, 'sources');
  // An S3 source's ETag is part of its fetch's cache key (a new object at the same key is fetched
  // again); one that is not there is refused now, before any job.
  const versions = await pMap(listed.accepted, (s) => (s.uri.startsWith('s3://') && !s.sha256 ? objectVersion(s.uri) : Promise.resolve(null)), {
    concurrency: 16,
  });
  const found = listed.accepted.map((source, i) => ({ source, version: versions[i]! })).filter((f) => f.version !== 'missing');
  const accepted = found.map((f) => f.source);
  const refused = [
    ...listed.refused,
    ...listed.accepted
      .filter((_, i) => versions[i] === 'missing')
      .map((s) => ({ index: s.index, id: s.id, field: `sources[${s.index}].uri`, reason: `${s.uri}: no such object` })),
  ].sort((a, b) => a.index - b.index);
  const document: SourcesDocument = { format: SOURCES_FORMAT, accepted, refused };
  const sources = await writeJson(ctx, 'sources', document);
  // The Map's items: what a child run needs, no licence text.
  const items = await writeJson(
    ctx,
    'items',
    found.map(({ source: s, version }) => ({ index: s.index, id: s.id, uri: s.uri, sha256: s.sha256 ?? null, version })),
  );
  const captioner = request.captioner === 'auto' ? ((await hasApiKey(ctx)) ? 'claude' : 'none') : request.captioner;
  return {
    sourcesUri: sources.uri,
    sourcesSha256: sources.sha256,
    itemsKey: items.Key,
    files: [{ uri: sources.uri, name: 'sources.json' }],
    accepted: accepted.length,
    refused: refused.length,
    captioner,
    s3Outputs: [s3Out(sources), s3Out(items)],
  };
}

/** An S3 object's ETag, or `missing` when there is none at that key. */
async function objectVersion(uri: string): Promise<string> {
  try {
    const head = await s3Client().send(new HeadObjectCommand(parseS3Uri(uri, 'sources.uri')));
    return head.ETag ?? 'unknown';
  } catch (error) {
    if (['NotFound', 'NoSuchKey', 'NoSuchBucket'].includes(errorName(error))) return 'missing';
    throw error;
  }
}

async function readSources(uri: string, field: string): Promise<SourcesDocument> {
  const doc = (await readJson(uri, field)) as SourcesDocument;
  if (doc?.format !== SOURCES_FORMAT) throw new ConfigError(field, uri, `is not a ${SOURCES_FORMAT} document`);
  return doc;
}

// ---------------------------------------------------------------------------------------------
// curate

/** What a child run of the Map ends with (pipelines/video/stack.ts, its Output state). */
const ChildOutput = z.union([
  z
    .object({
      ok: z.literal(true),
      index: z.int(),
      id: z.string(),
      clipsUri: z.string(),
      scoresUri: z.string(),
    })
    .loose(),
  z.object({ ok: z.literal(false), index: z.int(), id: z.string(), field: z.string(), reason: z.string() }).loose(),
]);

const ClipsDocument = z
  .object({
    format: z.literal('video-clips-v1'),
    clips: z.array(z.object({ id: z.string() }).loose()),
    dropped: z.array(z.object({ rule: z.string() }).loose()).default([]),
    probe: z.object({ duration: z.number() }).loose().optional(),
    timings: z.record(z.string(), z.number()).default({}),
  })
  .loose();

const ScoresDocument = z
  .object({
    format: z.literal('video-scores-v1'),
    clips: z.array(z.object({ id: z.string() }).loose()),
    scorer: z.object({ aesthetic: z.string(), formula: z.string() }).loose(),
    seconds: z.number().optional(),
  })
  .loose();

export const CurateRequest = z
  .object({
    sourcesUri: z.string().startsWith('s3://'),
    /** The Map's ResultWriter manifest location; absent when no source was accepted (the Map did not run). */
    manifest: z.object({ Bucket: z.string(), Key: z.string() }).loose().nullable(),
    thresholds: z
      .object({
        minAesthetic: z.number().nullable(),
        minMotion: z.number(),
        darkLuma: z.number(),
        brightLuma: z.number(),
        maxDuplicateDistance: z.number(),
      })
      .strict(),
  })
  .strict();

/** The curated document the later steps read: the curation, the timings of the jobs, the scorer. */
export interface CuratedDocument extends Curated {
  readonly sourcesUri: string;
  readonly scorer: { readonly aesthetic: string; readonly formula: string } | null;
  readonly jobs: { readonly videoSeconds: number; readonly cutSeconds: number; readonly cutCpuSeconds: number; readonly scoreSeconds: number };
  /** Each cut and scored source's documents and its video's sha256 (the report reads the cuts). */
  readonly documents: readonly { readonly id: string; readonly sha256: string | null; readonly clipsUri: string; readonly scoresUri: string }[];
}

const itemIndexOf = (input: unknown): number | undefined => {
  const item = (input as { item?: { index?: unknown } } | null)?.item;
  return typeof item?.index === 'number' ? item.index : undefined;
};

export async function curateStep(ctx: VideoStepContext, raw: unknown) {
  const request = parseOrThrow(CurateRequest, raw, 'curate');
  const sources = await readSources(request.sourcesUri, 'sourcesUri');
  const results = request.manifest ? await readMapResults(request.manifest, 'manifest') : { outputs: [], failures: [] };
  const outputs = new Map<number, z.infer<typeof ChildOutput>>();
  for (const [i, output] of results.outputs.entries()) {
    const parsed = parseOrThrow(ChildOutput, output, `manifest.outputs[${i}]`);
    outputs.set(parsed.index, parsed);
  }
  const failures = new Map(results.failures.map((f) => [itemIndexOf(f.input), f]));
  let scorer: CuratedDocument['scorer'] = null;
  const jobs = { videoSeconds: 0, cutSeconds: 0, cutCpuSeconds: 0, scoreSeconds: 0 };
  const documents: { id: string; sha256: string | null; clipsUri: string; scoresUri: string }[] = [];
  const accepted = await pMap(
    sources.accepted,
    async (source): Promise<SourceOutcome & { index: number }> => {
      const at = `sources[${source.index}]`;
      const output = outputs.get(source.index);
      if (!output) {
        const failure = failures.get(source.index);
        const reason = failure ? `${failure.error}: ${failure.cause.slice(0, 500)}` : 'the source has no result';
        return { index: source.index, id: source.id, title: source.record.title, status: 'failed', field: at, reason };
      }
      if (!output.ok) return { index: source.index, id: source.id, title: source.record.title, status: 'refused', field: output.field, reason: output.reason };
      const clips = parseOrThrow(ClipsDocument, await readJson(output.clipsUri, `${at}.clipsUri`), `${at}.clipsUri`);
      const scores = parseOrThrow(ScoresDocument, await readJson(output.scoresUri, `${at}.scoresUri`), `${at}.scoresUri`);
      scorer ??= { aesthetic: scores.scorer.aesthetic, formula: scores.scorer.formula };
      const videoSeconds = clips.timings.videoSeconds ?? clips.probe?.duration ?? 0;
      jobs.videoSeconds += videoSeconds;
      jobs.cutSeconds += (clips.timings.detectSeconds ?? 0) + (clips.timings.encodeSeconds ?? 0);
      jobs.cutCpuSeconds += (clips.timings.detectCpuSeconds ?? 0) + (clips.timings.encodeCpuSeconds ?? 0);
      jobs.scoreSeconds += scores.seconds ?? 0;
      const sha256 = typeof clips.videoSha256 === 'string' ? clips.videoSha256 : (source.sha256 ?? null);
      documents.push({ id: source.id, sha256, clipsUri: output.clipsUri, scoresUri: output.scoresUri });
      return {
        index: source.index,
        id: source.id,
        title: source.record.title,
        status: 'ok',
        videoSeconds,
        clips: clips.clips as unknown as CutClip[],
        dropped: clips.dropped as unknown as CutDrop[],
        scores: scores.clips as unknown as ClipScore[],
      };
    },
    { concurrency: 16 },
  );
  const refused: (SourceOutcome & { index: number })[] = sources.refused.map((r) => ({
    index: r.index,
    id: r.id,
    status: 'refused',
    field: r.field,
    reason: r.reason,
  }));
  // In the list's order: its order is the near-duplicate rule's priority.
  const outcomes = [...accepted, ...refused].sort((a, b) => a.index - b.index);
  const minAesthetic = request.thresholds.minAesthetic ?? defaultMinAesthetic((scorer as CuratedDocument['scorer'])?.aesthetic ?? null);
  const curated = curate(outcomes, { ...request.thresholds, minAesthetic });
  documents.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const document: CuratedDocument = { ...curated, sourcesUri: request.sourcesUri, scorer, jobs, documents };
  const written = await writeJson(ctx, 'curated', document);
  return {
    curatedUri: written.uri,
    curatedSha256: written.sha256,
    candidates: curated.funnel.candidates,
    kept: curated.funnel.kept,
    refused: curated.funnel.refused,
    failed: curated.funnel.failed,
    s3Outputs: [s3Out(written)],
  };
}

/** Each scorer's default threshold: the two scales are not calibrated to each other. */
export const DEFAULT_MIN_AESTHETIC: Readonly<Record<string, number>> = { 'quality-v1': 4, 'clip-l14-aesthetic-v1': 4.5 };

export function defaultMinAesthetic(scorer: string | null): number {
  return (scorer === null ? undefined : DEFAULT_MIN_AESTHETIC[scorer]) ?? 4.5;
}

export async function readCurated(uri: string, field: string): Promise<CuratedDocument> {
  const doc = (await readJson(uri, field)) as CuratedDocument;
  if (doc?.format !== 'video-curated-v1') throw new ConfigError(field, uri, 'is not a video-curated-v1 document');
  return doc;
}

// ---------------------------------------------------------------------------------------------
// captions

export type Captioner = 'vlm' | 'claude' | 'none';

/** Where a clip's caption by a captioner and model is kept: one object per clip, content-keyed. */
export function captionKey(pipeline: string, clipSha256: string, captioner: Captioner, model: string): string {
  // Claude's instructions are versioned: new instructions caption every clip again.
  const prompt = captioner === 'claude' ? CAPTION_PROMPT_VERSION : 1;
  return `data/${pipeline}/captions/${sha256Hex(canonicalJson({ clip: clipSha256, captioner, model, prompt }))}.json`;
}

export interface StoredCaption {
  readonly id: string;
  readonly caption: string;
  readonly captioner: Captioner;
  readonly model: string;
}

async function readCaption(ctx: VideoStepContext, key: string): Promise<StoredCaption | null> {
  try {
    return (await readJson(`s3://${ctx.bucket}/${key}`, 'caption')) as StoredCaption;
  } catch (error) {
    if (error instanceof NoSuchKey) return null;
    throw error;
  }
}

export const CaptionPlanRequest = z
  .object({
    curatedUri: z.string().startsWith('s3://'),
    captioner: z.enum(['vlm', 'claude', 'none']),
    model: z.string().min(1),
  })
  .strict();

export interface CaptionRequestItem {
  readonly id: string;
  readonly sha256: string;
  readonly contactSheetUri: string;
  readonly keyFrameUris: readonly string[];
  readonly key: string;
}

/** The kept clips this captioner and model have not captioned yet, as a request document. */
export async function captionPlanStep(ctx: VideoStepContext, raw: unknown) {
  const request = parseOrThrow(CaptionPlanRequest, raw, 'caption-plan');
  const curated = await readCurated(request.curatedUri, 'curatedUri');
  const kept = curated.clips.filter((c) => c.kept && c.sha256 && c.contactSheetUri);
  if (request.captioner === 'none') return { missing: 0, kept: kept.length, requestUri: null };
  const items: CaptionRequestItem[] = kept.map((c) => ({
    id: c.id,
    sha256: c.sha256!,
    contactSheetUri: c.contactSheetUri!,
    keyFrameUris: c.keyFrameUris ?? [],
    key: captionKey(ctx.pipeline, c.sha256!, request.captioner as Captioner, request.model),
  }));
  const present = await pMap(items, async (item) => (await readCaption(ctx, item.key)) !== null, { concurrency: 16 });
  const missing = items.filter((_, i) => !present[i]);
  if (missing.length === 0) return { missing: 0, kept: kept.length, requestUri: null };
  const written = await writeJson(ctx, 'caption-requests', { captioner: request.captioner, model: request.model, clips: missing });
  return { missing: missing.length, kept: kept.length, requestUri: written.uri };
}

export interface CaptionMissing {
  readonly id: string;
  readonly reason: string;
}

async function storeCaptions(
  ctx: VideoStepContext,
  items: readonly CaptionRequestItem[],
  captions: ReadonlyMap<string, string>,
  captioner: Captioner,
  model: string,
  reasons: ReadonlyMap<string, string>,
) {
  const missing: CaptionMissing[] = [];
  await pMap(
    items,
    async (item) => {
      const caption = captions.get(item.id);
      if (caption === undefined) {
        missing.push({ id: item.id, reason: reasons.get(item.id) ?? 'the captioner returned no caption for this clip' });
        return;
      }
      const stored: StoredCaption = { id: item.id, caption, captioner, model };
      await writeFile(ctx.bucket, item.key, canonicalJson(stored), 'application/json');
    },
    { concurrency: 16 },
  );
  missing.sort((a, b) => (a.id < b.id ? -1 : 1));
  const written = await writeJson(ctx, 'caption-missing', missing);
  return { captioned: items.length - missing.length, missing: missing.length, missingUri: written.uri };
}

const CaptionRequestDocument = z
  .object({
    captioner: z.enum(['vlm', 'claude']),
    model: z.string(),
    clips: z.array(z.object({ id: z.string(), sha256: z.string(), contactSheetUri: z.string(), keyFrameUris: z.array(z.string()), key: z.string() }).strict()),
  })
  .strict();

export const CaptionStoreRequest = z.object({ requestUri: z.string().startsWith('s3://'), captionsUri: z.string().startsWith('s3://') }).strict();

/** The VLM job's captions.json (`{captions: {id: caption}, missing: {id: reason}}`) stored per clip. */
export async function captionStoreStep(ctx: VideoStepContext, raw: unknown) {
  const request = parseOrThrow(CaptionStoreRequest, raw, 'caption-store');
  const plan = parseOrThrow(CaptionRequestDocument, await readJson(request.requestUri, 'requestUri'), 'requestUri');
  const out = parseOrThrow(
    z.object({ captions: z.record(z.string(), z.string()), missing: z.record(z.string(), z.string()).default({}) }).loose(),
    await readJson(request.captionsUri, 'captionsUri'),
    'captionsUri',
  );
  const captions = new Map(Object.entries(out.captions).filter(([, c]) => c.trim().length > 0));
  return storeCaptions(ctx, plan.clips, captions, plan.captioner, plan.model, new Map(Object.entries(out.missing)));
}

export const CaptionClaudeRequest = z.object({ requestUri: z.string().startsWith('s3://'), concurrency: z.int().min(1).max(64) }).strict();

/** Claude's vision input over each clip's contact sheet; a clip refused or answered badly after the retries is missing, with its reason. */
export async function captionClaudeStep(ctx: VideoStepContext, raw: unknown) {
  const request = parseOrThrow(CaptionClaudeRequest, raw, 'caption-claude');
  const plan = parseOrThrow(CaptionRequestDocument, await readJson(request.requestUri, 'requestUri'), 'requestUri');
  const apiKey = await resolveApiKey(ctx.env ?? process.env, ctx.anthropicSecretArn).catch((error: Error) => {
    throw new MissingApiKeyError(`captions.captioner is claude but ${error.message}; or set captions.captioner to none`);
  });
  const items: CaptionItem[] = await pMap(
    plan.clips,
    async (clip) => {
      const bytes = await readObjectBytes(clip.contactSheetUri, `clips.${clip.id}.contactSheetUri`);
      const mediaType = bytes[0] === 0x89 && bytes[1] === 0x50 ? 'image/png' : 'image/jpeg';
      return { id: clip.id, contactSheet: { mediaType, base64: bytes.toString('base64') } } as CaptionItem;
    },
    { concurrency: 16 },
  );
  const run = await captionClips(anthropicClient(apiKey), items, { model: plan.model, concurrency: request.concurrency });
  const captions = new Map(run.captions.map((c) => [c.id, c.caption]));
  const reasons = new Map(run.missing.map((m) => [m.id, `${m.reason} after ${m.attempts} attempts: ${m.detail}`]));
  const stored = await storeCaptions(ctx, plan.clips, captions, 'claude', plan.model, reasons);
  return { ...stored, requests: run.stats.requests, retries: run.stats.retries, ...claudeUsageField(plan.model, run.stats.usage) };
}

// ---------------------------------------------------------------------------------------------
// package

export const PackageRequest = z
  .object({
    curatedUri: z.string().startsWith('s3://'),
    captioner: z.enum(['vlm', 'claude', 'none']),
    model: z.string().min(1),
    height: z.int().positive(),
  })
  .strict();

export const CLIPS_MANIFEST = 'clips.jsonl';
export const ATTRIBUTION = 'ATTRIBUTION.txt';
/** The most clips a `video-clips` artifact publishes: its file limit less the manifest and attribution. */
export const MAX_PUBLISHED_CLIPS = MAX_ARTIFACT_FILES - 2;

/** One line of clips.jsonl. */
export interface ManifestRow {
  readonly id: string;
  readonly file: string;
  readonly sha256: string;
  readonly source: { readonly id: string; readonly uri: string };
  readonly start: number;
  readonly end: number;
  readonly duration: number;
  readonly scores: { readonly aesthetic: number | null; readonly motion: number | null; readonly meanLuma: number | null };
  readonly caption: string | null;
  readonly captionedBy: string | null;
  readonly licence: LicenceRecord;
}

export async function packageStep(ctx: VideoStepContext, raw: unknown) {
  const request = parseOrThrow(PackageRequest, raw, 'package');
  const curated = await readCurated(request.curatedUri, 'curatedUri');
  const kept = curated.clips.filter((c) => c.kept);
  // Checked before anything is written: the clips, cached, stay; a stricter curate rerun is cheap.
  if (kept.length > MAX_PUBLISHED_CLIPS) {
    throw new ConfigError(
      'curate',
      kept.length,
      `keeps more clips than an artifact holds: ${MAX_PUBLISHED_CLIPS} (one file each, with ${CLIPS_MANIFEST} and ${ATTRIBUTION} within ${MAX_ARTIFACT_FILES} files); ` +
        'raise the thresholds or use fewer sources (a rerun is cache hits and the curate step)',
    );
  }
  const sources = await readSources(curated.sourcesUri, 'curated.sourcesUri');
  const byId = new Map(sources.accepted.map((s) => [s.id, s]));
  const captions =
    request.captioner === 'none'
      ? kept.map(() => null)
      : await pMap(kept, (c) => readCaption(ctx, captionKey(ctx.pipeline, c.sha256!, request.captioner, request.model)), { concurrency: 16 });
  const rows: ManifestRow[] = kept.map((c, i) => {
    const source = byId.get(c.sourceId);
    // Never published without its licence record: curate only keeps clips of accepted sources.
    if (!source) throw new ConfigError(`clips.${c.id}.sourceId`, c.sourceId, 'has no accepted licence record: the clip cannot be published');
    return {
      id: c.id,
      file: `${c.id}.mp4`,
      sha256: c.sha256!,
      source: { id: source.id, uri: source.uri },
      start: c.start,
      end: c.end,
      duration: c.duration,
      scores: { aesthetic: c.aesthetic ?? null, motion: c.motion ?? null, meanLuma: c.meanLuma ?? null },
      caption: captions[i]?.caption ?? null,
      captionedBy: captions[i] ? `${request.captioner}:${request.model}` : null,
      licence: source.record,
    };
  });
  const manifest = await writeText(
    ctx,
    'packages',
    CLIPS_MANIFEST,
    rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : ''),
    'application/x-ndjson',
  );
  const attributed = sources.accepted.map((s) => ({ id: s.id, record: s.record, clips: kept.filter((c) => c.sourceId === s.id) }));
  const attribution = await writeText(ctx, 'packages', ATTRIBUTION, attributionText(attributed, request.height), 'text/plain; charset=utf-8');
  const files = [
    ...kept.map((c) => ({ uri: c.uri!, name: `${c.id}.mp4` })),
    { uri: manifest.uri, name: CLIPS_MANIFEST },
    { uri: attribution.uri, name: ATTRIBUTION },
  ];
  const filesDoc = await writeJson(ctx, 'files', files);
  return {
    filesUri: filesDoc.uri,
    metrics: {
      clips: kept.length,
      seconds: Math.round(curated.funnel.keptSeconds * 100) / 100,
      sources: new Set(kept.map((c) => c.sourceId)).size,
      captioned: rows.filter((r) => r.caption !== null).length,
    },
    // When the copy into the artifact starts: the report measures it from here.
    finishedAt: new Date().toISOString(),
    s3Outputs: [s3Out(manifest), s3Out(attribution), s3Out(filesDoc)],
  };
}

// ---------------------------------------------------------------------------------------------
// report

export const ReportRequest = z
  .object({
    curatedUri: z.string().startsWith('s3://'),
    captioner: z.enum(['vlm', 'claude', 'none']),
    model: z.string().min(1),
    captions: z.object({ missingUri: z.string().nullable().optional() }).loose(),
    /** Kept clips with a caption, as the package step found them. */
    captioned: z.int().min(0),
    truthUri: z.string().startsWith('s3://').nullable(),
    artifact: z.object({ name: z.string(), version: z.int() }).loose(),
    runStartedAt: z.string(),
    copyStartedAt: z.string(),
    generateSeconds: z.number().nullable().optional(),
  })
  .strict();

/** Contact sheets shown per column (kept, dropped): the page stays a few megabytes. */
const SHEETS_SHOWN = 24;

/** The report, written after the copy into the artifact; its files are published as video-report. */
export async function reportStep(ctx: VideoStepContext, raw: unknown) {
  const request = parseOrThrow(ReportRequest, raw, 'report');
  // After the copy into the artifact: the run's wall clock so far includes it.
  const reportAt = new Date().toISOString();
  const curated = await readCurated(request.curatedUri, 'curatedUri');
  const kept = curated.clips.filter((c) => c.kept);
  // The package step counted the captions over every kept clip (this run's and earlier runs');
  // this run's misses come with their reasons.
  const captioned = request.captioner === 'none' ? 0 : request.captioned;
  const missing = request.captions.missingUri ? ((await readJson(request.captions.missingUri, 'captions.missingUri')) as CaptionMissing[]) : [];
  const seconds = (from: string, to: string) => Math.max(0, (Date.parse(to) - Date.parse(from)) / 1000);
  // Sheets: the first kept and the first dropped (with a file) in the curated order.
  const shown = [...kept.slice(0, SHEETS_SHOWN), ...curated.clips.filter((c) => !c.kept && c.contactSheetUri).slice(0, SHEETS_SHOWN)];
  const contactSheets = await pMap(
    shown,
    async (c) => {
      const bytes = await readObjectBytes(c.contactSheetUri!, `clips.${c.id}.contactSheetUri`);
      const type = bytes[0] === 0x89 && bytes[1] === 0x50 ? 'png' : 'jpeg';
      return { id: c.id, dataUri: `data:image/${type};base64,${bytes.toString('base64')}` };
    },
    { concurrency: 16 },
  );
  let truth: TruthFigures | undefined;
  if (request.truthUri) {
    const document = parseOrThrow(TruthDocument, await readJson(request.truthUri, 'truthUri'), 'truthUri');
    const cuts = new Map<string, number[]>();
    await pMap(
      curated.documents,
      async (d) => {
        const clips = (await readJson(d.clipsUri, `${d.id}.clipsUri`)) as { cuts?: { frame: number }[] };
        cuts.set(
          d.id,
          (clips.cuts ?? []).map((c) => c.frame),
        );
      },
      { concurrency: 16 },
    );
    truth = truthFigures(document, curated, new Map(curated.documents.map((d) => [d.id, d.sha256 ?? ''])), cuts);
  }
  const figures = videoFigures({
    curated,
    aestheticScorer: { name: curated.scorer?.aesthetic ?? 'none', formula: curated.scorer?.formula ?? 'no clip was scored' },
    captions: { captioner: request.captioner, model: request.captioner === 'none' ? null : request.model, captioned, missing },
    timings: {
      runStartedAt: request.runStartedAt,
      reportAt,
      steps: [
        ...(request.generateSeconds ? [{ name: 'generate', seconds: request.generateSeconds }] : []),
        { name: 'cut (summed over sources)', seconds: curated.jobs.cutSeconds },
        { name: 'score (summed over sources)', seconds: curated.jobs.scoreSeconds },
        { name: 'copy into the artifact', seconds: seconds(request.copyStartedAt, reportAt) },
      ],
      cutVideoSeconds: curated.jobs.videoSeconds,
      cutSeconds: curated.jobs.cutSeconds,
      ...(curated.jobs.cutCpuSeconds ? { cutCpuSeconds: curated.jobs.cutCpuSeconds } : {}),
      scoreSeconds: curated.jobs.scoreSeconds,
    },
    contactSheets,
    artifact: { name: request.artifact.name, version: request.artifact.version },
    ...(truth ? { truth } : {}),
  });
  const html = await videoReportHtml(figures);
  const folder = sha256Hex(html);
  const report = await writeFile(ctx.bucket, `data/${ctx.pipeline}/reports/${folder}/report.html`, html, 'text/html; charset=utf-8');
  const figuresFile = await writeFile(ctx.bucket, `data/${ctx.pipeline}/reports/${folder}/figures.json`, canonicalJson(figures), 'application/json');
  return {
    reportUri: report.uri,
    files: [
      { uri: report.uri, name: 'report.html' },
      { uri: figuresFile.uri, name: 'figures.json' },
    ],
    metrics: videoMetrics(figures),
  };
}
