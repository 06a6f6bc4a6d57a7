/**
 * The generated set's truth against what the pipeline found: cut detection's precision and
 * recall within a tolerance of frames, each drop rule's recall on the clips made for it, and
 * the share of good clips dropped. Only the local generator writes a truth document
 * (batch-jobs/video-cut/generate.py, `video-truth-v1`); real sources have none.
 */
import { z } from 'zod';
import { ConfigError } from '#shared/errors.ts';
import type { Curated, DropRule } from './curate.ts';

export const TRUTH_FORMAT = 'video-truth-v1';

/** The kinds of shot the generator makes, and the rule each made-to-be-dropped kind is for. */
export const RULE_FOR_KIND: Readonly<Record<string, DropRule>> = {
  short: 'too-short',
  static: 'static',
  dark: 'dark',
  'washed-out': 'washed-out',
  duplicate: 'near-duplicate',
};

export const TruthDocument = z
  .object({
    format: z.literal(TRUTH_FORMAT),
    fps: z.number().positive(),
    videos: z.array(
      z
        .object({
          sha256: z.string(),
          frames: z.int().positive(),
          cuts: z.array(z.int()),
          shots: z.array(z.object({ startFrame: z.int(), endFrame: z.int(), kind: z.string() }).loose()),
        })
        .loose(),
    ),
  })
  .loose();
export type TruthDocument = z.infer<typeof TruthDocument>;

export interface TruthFigures {
  readonly cuts: { readonly truePositives: number; readonly falsePositives: number; readonly falseNegatives: number; readonly toleranceFrames: number };
  readonly rules: { readonly rule: DropRule; readonly madeFor: number; readonly droppedByRule: number }[];
  readonly goodClips: number;
  readonly goodDropped: number;
  /** The good clips dropped, counted by the rule that dropped them. */
  readonly goodDroppedBy: Readonly<Record<string, number>>;
}

/** Matches detected cut frames to true ones, each at most once, within `tolerance` frames (nearest first). */
export function matchCuts(
  truth: readonly number[],
  found: readonly number[],
  tolerance: number,
): { truePositives: number; falsePositives: number; falseNegatives: number } {
  const pairs: { t: number; f: number; d: number }[] = [];
  truth.forEach((t, ti) => {
    found.forEach((f, fi) => {
      const d = Math.abs(t - f);
      if (d <= tolerance) pairs.push({ t: ti, f: fi, d });
    });
  });
  pairs.sort((a, b) => a.d - b.d || a.t - b.t || a.f - b.f);
  const usedT = new Set<number>();
  const usedF = new Set<number>();
  for (const p of pairs) {
    if (usedT.has(p.t) || usedF.has(p.f)) continue;
    usedT.add(p.t);
    usedF.add(p.f);
  }
  return { truePositives: usedT.size, falsePositives: found.length - usedF.size, falseNegatives: truth.length - usedT.size };
}

/**
 * The figures for the sources that have a truth video (matched by the video's sha256).
 * `sources` maps a curated source id to its video's sha256; `cuts` maps it to the cut frames found.
 */
export function truthFigures(
  truth: TruthDocument,
  curated: Curated,
  sources: ReadonlyMap<string, string>,
  cuts: ReadonlyMap<string, readonly number[]>,
  tolerance = 2,
): TruthFigures {
  if (!Number.isInteger(tolerance) || tolerance < 0) throw new ConfigError('tolerance', tolerance, 'must be a non-negative integer of frames');
  const videos = new Map(truth.videos.map((v) => [v.sha256, v]));
  const cutTotals = { truePositives: 0, falsePositives: 0, falseNegatives: 0 };
  const rules = new Map<DropRule, { madeFor: number; droppedByRule: number }>();
  for (const rule of new Set(Object.values(RULE_FOR_KIND))) rules.set(rule, { madeFor: 0, droppedByRule: 0 });
  let goodClips = 0;
  let goodDropped = 0;
  const goodDroppedBy: Record<string, number> = {};
  for (const source of curated.sources) {
    if (source.status !== 'ok') continue;
    const video = videos.get(sources.get(source.id) ?? '');
    if (!video) continue;
    const m = matchCuts(video.cuts, cuts.get(source.id) ?? [], tolerance);
    cutTotals.truePositives += m.truePositives;
    cutTotals.falsePositives += m.falsePositives;
    cutTotals.falseNegatives += m.falseNegatives;
    const clips = curated.clips.filter((c) => c.sourceId === source.id);
    const shotOf = (clip: (typeof clips)[number]) => {
      const middle = ((clip.start + clip.end) / 2) * truth.fps;
      return video.shots.find((s) => s.startFrame <= middle && middle < s.endFrame);
    };
    for (const shot of video.shots) {
      const rule = RULE_FOR_KIND[shot.kind];
      if (!rule) continue;
      const entry = rules.get(rule)!;
      entry.madeFor += 1;
      if (clips.some((c) => shotOf(c) === shot && c.drop?.rule === rule)) entry.droppedByRule += 1;
    }
    for (const clip of clips) {
      if (shotOf(clip)?.kind !== 'good') continue;
      goodClips += 1;
      if (clip.kept) continue;
      goodDropped += 1;
      const rule = clip.drop?.rule ?? 'unknown';
      goodDroppedBy[rule] = (goodDroppedBy[rule] ?? 0) + 1;
    }
  }
  return {
    cuts: { ...cutTotals, toleranceFrames: tolerance },
    rules: [...rules].map(([rule, v]) => ({ rule, ...v })),
    goodClips,
    goodDropped,
    goodDroppedBy,
  };
}
