/**
 * The sparse-autoencoder pipeline's report: one self-contained HTML page (charts rendered to
 * inline SVG, no network) and a flat record of metrics for the artifact index.
 *
 * What it shows. A language model's residual stream at one layer was harvested once; a grid of
 * TopK SAEs (widths x ks) was trained on the harvest. Each SAE has its FVU (fraction of variance
 * unexplained), L0 (mean active latents per token), dead-latent share and loss recovered,
 * (CE_ablated - CE_sae) / (CE_ablated - CE_clean), against the ablation the input names (the
 * layer's output replaced by zeros or by its mean). The page shows the grid against the two
 * trade-offs (L0 vs FVU, L0 vs loss recovered) with their Pareto fronts, the SAE a rule picks
 * (best loss recovered among those with L0 <= targetL0), then the labels of a sample of that
 * SAE's features and their detection scores (balanced accuracy) against a control of mismatched
 * labels, always naming the explainer that produced them; the five most interpretable features
 * with their contexts shaded token by token; every feature left unlabelled or unscored, with its
 * reason; the licences of the model and the corpus; each step's compute time.
 *
 * `saeFigures` derives every number (plain JSON, written beside the page as figures.json);
 * `saeReportHtml` renders them; `saeMetrics` is the flat record.
 */
import type { TopLevelSpec } from 'vega-lite';
import { escapeHtml, svgOf } from '../charts.ts';
import { ConfigError } from '../errors.ts';
import { quantile } from '../stats.ts';
import type { DetectionReport, LabelScore, ScoreSummary } from './detection.ts';
import type { ExplainerName, FeatureContext, FeatureContexts, FeatureLabel, UnlabelledFeature } from './explain.ts';

// ---------------------------------------------------------------------------------------------
// The input.

/** One trained SAE of the grid and its evaluation on the held-out harvest. */
export interface SaeResult {
  /** Latents (dictionary size). */
  readonly width: number;
  /** TopK's k: latents kept per token. */
  readonly k: number;
  /** Fraction of variance unexplained on held-out activations, usually in [0, 1]. */
  readonly fvu: number;
  /** Mean active latents per token on held-out activations (at most k). */
  readonly l0: number;
  /** Share of latents that never fired on the held-out tokens, in [0, 1]. */
  readonly deadShare: number;
  /** (CE_ablated - CE_sae) / (CE_ablated - CE_clean) against the input's `ablation`. */
  readonly lossRecovered: number;
  /** Training throughput: harvested tokens per second. */
  readonly tokensPerSecond: number;
  readonly trainSeconds?: number;
}

export interface SaeReportInput {
  readonly corpus: {
    /** The corpus artifact's name, e.g. "refined-corpus". */
    readonly artifact: string;
    readonly version: string;
    readonly documents?: number;
    readonly tokens?: number;
  };
  readonly lm: {
    /** local: a small GPT trained here on the corpus; hf: a published checkpoint. */
    readonly kind: 'local' | 'hf';
    /** "local GPT", "EleutherAI/pythia-70m@main". */
    readonly name: string;
    readonly layers: number;
    /** Residual stream width (d_model). */
    readonly width: number;
    /** The layer whose residual stream was harvested. */
    readonly layer: number;
    readonly parameters?: number;
    /** Cross-entropy (nats per token) on held-out text, for a model trained here. */
    readonly heldOutLoss?: number;
    readonly trainSeconds?: number;
  };
  readonly harvest: {
    readonly trainTokens: number;
    readonly heldOutTokens: number;
    /** Next-token cross-entropy (nats) on the held-out tokens: clean, and with the layer's output zeroed or replaced by its mean. */
    readonly ceClean: number;
    readonly ceZeroAblated: number;
    readonly ceMeanAblated: number;
    readonly seconds: number;
  };
  /** The ablation loss recovered is measured against. */
  readonly ablation: 'zero' | 'mean';
  /** The grid, one per (width, k). */
  readonly saes: readonly SaeResult[];
  /** The SAE whose features were labelled, and the rule's L0 bound. */
  readonly chosen: { readonly width: number; readonly k: number; readonly targetL0: number };
  readonly explainer: ExplainerName;
  /** The Claude model id for the Claude explainer; null for top-tokens. */
  readonly model: string | null;
  /** The explain run's labels and its unlabelled features (ExplainRun.labels, ExplainRun.unlabelled). */
  readonly labels: readonly FeatureLabel[];
  readonly unlabelled: readonly UnlabelledFeature[];
  readonly detection: DetectionReport;
  /** The sampled features' contexts (the document the explainer read). */
  readonly contexts: FeatureContexts;
  /** Licence statements: the model's ("Apache 2.0 (EleutherAI)", or trained here on the corpus) and the corpus's. */
  readonly licences: { readonly model: string; readonly corpus: string };
  /** Step name to compute seconds this run; null: reused from the cache (no compute this run). */
  readonly timings?: Readonly<Record<string, number | null>>;
}

// ---------------------------------------------------------------------------------------------
// The figures.

/** An SAE of the grid with what the report derives for it. */
export interface SaeRow extends SaeResult {
  /** "w1024 k32". */
  readonly name: string;
  /** CE with the SAE spliced in, implied by loss recovered and the ablation's CE. */
  readonly ceSae: number;
  /** Not dominated in (lower L0, lower FVU). */
  readonly paretoFvu: boolean;
  /** Not dominated in (lower L0, higher loss recovered). */
  readonly paretoLossRecovered: boolean;
  /** L0 <= targetL0. */
  readonly withinTarget: boolean;
  readonly chosen: boolean;
  readonly best: boolean;
}

/** A context window as shown: each token with its activation; tag says where it came from. */
export interface ShownWindow {
  readonly tag: 'top' | 'quantile' | 'inactive' | 'active';
  readonly tokens: readonly string[];
  readonly activations: readonly number[];
}

export interface FeatureScoreRow {
  readonly feature: number;
  readonly label: string;
  /** Own label's balanced accuracy and standard error; null when unscored. */
  readonly own: number | null;
  readonly ownStandardError: number | null;
  readonly control: number | null;
  readonly controlStandardError: number | null;
  /** The feature whose label is the control. */
  readonly controlFrom: number;
  readonly controlLabel: string;
  /** own - control; null when either is missing. */
  readonly gap: number | null;
}

export interface TopFeature extends FeatureScoreRow {
  readonly own: number;
  readonly firingRate: number | null;
  readonly maxActivation: number | null;
  /** A few explain windows (activating first) and detect windows (active, then inactive). */
  readonly explain: readonly ShownWindow[];
  readonly detect: readonly ShownWindow[];
}

export interface UnscoredEntry {
  readonly feature: number;
  /** Which label's score: the feature's own, or the control's. */
  readonly which: 'own' | 'control';
  /** A request failure (refused, malformed, timeout, api-error), 'no-score' (the scored windows lack a class), or 'not-in-detection'. */
  readonly reason: string;
  readonly detail: string;
  /** Windows left unscored; null when the whole score is missing. */
  readonly windows: number | null;
}

export interface SaeFigures {
  readonly corpus: SaeReportInput['corpus'];
  readonly lm: SaeReportInput['lm'];
  readonly harvest: SaeReportInput['harvest'] & { readonly ceAblated: number };
  readonly ablation: 'zero' | 'mean';
  readonly licences: SaeReportInput['licences'];
  readonly targetL0: number;
  /** By width, then k. */
  readonly saes: readonly SaeRow[];
  /** Names, by L0 (then FVU / loss recovered). */
  readonly paretoFvu: readonly string[];
  readonly paretoLossRecovered: readonly string[];
  /** Best loss recovered among L0 <= targetL0 (ties: lower FVU, lower L0, narrower, smaller k); null when no SAE qualifies. */
  readonly best: SaeRow | null;
  readonly chosen: SaeRow;
  readonly throughput: {
    readonly medianTokensPerSecond: number;
    readonly minTokensPerSecond: number;
    readonly maxTokensPerSecond: number;
    readonly trainSeconds: number | null;
  };
  readonly explainer: ExplainerName;
  readonly model: string | null;
  readonly detection: {
    readonly seed: number;
    readonly own: ScoreSummary | null;
    readonly control: ScoreSummary | null;
    readonly gap: number | null;
    /** One per detection row, by feature. */
    readonly features: readonly FeatureScoreRow[];
  };
  /** Highest own balanced accuracy; ties: larger gap to the control (a missing gap last), then feature id. */
  readonly topFeatures: readonly TopFeature[];
  readonly counts: {
    /** Features in the contexts document (the sample), and how many the SAE had to sample from, when known. */
    readonly sampled: number;
    readonly eligible: number | null;
    readonly labelled: number;
    readonly unlabelled: number;
    /** Labelled features with an own score. */
    readonly scored: number;
    /** Labelled features without an own score. */
    readonly unscored: number;
    /** Scored features with some windows unscored. */
    readonly partlyScored: number;
    readonly unlabelledByReason: Readonly<Record<string, number>>;
    readonly unscoredByReason: Readonly<Record<string, number>>;
  };
  readonly unlabelled: readonly { readonly feature: number; readonly reason: string; readonly detail: string; readonly attempts: number }[];
  readonly unscored: readonly UnscoredEntry[];
  readonly timings: {
    readonly cold: readonly { readonly step: string; readonly seconds: number }[];
    readonly cached: readonly string[];
    readonly coldSeconds: number;
  } | null;
}

/** How many top features the report shows, and windows per feature. */
export const TOP_FEATURES = 5;
const EXPLAIN_SHOWN = 3;
const DETECT_ACTIVE_SHOWN = 3;
const DETECT_INACTIVE_SHOWN = 2;

const saeName = (s: { width: number; k: number }) => `w${s.width} k${s.k}`;

function checkFinite(field: string, value: unknown): void {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new ConfigError(field, value, 'must be a finite number');
}

/**
 * Indices of the points not dominated: no other point at least as good on both axes and better
 * on one. Lower x is better; lower y when `lowerY`, else higher y. Equal points do not dominate
 * each other, so both stay on the front.
 */
export function paretoFront(points: readonly { readonly x: number; readonly y: number }[], lowerY: boolean): number[] {
  const better = (a: number, b: number) => (lowerY ? a < b : a > b);
  const atLeast = (a: number, b: number) => a === b || better(a, b);
  return points
    .map((p, i) => ({ p, i }))
    .filter(({ p, i }) => !points.some((q, j) => j !== i && q.x <= p.x && atLeast(q.y, p.y) && (q.x < p.x || better(q.y, p.y))))
    .map(({ i }) => i);
}

function scoreOf(s: LabelScore): { value: number | null; se: number | null } {
  return { value: s.score?.balancedAccuracy ?? null, se: s.score?.standardError ?? null };
}

function shownWindows(feature: FeatureContext | undefined): { explain: ShownWindow[]; detect: ShownWindow[] } {
  if (!feature) return { explain: [], detect: [] };
  const explain = [...feature.explain.filter((w) => w.source !== 'inactive'), ...feature.explain.filter((w) => w.source === 'inactive')]
    .slice(0, EXPLAIN_SHOWN)
    .map((w) => ({ tag: w.source, tokens: [...w.tokens], activations: [...w.activations] }));
  const detect = [
    ...feature.detect.filter((w) => w.active).slice(0, DETECT_ACTIVE_SHOWN),
    ...feature.detect.filter((w) => !w.active).slice(0, DETECT_INACTIVE_SHOWN),
  ].map((w) => ({ tag: w.active ? ('active' as const) : ('inactive' as const), tokens: [...w.tokens], activations: [...w.activations] }));
  return { explain, detect };
}

const countBy = <T>(items: readonly T[], key: (item: T) => string): Record<string, number> => {
  const out: Record<string, number> = {};
  for (const item of items) out[key(item)] = (out[key(item)] ?? 0) + 1;
  return out;
};

/** Every figure of the report. Throws a ConfigError on an inconsistent input (no SAE, the chosen one missing, labels of another explainer). */
export function saeFigures(input: SaeReportInput): SaeFigures {
  if (!Array.isArray(input.saes) || input.saes.length === 0) throw new ConfigError('saes', input.saes, 'must list at least one SAE');
  const seen = new Set<string>();
  input.saes.forEach((s, i) => {
    for (const key of ['width', 'k', 'fvu', 'l0', 'deadShare', 'lossRecovered', 'tokensPerSecond'] as const) checkFinite(`saes[${i}].${key}`, s[key]);
    if (seen.has(saeName(s))) throw new ConfigError(`saes[${i}]`, saeName(s), 'is a duplicate (width, k)');
    seen.add(saeName(s));
  });
  checkFinite('chosen.targetL0', input.chosen.targetL0);
  if (input.ablation !== 'zero' && input.ablation !== 'mean') throw new ConfigError('ablation', input.ablation, 'must be "zero" or "mean"');
  if (!seen.has(saeName(input.chosen))) throw new ConfigError('chosen', saeName(input.chosen), 'is not an SAE of saes');
  input.labels.forEach((l, i) => {
    if (l.explainer !== input.explainer) throw new ConfigError(`labels[${i}].explainer`, l.explainer, `must be the input's explainer ("${input.explainer}")`);
  });
  if (input.detection.explainer !== input.explainer)
    throw new ConfigError(
      'detection.explainer',
      input.detection.explainer,
      `must be the input's explainer ("${input.explainer}"): every score names its explainer`,
    );

  // The grid.
  const ceAblated = input.ablation === 'zero' ? input.harvest.ceZeroAblated : input.harvest.ceMeanAblated;
  const sorted = [...input.saes].sort((a, b) => a.width - b.width || a.k - b.k);
  const frontFvu = new Set(
    paretoFront(
      sorted.map((s) => ({ x: s.l0, y: s.fvu })),
      true,
    ),
  );
  const frontLr = new Set(
    paretoFront(
      sorted.map((s) => ({ x: s.l0, y: s.lossRecovered })),
      false,
    ),
  );
  const target = input.chosen.targetL0;
  const within = sorted.filter((s) => s.l0 <= target);
  const bestResult = [...within].sort((a, b) => b.lossRecovered - a.lossRecovered || a.fvu - b.fvu || a.l0 - b.l0 || a.width - b.width || a.k - b.k)[0] ?? null;
  const saes: SaeRow[] = sorted.map((s, i) => ({
    ...s,
    name: saeName(s),
    ceSae: ceAblated - s.lossRecovered * (ceAblated - input.harvest.ceClean),
    paretoFvu: frontFvu.has(i),
    paretoLossRecovered: frontLr.has(i),
    withinTarget: s.l0 <= target,
    chosen: s.width === input.chosen.width && s.k === input.chosen.k,
    best: s === bestResult,
  }));
  const byL0 = (y: (s: SaeRow) => number) => (a: SaeRow, b: SaeRow) => a.l0 - b.l0 || y(a) - y(b);
  const tps = saes.map((s) => s.tokensPerSecond).sort((a, b) => a - b);
  const trainSeconds = saes.every((s) => typeof s.trainSeconds === 'number') ? saes.reduce((n, s) => n + s.trainSeconds!, 0) : null;

  // Detection.
  const labelOf = new Map(input.labels.map((l) => [l.feature, l]));
  const contextOf = new Map(input.contexts.features.map((f) => [f.feature, f]));
  const features: FeatureScoreRow[] = input.detection.rows.map((row) => {
    const own = scoreOf(row.own);
    const control = scoreOf(row.control);
    return {
      feature: row.feature,
      label: labelOf.get(row.feature)?.label ?? row.own.label,
      own: own.value,
      ownStandardError: own.se,
      control: control.value,
      controlStandardError: control.se,
      controlFrom: row.control.labelFrom,
      controlLabel: row.control.label,
      gap: own.value !== null && control.value !== null ? own.value - control.value : null,
    };
  });
  const topFeatures: TopFeature[] = features
    .filter((f): f is FeatureScoreRow & { own: number } => f.own !== null)
    .sort((a, b) => b.own - a.own || (b.gap ?? -Infinity) - (a.gap ?? -Infinity) || a.feature - b.feature)
    .slice(0, TOP_FEATURES)
    .map((f) => {
      const context = contextOf.get(f.feature);
      return { ...f, firingRate: context?.firingRate ?? null, maxActivation: context?.maxActivation ?? null, ...shownWindows(context) };
    });

  // Unlabelled and unscored: every sampled feature is accounted for.
  const listed = new Set(input.unlabelled.map((u) => u.feature));
  const unlabelled = [
    ...input.unlabelled.map((u) => ({ feature: u.feature, reason: u.reason as string, detail: u.detail, attempts: u.attempts })),
    ...input.contexts.features
      .filter((f) => !labelOf.has(f.feature) && !listed.has(f.feature))
      .map((f) => ({ feature: f.feature, reason: 'missing', detail: 'neither labelled nor listed as unlabelled by the explain run', attempts: 0 })),
  ].sort((a, b) => a.feature - b.feature);
  const unscored: UnscoredEntry[] = [];
  for (const row of input.detection.rows)
    for (const which of ['own', 'control'] as const) {
      const s = row[which];
      for (const u of s.unscored)
        unscored.push({ feature: row.feature, which, reason: u.reason, detail: `${u.detail} (${u.attempts} attempts)`, windows: u.windows.length });
      if (s.score === null) unscored.push({ feature: row.feature, which, reason: 'no-score', detail: s.note ?? 'no score', windows: null });
    }
  const inDetection = new Set(input.detection.rows.map((r) => r.feature));
  for (const l of input.labels)
    if (!inDetection.has(l.feature))
      unscored.push({
        feature: l.feature,
        which: 'own',
        reason: 'not-in-detection',
        detail: 'labelled, but the detection report has no row for it',
        windows: null,
      });
  unscored.sort((a, b) => a.feature - b.feature || (a.which === b.which ? 0 : a.which === 'own' ? -1 : 1));
  const scored = features.filter((f) => f.own !== null).length;

  // Timings: computed this run, apart from those reused from the cache.
  const timings = input.timings
    ? (() => {
        const entries = Object.entries(input.timings);
        const cold = entries.filter((e): e is [string, number] => typeof e[1] === 'number').map(([step, seconds]) => ({ step, seconds }));
        return { cold, cached: entries.filter(([, s]) => s === null).map(([step]) => step), coldSeconds: cold.reduce((n, c) => n + c.seconds, 0) };
      })()
    : null;

  return {
    corpus: input.corpus,
    lm: input.lm,
    harvest: { ...input.harvest, ceAblated },
    ablation: input.ablation,
    licences: input.licences,
    targetL0: target,
    saes,
    paretoFvu: saes
      .filter((s) => s.paretoFvu)
      .sort(byL0((s) => s.fvu))
      .map((s) => s.name),
    paretoLossRecovered: saes
      .filter((s) => s.paretoLossRecovered)
      .sort(byL0((s) => -s.lossRecovered))
      .map((s) => s.name),
    best: saes.find((s) => s.best) ?? null,
    chosen: saes.find((s) => s.chosen)!,
    throughput: { medianTokensPerSecond: quantile(tps, 0.5), minTokensPerSecond: tps[0]!, maxTokensPerSecond: tps[tps.length - 1]!, trainSeconds },
    explainer: input.explainer,
    model: input.model,
    detection: { seed: input.detection.seed, own: input.detection.own, control: input.detection.control, gap: input.detection.gap, features },
    topFeatures,
    counts: {
      sampled: input.contexts.features.length,
      eligible: input.contexts.eligible ?? null,
      labelled: input.labels.length,
      unlabelled: unlabelled.length,
      scored,
      unscored: input.labels.length - scored,
      partlyScored: features.filter((f) => {
        const row = input.detection.rows.find((r) => r.feature === f.feature)!;
        return f.own !== null && row.own.unscored.length > 0;
      }).length,
      unlabelledByReason: countBy(unlabelled, (u) => u.reason),
      unscoredByReason: countBy(unscored, (u) => u.reason),
    },
    unlabelled,
    unscored,
    timings,
  };
}

// ---------------------------------------------------------------------------------------------
// The page.

const num = (x: number | null | undefined, digits = 3) => (x === null || x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(digits));
const pct = (x: number | null | undefined) => (x === null || x === undefined || !Number.isFinite(x) ? '–' : `${(100 * x).toFixed(1)} %`);
const int = (x: number | null | undefined) => (x === null || x === undefined ? '–' : Math.round(x).toLocaleString('en-US'));
const pm = (value: number | null, se: number | null) => (value === null ? '–' : se === null ? num(value) : `${num(value)} ± ${num(se)}`);

/** Who produced the labels, as the page names it next to every score. */
export function explainerDescription(explainer: ExplainerName, model: string | null): string {
  return explainer === 'claude' ? `Claude explainer (${model || 'model not recorded'})` : 'top-tokens explainer (non-LLM baseline)';
}

const VEGA = 'https://vega.github.io/schema/vega-lite/v5.json' as const;

function gridValues(f: SaeFigures) {
  return f.saes.map((s) => ({
    name: s.name,
    width: s.width,
    k: s.k,
    l0: s.l0,
    fvu: s.fvu,
    lossRecovered: s.lossRecovered,
    deadShare: s.deadShare,
    paretoFvu: s.paretoFvu,
    paretoLossRecovered: s.paretoLossRecovered,
    chosen: s.chosen,
  }));
}

/** Widths as categories (category10), smallest first. */
const widthColor = { field: 'width', type: 'nominal' as const, title: 'width', sort: 'ascending' as const, scale: { scheme: 'category10' } };

function tradeOffChart(f: SaeFigures, y: 'fvu' | 'lossRecovered'): TopLevelSpec {
  const front = y === 'fvu' ? 'paretoFvu' : 'paretoLossRecovered';
  const yTitle = y === 'fvu' ? 'FVU (lower is better)' : 'loss recovered (higher is better)';
  const logX = f.saes.every((s) => s.l0 > 0) && f.targetL0 > 0;
  const x = { field: 'l0', type: 'quantitative' as const, scale: logX ? { type: 'log' as const } : { zero: false }, title: `L0${logX ? ' (log)' : ''}` };
  const yEnc = { field: y, type: 'quantitative' as const, scale: { zero: false }, title: yTitle };
  return {
    $schema: VEGA,
    title: `L0 against ${y === 'fvu' ? 'FVU' : `loss recovered (${f.ablation} ablation)`}: ${f.saes.length} SAEs, Pareto front circled, L0 target ${f.targetL0} red`,
    width: 560,
    height: 260,
    data: { values: gridValues(f) },
    layer: [
      {
        transform: [{ filter: `datum.${front}` }],
        mark: { type: 'line', color: '#777', strokeDash: [5, 3] },
        encoding: { x, y: yEnc, order: { field: 'l0', type: 'quantitative' } },
      },
      {
        transform: [{ filter: `datum.${front}` }],
        mark: { type: 'point', size: 220, color: '#333', filled: false },
        encoding: { x, y: yEnc },
      },
      {
        mark: { type: 'point', filled: true, size: 70 },
        encoding: { x, y: yEnc, color: widthColor, tooltip: [{ field: 'name' }, { field: 'l0' }, { field: y }] },
      },
      {
        transform: [{ filter: 'datum.chosen' }],
        mark: { type: 'text', dy: -14, fontWeight: 'bold' },
        encoding: { x, y: yEnc, text: { value: 'chosen' } },
      },
      { mark: { type: 'rule', color: '#c00', strokeDash: [2, 2] }, encoding: { x: { datum: f.targetL0 } } },
    ],
  };
}

function deadChart(f: SaeFigures): TopLevelSpec {
  return {
    $schema: VEGA,
    title: 'Dead latents per SAE (never fired on the held-out tokens)',
    width: 560,
    height: 180,
    data: { values: gridValues(f).map((v, i) => ({ ...v, order: i })) },
    mark: 'bar',
    encoding: {
      x: { field: 'name', type: 'nominal', sort: { field: 'order' }, title: 'SAE (width, k)' },
      y: { field: 'deadShare', type: 'quantitative', axis: { format: '%' }, title: 'dead share' },
      color: widthColor,
    },
  };
}

function detectionChart(f: SaeFigures): TopLevelSpec {
  const ownSeries = 'own label';
  const controlSeries = "control (another feature's label)";
  const values = f.detection.features.flatMap((row) => [
    ...(row.own !== null ? [{ feature: row.feature, series: ownSeries, balancedAccuracy: row.own }] : []),
    ...(row.control !== null ? [{ feature: row.feature, series: controlSeries, balancedAccuracy: row.control }] : []),
  ]);
  const title = 'balanced accuracy (0.5: chance; black: the mean)';
  return {
    $schema: VEGA,
    title: `Detection per feature, labels by the ${explainerDescription(f.explainer, f.model)}`,
    data: { values },
    facet: { row: { field: 'series', type: 'nominal', title: null, sort: [ownSeries, controlSeries] } },
    spec: {
      width: 560,
      height: 90,
      layer: [
        {
          mark: 'bar',
          encoding: {
            x: { field: 'balancedAccuracy', type: 'quantitative', bin: { extent: [0, 1], step: 0.05 }, title },
            y: { aggregate: 'count', type: 'quantitative', title: 'features' },
            color: { field: 'series', type: 'nominal', legend: null, sort: [ownSeries, controlSeries] },
          },
        },
        { mark: { type: 'rule', color: '#999', strokeDash: [2, 2] }, encoding: { x: { datum: 0.5 } } },
        { mark: { type: 'rule', color: 'black', size: 2 }, encoding: { x: { field: 'balancedAccuracy', aggregate: 'mean', type: 'quantitative' } } },
      ],
    },
  };
}

/** A token's text with the whitespace that matters made visible (newline ⏎, tab ⇥, carriage return ␍, an all-space token ␣). */
function visibleToken(token: string): string {
  if (token === '') return '∅';
  const text = /^ +$/.test(token) ? '␣'.repeat(token.length) : token;
  return escapeHtml(text).replace(/\r/g, '␍').replace(/\n/g, '⏎').replace(/\t/g, '⇥');
}

/** One window, each token a span shaded by activation / the feature's maxActivation. */
export function shadedWindowHtml(
  window: { readonly tokens: readonly string[]; readonly activations: readonly number[] },
  maxActivation: number | null,
): string {
  const spans = window.tokens.map((token, i) => {
    const a = window.activations[i] ?? 0;
    const alpha = maxActivation && maxActivation > 0 ? Math.min(1, Math.max(0, a / maxActivation)) : 0;
    return `<span class="tok" title="${num(a, 3)}" style="background:rgba(255,140,0,${alpha.toFixed(3)})">${visibleToken(token)}</span>`;
  });
  return `<span class="win">${spans.join('')}</span>`;
}

const cells = (rows: (string | number)[][]) =>
  rows.map((r) => `<tr>${r.map((c) => `<td>${typeof c === 'number' ? c : escapeHtml(c)}</td>`).join('')}</tr>`).join('\n');
/** Rows whose cells are already HTML. */
const htmlCells = (rows: string[][], attrs: (i: number) => string = () => '') =>
  rows.map((r, i) => `<tr${attrs(i)}>${r.map((c) => `<td>${c}</td>`).join('')}</tr>`).join('\n');

function summaryHtml(f: SaeFigures, explainer: string): string {
  const b = f.best;
  const grid = b
    ? `Best loss recovered at L0 &le; ${num(f.targetL0, 1)}: <strong id="best-loss-recovered">${pct(b.lossRecovered)}</strong> (SAE ${escapeHtml(b.name)}, L0 ${num(b.l0, 1)}, FVU ${num(b.fvu)}; against the ${f.ablation}-ablated layer).`
    : `No SAE of the ${f.saes.length} has L0 &le; ${num(f.targetL0, 1)}.`;
  const chosen =
    b && b.name === f.chosen.name
      ? ' It is the SAE whose features were labelled.'
      : ` The SAE whose features were labelled is <strong>${escapeHtml(f.chosen.name)}</strong> (loss recovered ${pct(f.chosen.lossRecovered)}, L0 ${num(f.chosen.l0, 1)})${b ? ', not the best by this rule' : ''}.`;
  const d = f.detection;
  const detection =
    d.own && d.control
      ? `Detection, labels by the ${escapeHtml(explainer)}: own labels <strong id="detection-own">${pm(d.own.mean, d.own.standardError)}</strong> against mismatched labels (control) <strong id="detection-control">${pm(d.control.mean, d.control.standardError)}</strong> balanced accuracy, a gap of <strong id="detection-gap">${num(d.gap)}</strong> over ${d.own.n} features.`
      : `Detection, labels by the ${escapeHtml(explainer)}: no feature could be scored.`;
  return `<p id="summary">${grid}${chosen} ${detection}</p>`;
}

export async function saeReportHtml(f: SaeFigures): Promise<string> {
  const [fvuSvg, lrSvg, deadSvg, detectionSvg] = await Promise.all([
    svgOf(tradeOffChart(f, 'fvu')),
    svgOf(tradeOffChart(f, 'lossRecovered')),
    svgOf(deadChart(f)),
    svgOf(detectionChart(f)),
  ]);
  const explainer = explainerDescription(f.explainer, f.model);
  const by = escapeHtml(f.explainer === 'claude' ? `claude, ${f.model ?? '?'}` : 'top-tokens');
  const lm = f.lm;
  const h = f.harvest;
  const lmText =
    lm.kind === 'local'
      ? `${escapeHtml(lm.name)}, trained here on the corpus: ${lm.layers > 0 ? `${lm.layers} layers, ` : ''}width ${lm.width}${lm.parameters ? `, ${int(lm.parameters)} parameters` : ''}${lm.heldOutLoss !== undefined ? `, held-out loss ${num(lm.heldOutLoss)} nats/token` : ''}${lm.trainSeconds !== undefined ? `, ${num(lm.trainSeconds, 0)} s of training` : ''}.`
      : `${escapeHtml(lm.name)} (published weights): ${lm.layers > 0 ? `${lm.layers} layers, ` : ''}width ${lm.width}${lm.parameters ? `, ${int(lm.parameters)} parameters` : ''}.`;
  const corpus = `${escapeHtml(f.corpus.artifact)}@${escapeHtml(f.corpus.version)}${f.corpus.documents !== undefined ? `, ${int(f.corpus.documents)} documents` : ''}${f.corpus.tokens !== undefined ? `, ${int(f.corpus.tokens)} tokens` : ''}`;

  const saeRows = htmlCells(
    f.saes.map((s) => [
      `${s.width}`,
      `${s.k}`,
      num(s.l0, 1),
      num(s.fvu),
      pct(s.lossRecovered),
      num(s.ceSae),
      pct(s.deadShare),
      int(s.tokensPerSecond),
      [s.paretoFvu ? 'FVU' : '', s.paretoLossRecovered ? 'loss recovered' : ''].filter(Boolean).join(', ') || '–',
      [s.chosen ? '<strong>chosen</strong>' : '', s.best ? 'best at L0 target' : '', s.withinTarget ? '' : 'above L0 target'].filter(Boolean).join('; '),
    ]),
    (i) => (f.saes[i]!.chosen ? ' class="chosen"' : ''),
  );

  const featureRows = htmlCells(
    f.detection.features.map((r) => [
      `${r.feature}`,
      escapeHtml(r.label),
      pm(r.own, r.ownStandardError),
      `${pm(r.control, r.controlStandardError)} <small>(label of ${r.controlFrom})</small>`,
      num(r.gap),
    ]),
  );

  const top = f.topFeatures
    .map(
      (t, i) => `<section class="feature" id="feature-${t.feature}">
<h3>${i + 1}. Feature ${t.feature}: <span class="label">${escapeHtml(t.label)}</span></h3>
<p>Balanced accuracy (${by}): own label <strong>${pm(t.own, t.ownStandardError)}</strong>, control (label of feature ${t.controlFrom}, ${escapeHtml(t.controlLabel)}) <strong>${pm(t.control, t.controlStandardError)}</strong>, gap ${num(t.gap)}.
Firing rate ${pct(t.firingRate)}, maximum activation ${num(t.maxActivation)}.</p>
<p class="ctx-head">What the explainer read:</p>
<ul class="ctx">${t.explain.map((w) => `<li><small>${w.tag}</small> ${shadedWindowHtml(w, t.maxActivation)}</li>`).join('')}</ul>
<p class="ctx-head">Held-out windows the label was scored on:</p>
<ul class="ctx">${t.detect.map((w) => `<li><small>${w.tag}</small> ${shadedWindowHtml(w, t.maxActivation)}</li>`).join('')}</ul>
</section>`,
    )
    .join('\n');

  const c = f.counts;
  const unlabelledHtml = f.unlabelled.length
    ? `<table id="unlabelled"><tr><th>feature</th><th>reason</th><th>detail</th><th>requests</th></tr>${cells(f.unlabelled.map((u) => [u.feature, u.reason, u.detail, u.attempts]))}</table>`
    : '<p id="unlabelled">Every sampled feature has a label.</p>';
  const unscoredHtml = f.unscored.length
    ? `<table id="unscored"><tr><th>feature</th><th>label</th><th>reason</th><th>detail</th><th>windows unscored</th></tr>${cells(
        f.unscored.map((u) => [u.feature, u.which, u.reason, u.detail, u.windows === null ? 'all (no score)' : u.windows]),
      )}</table>`
    : '<p id="unscored">Every label was scored on all its windows.</p>';
  const t = f.timings;
  const timingsHtml = t
    ? `<h2>Compute time per step</h2>
<p>Computed in this run: ${num(t.coldSeconds, 1)} s in all. Steps found in the cache were reused and spent nothing this run; their times are not counted.</p>
<table id="timings-cold"><tr><th>step (computed)</th><th>seconds</th></tr>${cells(t.cold.map((s) => [s.step, num(s.seconds, 2)]))}</table>
<p id="timings-cached">Reused from the cache: ${t.cached.length ? t.cached.map(escapeHtml).join(', ') : 'none'}.</p>`
    : '';

  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sparse autoencoders on ${escapeHtml(lm.name)}, layer ${lm.layer}</title>
<style>body{font-family:system-ui,sans-serif;max-width:980px;margin:2rem auto;padding:0 1rem;color:#222}table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}th{background:#f4f4f4}td:nth-child(2),td:last-child{text-align:left}tr.chosen{background:#fff6e0}.win{font-family:ui-monospace,monospace;white-space:pre-wrap;background:#fafafa;border:1px solid #e4e4e4;padding:0 .2rem}.tok{border-radius:2px}ul.ctx{list-style:none;padding-left:0}ul.ctx li{margin:.25rem 0}.ctx-head{margin-bottom:0}</style>
</head><body>
<h1>Sparse autoencoders: ${escapeHtml(lm.name)}, layer ${lm.layer}</h1>
${summaryHtml(f, explainer)}
<h2>Model and harvest</h2>
<p id="model">Model: ${lmText} Corpus: ${corpus}.</p>
<p id="harvest">Residual stream after layer ${lm.layer}${lm.layers > 0 ? ` of ${lm.layers}` : ''}, width ${lm.width}: ${int(h.trainTokens)} training tokens and ${int(h.heldOutTokens)} held-out tokens, harvested in ${num(h.seconds, 1)} s.
Held-out cross-entropy: clean ${num(h.ceClean)}, layer zero-ablated ${num(h.ceZeroAblated)}, mean-ablated ${num(h.ceMeanAblated)} nats/token; loss recovered is measured against the <strong>${f.ablation}</strong> ablation.</p>
<h2>The SAE grid</h2>
<p id="throughput">${f.saes.length} TopK SAEs; training throughput median ${int(f.throughput.medianTokensPerSecond)} tokens/s (${int(f.throughput.minTokensPerSecond)} to ${int(f.throughput.maxTokensPerSecond)})${f.throughput.trainSeconds !== null ? `, ${num(f.throughput.trainSeconds, 0)} s of training in all` : ''}.
Pareto front in (L0, FVU): ${f.paretoFvu.map(escapeHtml).join(', ')}; in (L0, loss recovered): ${f.paretoLossRecovered.map(escapeHtml).join(', ')}.</p>
<figure id="chart-l0-fvu">${fvuSvg}</figure>
<figure id="chart-l0-loss-recovered">${lrSvg}</figure>
<table id="saes"><tr><th>width</th><th>k</th><th>L0</th><th>FVU</th><th>loss recovered</th><th>CE with SAE</th><th>dead</th><th>tokens/s</th><th>Pareto front</th><th>note</th></tr>
${saeRows}</table>
<figure id="chart-dead">${deadSvg}</figure>
<h2>Feature labels and detection</h2>
<p id="detection">SAE ${escapeHtml(f.chosen.name)}: ${c.sampled} features sampled${c.eligible !== null ? ` from ${c.eligible} that fired` : ''}; ${c.labelled} labelled by the <strong class="explainer">${escapeHtml(explainer)}</strong>, ${c.unlabelled} unlabelled; ${c.scored} scored, ${c.unscored} unscored${c.partlyScored ? `, ${c.partlyScored} with some windows unscored` : ''}.
Each label is scored by balanced accuracy on held-out windows, and so is a mismatched label (another feature's, seed ${f.detection.seed}) as the control: the gap between the two, not the own score alone, shows what the labels say.</p>
<figure id="chart-detection">${detectionSvg}</figure>
<table id="features"><tr><th>feature</th><th>label (${by})</th><th>own balanced accuracy</th><th>control</th><th>gap</th></tr>
${featureRows}</table>
<h2>The ${f.topFeatures.length} most interpretable features</h2>
<p>Highest own balanced accuracy (labels by the ${escapeHtml(explainer)}); ties go to the larger gap to the control, then the lower feature id. Tokens are shaded by activation over the feature's maximum; ⏎ is a newline, ␣ a space-only token.</p>
${top}
<h2>Unlabelled and unscored features</h2>
${unlabelledHtml}
${unscoredHtml}
<h2>Licences</h2>
<p id="licences">Model (${escapeHtml(lm.name)}): ${escapeHtml(f.licences.model)}<br>Corpus (${escapeHtml(f.corpus.artifact)}): ${escapeHtml(f.licences.corpus)}</p>
${timingsHtml}
</body></html>
`;
}

// ---------------------------------------------------------------------------------------------
// The metrics.

const MAX_METRIC_STRING = 120;

/** A flat record for the artifact index: a few dozen numbers and short strings (well under 4,000 characters as JSON). */
export function saeMetrics(f: SaeFigures): Record<string, number | string> {
  const out: Record<string, number | string> = {};
  const add = (key: string, value: unknown) => {
    if (typeof value === 'number' && Number.isFinite(value)) out[key] = Number(value.toPrecision(6));
    else if (typeof value === 'string') out[key] = value.length > MAX_METRIC_STRING ? `${value.slice(0, MAX_METRIC_STRING - 1)}…` : value;
  };
  add('lm', f.lm.name);
  add('lmKind', f.lm.kind);
  add('layer', f.lm.layer);
  add('corpus', `${f.corpus.artifact}@${f.corpus.version}`);
  add('trainTokens', f.harvest.trainTokens);
  add('heldOutTokens', f.harvest.heldOutTokens);
  add('ceClean', f.harvest.ceClean);
  add('ceAblated', f.harvest.ceAblated);
  add('ablation', f.ablation);
  add('saes', f.saes.length);
  add('targetL0', f.targetL0);
  add('paretoFvu', f.paretoFvu.length);
  add('paretoLossRecovered', f.paretoLossRecovered.length);
  if (f.best) {
    add('bestSae', f.best.name);
    add('bestLossRecovered', f.best.lossRecovered);
    add('bestL0', f.best.l0);
    add('bestFvu', f.best.fvu);
    add('bestDeadShare', f.best.deadShare);
  }
  add('chosenSae', f.chosen.name);
  add('chosenIsBest', f.best?.name === f.chosen.name ? 1 : 0);
  add('chosenLossRecovered', f.chosen.lossRecovered);
  add('chosenL0', f.chosen.l0);
  add('chosenFvu', f.chosen.fvu);
  add('chosenDeadShare', f.chosen.deadShare);
  add('medianTokensPerSecond', f.throughput.medianTokensPerSecond);
  add('minTokensPerSecond', f.throughput.minTokensPerSecond);
  add('maxTokensPerSecond', f.throughput.maxTokensPerSecond);
  add('saeTrainSeconds', f.throughput.trainSeconds);
  add('explainer', f.explainer);
  if (f.model) add('model', f.model);
  add('featuresSampled', f.counts.sampled);
  add('featuresLabelled', f.counts.labelled);
  add('unlabelled', f.counts.unlabelled);
  add('featuresScored', f.counts.scored);
  add('unscored', f.counts.unscored);
  add('partlyScored', f.counts.partlyScored);
  add('detectionOwn', f.detection.own?.mean);
  add('detectionOwnSe', f.detection.own?.standardError);
  add('detectionControl', f.detection.control?.mean);
  add('detectionControlSe', f.detection.control?.standardError);
  add('detectionGap', f.detection.gap);
  add('detectionN', f.detection.own?.n);
  const first = f.topFeatures[0];
  if (first) {
    add('topFeature', first.feature);
    add('topFeatureOwn', first.own);
    add('topFeatureLabel', first.label);
  }
  if (f.timings) {
    add('coldSeconds', f.timings.coldSeconds);
    add('cachedSteps', f.timings.cached.length);
  }
  return out;
}
