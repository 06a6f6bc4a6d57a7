/**
 * The release guard and the leaderboard's data, pure.
 *
 * The release candidate is the fine-tuned checkpoint best on the target benchmark whose score on
 * the guard benchmark is at least the base model's minus the margin (in points, i.e. accuracy x
 * 100). Ties go to the earlier step. The base model is the run's checkpoint at its base step (the
 * manifests' `base_step`, default the lowest step); it is the reference, not a candidate. Every
 * checkpoint gets a reason: why it passed, why it failed, or what it has not been scored on.
 *
 * Only results of each benchmark's current version count: after a bump, a checkpoint is "not
 * evaluated" on that benchmark until its backfill computes the new version.
 */
import { z } from 'zod';
import { ConfigError } from '../errors.ts';

export const EvalMetrics = z.object({
  run: z.string(),
  step: z.int().min(0),
  benchmark: z.string(),
  benchmarkVersion: z.int().min(1),
  sampleSize: z.int().min(1),
  n: z.int().min(0),
  accuracy: z.number().min(0).max(1),
  stderr: z.number().min(0),
  baseline: z.number().min(0).max(1),
  contentHash: z.string(),
});
export type EvalMetrics = z.infer<typeof EvalMetrics>;

export interface GuardSettings {
  readonly target: string;
  readonly guard: string;
  /** Points (accuracy x 100) the guard benchmark may fall below the base model. */
  readonly marginPoints: number;
  readonly baseStep: number;
}

export interface CheckpointVerdict {
  readonly step: number;
  readonly base: boolean;
  /** null: not scored on both benchmarks (or the base model). */
  readonly passed: boolean | null;
  readonly target: number | null;
  readonly guard: number | null;
  readonly reason: string;
}

export interface GuardDecision {
  readonly settings: GuardSettings;
  /** The base model's guard score, and the floor (both in points); null when the base is not scored yet. */
  readonly baseGuardPoints: number | null;
  readonly floorPoints: number | null;
  readonly candidate: number | null;
  readonly verdicts: CheckpointVerdict[];
  readonly summary: string;
}

const points = (accuracy: number) => Math.round(accuracy * 10_000) / 100;

/** The latest result per (step, benchmark), of each benchmark's current version only. */
export function currentResults(results: readonly EvalMetrics[], versions: ReadonlyMap<string, number>): EvalMetrics[] {
  const latest = new Map<string, EvalMetrics>();
  for (const r of results) {
    if (versions.get(r.benchmark) !== r.benchmarkVersion) continue;
    latest.set(`${r.step}#${r.benchmark}`, r); // results arrive oldest first
  }
  return [...latest.values()].sort((a, b) => a.step - b.step || (a.benchmark < b.benchmark ? -1 : 1));
}

export function decideRelease(results: readonly EvalMetrics[], settings: GuardSettings): GuardDecision {
  if (!(settings.marginPoints >= 0 && settings.marginPoints <= 100)) throw new ConfigError('marginPoints', settings.marginPoints, 'must be from 0 to 100');
  if (settings.target === settings.guard) throw new ConfigError('guard', settings.guard, 'must differ from the target benchmark');
  const at = (step: number, benchmark: string) => results.find((r) => r.step === step && r.benchmark === benchmark);
  const steps = [...new Set(results.map((r) => r.step))].sort((a, b) => a - b);
  const baseGuard = at(settings.baseStep, settings.guard);
  const baseGuardPoints = baseGuard ? points(baseGuard.accuracy) : null;
  const floorPoints = baseGuardPoints === null ? null : Math.round((baseGuardPoints - settings.marginPoints) * 100) / 100;
  const verdicts: CheckpointVerdict[] = steps.map((step) => {
    const target = at(step, settings.target);
    const guard = at(step, settings.guard);
    const t = target ? points(target.accuracy) : null;
    const g = guard ? points(guard.accuracy) : null;
    if (step === settings.baseStep) {
      return { step, base: true, passed: null, target: t, guard: g, reason: `base model: the reference (${settings.guard} ${g ?? 'not scored yet'})` };
    }
    if (t === null || g === null) {
      const missing = [t === null ? settings.target : null, g === null ? settings.guard : null].filter(Boolean).join(' and ');
      return { step, base: false, passed: null, target: t, guard: g, reason: `not scored on ${missing} (current version) yet` };
    }
    if (floorPoints === null)
      return {
        step,
        base: false,
        passed: null,
        target: t,
        guard: g,
        reason: `the base model (step ${settings.baseStep}) is not scored on ${settings.guard} yet`,
      };
    return g >= floorPoints
      ? {
          step,
          base: false,
          passed: true,
          target: t,
          guard: g,
          reason: `passed: ${settings.guard} ${g.toFixed(2)} >= floor ${floorPoints.toFixed(2)} (base ${baseGuardPoints!.toFixed(2)} - ${settings.marginPoints})`,
        }
      : {
          step,
          base: false,
          passed: false,
          target: t,
          guard: g,
          reason: `failed: ${settings.guard} ${g.toFixed(2)} < floor ${floorPoints.toFixed(2)} (base ${baseGuardPoints!.toFixed(2)} - ${settings.marginPoints})`,
        };
  });
  // Best target score among those that passed; ties to the earlier step (verdicts are in step order).
  let candidate: CheckpointVerdict | null = null;
  for (const v of verdicts) if (v.passed && (candidate === null || v.target! > candidate.target!)) candidate = v;
  const failed = verdicts.filter((v) => v.passed === false).length;
  const summary = candidate
    ? `release candidate: step ${candidate.step} (${settings.target} ${candidate.target!.toFixed(2)}, ${settings.guard} ${candidate.guard!.toFixed(2)} >= floor ${floorPoints!.toFixed(2)})` +
      (failed ? `; ${failed} checkpoint(s) failed the guard` : '')
    : floorPoints === null
      ? `no release candidate: the base model is not scored on ${settings.guard} yet`
      : `no release candidate: no fine-tuned checkpoint kept ${settings.guard} at or above ${floorPoints.toFixed(2)}`;
  return { settings, baseGuardPoints, floorPoints, candidate: candidate?.step ?? null, verdicts, summary };
}
