/**
 * The SAE pipeline's Lambda steps. Each takes a zod-checked request, reads and writes S3
 * (content-addressed under data/sae/), and returns a small record: URIs, hashes and a few
 * figures. Cached steps list what they wrote as `s3Outputs`, so a cache hit whose files are gone
 * is a miss.
 *
 * - prepare: the corpus artifact's version and manifest; `labels.explainer: auto` resolved (claude
 *   when an Anthropic key is there, else top-tokens) before any cached step reads it; the grid.
 * - select: every SAE's result read from the fan-out; the one labelled is the best loss recovered
 *   among those with L0 at most `labels.targetL0`.
 * - label: the chosen SAE's feature contexts labelled by the explainer.
 * - detect: each label scored for detection on held-out contexts, with a mismatched-label control.
 */
import { claudeUsageField } from '#shared/cost/usage.ts';
import { z } from 'zod';
import { CORPUS_MANIFEST, copySource, getArtifactVersion } from '../artifacts.ts';
import { CopyObjectCommand } from '@aws-sdk/client-s3';
import { readObjectBytes, s3Client } from '../clients/aws.ts';
import { writeFile } from '../documents.ts';
import { ConfigError, NotFoundError } from '../errors.ts';
import { canonicalJson, sha256Hex } from '../json.ts';
import { MissingApiKeyError } from '../rewards/errors.ts';
import { resolveApiKey } from '../rewards/propose.ts';
import { hasApiKey, readJson, type StepContext, s3Out, stepHandler, writeJson } from '../pipeline-steps.ts';
import { parseOrThrow } from '../schema.ts';
import { parseS3Uri } from '../s3uri.ts';
import { anthropicClient } from '../claude-requests.ts';
import { claudePredictor, type DetectionReport, scoreDetection, tokenMatchPredictor } from './detection.ts';
import { explainWithClaude, explainWithTopTokens, type FeatureLabel, parseFeatureContexts, type UnlabelledFeature } from './explain.ts';
import { saeFigures, saeMetrics, saeReportHtml } from './report.ts';

export type SaeStepContext = StepContext;

/** A step's Lambda handler (shared/pipeline-steps.ts). */
export const saeHandler = stepHandler;

// ---------------------------------------------------------------------------------------------
// prepare

export const PrepareRequest = z
  .object({
    corpus: z.object({ artifact: z.string(), version: z.int().nullable() }).strict(),
    explainer: z.enum(['auto', 'claude', 'top-tokens']),
    widths: z.array(z.int()),
    ks: z.array(z.int()),
  })
  .strict();

export async function prepareStep(ctx: SaeStepContext, raw: unknown) {
  const request = parseOrThrow(PrepareRequest, raw, 'prepare');
  if (!ctx.table) throw new ConfigError('table', ctx.table, 'the prepare step reads the artifact index: set TABLE_NAME');
  const { artifact, version } = request.corpus;
  let corpus;
  try {
    corpus = await getArtifactVersion({ table: ctx.table, bucket: ctx.bucket }, artifact, version ?? undefined);
  } catch (error) {
    if (error instanceof NotFoundError) {
      throw new ConfigError(
        version === null ? 'corpus.artifact' : 'corpus.version',
        version === null ? artifact : version,
        `${error.message}: run the refinery pipeline first (it publishes refined-corpus), or publish a corpus of JSONL shards with a manifest.json`,
      );
    }
    throw error;
  }
  const manifest = corpus.files.find((f) => f.name === CORPUS_MANIFEST) ?? corpus.files.find((f) => /\.jsonl$/.test(f.name));
  if (!manifest) {
    throw new ConfigError('corpus.artifact', `${artifact} version ${corpus.version}`, `has no ${CORPUS_MANIFEST} or .jsonl file: it is not a text corpus`);
  }
  const explainer = request.explainer === 'auto' ? ((await hasApiKey(ctx)) ? 'claude' : 'top-tokens') : request.explainer;
  const grid = request.widths.flatMap((width) => request.ks.map((k) => ({ width, k })));
  return {
    corpusUri: manifest.uri,
    corpusSha256: manifest.sha256,
    corpus: { name: corpus.name, version: corpus.version },
    lineage: [{ name: corpus.name, version: corpus.version }],
    explainer,
    grid,
  };
}

// ---------------------------------------------------------------------------------------------
// select

/** What one SAE job returns (batch-jobs/sae/main.py, stage sae). */
export const SaeResult = z
  .object({
    saeUri: z.string(),
    saeSha256: z.string(),
    metricsUri: z.string(),
    width: z.int(),
    k: z.int(),
    fvu: z.number(),
    l0: z.number(),
    deadShare: z.number(),
    lossRecovered: z.number(),
    tokensPerSecond: z.number(),
  })
  .loose();
export type SaeResult = z.infer<typeof SaeResult>;

const FanOutRecord = z.union([
  z.object({ ok: z.literal(true), uri: z.string() }).loose(),
  z.object({ ok: z.literal(false), error: z.string(), causeUri: z.string() }).loose(),
]);

export const SelectRequest = z.object({ saes: z.array(FanOutRecord).min(1), targetL0: z.int().min(1) }).strict();

/** The SAE labelled: the best loss recovered among those with L0 at most targetL0 (ties: the smaller L0, then width). */
export function chooseSae(saes: readonly SaeResult[], targetL0: number): SaeResult {
  const within = saes.filter((s) => s.l0 <= targetL0 + 1e-9);
  if (within.length === 0) {
    const lowest = Math.min(...saes.map((s) => s.l0));
    throw new ConfigError(
      'labels.targetL0',
      targetL0,
      `no SAE of the grid has L0 at most this (the lowest is ${lowest.toFixed(2)}): raise it or add a smaller k`,
    );
  }
  return [...within].sort((a, b) => b.lossRecovered - a.lossRecovered || a.l0 - b.l0 || a.width - b.width)[0]!;
}

export async function selectStep(ctx: SaeStepContext, raw: unknown) {
  const request = parseOrThrow(SelectRequest, raw, 'select');
  const saes: SaeResult[] = [];
  for (const [i, record] of request.saes.entries()) {
    if (!record.ok) throw new ConfigError(`saes[${i}]`, record.error, `the SAE job failed; its cause is at ${record.causeUri}`);
    saes.push(parseOrThrow(SaeResult, await readJson(record.uri, `saes[${i}].uri`), `saes[${i}]`));
  }
  const chosen = chooseSae(saes, request.targetL0);
  // Each SAE's weights, copied from its job's output to a content-addressed key: the artifact's
  // file list names them by these short, stable URIs.
  const weights: string[] = [];
  for (const sae of saes) {
    const source = parseS3Uri(sae.saeUri, `saes[${sae.width}x${sae.k}].saeUri`);
    const Key = `data/${ctx.pipeline}/saes/${sae.saeSha256}.safetensors`;
    await s3Client().send(new CopyObjectCommand({ Bucket: ctx.bucket, Key, CopySource: copySource(source) }));
    weights.push(`s3://${ctx.bucket}/${Key}`);
  }
  const grid = await writeJson(ctx, 'grids', {
    saes: saes.map((s, i) => ({ ...s, weightsUri: weights[i] })),
    chosen: { width: chosen.width, k: chosen.k },
    targetL0: request.targetL0,
  });
  return {
    gridUri: grid.uri,
    gridSha256: grid.sha256,
    chosen: { saeUri: chosen.saeUri, saeSha256: chosen.saeSha256, width: chosen.width, k: chosen.k, l0: chosen.l0, lossRecovered: chosen.lossRecovered },
    s3Outputs: [s3Out(grid), ...weights.map((uri) => parseS3Uri(uri, 'weightsUri'))],
  };
}

// ---------------------------------------------------------------------------------------------
// label and detect

const Explainer = z.enum(['claude', 'top-tokens']);

export const LabelRequest = z
  .object({
    contextsUri: z.string(),
    explainer: Explainer,
    model: z.string(),
    concurrency: z.int().min(1).max(64),
  })
  .strict();

async function claudeClient(ctx: SaeStepContext) {
  const apiKey = await resolveApiKey(ctx.env ?? process.env, ctx.anthropicSecretArn).catch((error: Error) => {
    throw new MissingApiKeyError(`labels.explainer is claude but ${error.message}; or set labels.explainer to top-tokens (no model call)`);
  });
  return anthropicClient(apiKey);
}

async function readContexts(uri: string) {
  return parseFeatureContexts((await readObjectBytes(uri, 'contextsUri')).toString('utf8'), 'contexts');
}

export async function labelStep(ctx: SaeStepContext, raw: unknown) {
  const request = parseOrThrow(LabelRequest, raw, 'label');
  const contexts = await readContexts(request.contextsUri);
  const run =
    request.explainer === 'top-tokens'
      ? explainWithTopTokens(contexts.features)
      : await explainWithClaude(await claudeClient(ctx), contexts.features, { model: request.model, concurrency: request.concurrency });
  const document = { ...run, model: request.explainer === 'claude' ? request.model : null };
  const written = await writeJson(ctx, 'labels', document);
  return {
    labelsUri: written.uri,
    labelsSha256: written.sha256,
    labelled: run.labels.length,
    unlabelled: run.unlabelled.length,
    s3Outputs: [s3Out(written)],
    ...('stats' in run && run.stats ? claudeUsageField(request.model, run.stats.usage) : {}),
  };
}

export const DetectRequest = z
  .object({
    contextsUri: z.string(),
    labelsUri: z.string(),
    explainer: Explainer,
    model: z.string(),
    concurrency: z.int().min(1).max(64),
    seed: z.int().min(0),
  })
  .strict();

const LabelsDocument = z
  .object({
    explainer: Explainer,
    labels: z.array(z.object({ feature: z.int(), label: z.string(), explainer: Explainer, tokens: z.array(z.string()).optional() }).strict()),
    unlabelled: z.array(z.unknown()),
  })
  .loose();

export async function detectStep(ctx: SaeStepContext, raw: unknown) {
  const request = parseOrThrow(DetectRequest, raw, 'detect');
  const contexts = await readContexts(request.contextsUri);
  const labels = parseOrThrow(LabelsDocument, await readJson(request.labelsUri, 'labelsUri'), 'labels');
  const claude =
    request.explainer === 'claude' ? claudePredictor(await claudeClient(ctx), { model: request.model, concurrency: request.concurrency }) : undefined;
  const report = await scoreDetection({
    features: contexts.features,
    labels: labels.labels satisfies FeatureLabel[],
    predict: claude ? claude.predict : tokenMatchPredictor,
    seed: request.seed,
    concurrency: request.concurrency,
  });
  const document = { ...report, model: claude ? request.model : null, ...(claude ? { stats: claude.stats() } : {}) };
  const written = await writeJson(ctx, 'detection', document);
  return {
    detectionUri: written.uri,
    detectionSha256: written.sha256,
    own: report.own?.mean ?? null,
    control: report.control?.mean ?? null,
    s3Outputs: [s3Out(written)],
    ...(claude ? claudeUsageField(request.model, claude.stats().usage) : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// report

export const ReportRequest = z
  .object({
    lmMetricsUri: z.string(),
    lm: z.object({ kind: z.enum(['local', 'hf']) }).loose(),
    layer: z.int(),
    corpus: z.object({ name: z.string(), version: z.int() }).strict(),
    harvestUri: z.string(),
    gridUri: z.string(),
    contextsUri: z.string(),
    labelsUri: z.string(),
    detectionUri: z.string(),
    targetL0: z.int(),
    ablation: z.enum(['zero', 'mean']),
    lmArtifact: z.object({ name: z.string(), version: z.int() }).loose(),
  })
  .strict();

const LmMetrics = z
  .object({ corpusDocuments: z.number(), corpusTokens: z.number(), parameters: z.number(), heldOutLoss: z.number(), seconds: z.number() })
  .loose();
const HarvestSummary = z
  .object({
    layer: z.int(),
    d: z.int(),
    trainTokens: z.number(),
    heldOutTokens: z.number(),
    ceClean: z.number(),
    ceZeroAblated: z.number(),
    ceMeanAblated: z.number(),
    seconds: z.number(),
  })
  .loose();
const GridDocument = z.object({ saes: z.array(SaeResult.extend({ weightsUri: z.string() })), chosen: z.object({ width: z.int(), k: z.int() }) }).loose();
const CorpusManifest = z
  .object({
    lineage: z
      .object({ source: z.object({ uri: z.string() }).loose() })
      .loose()
      .optional(),
  })
  .loose();

/** Where the corpus came from decides whose licence it carries. */
export function corpusLicence(source: string | undefined): string {
  if (source?.startsWith('debian:'))
    return "Debian documentation (python3-doc, debian-reference, man pages, fortunes), each under its package's own licence (/usr/share/doc/<package>/copyright)";
  if (source?.startsWith('hf://datasets/HuggingFaceFW/fineweb')) return 'FineWeb: ODC-By 1.0 (and the terms of the crawled pages, per Common Crawl)';
  return source ? `the licence of its source, ${source}` : "the licence of the corpus artifact's own source";
}

function modelLicence(lm: { kind: string; model?: unknown }): string {
  if (lm.kind === 'local') return 'trained here on the corpus from random weights: no third-party weights';
  const model = String(lm.model ?? '');
  return model.startsWith('EleutherAI/pythia') ? `${model}: Apache 2.0 (EleutherAI)` : `${model}: see its model card`;
}

export async function reportStep(ctx: SaeStepContext, raw: unknown) {
  const request = parseOrThrow(ReportRequest, raw, 'report');
  const [lmMetrics, harvest, grid, contexts, labels, detection] = await Promise.all([
    readJson(request.lmMetricsUri, 'lmMetricsUri').then((v) => parseOrThrow(LmMetrics, v, 'lm metrics')),
    readJson(request.harvestUri, 'harvestUri').then((v) => parseOrThrow(HarvestSummary, v, 'harvest')),
    readJson(request.gridUri, 'gridUri').then((v) => parseOrThrow(GridDocument, v, 'grid')),
    readContexts(request.contextsUri),
    readJson(request.labelsUri, 'labelsUri').then((v) => parseOrThrow(LabelsDocument, v, 'labels')),
    readJson(request.detectionUri, 'detectionUri'),
  ]);
  const corpusArtifact = ctx.table
    ? await getArtifactVersion({ table: ctx.table, bucket: ctx.bucket }, request.corpus.name, request.corpus.version)
    : undefined;
  const manifestFile = corpusArtifact?.files.find((f) => f.name === CORPUS_MANIFEST);
  const manifest = manifestFile ? parseOrThrow(CorpusManifest, await readJson(manifestFile.uri, 'corpus manifest'), 'corpus manifest') : undefined;
  const lmName = request.lm.kind === 'local' ? 'local GPT' : `${String(request.lm.model)}@${String(request.lm.revision)}`;
  const figures = saeFigures({
    corpus: { artifact: request.corpus.name, version: String(request.corpus.version), documents: lmMetrics.corpusDocuments, tokens: lmMetrics.corpusTokens },
    lm: {
      kind: request.lm.kind,
      name: lmName,
      layers: Number(request.lm.layers ?? 0),
      width: harvest.d,
      layer: harvest.layer,
      parameters: lmMetrics.parameters,
      heldOutLoss: lmMetrics.heldOutLoss,
      trainSeconds: lmMetrics.seconds,
    },
    harvest,
    ablation: request.ablation,
    saes: grid.saes,
    chosen: { ...grid.chosen, targetL0: request.targetL0 },
    explainer: labels.explainer,
    model: labels.explainer === 'claude' ? String(labels.model ?? '') : null,
    labels: labels.labels,
    unlabelled: labels.unlabelled as UnlabelledFeature[],
    detection: detection as DetectionReport,
    contexts,
    licences: { model: modelLicence(request.lm), corpus: corpusLicence(manifest?.lineage?.source.uri) },
  });
  const prefix = `data/${ctx.pipeline}/report/${sha256Hex(canonicalJson(request)).slice(0, 32)}/`;
  const html = await writeFile(ctx.bucket, `${prefix}report.html`, await saeReportHtml(figures), 'text/html; charset=utf-8');
  const json = await writeFile(ctx.bucket, `${prefix}figures.json`, JSON.stringify(figures, null, 2), 'application/json');
  return {
    files: [
      ...grid.saes.map((s) => ({ name: `w${s.width}-k${s.k}.safetensors`, uri: s.weightsUri })),
      { name: 'grid.json', uri: request.gridUri },
      { name: 'labels.json', uri: request.labelsUri },
      { name: 'detection.json', uri: request.detectionUri },
      { name: 'report.html', uri: html.uri },
      { name: 'figures.json', uri: json.uri },
    ],
    metrics: saeMetrics(figures),
    lineage: [
      { name: request.lmArtifact.name, version: request.lmArtifact.version },
      { name: request.corpus.name, version: request.corpus.version },
    ],
    reportUri: html.uri,
    s3Outputs: [s3Out(html), s3Out(json)],
  };
}
