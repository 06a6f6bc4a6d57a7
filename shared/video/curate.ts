/**
 * Curation: which candidate clips are kept, and for each dropped one the rule and the score that
 * dropped it. Pure: the curate step reads the cut and score documents and calls this, so a
 * stricter threshold reruns only this (every Batch job a cache hit).
 *
 * Rules, in order; a clip is recorded under the first it fails:
 * 1. `too-short`: a segment between two cuts shorter than the minimum clip length (decided when
 *    cutting; no clip is encoded for it).
 * 2. `unscored`: the clip could not be decoded when scoring (its error is kept).
 * 3. `dark`: mean luma below `darkLuma` (black or nearly black frames).
 * 4. `washed-out`: mean luma above `brightLuma` (white or nearly white frames).
 * 5. `static`: motion below `minMotion` (a still frame held).
 * 6. `low-aesthetic`: aesthetic score below `minAesthetic`.
 * 7. `near-duplicate`: the key frames' perceptual hashes within `maxDuplicateDistance` bits (mean
 *    over the three key-frame positions) of a clip already kept. Clips are visited in the source
 *    list's order, then by start time, so the list's order is its priority: the first copy is
 *    kept and later ones name it (`duplicateOf`).
 * Exposure comes before motion because a black clip is also still: it is recorded as dark.
 */
import { ConfigError } from '#shared/errors.ts';

export const DROP_RULES = ['too-short', 'unscored', 'dark', 'washed-out', 'static', 'low-aesthetic', 'near-duplicate'] as const;
export type DropRule = (typeof DROP_RULES)[number];

export interface CurateThresholds {
  /** Aesthetic score (1-10) a clip needs. */
  readonly minAesthetic: number;
  /** Motion (mean absolute luma difference, 0-255) a clip needs. */
  readonly minMotion: number;
  /** Mean luma (0-1) below which a clip is dark. */
  readonly darkLuma: number;
  /** Mean luma (0-1) above which a clip is washed out. */
  readonly brightLuma: number;
  /** Mean Hamming distance (bits of 64) at or below which a clip duplicates a kept one. */
  readonly maxDuplicateDistance: number;
}

/** One clip as the cut job wrote it (clips.json, `video-clips-v1`). */
export interface CutClip {
  readonly id: string;
  readonly startFrame: number;
  readonly endFrame: number;
  readonly start: number;
  readonly end: number;
  readonly uri: string;
  readonly sha256: string;
  readonly bytes?: number;
  readonly contactSheetUri: string;
  readonly keyFrameUris: readonly string[];
}

/** A segment the cut job dropped (too short), with no file. */
export interface CutDrop {
  readonly startFrame: number;
  readonly endFrame: number;
  readonly start: number;
  readonly end: number;
  readonly rule: string;
  readonly value: number;
  readonly threshold: number;
}

/** One clip's scores (scores.json, `video-scores-v1`). */
export interface ClipScore {
  readonly id: string;
  readonly aesthetic?: number;
  readonly motion?: number;
  readonly meanLuma?: number;
  readonly lumaStd?: number;
  readonly phash?: readonly string[];
  readonly error?: string;
}

/** What happened to one source, as the curate step gathers it. */
export interface SourceOutcome {
  readonly id: string;
  readonly title?: string;
  /** ok: cut and scored; refused: bad input (no licence record, not a video, too long...); failed: a job failed. */
  readonly status: 'ok' | 'refused' | 'failed';
  /** For refused and failed: the field and why. */
  readonly field?: string;
  readonly reason?: string;
  readonly videoSeconds?: number;
  readonly clips?: readonly CutClip[];
  readonly dropped?: readonly CutDrop[];
  readonly scores?: readonly ClipScore[];
}

export interface Drop {
  readonly rule: DropRule;
  /** The score that dropped it (seconds for too-short, bits for near-duplicate). */
  readonly value: number | null;
  readonly threshold: number | null;
  readonly duplicateOf?: string;
  readonly error?: string;
}

export interface CuratedClip {
  readonly id: string;
  readonly sourceId: string;
  readonly start: number;
  readonly end: number;
  readonly duration: number;
  /** Absent for a too-short segment: no file was made. */
  readonly uri?: string;
  readonly sha256?: string;
  readonly bytes?: number;
  readonly contactSheetUri?: string;
  readonly keyFrameUris?: readonly string[];
  readonly aesthetic?: number;
  readonly motion?: number;
  readonly meanLuma?: number;
  readonly lumaStd?: number;
  readonly phash?: readonly string[];
  readonly kept: boolean;
  readonly drop?: Drop;
}

export interface SourceSummary {
  readonly id: string;
  readonly status: SourceOutcome['status'];
  readonly field?: string;
  readonly reason?: string;
  readonly videoSeconds: number;
  readonly candidates: number;
  readonly kept: number;
}

export interface Curated {
  readonly format: 'video-curated-v1';
  readonly thresholds: CurateThresholds;
  readonly funnel: {
    readonly sources: number;
    readonly refused: number;
    readonly failed: number;
    readonly candidates: number;
    readonly dropped: Record<DropRule, number>;
    readonly kept: number;
    readonly keptSeconds: number;
  };
  readonly sources: readonly SourceSummary[];
  readonly clips: readonly CuratedClip[];
}

const HASH = /^[0-9a-f]{16}$/;

/** Bits that differ between two 64-bit hashes written as 16 hex digits. */
export function hammingDistance(a: string, b: string): number {
  if (!HASH.test(a)) throw new ConfigError('phash', a, 'must be 16 lowercase hex digits');
  if (!HASH.test(b)) throw new ConfigError('phash', b, 'must be 16 lowercase hex digits');
  let bits = 0;
  for (let i = 0; i < 16; i += 8) {
    let x = Number.parseInt(a.slice(i, i + 8), 16) ^ Number.parseInt(b.slice(i, i + 8), 16);
    while (x) {
      x &= x - 1;
      bits += 1;
    }
  }
  return bits;
}

/** Mean distance over the key-frame positions both clips have. */
export function clipDistance(a: readonly string[], b: readonly string[]): number {
  const n = Math.min(a.length, b.length);
  if (n === 0) return Number.POSITIVE_INFINITY;
  let sum = 0;
  for (let i = 0; i < n; i += 1) sum += hammingDistance(a[i]!, b[i]!);
  return sum / n;
}

export function checkThresholds(t: CurateThresholds): void {
  const within = (field: keyof CurateThresholds, value: number, min: number, max: number) => {
    if (!(Number.isFinite(value) && value >= min && value <= max)) throw new ConfigError(`curate.${field}`, value, `must be a number from ${min} to ${max}`);
  };
  within('minAesthetic', t.minAesthetic, 0, 10);
  within('minMotion', t.minMotion, 0, 255);
  within('darkLuma', t.darkLuma, 0, 1);
  within('brightLuma', t.brightLuma, 0, 1);
  within('maxDuplicateDistance', t.maxDuplicateDistance, 0, 64);
  if (t.darkLuma >= t.brightLuma) throw new ConfigError('curate.darkLuma', t.darkLuma, `must be below curate.brightLuma (${t.brightLuma})`);
}

function firstFailed(score: ClipScore, t: CurateThresholds): Drop | undefined {
  if (score.error !== undefined) return { rule: 'unscored', value: null, threshold: null, error: score.error };
  const { meanLuma, motion, aesthetic } = score;
  if (meanLuma === undefined || motion === undefined || aesthetic === undefined || !score.phash?.length) {
    return { rule: 'unscored', value: null, threshold: null, error: 'the score document lacks this clip' };
  }
  if (meanLuma < t.darkLuma) return { rule: 'dark', value: meanLuma, threshold: t.darkLuma };
  if (meanLuma > t.brightLuma) return { rule: 'washed-out', value: meanLuma, threshold: t.brightLuma };
  if (motion < t.minMotion) return { rule: 'static', value: motion, threshold: t.minMotion };
  if (aesthetic < t.minAesthetic) return { rule: 'low-aesthetic', value: aesthetic, threshold: t.minAesthetic };
  return undefined;
}

/** Keeps or drops every candidate of every source, by the rules above. */
export function curate(outcomes: readonly SourceOutcome[], thresholds: CurateThresholds): Curated {
  checkThresholds(thresholds);
  const dropped = Object.fromEntries(DROP_RULES.map((r) => [r, 0])) as Record<DropRule, number>;
  const clips: CuratedClip[] = [];
  const sources: SourceSummary[] = [];
  const kept: { id: string; phash: readonly string[] }[] = [];
  const seen = new Set<string>();
  for (const outcome of outcomes) {
    if (seen.has(outcome.id)) throw new ConfigError('sources.id', outcome.id, 'appears twice: every source needs its own id');
    seen.add(outcome.id);
    if (outcome.status !== 'ok') {
      sources.push({ id: outcome.id, status: outcome.status, field: outcome.field, reason: outcome.reason, videoSeconds: 0, candidates: 0, kept: 0 });
      continue;
    }
    const scores = new Map((outcome.scores ?? []).map((s) => [s.id, s]));
    const candidates: CuratedClip[] = [];
    for (const drop of outcome.dropped ?? []) {
      candidates.push({
        id: `${outcome.id}@${drop.startFrame}`,
        sourceId: outcome.id,
        start: drop.start,
        end: drop.end,
        duration: drop.end - drop.start,
        kept: false,
        drop: { rule: 'too-short', value: drop.value, threshold: drop.threshold },
      });
    }
    for (const clip of outcome.clips ?? []) {
      const score = scores.get(clip.id) ?? { id: clip.id, error: 'the score document lacks this clip' };
      let drop = firstFailed(score, thresholds);
      if (!drop) {
        const phash = score.phash!;
        let nearest: { id: string; distance: number } | undefined;
        for (const other of kept) {
          const distance = clipDistance(phash, other.phash);
          if (distance <= thresholds.maxDuplicateDistance && (!nearest || distance < nearest.distance)) nearest = { id: other.id, distance };
        }
        if (nearest) drop = { rule: 'near-duplicate', value: nearest.distance, threshold: thresholds.maxDuplicateDistance, duplicateOf: nearest.id };
        else kept.push({ id: clip.id, phash });
      }
      candidates.push({
        id: clip.id,
        sourceId: outcome.id,
        start: clip.start,
        end: clip.end,
        duration: clip.end - clip.start,
        uri: clip.uri,
        sha256: clip.sha256,
        ...(clip.bytes !== undefined ? { bytes: clip.bytes } : {}),
        contactSheetUri: clip.contactSheetUri,
        keyFrameUris: clip.keyFrameUris,
        ...(score.aesthetic !== undefined ? { aesthetic: score.aesthetic } : {}),
        ...(score.motion !== undefined ? { motion: score.motion } : {}),
        ...(score.meanLuma !== undefined ? { meanLuma: score.meanLuma } : {}),
        ...(score.lumaStd !== undefined ? { lumaStd: score.lumaStd } : {}),
        ...(score.phash ? { phash: score.phash } : {}),
        kept: drop === undefined,
        ...(drop ? { drop } : {}),
      });
    }
    candidates.sort((a, b) => a.start - b.start);
    for (const c of candidates) if (c.drop) dropped[c.drop.rule] += 1;
    clips.push(...candidates);
    sources.push({
      id: outcome.id,
      status: 'ok',
      videoSeconds: outcome.videoSeconds ?? 0,
      candidates: candidates.length,
      kept: candidates.filter((c) => c.kept).length,
    });
  }
  const keptClips = clips.filter((c) => c.kept);
  return {
    format: 'video-curated-v1',
    thresholds,
    funnel: {
      sources: sources.length,
      refused: sources.filter((s) => s.status === 'refused').length,
      failed: sources.filter((s) => s.status === 'failed').length,
      candidates: clips.length,
      dropped,
      kept: keptClips.length,
      keptSeconds: keptClips.reduce((sum, c) => sum + c.duration, 0),
    },
    sources,
    clips,
  };
}
