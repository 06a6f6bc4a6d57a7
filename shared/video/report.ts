/**
 * The video pipeline's report: one self-contained HTML page (charts rendered to inline SVG,
 * contact sheets inlined as data URIs, no network) and a flat record of metrics for the artifact
 * index.
 *
 * What it shows. Source videos were cut at their scene changes into candidate clips, the clips
 * scored (aesthetic 1-10, motion, mean luma, perceptual hashes) and curated by the rules of
 * curate.ts; the kept ones were captioned and copied into the published artifact. The page shows
 * the funnel (every candidate is kept or dropped under exactly one rule, in DROP_RULES order),
 * each score's distribution with its threshold drawn, the kept share per source (refused and
 * failed sources named with their reasons), contact sheets of kept and dropped clips side by side
 * (each dropped one with the rule, the score and the threshold that dropped it), the aesthetic
 * scorer's name and formula, the captions (the captioner, its model, and every kept clip left
 * without a caption with the reason: a caption is never made up), throughput and each step's
 * time, and, for generated sources, the cuts and rules against the generator's truth.
 *
 * The report is written after the kept clips were copied into the artifact, so its wall clock
 * (run start to `reportAt`) includes the copy.
 *
 * `videoFigures` derives every number (plain JSON, written beside the page as figures.json);
 * `videoReportHtml` renders them; `videoMetrics` is the flat record.
 */
import type { TopLevelSpec } from 'vega-lite';
import { escapeHtml, svgOf } from '../charts.ts';
import { ConfigError } from '../errors.ts';
import { quantile } from '../stats.ts';
import { type Curated, type CuratedClip, type CurateThresholds, DROP_RULES, type Drop, type DropRule, type SourceSummary } from './curate.ts';

// ---------------------------------------------------------------------------------------------
// The input.

export type Captioner = 'vlm' | 'claude' | 'none';

/** The generator's truth for generated sources: where it cut, and which clips it made to be dropped by which rule. */
export interface VideoTruth {
  readonly cuts: {
    /** Detected cuts within `toleranceFrames` of a true cut, detected cuts with none, true cuts with none detected. */
    readonly truePositives: number;
    readonly falsePositives: number;
    readonly falseNegatives: number;
    readonly toleranceFrames: number;
  };
  /** Per rule: clips made to fail it, and how many of those it dropped. */
  readonly rules: readonly { readonly rule: DropRule; readonly madeFor: number; readonly droppedByRule: number }[];
  /** Clips made to pass every rule, and how many of them were dropped all the same. */
  readonly goodClips: number;
  readonly goodDropped: number;
  /** The good clips dropped, by the rule that dropped them (absent in documents written before it). */
  readonly goodDroppedBy?: Readonly<Record<string, number>>;
}

export interface VideoReportInput {
  readonly curated: Curated;
  /** The scorer behind the aesthetic score ("quality", "clip"), and its formula as the page prints it. */
  readonly aestheticScorer: { readonly name: string; readonly formula: string };
  readonly captions: {
    readonly captioner: Captioner;
    /** The captioner's model id; null for none. */
    readonly model: string | null;
    /** Kept clips with a caption. */
    readonly captioned: number;
    /** Kept clips without one, each with the reason (a refusal, a failed request, no captioner). */
    readonly missing: readonly { readonly id: string; readonly reason: string }[];
  };
  readonly timings: {
    /** ISO 8601: when the run started. */
    readonly runStartedAt: string;
    /** ISO 8601: when this report was made, after the clips were copied into the artifact. */
    readonly reportAt: string;
    /** Each step's seconds, in run order; a step of many jobs (cut, score) is their sum. The copy into the artifact is one. */
    readonly steps: readonly { readonly name: string; readonly seconds: number }[];
    /** Seconds of source video cut, and the cut jobs' seconds summed. */
    readonly cutVideoSeconds: number;
    readonly cutSeconds: number;
    /** The cut jobs' CPU seconds summed (each job runs on one core), when they reported them. */
    readonly cutCpuSeconds?: number;
    /** The score jobs' seconds summed; the clip seconds they scored come from the curated document. */
    readonly scoreSeconds: number;
  };
  /**
   * Contact sheets to show: each a clip of `curated` and its sheet as a JPEG (or PNG, WebP) data
   * URI, fetched and capped by the caller. Kept or dropped, and why, is read from the curated clip.
   */
  readonly contactSheets: readonly { readonly id: string; readonly dataUri: string }[];
  /** The published artifact; null when nothing was published (no clip kept). */
  readonly artifact: { readonly name: string; readonly version: number } | null;
  /** For generated sources only. */
  readonly truth?: VideoTruth;
}

// ---------------------------------------------------------------------------------------------
// The figures.

/** Clips left after a rule of the funnel dropped its share. */
export interface FunnelStage {
  /** "candidates", then each rule in DROP_RULES order. */
  readonly stage: string;
  readonly rule: DropRule | null;
  readonly dropped: number;
  readonly remaining: number;
}

export interface SourceRow {
  readonly id: string;
  readonly status: SourceSummary['status'];
  /** For refused and failed sources: the field and why. */
  readonly field: string | null;
  readonly reason: string | null;
  readonly videoSeconds: number;
  readonly candidates: number;
  readonly kept: number;
  /** kept / candidates; null without candidates. */
  readonly keptShare: number | null;
  /** The rule that dropped most of this source's clips (the first in DROP_RULES order on a tie), and how many. */
  readonly topDropRule: DropRule | null;
  readonly topDropCount: number;
}

export interface ScoreBin {
  readonly from: number;
  readonly to: number;
  readonly kept: number;
  readonly dropped: number;
}

export type ScoreName = 'aesthetic' | 'motion' | 'meanLuma';

export interface ScoreDistribution {
  readonly score: ScoreName;
  readonly title: string;
  /** Clips with this score. */
  readonly n: number;
  readonly min: number | null;
  readonly median: number | null;
  readonly max: number | null;
  /** Each threshold on this score: its name in the config, its value, and which side a kept clip lies. */
  readonly thresholds: readonly { readonly name: keyof CurateThresholds; readonly value: number; readonly keep: 'at or above' | 'at or below' }[];
  /** Equal-width bins from the first's `from` to the last's `to`; a value outside lands in the nearest bin. */
  readonly bins: readonly ScoreBin[];
}

export interface SheetFigure {
  readonly id: string;
  readonly sourceId: string;
  readonly start: number;
  readonly end: number;
  readonly kept: boolean;
  readonly drop: Drop | null;
  readonly aesthetic: number | null;
  readonly motion: number | null;
  readonly meanLuma: number | null;
  readonly dataUri: string;
}

export interface VideoTruthFigures {
  readonly cuts: VideoTruth['cuts'] & { readonly precision: number | null; readonly recall: number | null; readonly f1: number | null };
  readonly rules: readonly { readonly rule: DropRule; readonly madeFor: number; readonly droppedByRule: number; readonly recall: number | null }[];
  readonly goodClips: number;
  readonly goodDropped: number;
  /** goodDropped / goodClips. */
  readonly goodDroppedShare: number | null;
  /** The good clips dropped, by rule, most first. */
  readonly goodDroppedBy: readonly { readonly rule: string; readonly count: number }[];
}

export interface VideoFigures {
  readonly artifact: VideoReportInput['artifact'];
  readonly thresholds: CurateThresholds;
  readonly funnel: {
    readonly sources: number;
    readonly refused: number;
    readonly failed: number;
    readonly candidates: number;
    readonly dropped: Readonly<Record<DropRule, number>>;
    readonly kept: number;
    readonly keptSeconds: number;
    /** Seconds of all candidates (kept and dropped). */
    readonly candidateSeconds: number;
    /** kept + every rule's drops = candidates. */
    readonly addsUp: boolean;
    readonly stages: readonly FunnelStage[];
  };
  /** In the curated document's order (the source list's). */
  readonly sources: readonly SourceRow[];
  readonly scores: Readonly<Record<ScoreName, ScoreDistribution>>;
  readonly aestheticScorer: VideoReportInput['aestheticScorer'];
  readonly captions: {
    readonly captioner: Captioner;
    readonly model: string | null;
    readonly kept: number;
    readonly captioned: number;
    /** Missing captions listed (at most MAX_MISSING_LISTED), with their total and counts by reason. */
    readonly missing: readonly { readonly id: string; readonly reason: string }[];
    readonly missingTotal: number;
    readonly missingByReason: Readonly<Record<string, number>>;
    /** Kept clips neither captioned nor listed as missing (0 without a captioner). */
    readonly unaccounted: number;
  };
  readonly throughput: {
    readonly cutVideoSeconds: number;
    readonly cutSeconds: number;
    /** Source video seconds cut per second of cut jobs; null when no time was spent. */
    readonly cutSpeed: number | null;
    /** Per CPU second of the cut jobs (one core each): the speed per core; null without CPU times. */
    readonly cutCpuSeconds: number | null;
    readonly cutSpeedPerCore: number | null;
    /** Seconds of the clips sent to scoring (every candidate with a file). */
    readonly scoredVideoSeconds: number;
    readonly scoreSeconds: number;
    readonly scoreSpeed: number | null;
  };
  readonly timings: {
    readonly runStartedAt: string;
    readonly reportAt: string;
    /** reportAt - runStartedAt: the whole run up to this report, the copy into the artifact included. */
    readonly wallSeconds: number;
    readonly steps: readonly { readonly name: string; readonly seconds: number; readonly share: number | null }[];
    readonly stepSeconds: number;
    /** wallSeconds - stepSeconds: waiting and orchestration; negative when jobs ran at once. */
    readonly outsideSteps: number;
  };
  readonly sheets: {
    readonly kept: readonly SheetFigure[];
    readonly dropped: readonly SheetFigure[];
    /** Clips of each kind without a sheet on the page. */
    readonly keptNotShown: number;
    readonly droppedNotShown: number;
  };
  readonly truth: VideoTruthFigures | null;
}

/** Contact sheets shown per column; sheets beyond are counted, not shown. */
export const MAX_SHEETS_PER_COLUMN = 48;
/** The longest contact-sheet data URI accepted (about 750 KB of JPEG). */
export const MAX_SHEET_CHARS = 1_000_000;
/** Missing captions listed by id; the rest are counted by reason. */
export const MAX_MISSING_LISTED = 500;
/** Sources drawn one bar each; with more, the chart is a histogram of kept shares. */
export const MAX_SOURCE_BARS = 50;
const MAX_STEPS = 40;
const MAX_TEXT = 500;
const MAX_FORMULA = 2_000;

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const DATA_URI = /^data:image\/(jpeg|png|webp);base64,[A-Za-z0-9+/]+={0,2}$/;

const ratio = (a: number, b: number) => (b > 0 ? a / b : null);
const cut = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

function checkCount(field: string, value: unknown): asserts value is number {
  if (!Number.isSafeInteger(value) || (value as number) < 0) throw new ConfigError(field, value, 'must be a whole number, 0 or more');
}

function checkSeconds(field: string, value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) throw new ConfigError(field, value, 'must be a finite number of seconds, 0 or more');
}

function checkText(field: string, value: unknown): asserts value is string {
  if (typeof value !== 'string' || !value.trim()) throw new ConfigError(field, value, 'must be a non-empty string');
}

function instant(field: string, value: unknown): number {
  const ms = typeof value === 'string' && ISO.test(value) ? Date.parse(value) : Number.NaN;
  if (!Number.isFinite(ms)) throw new ConfigError(field, value, 'must be an ISO 8601 time such as 2026-01-31T12:00:00Z');
  return ms;
}

/** Bins of `step` from `lo` to at least `hi`, each clip counted as kept or dropped. */
function binned(clips: readonly { value: number; kept: boolean }[], lo: number, hi: number, step: number): ScoreBin[] {
  const n = Math.max(1, Math.ceil((hi - lo) / step - 1e-9));
  const bins = Array.from({ length: n }, (_, i) => ({ from: lo + i * step, to: lo + (i + 1) * step, kept: 0, dropped: 0 }));
  for (const c of clips) {
    const i = Math.min(n - 1, Math.max(0, Math.floor((c.value - lo) / step + 1e-9)));
    if (c.kept) bins[i]!.kept += 1;
    else bins[i]!.dropped += 1;
  }
  // Round the edges (0.025 * 3 is 0.07500000000000001).
  return bins.map((b) => ({ ...b, from: Number(b.from.toPrecision(12)), to: Number(b.to.toPrecision(12)) }));
}

/** The least of 1, 2, 5 times a power of ten that covers `hi` in at most `bins` bins. */
function niceStep(hi: number, bins: number): number {
  const raw = hi / bins;
  const power = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * power).find((s) => s * bins >= hi) ?? 10 * power;
}

function distribution(
  clips: readonly CuratedClip[],
  score: ScoreName,
  title: string,
  thresholds: ScoreDistribution['thresholds'],
  range: (max: number) => { lo: number; hi: number; step: number },
): ScoreDistribution {
  const scored = clips.filter((c) => typeof c[score] === 'number' && Number.isFinite(c[score])).map((c) => ({ value: c[score] as number, kept: c.kept }));
  const sorted = scored.map((c) => c.value).sort((a, b) => a - b);
  const max = sorted.length ? sorted[sorted.length - 1]! : null;
  const { lo, hi, step } = range(Math.max(max ?? 0, ...thresholds.map((t) => t.value)));
  return {
    score,
    title,
    n: sorted.length,
    min: sorted.length ? sorted[0]! : null,
    median: sorted.length ? quantile(sorted, 0.5) : null,
    max,
    thresholds,
    bins: binned(scored, lo, hi, step),
  };
}

function checkTruth(truth: VideoTruth): VideoTruthFigures {
  const c = truth.cuts;
  for (const key of ['truePositives', 'falsePositives', 'falseNegatives', 'toleranceFrames'] as const) checkCount(`truth.cuts.${key}`, c[key]);
  const seen = new Set<string>();
  const rules = truth.rules.map((r, i) => {
    if (!(DROP_RULES as readonly string[]).includes(r.rule)) throw new ConfigError(`truth.rules[${i}].rule`, r.rule, `must be one of ${DROP_RULES.join(', ')}`);
    if (seen.has(r.rule)) throw new ConfigError(`truth.rules[${i}].rule`, r.rule, 'appears twice');
    seen.add(r.rule);
    checkCount(`truth.rules[${i}].madeFor`, r.madeFor);
    checkCount(`truth.rules[${i}].droppedByRule`, r.droppedByRule);
    if (r.droppedByRule > r.madeFor) throw new ConfigError(`truth.rules[${i}].droppedByRule`, r.droppedByRule, `must be at most madeFor (${r.madeFor})`);
    return { rule: r.rule, madeFor: r.madeFor, droppedByRule: r.droppedByRule, recall: ratio(r.droppedByRule, r.madeFor) };
  });
  rules.sort((a, b) => DROP_RULES.indexOf(a.rule) - DROP_RULES.indexOf(b.rule));
  checkCount('truth.goodClips', truth.goodClips);
  checkCount('truth.goodDropped', truth.goodDropped);
  if (truth.goodDropped > truth.goodClips) throw new ConfigError('truth.goodDropped', truth.goodDropped, `must be at most goodClips (${truth.goodClips})`);
  const tp = c.truePositives;
  return {
    cuts: {
      truePositives: tp,
      falsePositives: c.falsePositives,
      falseNegatives: c.falseNegatives,
      toleranceFrames: c.toleranceFrames,
      precision: ratio(tp, tp + c.falsePositives),
      recall: ratio(tp, tp + c.falseNegatives),
      f1: ratio(2 * tp, 2 * tp + c.falsePositives + c.falseNegatives),
    },
    rules,
    goodClips: truth.goodClips,
    goodDropped: truth.goodDropped,
    goodDroppedShare: ratio(truth.goodDropped, truth.goodClips),
    goodDroppedBy: goodDroppedBy(truth),
  };
}

function goodDroppedBy(truth: VideoTruth): { rule: string; count: number }[] {
  const entries = Object.entries(truth.goodDroppedBy ?? {});
  let total = 0;
  for (const [rule, count] of entries) {
    checkCount(`truth.goodDroppedBy.${rule}`, count);
    total += count;
  }
  if (truth.goodDroppedBy && total !== truth.goodDropped) {
    throw new ConfigError('truth.goodDroppedBy', total, `must add up to goodDropped (${truth.goodDropped})`);
  }
  return entries.map(([rule, count]) => ({ rule, count })).sort((a, b) => b.count - a.count || a.rule.localeCompare(b.rule));
}

/** Every figure of the report. Throws a ConfigError on an inconsistent input (a time out of order, a sheet or caption of a clip not in the document). */
export function videoFigures(input: VideoReportInput): VideoFigures {
  const { curated } = input;
  if (curated?.format !== 'video-curated-v1') throw new ConfigError('curated.format', curated?.format, 'must be "video-curated-v1"');
  const clipOf = new Map(curated.clips.map((c) => [c.id, c]));

  // The funnel, in DROP_RULES order.
  const f = curated.funnel;
  const dropped = Object.fromEntries(DROP_RULES.map((r) => [r, f.dropped[r] ?? 0])) as Record<DropRule, number>;
  let remaining = f.candidates;
  const stages: FunnelStage[] = [{ stage: 'candidates', rule: null, dropped: 0, remaining }];
  for (const rule of DROP_RULES) {
    remaining -= dropped[rule];
    stages.push({ stage: rule, rule, dropped: dropped[rule], remaining });
  }

  // Sources.
  const dropsBySource = new Map<string, Record<string, number>>();
  for (const c of curated.clips)
    if (c.drop) {
      const counts = dropsBySource.get(c.sourceId) ?? {};
      counts[c.drop.rule] = (counts[c.drop.rule] ?? 0) + 1;
      dropsBySource.set(c.sourceId, counts);
    }
  const sources: SourceRow[] = curated.sources.map((s) => {
    const counts = dropsBySource.get(s.id) ?? {};
    const top = DROP_RULES.reduce<DropRule | null>((best, r) => ((counts[r] ?? 0) > (best ? (counts[best] ?? 0) : 0) ? r : best), null);
    return {
      id: s.id,
      status: s.status,
      field: s.field ?? null,
      reason: s.reason !== undefined ? cut(s.reason, MAX_TEXT) : null,
      videoSeconds: s.videoSeconds,
      candidates: s.candidates,
      kept: s.kept,
      keptShare: ratio(s.kept, s.candidates),
      topDropRule: top,
      topDropCount: top ? counts[top]! : 0,
    };
  });

  // Score distributions: every clip with the score, kept or dropped.
  const t = curated.thresholds;
  const scores: Record<ScoreName, ScoreDistribution> = {
    aesthetic: distribution(
      curated.clips,
      'aesthetic',
      'aesthetic score (1-10)',
      [{ name: 'minAesthetic', value: t.minAesthetic, keep: 'at or above' }],
      () => ({
        lo: 0,
        hi: 10,
        step: 0.25,
      }),
    ),
    motion: distribution(
      curated.clips,
      'motion',
      'motion (mean absolute luma difference, 0-255)',
      [{ name: 'minMotion', value: t.minMotion, keep: 'at or above' }],
      (max) => {
        const hi = Math.min(255, Math.max(1, max * 1.05));
        const step = niceStep(hi, 30);
        return { lo: 0, hi, step };
      },
    ),
    meanLuma: distribution(
      curated.clips,
      'meanLuma',
      'mean luma (0-1)',
      [
        { name: 'darkLuma', value: t.darkLuma, keep: 'at or above' },
        { name: 'brightLuma', value: t.brightLuma, keep: 'at or below' },
      ],
      () => ({ lo: 0, hi: 1, step: 0.025 }),
    ),
  };

  // Captions.
  const cap = input.captions;
  if (!['vlm', 'claude', 'none'].includes(cap.captioner)) throw new ConfigError('captions.captioner', cap.captioner, 'must be vlm, claude or none');
  if (cap.model !== null) checkText('captions.model', cap.model);
  checkCount('captions.captioned', cap.captioned);
  if (cap.captioner === 'none' && cap.captioned > 0) throw new ConfigError('captions.captioned', cap.captioned, 'must be 0 without a captioner');
  const missingSeen = new Set<string>();
  cap.missing.forEach((m, i) => {
    const clip = clipOf.get(m.id);
    if (!clip?.kept) throw new ConfigError(`captions.missing[${i}].id`, m.id, 'must be a kept clip of the curated document');
    if (missingSeen.has(m.id)) throw new ConfigError(`captions.missing[${i}].id`, m.id, 'appears twice');
    missingSeen.add(m.id);
    checkText(`captions.missing[${i}].reason`, m.reason);
  });
  if (cap.captioned + cap.missing.length > f.kept)
    throw new ConfigError('captions.captioned', cap.captioned, `plus ${cap.missing.length} missing must be at most the ${f.kept} kept clips`);
  const missingByReason: Record<string, number> = {};
  for (const m of cap.missing) {
    const reason = cut(m.reason, MAX_TEXT);
    missingByReason[reason] = (missingByReason[reason] ?? 0) + 1;
  }

  // Throughput and timings.
  const tm = input.timings;
  const started = instant('timings.runStartedAt', tm.runStartedAt);
  const reported = instant('timings.reportAt', tm.reportAt);
  if (reported < started) throw new ConfigError('timings.reportAt', tm.reportAt, `must not be before timings.runStartedAt (${tm.runStartedAt})`);
  if (tm.steps.length > MAX_STEPS) throw new ConfigError('timings.steps', tm.steps.length, `must list at most ${MAX_STEPS} steps`);
  tm.steps.forEach((s, i) => {
    checkText(`timings.steps[${i}].name`, s.name);
    checkSeconds(`timings.steps[${i}].seconds`, s.seconds);
  });
  checkSeconds('timings.cutVideoSeconds', tm.cutVideoSeconds);
  checkSeconds('timings.cutSeconds', tm.cutSeconds);
  checkSeconds('timings.scoreSeconds', tm.scoreSeconds);
  const wallSeconds = (reported - started) / 1000;
  const stepSeconds = tm.steps.reduce((n, s) => n + s.seconds, 0);
  const scoredVideoSeconds = curated.clips.filter((c) => c.uri !== undefined).reduce((n, c) => n + c.duration, 0);

  // Contact sheets, kept left and dropped right.
  const kept: SheetFigure[] = [];
  const droppedSheets: SheetFigure[] = [];
  const sheetSeen = new Set<string>();
  input.contactSheets.forEach((s, i) => {
    const clip = clipOf.get(s.id);
    if (!clip) throw new ConfigError(`contactSheets[${i}].id`, s.id, 'must be a clip of the curated document');
    if (sheetSeen.has(s.id)) throw new ConfigError(`contactSheets[${i}].id`, s.id, 'appears twice');
    sheetSeen.add(s.id);
    if (typeof s.dataUri !== 'string' || s.dataUri.length > MAX_SHEET_CHARS || !DATA_URI.test(s.dataUri))
      throw new ConfigError(
        `contactSheets[${i}].dataUri`,
        typeof s.dataUri === 'string' ? `${s.dataUri.slice(0, 40)}… (${s.dataUri.length} characters)` : s.dataUri,
        `must be a base64 data:image/jpeg (png, webp) URI of at most ${MAX_SHEET_CHARS} characters`,
      );
    const column = clip.kept ? kept : droppedSheets;
    if (column.length >= MAX_SHEETS_PER_COLUMN) return;
    column.push({
      id: clip.id,
      sourceId: clip.sourceId,
      start: clip.start,
      end: clip.end,
      kept: clip.kept,
      drop: clip.drop ?? null,
      aesthetic: clip.aesthetic ?? null,
      motion: clip.motion ?? null,
      meanLuma: clip.meanLuma ?? null,
      dataUri: s.dataUri,
    });
  });

  checkText('aestheticScorer.name', input.aestheticScorer.name);
  checkText('aestheticScorer.formula', input.aestheticScorer.formula);

  return {
    artifact: input.artifact,
    thresholds: t,
    funnel: {
      sources: f.sources,
      refused: f.refused,
      failed: f.failed,
      candidates: f.candidates,
      dropped,
      kept: f.kept,
      keptSeconds: f.keptSeconds,
      candidateSeconds: curated.clips.reduce((n, c) => n + c.duration, 0),
      addsUp: f.kept + DROP_RULES.reduce((n, r) => n + dropped[r], 0) === f.candidates && f.candidates === curated.clips.length,
      stages,
    },
    sources,
    scores,
    aestheticScorer: { name: cut(input.aestheticScorer.name, MAX_TEXT), formula: cut(input.aestheticScorer.formula, MAX_FORMULA) },
    captions: {
      captioner: cap.captioner,
      model: cap.model === null ? null : cut(cap.model, MAX_TEXT),
      kept: f.kept,
      captioned: cap.captioned,
      missing: cap.missing.slice(0, MAX_MISSING_LISTED).map((m) => ({ id: m.id, reason: cut(m.reason, MAX_TEXT) })),
      missingTotal: cap.missing.length,
      missingByReason,
      // Without a captioner no clip is captioned, by design: none is unaccounted for.
      unaccounted: cap.captioner === 'none' ? 0 : f.kept - cap.captioned - cap.missing.length,
    },
    throughput: {
      cutVideoSeconds: tm.cutVideoSeconds,
      cutSeconds: tm.cutSeconds,
      cutSpeed: ratio(tm.cutVideoSeconds, tm.cutSeconds),
      cutCpuSeconds: tm.cutCpuSeconds ?? null,
      cutSpeedPerCore: tm.cutCpuSeconds ? ratio(tm.cutVideoSeconds, tm.cutCpuSeconds) : null,
      scoredVideoSeconds,
      scoreSeconds: tm.scoreSeconds,
      scoreSpeed: ratio(scoredVideoSeconds, tm.scoreSeconds),
    },
    timings: {
      runStartedAt: tm.runStartedAt,
      reportAt: tm.reportAt,
      wallSeconds,
      steps: tm.steps.map((s) => ({ name: cut(s.name, 100), seconds: s.seconds, share: ratio(s.seconds, wallSeconds) })),
      stepSeconds,
      outsideSteps: wallSeconds - stepSeconds,
    },
    sheets: {
      kept,
      dropped: droppedSheets,
      keptNotShown: f.kept - kept.length,
      droppedNotShown: f.candidates - f.kept - droppedSheets.length,
    },
    truth: input.truth ? checkTruth(input.truth) : null,
  };
}

// ---------------------------------------------------------------------------------------------
// The page.

const num = (x: number | null | undefined, digits = 3) => (x === null || x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(digits));
const pct = (x: number | null | undefined) => (x === null || x === undefined || !Number.isFinite(x) ? '–' : `${(100 * x).toFixed(1)} %`);
const int = (x: number | null | undefined) => (x === null || x === undefined ? '–' : Math.round(x).toLocaleString('en-US'));

/** Seconds as "42.0 s", or with minutes and hours beside them from two minutes up. */
function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '–';
  const s = `${num(seconds, 1)} s`;
  if (Math.abs(seconds) < 120) return s;
  const whole = Math.round(Math.abs(seconds));
  const h = Math.floor(whole / 3600);
  const m = Math.floor((whole % 3600) / 60);
  return `${s} (${seconds < 0 ? '-' : ''}${h ? `${h} h ` : ''}${m} min ${whole % 60} s)`;
}

const speed = (x: number | null) => (x === null ? '–' : `${num(x, 1)}× real time`);

/** The rule that dropped a clip, with the score and the threshold, as the page writes it under a sheet. */
export function dropText(drop: Drop): string {
  const v = drop.value;
  const th = drop.threshold;
  switch (drop.rule) {
    case 'too-short':
      return `too-short: ${num(v, 2)} s, under ${num(th, 2)} s`;
    case 'unscored':
      return `unscored: ${drop.error ?? 'no score'}`;
    case 'dark':
      return `dark: mean luma ${num(v)} below ${num(th)}`;
    case 'washed-out':
      return `washed-out: mean luma ${num(v)} above ${num(th)}`;
    case 'static':
      return `static: motion ${num(v)} below ${num(th)}`;
    case 'low-aesthetic':
      return `low-aesthetic: aesthetic ${num(v, 2)} below ${num(th, 2)}`;
    case 'near-duplicate':
      return `near-duplicate of ${drop.duplicateOf ?? '?'}: ${num(v, 1)} bits apart, at most ${num(th, 1)}`;
  }
}

const VEGA = 'https://vega.github.io/schema/vega-lite/v5.json' as const;
/** The colour every threshold line is drawn in. */
export const THRESHOLD_COLOR = '#c00';

function funnelChart(f: VideoFigures): TopLevelSpec {
  return {
    $schema: VEGA,
    title: 'Candidate clips left after each rule (in the order the rules apply)',
    width: 560,
    height: 200,
    data: { values: f.funnel.stages.map((s, i) => ({ stage: s.rule ? `after ${s.stage}` : s.stage, clips: s.remaining, dropped: s.dropped, order: i })) },
    encoding: {
      y: { field: 'stage', type: 'nominal', sort: { field: 'order', op: 'min' }, title: null },
      x: { field: 'clips', type: 'quantitative', title: 'clips' },
    },
    layer: [
      { mark: 'bar', encoding: { tooltip: [{ field: 'stage' }, { field: 'clips' }, { field: 'dropped' }] } },
      { mark: { type: 'text', align: 'left', dx: 4 }, encoding: { text: { field: 'clips', type: 'quantitative' } } },
    ],
  };
}

function scoreChart(d: ScoreDistribution): TopLevelSpec {
  const values = d.bins.flatMap((b) => [
    { from: b.from, to: b.to, status: 'kept', clips: b.kept },
    { from: b.from, to: b.to, status: 'dropped', clips: b.dropped },
  ]);
  const step = d.bins.length ? d.bins[0]!.to - d.bins[0]!.from : 1;
  const lines = d.thresholds.map((th) => ({ value: th.value, label: `${th.name} ${th.value}` }));
  return {
    $schema: VEGA,
    title: `${d.title}: ${d.n} clips; threshold${lines.length > 1 ? 's' : ''} in red`,
    width: 560,
    height: 160,
    layer: [
      {
        data: { values },
        mark: 'bar',
        encoding: {
          x: { field: 'from', type: 'quantitative', bin: { binned: true, step }, title: d.title },
          x2: { field: 'to' },
          y: { field: 'clips', type: 'quantitative', stack: 'zero', title: 'clips' },
          color: {
            field: 'status',
            type: 'nominal',
            title: null,
            sort: ['kept', 'dropped'],
            scale: { domain: ['kept', 'dropped'], range: ['#4c78a8', '#bbb'] },
            legend: { orient: 'bottom' },
          },
        },
      },
      {
        data: { values: lines },
        mark: { type: 'rule', color: THRESHOLD_COLOR, size: 2, strokeDash: [4, 2] },
        encoding: { x: { field: 'value', type: 'quantitative' } },
      },
      {
        data: { values: lines },
        mark: { type: 'text', color: THRESHOLD_COLOR, align: 'left', baseline: 'top', dx: 3, y: 2 },
        encoding: { x: { field: 'value', type: 'quantitative' }, text: { field: 'label', type: 'nominal' } },
      },
    ],
  };
}

function sourceChart(f: VideoFigures): TopLevelSpec | null {
  const ok = f.sources.filter((s) => s.keptShare !== null);
  if (!ok.length) return null;
  if (ok.length <= MAX_SOURCE_BARS)
    return {
      $schema: VEGA,
      title: 'Share of each source’s candidates kept (refused and failed sources are in the table)',
      width: 560,
      height: Math.max(60, 16 * ok.length),
      data: { values: ok.map((s, i) => ({ id: s.id, share: s.keptShare, kept: s.kept, candidates: s.candidates, order: i })) },
      mark: 'bar',
      encoding: {
        y: { field: 'id', type: 'nominal', sort: { field: 'order' }, title: 'source' },
        x: { field: 'share', type: 'quantitative', scale: { domain: [0, 1] }, axis: { format: '%' }, title: 'kept share' },
        tooltip: [{ field: 'id' }, { field: 'kept' }, { field: 'candidates' }],
      },
    };
  return {
    $schema: VEGA,
    title: `Kept share of candidates across ${ok.length} sources (refused and failed sources are in the table)`,
    width: 560,
    height: 160,
    data: { values: ok.map((s) => ({ share: s.keptShare })) },
    mark: 'bar',
    encoding: {
      x: { field: 'share', type: 'quantitative', bin: { extent: [0, 1], step: 0.05 }, axis: { format: '%' }, title: 'kept share' },
      y: { aggregate: 'count', type: 'quantitative', title: 'sources' },
    },
  };
}

/** Rows whose cells are escaped here (strings) or printed as they are (numbers). */
const cells = (rows: (string | number)[][]) =>
  rows.map((r) => `<tr>${r.map((c) => `<td>${typeof c === 'number' ? c : escapeHtml(c)}</td>`).join('')}</tr>`).join('\n');
/** Rows whose cells are already HTML. */
const htmlCells = (rows: string[][], attrs: (i: number) => string = () => '') =>
  rows.map((r, i) => `<tr${attrs(i)}>${r.map((c) => `<td>${c}</td>`).join('')}</tr>`).join('\n');

function sheetHtml(s: SheetFigure): string {
  const what = `${escapeHtml(s.id)} <small>(${escapeHtml(s.sourceId)}, ${num(s.start, 2)}-${num(s.end, 2)} s)</small>`;
  const scores = `aesthetic ${num(s.aesthetic, 2)}, motion ${num(s.motion, 2)}, luma ${num(s.meanLuma)}`;
  const caption = s.drop ? `${what}<br><span class="rule">${escapeHtml(dropText(s.drop))}</span>` : `${what}<br><small>${scores}</small>`;
  return `<figure class="sheet" id="sheet-${escapeHtml(s.id)}"><img src="${escapeHtml(s.dataUri)}" alt="contact sheet of ${escapeHtml(s.id)}"><figcaption>${caption}</figcaption></figure>`;
}

function captionerDescription(c: VideoFigures['captions']): string {
  const model = escapeHtml(c.model ?? 'model not recorded');
  if (c.captioner === 'vlm') return `an open vision-language model over the key frames (<strong id="captions-model">${model}</strong>)`;
  if (c.captioner === 'claude') return `Claude over the contact sheet (<strong id="captions-model">${model}</strong>)`;
  return 'none: no captioner ran, so the clips are published without captions';
}

export async function videoReportHtml(f: VideoFigures): Promise<string> {
  const sourcesSpec = sourceChart(f);
  const [funnelSvg, aestheticSvg, motionSvg, lumaSvg, sourcesSvg] = await Promise.all([
    svgOf(funnelChart(f)),
    svgOf(scoreChart(f.scores.aesthetic)),
    svgOf(scoreChart(f.scores.motion)),
    svgOf(scoreChart(f.scores.meanLuma)),
    sourcesSpec ? svgOf(sourcesSpec) : Promise.resolve(''),
  ]);
  const fu = f.funnel;
  const title = f.artifact ? `${escapeHtml(f.artifact.name)} v${f.artifact.version}` : 'nothing published';

  const funnelRows = [
    htmlCells([
      ['sources', '', int(fu.sources)],
      ['refused (bad input: no licence record, not a video, too long...)', int(fu.refused), ''],
      ['failed (a job failed)', int(fu.failed), ''],
      ['cut and scored', '', int(fu.sources - fu.refused - fu.failed)],
    ]),
    htmlCells(
      fu.stages.map((s) => [s.rule ? `dropped: ${escapeHtml(s.rule)}` : 'candidate clips', s.rule ? int(s.dropped) : '', int(s.remaining)]),
      (i) => (fu.stages[i]!.rule ? ' class="stage"' : ''),
    ),
    htmlCells([[`<strong>kept</strong>`, '', `<strong id="funnel-kept">${int(fu.kept)}</strong> (${duration(fu.keptSeconds)} of video)`]]),
  ].join('\n');

  const scoreRows = htmlCells(
    (['aesthetic', 'motion', 'meanLuma'] as const).map((k) => {
      const d = f.scores[k];
      return [
        escapeHtml(d.title),
        `${d.n}`,
        num(d.min),
        num(d.median),
        num(d.max),
        d.thresholds.map((th) => `keep ${th.keep} ${th.value} (${th.name})`).join('; '),
      ];
    }),
  );

  const sourceRows = htmlCells(
    f.sources.map((s) => [
      escapeHtml(s.id),
      s.status === 'ok' ? 'ok' : `<strong>${s.status}</strong>`,
      num(s.videoSeconds, 1),
      `${s.candidates}`,
      `${s.kept}`,
      pct(s.keptShare),
      s.topDropRule ? `${escapeHtml(s.topDropRule)} (${s.topDropCount})` : '–',
      s.reason !== null ? `${s.field ? `<code>${escapeHtml(s.field)}</code>: ` : ''}${escapeHtml(s.reason)}` : '',
    ]),
    (i) => (f.sources[i]!.status !== 'ok' ? ` class="${f.sources[i]!.status}"` : ''),
  );

  const c = f.captions;
  const missingHtml = c.missingTotal
    ? `<table id="captions-missing"><tr><th>kept clip without a caption</th><th>reason</th></tr>${cells(c.missing.map((m) => [m.id, m.reason]))}</table>
${c.missingTotal > c.missing.length ? `<p>And ${c.missingTotal - c.missing.length} more, not listed.</p>` : ''}
<table id="captions-missing-by-reason"><tr><th>reason</th><th>clips</th></tr>${cells(Object.entries(c.missingByReason).map(([r, n]) => [r, n]))}</table>`
    : c.captioner === 'none'
      ? '<p id="captions-missing">No kept clip has a caption: no captioner ran.</p>'
      : '<p id="captions-missing">Every kept clip has a caption.</p>';
  const unaccounted = c.unaccounted
    ? `<p id="captions-unaccounted"><strong>${c.unaccounted} kept clips are neither captioned nor listed as missing.</strong></p>`
    : '';

  const sh = f.sheets;
  const column = (id: string, heading: string, list: readonly SheetFigure[], notShown: number) =>
    `<section id="${id}"><h3>${heading} (${list.length} shown${notShown ? `, ${notShown} more not shown` : ''})</h3>${list.map(sheetHtml).join('\n') || '<p>None.</p>'}</section>`;

  const tm = f.timings;
  const timingRows = htmlCells([
    ...tm.steps.map((s) => [escapeHtml(s.name), num(s.seconds, 1), pct(s.share)]),
    ['outside the steps (waiting, orchestration; negative when jobs ran at once)', num(tm.outsideSteps, 1), pct(ratio(tm.outsideSteps, tm.wallSeconds))],
    ['<strong>wall clock, run start to this report (after the copy)</strong>', `<strong id="wall-seconds">${num(tm.wallSeconds, 1)}</strong>`, '100.0 %'],
  ]);
  const th = f.throughput;

  const tr = f.truth;
  const truthHtml = tr
    ? `<h2>Against the generator's truth</h2>
<p id="truth-cuts">Cuts, a detected cut counting when within ${tr.cuts.toleranceFrames} frames of a true one: ${tr.cuts.truePositives} found, ${tr.cuts.falsePositives} spurious, ${tr.cuts.falseNegatives} missed;
precision <strong id="cut-precision">${pct(tr.cuts.precision)}</strong>, recall <strong id="cut-recall">${pct(tr.cuts.recall)}</strong>, F1 ${pct(tr.cuts.f1)}.</p>
<table id="truth-rules"><tr><th>rule</th><th>clips made for it</th><th>dropped by it</th><th>recall</th></tr>${htmlCells(
        tr.rules.map((r) => [escapeHtml(r.rule), `${r.madeFor}`, `${r.droppedByRule}`, pct(r.recall)]),
      )}</table>
<p id="truth-good">Clips made to pass every rule: ${tr.goodClips}, of which ${tr.goodDropped} were dropped (<strong id="good-dropped-share">${pct(tr.goodDroppedShare)}</strong>)${tr.goodDroppedBy.length ? `: ${tr.goodDroppedBy.map((g) => `${escapeHtml(g.rule)} ${g.count}`).join(', ')}` : ''}.</p>`
    : '';

  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Video clips: ${title}</title>
<style>body{font-family:system-ui,sans-serif;max-width:1080px;margin:2rem auto;padding:0 1rem;color:#222}table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}th{background:#f4f4f4}td:first-child,td:last-child{text-align:left}tr.refused,tr.failed{background:#fff0f0}tr.stage td:first-child{padding-left:1.5rem}.sheets{display:grid;grid-template-columns:1fr 1fr;gap:1.5rem;align-items:start}.sheet{margin:0 0 1rem}.sheet img{max-width:100%;display:block;border:1px solid #ddd}.sheet figcaption{font-size:.85rem}.rule{color:#a00}pre.formula{white-space:pre-wrap;background:#f7f7f7;padding:.5rem;border:1px solid #e4e4e4}</style>
</head><body>
<h1>Video clips: ${title}</h1>
<p id="summary">${int(fu.sources)} sources (${int(fu.refused)} refused, ${int(fu.failed)} failed) gave <strong>${int(fu.candidates)}</strong> candidate clips (${duration(fu.candidateSeconds)});
<strong id="summary-kept">${int(fu.kept)}</strong> kept, ${duration(fu.keptSeconds)} of video. The funnel ${fu.addsUp ? 'adds up: every candidate is kept or dropped under one rule' : '<strong>does not add up</strong>'}.
Wall clock ${duration(tm.wallSeconds)}, from the run's start to this report, which was written after the clips were copied into the artifact.</p>
<h2>The funnel</h2>
<p>A clip is dropped under the first rule it fails, in this order; thresholds: aesthetic at least ${f.thresholds.minAesthetic}, motion at least ${f.thresholds.minMotion},
mean luma from ${f.thresholds.darkLuma} to ${f.thresholds.brightLuma}, a near duplicate at most ${f.thresholds.maxDuplicateDistance} bits (of 64) from a kept clip.</p>
<figure id="chart-funnel">${funnelSvg}</figure>
<table id="funnel"><tr><th>stage</th><th>dropped</th><th>left</th></tr>
${funnelRows}</table>
<h2>Scores</h2>
<p id="aesthetic-scorer">Aesthetic scorer: <strong>${escapeHtml(f.aestheticScorer.name)}</strong>. Formula:</p>
<pre id="aesthetic-formula" class="formula">${escapeHtml(f.aestheticScorer.formula)}</pre>
<p>Every clip with the score, kept (blue) or dropped (grey) by any rule; the red line is the threshold.</p>
<figure id="chart-aesthetic">${aestheticSvg}</figure>
<figure id="chart-motion">${motionSvg}</figure>
<figure id="chart-mean-luma">${lumaSvg}</figure>
<table id="scores"><tr><th>score</th><th>clips</th><th>min</th><th>median</th><th>max</th><th>threshold</th></tr>
${scoreRows}</table>
<h2>Sources</h2>
${sourcesSvg ? `<figure id="chart-sources">${sourcesSvg}</figure>` : '<p id="chart-sources">No source was cut and scored.</p>'}
<table id="sources"><tr><th>source</th><th>status</th><th>video s</th><th>candidates</th><th>kept</th><th>kept share</th><th>most drops</th><th>reason</th></tr>
${sourceRows}</table>
<h2>Contact sheets</h2>
<p>Kept clips on the left; dropped clips on the right, each with the rule, the score and the threshold that dropped it.</p>
<div class="sheets">
${column('sheets-kept', 'Kept', sh.kept, sh.keptNotShown)}
${column('sheets-dropped', 'Dropped', sh.dropped, sh.droppedNotShown)}
</div>
<h2>Captions</h2>
<p id="captions">Captioner: ${captionerDescription(c)}. <strong id="captions-captioned">${c.captioned}</strong> of ${c.kept} kept clips captioned; ${c.missingTotal} without a caption, each listed with the reason (no caption is made up for them).</p>
${missingHtml}
${unaccounted}
<h2>Throughput and time</h2>
<p id="throughput">Cutting: ${duration(th.cutVideoSeconds)} of source video in ${duration(th.cutSeconds)} of cut jobs, <strong id="cut-speed">${speed(th.cutSpeed)}</strong>${th.cutSpeedPerCore !== null ? `; per CPU second of those jobs (each on one core) <strong id="cut-speed-per-core">${speed(th.cutSpeedPerCore)}</strong>` : ''}.
Scoring: ${duration(th.scoredVideoSeconds)} of clips in ${duration(th.scoreSeconds)} of score jobs, <strong id="score-speed">${speed(th.scoreSpeed)}</strong>.
Job seconds are summed over the jobs, which run at once, so they can exceed the wall clock.</p>
<table id="timings"><tr><th>step</th><th>seconds</th><th>of the wall clock</th></tr>
${timingRows}</table>
<p id="wall-clock">Run started ${escapeHtml(tm.runStartedAt)}; this report at ${escapeHtml(tm.reportAt)}: ${duration(tm.wallSeconds)}, the copy into the artifact included.</p>
${truthHtml}
</body></html>
`;
}

// ---------------------------------------------------------------------------------------------
// The metrics.

/** "near-duplicate" to "droppedNearDuplicate". */
const dropKey = (rule: DropRule) => `dropped${rule.replace(/(^|-)([a-z])/g, (_, __, c: string) => c.toUpperCase())}`;

/** A flat record for the artifact index: at most 18 numbers (well under 2,000 characters as JSON, whatever the number of sources). */
export function videoMetrics(f: VideoFigures): Record<string, number> {
  const out: Record<string, number> = {};
  const add = (key: string, value: number | null | undefined) => {
    if (typeof value === 'number' && Number.isFinite(value)) out[key] = Number(value.toPrecision(6));
  };
  add('sources', f.funnel.sources);
  add('refused', f.funnel.refused);
  add('failed', f.funnel.failed);
  add('candidates', f.funnel.candidates);
  add('kept', f.funnel.kept);
  add('keptSeconds', f.funnel.keptSeconds);
  for (const rule of DROP_RULES) add(dropKey(rule), f.funnel.dropped[rule]);
  add('wallSeconds', f.timings.wallSeconds);
  add('cutSpeed', f.throughput.cutSpeed);
  add('cutSpeedPerCore', f.throughput.cutSpeedPerCore);
  add('captioned', f.captions.captioned);
  if (f.truth) {
    add('cutPrecision', f.truth.cuts.precision);
    add('cutRecall', f.truth.cuts.recall);
  }
  return out;
}
