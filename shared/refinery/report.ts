/**
 * The refinery's report: what each stage kept and removed (the funnel, which adds up: every
 * document ingested is kept or removed for exactly one reason), removals per rule with examples,
 * each filter's precision and recall on the injected material, duplicate clusters, the labels,
 * the classifier (held-out figures, score distribution and the threshold), the cost of a label
 * from the LLM against a score from the classifier, and each stage's compute time as measured
 * when it was computed (a cached rerun reuses a stage at no cost, so its time is not this run's).
 *
 * Precision and recall on the injected material (inject.ts writes the truth): a spam document is
 * a true positive of the rule that removed it; an injected document that is not spam (a
 * near-duplicate copy, or real text carrying a benchmark item) removed by a filter is a false
 * positive. Real documents removed by a rule have no label and are counted apart.
 */
import pMap from 'p-map';
import { z } from 'zod';
import type { TopLevelSpec } from 'vega-lite';
import { CORPUS_MANIFEST } from '../artifacts.ts';
import { readObjectBytes } from '../clients/aws.ts';
import { escapeHtml, svgOf } from '../charts.ts';
import { readContentAddressed, writeFile } from '../documents.ts';
import { canonicalJson, sha256Hex } from '../json.ts';
import { parseOrThrow } from '../schema.ts';
import { parseS3Uri } from '../s3uri.ts';
import { readDedupDoc } from './label-step.ts';

/** Lambda's price on x86 (us-east-1): USD per GB-second and per request. */
export const LAMBDA_PRICE = { perGbSecond: 0.0000166667, perRequest: 0.2 / 1_000_000, asOf: '2026-12-01' } as const;

export const TruthRow = z
  .object({
    id: z.string(),
    kind: z.enum(['spam', 'near-duplicate', 'contamination']),
    variant: z.string().optional(),
    of: z.string().optional(),
    jaccard: z.number().optional(),
    filteredJaccard: z.number().optional(),
    benchmark: z.unknown().optional(),
  })
  .loose();
export type TruthRow = z.infer<typeof TruthRow>;

const Removal = z.object({ id: z.string(), rule: z.string(), reason: z.string(), detail: z.string().optional() }).loose();

export interface ReportInputs {
  readonly threshold: number;
  readonly ingestReportUri: string;
  readonly truthUri: string | null;
  /** Benchmarks (and extra sets) decontaminated against; 0: there was nothing to check against. */
  readonly benchmarkCount: number;
  readonly dedupUri: string;
  readonly labelSummaryUri: string;
  readonly metricsUri: string;
  readonly manifestUri: string;
}

const ratio = (a: number, b: number) => (b > 0 ? a / b : null);

function parseJsonl(text: string): unknown[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as unknown);
}

async function readJson(uri: string, field: string): Promise<Record<string, unknown>> {
  return JSON.parse((await readObjectBytes(uri, field)).toString('utf8')) as Record<string, unknown>;
}

/** Every figure of the report, computed from the stages' documents. */
export async function refineryFigures(inputs: ReportInputs) {
  const [ingest, dedup, labels, metrics, manifest] = await Promise.all([
    readJson(inputs.ingestReportUri, 'ingestReportUri'),
    readDedupDoc(inputs.dedupUri),
    readContentAddressed(inputs.labelSummaryUri, 'labelSummaryUri', 'label summary') as Promise<Record<string, unknown>>,
    readJson(inputs.metricsUri, 'metricsUri'),
    readContentAddressed(inputs.manifestUri, 'manifestUri', 'refined corpus manifest') as Promise<Record<string, unknown>>,
  ]);
  const truth = inputs.truthUri
    ? parseJsonl((await readObjectBytes(inputs.truthUri, 'truthUri')).toString('utf8')).map((r, i) => parseOrThrow(TruthRow, r, `truth[${i}]`))
    : [];
  const removals = (
    await pMap(dedup.shards, async (s, i) => parseJsonl((await readObjectBytes(s.removalsUri, `shards[${i}].removalsUri`)).toString('utf8')), {
      concurrency: 8,
    })
  )
    .flat()
    .map((r, i) => parseOrThrow(Removal, r, `removals[${i}]`));
  const ruleOf = new Map(removals.map((r) => [r.id, r.rule]));
  const dupOf = new Map(dedup.removed.map((r) => [r.id, r]));

  // The funnel, from the shards' own counts.
  type Counts = { lines: number; documents: number; skipped: number; kept: number; removed: number };
  const shardCounts = dedup.shards.map((s) => (s as unknown as { counts: Counts }).counts);
  const sum = (f: (c: Counts) => number) => shardCounts.reduce((n, c) => n + f(c), 0);
  const documents = sum((c) => c.documents);
  const removedByRule: Record<string, number> = {};
  for (const r of removals) removedByRule[r.rule] = (removedByRule[r.rule] ?? 0) + 1;
  const decontaminated = removedByRule.decontamination ?? 0;
  const filtered = removals.length - decontaminated;
  const exact = dedup.removed.filter((r) => r.kind === 'exact').length;
  const near = dedup.removed.length - exact;
  const kept = Number(manifest.documents);
  const belowThreshold = Number(manifest.belowThreshold);
  const funnel = [
    { stage: 'ingested', documents },
    { stage: 'after filters', documents: documents - filtered },
    { stage: 'after decontamination', documents: documents - filtered - decontaminated },
    { stage: 'after dedup', documents: documents - filtered - decontaminated - exact - near },
    { stage: `score >= ${inputs.threshold}`, documents: kept },
  ];
  // What the ingest read before the shards: lines of a corpus file skipped by reason, texts cut.
  const read = (ingest.read ?? null) as { lines: number; skipped: Record<string, { count: number; examples: number[] }>; truncated: number } | null;
  const input = read
    ? {
        lines: read.lines,
        skipped: Object.fromEntries(Object.entries(read.skipped).filter(([, v]) => v.count > 0)),
        truncated: read.truncated,
        documentsRead: read.lines - Object.values(read.skipped).reduce((n, v) => n + v.count, 0),
      }
    : null;
  const accounting = {
    documents,
    kept,
    filtered,
    decontaminated,
    exact,
    near,
    belowThreshold,
    addsUp: kept + filtered + decontaminated + exact + near + belowThreshold === documents,
  };
  const examples: Record<string, { id: string; reason: string; detail?: string }[]> = {};
  for (const r of removals) {
    examples[r.rule] ??= [];
    const list = examples[r.rule]!;
    if (list.length < 3) list.push({ id: r.id, reason: r.reason, ...(r.detail ? { detail: r.detail.slice(0, 200) } : {}) });
  }

  // The injected material.
  const spam = truth.filter((t) => t.kind === 'spam');
  const notSpam = new Set(truth.filter((t) => t.kind !== 'spam').map((t) => t.id));
  const filterRule = (id: string) => {
    const rule = ruleOf.get(id);
    return rule && rule !== 'decontamination' ? rule : undefined;
  };
  const rules = [...new Set(removals.map((r) => r.rule).filter((r) => r !== 'decontamination'))].sort();
  const perRule = rules.map((rule) => {
    const tp = spam.filter((t) => filterRule(t.id) === rule).length;
    const fp = [...notSpam].filter((id) => filterRule(id) === rule).length;
    return { rule, spamRemoved: tp, injectedCleanRemoved: fp, realRemoved: (removedByRule[rule] ?? 0) - tp - fp, precision: ratio(tp, tp + fp) };
  });
  const spamRemoved = spam.filter((t) => filterRule(t.id) !== undefined).length;
  const cleanRemoved = [...notSpam].filter((id) => filterRule(id) !== undefined).length;
  const root = (id: string) => dupOf.get(id)?.keptId ?? id;
  const pairs = truth.filter((t) => t.kind === 'near-duplicate' && t.of && t.jaccard !== undefined);
  // Dedup compares the texts the filters left: their Jaccard, when the truth has it.
  const jaccardOf = (t: TruthRow) => t.filteredJaccard ?? t.jaccard!;
  const evaluable = pairs.filter((t) => !ruleOf.has(t.id) && !ruleOf.has(t.of!));
  const found = (t: TruthRow) => root(t.id) === root(t.of!);
  const bins = [0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01];
  const byJaccard = bins.slice(0, -1).map((low, i) => {
    const inBin = evaluable.filter((t) => jaccardOf(t) >= low && jaccardOf(t) < bins[i + 1]!);
    return { from: low, to: Math.min(1, bins[i + 1]!), pairs: inBin.length, found: inBin.filter(found).length };
  });
  const high = evaluable.filter((t) => jaccardOf(t) >= 0.8);
  const contaminated = truth.filter((t) => t.kind === 'contamination');
  const contaminatedRemoved = contaminated.filter((t) => ruleOf.get(t.id) === 'decontamination').length;
  // A contaminated document a filter removed first never reached decontamination: removed all the
  // same, and counted apart so the decontaminator's own recall is over those it saw.
  const removedEarlier = contaminated.filter((t) => ruleOf.has(t.id) && ruleOf.get(t.id) !== 'decontamination').length;
  const contaminatedIds = new Set(contaminated.map((t) => t.id));
  const cleanDecontaminated = removals.filter((r) => r.rule === 'decontamination' && !contaminatedIds.has(r.id));
  const injected = {
    spam: {
      total: spam.length,
      removed: spamRemoved,
      recall: ratio(spamRemoved, spam.length),
      precision: ratio(spamRemoved, spamRemoved + cleanRemoved),
      perRule,
    },
    nearDuplicates: {
      pairs: pairs.length,
      evaluable: evaluable.length,
      atLeast08: high.length,
      found08: high.filter(found).length,
      recall08: ratio(high.filter(found).length, high.length),
      byJaccard,
    },
    contamination: {
      total: contaminated.length,
      removed: contaminatedRemoved + removedEarlier,
      removedByDecontamination: contaminatedRemoved,
      removedEarlier,
      recall: ratio(contaminatedRemoved + removedEarlier, contaminated.length),
      decontaminationRecall: ratio(contaminatedRemoved, contaminated.length - removedEarlier),
      cleanRemoved: cleanDecontaminated.length,
      cleanRemovedExamples: cleanDecontaminated.slice(0, 5).map((r) => ({ id: r.id, reason: r.reason })),
    },
  };

  // Dedup reads, against the corpus's bytes (fields the loose DedupDoc schema passes through).
  const d = dedup as unknown as {
    bytesRead: { compact: number; full: number };
    metadataBytesRead: number;
    clusterSizes: Record<string, number>;
    candidates: number;
    millis?: number;
  };
  const corpusBytes = dedup.shards.reduce((n, s) => n + Number((s as unknown as { bytes: { input: number } }).bytes.input), 0);
  const dedupFigures = {
    exact,
    near,
    clusters: Object.values(d.clusterSizes).reduce((a, b) => a + b, 0),
    clusterSizes: d.clusterSizes,
    candidates: d.candidates,
    bytesRead: d.bytesRead.compact + d.bytesRead.full,
    metadataBytesRead: d.metadataBytesRead,
    corpusBytes,
    readPercent: corpusBytes > 0 ? (100 * (d.bytesRead.compact + d.bytesRead.full)) / corpusBytes : null,
  };

  // Cost: a label from the LLM against a score from the classifier.
  const scoring = manifest.scoring as { documents: number; seconds: number; gbSeconds: number };
  const shardsScored = dedup.shards.length;
  const classifierPerDocument =
    scoring.documents > 0 ? (scoring.gbSeconds * LAMBDA_PRICE.perGbSecond + shardsScored * LAMBDA_PRICE.perRequest) / scoring.documents : null;
  const llmPerDocument = typeof labels.costPerDocumentUsd === 'number' && labels.costPerDocumentUsd > 0 ? labels.costPerDocumentUsd : null;
  const cost = {
    llmPerDocumentUsd: llmPerDocument,
    classifierPerDocumentUsd: classifierPerDocument,
    ratio: llmPerDocument !== null && classifierPerDocument ? llmPerDocument / classifierPerDocument : null,
    gbSecondsPerDocument: scoring.documents > 0 ? scoring.gbSeconds / scoring.documents : null,
    lambdaPrice: LAMBDA_PRICE,
  };

  // Classifier against the LLM on the held-out labels, at this run's threshold.
  const predictions = (metrics.heldOutPredictions ?? []) as { label: number; predicted: number }[];
  const keepLabel = predictions.map((p) => p.label >= inputs.threshold);
  const keepModel = predictions.map((p) => p.predicted >= inputs.threshold);
  const tp = keepLabel.filter((k, n) => k && keepModel[n]).length;
  const agree = keepLabel.filter((k, n) => k === keepModel[n]).length;
  const predictedKeep = keepModel.filter(Boolean).length;
  const labelKeep = keepLabel.filter(Boolean).length;
  const heldMetrics = (metrics.heldOut ?? {}) as { mae?: number; accuracy?: number };
  const held = {
    n: predictions.length,
    agreement: ratio(agree, predictions.length),
    precision: ratio(tp, predictedKeep),
    recall: ratio(tp, labelKeep),
    f1: predictedKeep + labelKeep > 0 ? (2 * tp) / (predictedKeep + labelKeep) : null,
    mae: heldMetrics.mae ?? null,
    exactAccuracy: heldMetrics.accuracy ?? null,
  };
  return {
    threshold: inputs.threshold,
    input: ingest,
    read: input,
    benchmarkCount: inputs.benchmarkCount,
    funnel,
    accounting,
    removedByRule,
    examples,
    injected,
    dedup: dedupFigures,
    labels,
    classifier: metrics,
    heldOut: held,
    agreementCurve: [0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5].map((t) => ({
      threshold: t,
      agreement: ratio(predictions.filter((p) => p.label >= t === p.predicted >= t).length, predictions.length),
    })),
    scores: { histogram: manifest.scoreHistogram as number[], kept: manifest.keptHistogram as number[] },
    cost,
    timings: {
      ingestSeconds: Number(ingest.seconds ?? 0),
      filterSeconds: dedup.shards.reduce((n, s) => n + Number((s as unknown as { millis?: number }).millis ?? 0), 0) / 1000,
      labelSeconds: Number(labels.millis ?? 0) / 1000,
      dedupSeconds: Number(d.millis ?? 0) / 1000,
      scoreSeconds: scoring.seconds,
      curateSeconds: Number(manifest.millis ?? 0) / 1000,
      trainSeconds: Number((metrics.training as { seconds?: number } | undefined)?.seconds ?? 0),
    },
  };
}
export type RefineryFigures = Awaited<ReturnType<typeof refineryFigures>>;

const pct = (x: number | null | undefined) => (x === null || x === undefined ? '–' : `${(100 * x).toFixed(1)} %`);
const usd = (x: number | null | undefined) => (x === null || x === undefined ? '–' : `$${x.toPrecision(3)}`);

function funnelChart(f: RefineryFigures): TopLevelSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: 'Documents after each stage',
    width: 640,
    height: 180,
    data: { values: f.funnel.map((s, i) => ({ ...s, order: i })) },
    mark: 'bar',
    encoding: {
      y: { field: 'stage', type: 'nominal', sort: { field: 'order' }, title: null },
      x: { field: 'documents', type: 'quantitative' },
    },
  };
}

function scoreChart(f: RefineryFigures): TopLevelSpec {
  const values = (f.scores.histogram ?? []).map((n, i) => ({ score: i / 10, documents: n, kept: i / 10 >= f.threshold - 1e-9 ? 'kept' : 'dropped' }));
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: `Classifier scores (threshold ${f.threshold})`,
    width: 640,
    height: 180,
    data: { values },
    mark: 'bar',
    encoding: {
      x: { field: 'score', type: 'quantitative', bin: { binned: true, step: 0.1 }, title: 'predicted score' },
      x2: { datum: 0 },
      y: { field: 'documents', type: 'quantitative' },
      color: { field: 'kept', type: 'nominal' },
    },
  };
}

function labelChart(f: RefineryFigures): TopLevelSpec {
  const distribution = (f.labels.distribution ?? {}) as Record<string, number>;
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: 'LLM labels',
    width: 300,
    height: 160,
    data: { values: [0, 1, 2, 3, 4, 5].map((score) => ({ score, documents: distribution[score] ?? 0 })) },
    mark: 'bar',
    encoding: { x: { field: 'score', type: 'ordinal' }, y: { field: 'documents', type: 'quantitative' } },
  };
}

export async function refineryReportHtml(f: RefineryFigures): Promise<string> {
  const [funnel, scores, labels] = await Promise.all([svgOf(funnelChart(f)), svgOf(scoreChart(f)), svgOf(labelChart(f))]);
  const rows = (cells: (string | number)[][]) =>
    cells.map((r) => `<tr>${r.map((c) => `<td>${typeof c === 'number' ? c : escapeHtml(c)}</td>`).join('')}</tr>`).join('\n');
  const ruleRows = Object.entries(f.removedByRule)
    .sort((a, b) => b[1] - a[1])
    .map(([rule, n]) => [rule, n, (f.examples[rule] ?? []).map((e) => `${e.id}: ${e.reason}`).join(' | ')]);
  const i = f.injected;
  const h = f.heldOut;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Corpus refinery: ${f.accounting.documents} documents to ${f.accounting.kept}</title>
<style>body{font-family:system-ui,sans-serif;max-width:980px;margin:2rem auto;padding:0 1rem;color:#222}table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}th{background:#f4f4f4}td:first-child,td:last-child{text-align:left}</style>
</head><body>
<h1>Corpus refinery</h1>
<p id="headline"><strong>${f.accounting.documents}</strong> documents in, <strong id="kept">${f.accounting.kept}</strong> kept at a classifier score of at least ${f.threshold}.
The funnel ${f.accounting.addsUp ? 'adds up' : '<strong>does not add up</strong>'}: ${f.accounting.filtered} removed by filters, ${f.accounting.decontaminated} for contamination,
${f.accounting.exact} exact and ${f.accounting.near} near duplicates, ${f.accounting.belowThreshold} below the threshold.</p>
<figure>${funnel}</figure>
<h2>Removals per rule</h2>
<table id="rules"><tr><th>rule</th><th>documents</th><th>examples</th></tr>${rows(ruleRows)}</table>
<h2>Injected material</h2>
<p id="spam">Spam: ${i.spam.removed} of ${i.spam.total} removed by the filters, recall ${pct(i.spam.recall)}, precision ${pct(i.spam.precision)}.</p>
<table id="per-rule"><tr><th>rule</th><th>spam removed</th><th>injected clean removed</th><th>real documents removed</th><th>precision</th></tr>
${rows(i.spam.perRule.map((r) => [r.rule, r.spamRemoved, r.injectedCleanRemoved, r.realRemoved, pct(r.precision)]))}</table>
<p id="near-duplicates">Near duplicates: ${i.nearDuplicates.found08} of ${i.nearDuplicates.atLeast08} pairs at Jaccard &ge; 0.8 found (${pct(i.nearDuplicates.recall08)}).</p>
<table id="jaccard"><tr><th>Jaccard</th><th>pairs</th><th>found</th></tr>${rows(i.nearDuplicates.byJaccard.map((b) => [`${b.from.toFixed(1)}-${b.to.toFixed(1)}`, b.pairs, b.found]))}</table>
${
  f.benchmarkCount === 0
    ? '<p id="no-benchmarks">Decontamination had nothing to check against: no benchmark is registered for evals (and no extra set was named), so no document was checked.</p>'
    : ''
}
${
  f.read
    ? `<p id="read">The corpus file had ${f.read.lines} lines: ${f.read.documentsRead} documents read, ${
        Object.entries(f.read.skipped)
          .map(([reason, v]) => `${v.count} skipped as ${escapeHtml(reason)} (lines ${v.examples.join(', ')})`)
          .join('; ') || 'none skipped'
      }; ${f.read.truncated} cut to the size limit.</p>`
    : ''
}
<p id="contamination">Contamination: ${i.contamination.removed} of ${i.contamination.total} removed (${pct(i.contamination.recall)}):
${i.contamination.removedByDecontamination} by the n-gram check (${pct(i.contamination.decontaminationRecall)} of those that reached it), ${i.contamination.removedEarlier} by a filter first.
Clean documents removed for contamination: ${i.contamination.cleanRemoved}.</p>
<h2>Dedup</h2>
<p id="dedup">${f.dedup.exact} exact and ${f.dedup.near} near duplicates in ${f.dedup.clusters} clusters; ${f.dedup.candidates} candidate documents.
The global step read ${f.dedup.bytesRead} bytes of signatures (${f.dedup.readPercent?.toFixed(2) ?? '–'} % of the corpus's ${f.dedup.corpusBytes} bytes) and ${f.dedup.metadataBytesRead} bytes of the fan-out's result files; no text.</p>
<table id="clusters"><tr><th>cluster size</th><th>clusters</th></tr>${rows(Object.entries(f.dedup.clusterSizes).map(([k, v]) => [k, v]))}</table>
<h2>Labels and classifier</h2>
<figure>${labels}</figure>
<p id="labels">${escapeHtml(String(f.labels.source ?? ''))} labels: ${f.labels.labelled} of ${f.labels.sampled} sampled documents${f.labels.model ? ` (model ${escapeHtml(String(f.labels.model))})` : ''}; unlabelled ${Number(f.labels.unlabelled ?? 0)}.</p>
<p id="classifier">Classifier against the LLM on ${h.n} held-out labels: keep/drop agreement at the threshold ${pct(h.agreement)}, F1 ${pct(h.f1)},
MAE ${typeof h.mae === 'number' ? h.mae.toFixed(3) : '–'} (score points).</p>
<figure>${scores}</figure>
<h2>Cost</h2>
<p id="cost">LLM: ${usd(f.cost.llmPerDocumentUsd)} per document (token usage the API reported, at list prices). Classifier: ${usd(f.cost.classifierPerDocumentUsd)} per document
(${f.cost.gbSecondsPerDocument?.toPrecision(3) ?? '–'} Lambda GB-seconds measured per document). Ratio: <strong id="cost-ratio">${f.cost.ratio ? `${f.cost.ratio.toFixed(0)}x` : '–'}</strong>.</p>
<h2>Compute time per stage</h2>
<p>Measured when each stage was computed; a rerun that finds a stage in the cache reuses it and spends none of this.</p>
<table id="timings"><tr><th>stage</th><th>seconds</th></tr>${rows(Object.entries(f.timings).map(([k, v]) => [k, v.toFixed(2)]))}</table>
</body></html>
`;
}

export function refineryMetrics(f: RefineryFigures): Record<string, number> {
  const out: Record<string, number> = {
    documents: f.accounting.documents,
    kept: f.accounting.kept,
    filtered: f.accounting.filtered,
    decontaminated: f.accounting.decontaminated,
    exactDuplicates: f.accounting.exact,
    nearDuplicates: f.accounting.near,
    belowThreshold: f.accounting.belowThreshold,
    threshold: f.threshold,
  };
  const add = (k: string, v: unknown) => {
    if (typeof v === 'number' && Number.isFinite(v)) out[k] = v;
  };
  add('spamRecall', f.injected.spam.recall);
  add('spamPrecision', f.injected.spam.precision);
  add('nearDuplicateRecall08', f.injected.nearDuplicates.recall08);
  add('contaminationRecall', f.injected.contamination.recall);
  add('cleanDecontaminated', f.injected.contamination.cleanRemoved);
  add('dedupReadPercent', f.dedup.readPercent);
  add('heldOutAgreement', f.heldOut.agreement);
  add('costRatio', f.cost.ratio);
  return out;
}

export interface ReportContext {
  readonly bucket: string;
  readonly pipeline: string;
}

export const ReportRequest = z
  .object({
    threshold: z.number(),
    ingestReportUri: z.string(),
    truthUri: z.string().nullable(),
    benchmarkCount: z.int().min(0),
    dedupUri: z.string(),
    labelSummaryUri: z.string(),
    metricsUri: z.string(),
    manifestUri: z.string(),
  })
  .strict();

export async function reportStep(ctx: ReportContext, raw: unknown) {
  const inputs = parseOrThrow(ReportRequest, raw, 'report');
  const figures = await refineryFigures(inputs);
  const prefix = `data/${ctx.pipeline}/report/${sha256Hex(canonicalJson(inputs)).slice(0, 32)}/`;
  const html = await writeFile(ctx.bucket, `${prefix}report.html`, await refineryReportHtml(figures), 'text/html; charset=utf-8');
  const json = await writeFile(ctx.bucket, `${prefix}figures.json`, JSON.stringify(figures, null, 2), 'application/json');
  return {
    files: [
      { name: CORPUS_MANIFEST, uri: inputs.manifestUri },
      { name: 'report.html', uri: html.uri },
      { name: 'figures.json', uri: json.uri },
    ],
    metrics: refineryMetrics(figures),
    reportUri: html.uri,
    s3Outputs: [parseS3Uri(inputs.manifestUri), { Bucket: html.Bucket, Key: html.Key }, { Bucket: json.Bucket, Key: json.Key }],
  };
}
