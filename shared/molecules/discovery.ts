/**
 * Closed-loop molecular discovery: the campaign document and the pure steps of a round.
 *
 * Round 0 measures a random sample of the pool: its gaps set the hit threshold (the gap below
 * which `hitPercent` of the sample falls) and train the first surrogate. Every later round the
 * surrogate (a Tanimoto GP on Morgan fingerprints) picks `batchSize` molecules (exploit and
 * explore arms) and the random baseline draws as many from the rest, so both spend the same
 * oracle budget side by side. Every pick carries the surrogate's prediction, recorded before it is
 * measured, so calibration (MAE, Spearman) is reported per round; on the random arm it is unbiased.
 *
 * The document is immutable JSON, written content-addressed to S3 by the Lambdas; the functions
 * here take one document and return the next.
 */
import { z } from 'zod';
import { CampaignError } from './errors.ts';
import { quantile } from '../stats.ts';
import { ConfigError } from '../errors.ts';
import { seededRandom } from '../random.ts';
import { parseOrThrow } from '../schema.ts';
import { fitTanimotoGp, mae, proposeBatch, spearman, type Acquisition, type Fingerprint } from './surrogate.ts';

export const ARMS = ['sample', 'exploit', 'explore', 'random'] as const;
export type Arm = (typeof ARMS)[number];
/** Arms that spend the surrogate's budget; `random` is the baseline; `sample` is shared. */
export const SURROGATE_ARMS: readonly Arm[] = ['exploit', 'explore'];

const Prediction = z.object({ mean: z.number(), std: z.number().min(0) }).strict();

/** One oracle result for one molecule; `cached`: taken from the oracle cache, no oracle call in this run. */
export const OracleResult = z
  .object({
    ok: z.boolean(),
    gap: z.number().optional(),
    reason: z.string().optional(),
    attempts: z.int().min(0).optional(),
    seconds: z.number().min(0),
    cached: z.boolean(),
  })
  .strict()
  .refine((r) => (r.ok ? r.gap !== undefined && Number.isFinite(r.gap) : r.reason !== undefined), {
    message: 'an ok result needs a finite gap; a failed one needs a reason',
  });
export type OracleResult = z.infer<typeof OracleResult>;

export const PendingItem = z
  .object({
    index: z.int().min(0),
    smiles: z.string().min(1),
    arm: z.enum(ARMS),
    predicted: Prediction.optional(),
    /** Already measured by an earlier run with the same oracle settings and code. */
    known: OracleResult.optional(),
  })
  .strict();
export type PendingItem = z.infer<typeof PendingItem>;

export const Measurement = z
  .object({
    index: z.int().min(0),
    smiles: z.string().min(1),
    arm: z.enum(ARMS),
    round: z.int().min(0),
    predicted: Prediction.optional(),
    result: OracleResult,
  })
  .strict();
export type Measurement = z.infer<typeof Measurement>;

const ArmCounts = z.object({ sample: z.int(), exploit: z.int(), explore: z.int(), random: z.int() }).strict();
export type ArmCounts = z.infer<typeof ArmCounts>;

const Calibration = z.object({ n: z.int(), mae: z.number().nullable(), spearman: z.number().nullable() }).strict();

export const DECISIONS = ['approved', 'rejected', 'timedOut', 'nothingToMeasure'] as const;
export type Decision = (typeof DECISIONS)[number];

export const RoundRecord = z
  .object({
    round: z.int().min(0),
    decision: z.enum(DECISIONS),
    proposed: ArmCounts,
    measured: z.int(),
    failed: z.int(),
    /** Results taken from the oracle cache (no oracle call). */
    fromCache: z.int(),
    /** Hits among this round's measurements, per arm. */
    hits: ArmCounts,
    /** Predictions recorded before measuring, against the measured gaps: all picks, and the random arm alone. */
    calibration: Calibration.optional(),
    calibrationRandom: Calibration.optional(),
  })
  .strict();
export type RoundRecord = z.infer<typeof RoundRecord>;

export const CampaignSettings = z
  .object({
    sampleSize: z.int().min(2).max(10_000),
    rounds: z.int().min(0).max(100),
    batchSize: z.int().min(1).max(1_000),
    explorationFraction: z.number().min(0).max(1),
    hitPercent: z.number().gt(0).max(50),
    acquisition: z.enum(['ei', 'lcb']),
    seed: z.int().min(0),
  })
  .strict();
export type CampaignSettings = z.infer<typeof CampaignSettings>;

export const STOP_REASONS = ['rounds', 'rejected', 'timedOut', 'poolExhausted'] as const;

export const Campaign = z
  .object({
    version: z.literal(1),
    pool: z
      .object({
        uri: z.string(),
        fingerprintsUri: z.string(),
        size: z.int().min(1),
        /** Bytes per packed fingerprint. */
        nBytes: z.int().min(1),
        source: z.string(),
      })
      .strict(),
    settings: CampaignSettings,
    threshold: z
      .object({
        /** Hit: gap <= this (eV). */
        gap: z.number(),
        hitPercent: z.number(),
        /** Share of the measured sample at or below the threshold, in percent. */
        basePercent: z.number(),
        sampleMeasured: z.int(),
      })
      .strict()
      .optional(),
    measurements: z.array(Measurement),
    rounds: z.array(RoundRecord),
    pending: z
      .object({ round: z.int().min(0), items: z.array(PendingItem) })
      .strict()
      .optional(),
    stopped: z
      .object({ reason: z.enum(STOP_REASONS), round: z.int() })
      .strict()
      .optional(),
  })
  .strict();
export type Campaign = z.infer<typeof Campaign>;

export function parseCampaign(value: unknown): Campaign {
  return parseOrThrow(Campaign, value, 'campaign');
}

/** Distinct seeded draws of `count` indices from `candidates` (all of them when fewer). */
function drawIndices(candidates: readonly number[], count: number, seed: number): number[] {
  const pick = [...candidates];
  const random = seededRandom(seed);
  const n = Math.min(count, pick.length);
  for (let i = 0; i < n; i++) {
    const j = i + Math.floor(random() * (pick.length - i));
    [pick[i], pick[j]] = [pick[j]!, pick[i]!];
  }
  return pick.slice(0, n);
}

/** A new campaign whose pending round 0 is the random sample. */
export function newCampaign(pool: Campaign['pool'], settings: CampaignSettings, smilesOf: (index: number) => string): Campaign {
  parseOrThrow(CampaignSettings, settings, 'settings');
  if (settings.sampleSize > pool.size) {
    throw new ConfigError('sampleSize', settings.sampleSize, `must not exceed the pool's ${pool.size} molecules`);
  }
  const all = Array.from({ length: pool.size }, (_, i) => i);
  const sample = drawIndices(all, settings.sampleSize, settings.seed);
  return {
    version: 1,
    pool,
    settings,
    measurements: [],
    rounds: [],
    pending: { round: 0, items: sample.map((index) => ({ index, smiles: smilesOf(index), arm: 'sample' as const })) },
  };
}

/** The round the campaign is at: the pending one, else the next to propose. */
export function currentRound(campaign: Campaign): number {
  return campaign.pending?.round ?? campaign.rounds.length;
}

/**
 * Proposes the next round: fits the surrogate on every successful measurement, picks `batchSize`
 * molecules by the acquisition (exploit and explore arms), and draws as many at random from the
 * rest for the baseline, every pick with its prediction. Never proposes a molecule already measured.
 */
export function proposeRound(campaign: Campaign, fingerprints: readonly Fingerprint[], smilesOf: (index: number) => string): Campaign {
  if (campaign.pending) throw new CampaignError(`round ${campaign.pending.round} is still pending: record it before proposing another`);
  if (campaign.stopped) throw new CampaignError(`the campaign stopped at round ${campaign.stopped.round} (${campaign.stopped.reason})`);
  if (!campaign.threshold) throw new CampaignError('no hit threshold yet: round 0 (the random sample) must be recorded first');
  if (fingerprints.length !== campaign.pool.size) {
    throw new ConfigError('fingerprints.length', fingerprints.length, `must equal the pool size ${campaign.pool.size}`);
  }
  const round = campaign.rounds.length;
  const { settings } = campaign;
  const ok = campaign.measurements.filter((m) => m.result.ok);
  if (ok.length < 2) throw new CampaignError(`only ${ok.length} molecule(s) measured successfully: the surrogate needs at least 2`);
  const model = fitTanimotoGp(
    ok.map((m) => fingerprints[m.index]!),
    ok.map((m) => m.result.gap!),
  );
  const measured = new Set(campaign.measurements.map((m) => m.index));
  const unmeasured: number[] = [];
  for (let i = 0; i < campaign.pool.size; i++) if (!measured.has(i)) unmeasured.push(i);
  if (unmeasured.length === 0) return { ...campaign, stopped: { reason: 'poolExhausted', round } };

  const acquisition: Acquisition = settings.acquisition === 'ei' ? { kind: 'ei', incumbent: campaign.threshold.gap } : { kind: 'lcb', beta: 2 };
  const surrogateSize = Math.min(settings.batchSize, Math.ceil(unmeasured.length / 2));
  const batch = proposeBatch({
    model,
    pool: { ids: unmeasured.map(String), fingerprints: unmeasured.map((i) => fingerprints[i]!) },
    measuredIds: [],
    batchSize: surrogateSize,
    explorationFraction: settings.explorationFraction,
    seed: settings.seed + round,
    acquisition,
  });
  const chosen = new Set(batch.map((b) => Number(b.id)));
  const rest = unmeasured.filter((i) => !chosen.has(i));
  const randomPicks = drawIndices(rest, batch.length, settings.seed * 7919 + round);
  const randomPredictions = model.predict(randomPicks.map((i) => fingerprints[i]!));
  const items: PendingItem[] = [
    ...batch.map((b) => ({
      index: Number(b.id),
      smiles: smilesOf(Number(b.id)),
      arm: b.arm,
      predicted: { mean: b.predictedMean, std: b.predictedStd },
    })),
    ...randomPicks.map((index, k) => ({
      index,
      smiles: smilesOf(index),
      arm: 'random' as const,
      predicted: { mean: randomPredictions[k]!.mean, std: randomPredictions[k]!.std },
    })),
  ];
  return { ...campaign, pending: { round, items } };
}

/** Marks pending items already measured by an earlier run (the oracle cache), by SMILES. */
export function withKnownResults(campaign: Campaign, known: ReadonlyMap<string, Omit<OracleResult, 'cached'>>): Campaign {
  if (!campaign.pending) return campaign;
  const items = campaign.pending.items.map((item) => {
    const hit = known.get(item.smiles);
    return hit ? { ...item, known: { ...hit, cached: true } } : item;
  });
  return { ...campaign, pending: { ...campaign.pending, items } };
}

/** The pending molecules the oracle still has to measure. */
export function toMeasure(campaign: Campaign): PendingItem[] {
  return campaign.pending?.items.filter((item) => !item.known) ?? [];
}

export { quantile };

function zeroCounts(): ArmCounts {
  return { sample: 0, exploit: 0, explore: 0, random: 0 };
}

/** How many of these items (picks or measurements) each arm has. */
export function armCounts(items: readonly { arm: keyof ArmCounts }[]): ArmCounts {
  const counts = zeroCounts();
  for (const item of items) counts[item.arm] += 1;
  return counts;
}

function calibrationOf(ms: readonly Measurement[]): z.infer<typeof Calibration> | undefined {
  const scored = ms.filter((m) => m.predicted && m.result.ok);
  if (!ms.some((m) => m.predicted)) return undefined;
  const predicted = scored.map((m) => m.predicted!.mean);
  const actual = scored.map((m) => m.result.gap!);
  return {
    n: scored.length,
    mae: scored.length ? mae(predicted, actual) : null,
    spearman: scored.length >= 3 ? finiteOrNull(spearman(predicted, actual)) : null,
  };
}

function finiteOrNull(x: number): number | null {
  return Number.isFinite(x) ? x : null;
}

export function isHit(campaign: Pick<Campaign, 'threshold'>, m: Pick<Measurement, 'result'>): boolean {
  return !!campaign.threshold && m.result.ok && m.result.gap! <= campaign.threshold.gap;
}

/**
 * Records the pending round. `approved`: every pending molecule has a result (from the oracle, or
 * known before); the threshold is set after round 0. `rejected` or `timedOut`: the batch is skipped
 * and the loop ends, keeping everything measured before.
 */
export function recordRound(campaign: Campaign, decision: Decision, results: ReadonlyMap<number, OracleResult>): Campaign {
  const pending = campaign.pending;
  if (!pending) throw new CampaignError('no pending round to record');
  const round = pending.round;
  const proposed = armCounts(pending.items);
  if (decision === 'rejected' || decision === 'timedOut') {
    const measuredNone: RoundRecord = { round, decision, proposed, measured: 0, failed: 0, fromCache: 0, hits: zeroCounts() };
    return { ...campaign, pending: undefined, rounds: [...campaign.rounds, measuredNone], stopped: { reason: decision, round } };
  }
  const added: Measurement[] = pending.items.map((item) => {
    const result = item.known ?? results.get(item.index);
    if (!result) throw new CampaignError(`round ${round}: no oracle result for pool molecule ${item.index} (${item.smiles})`);
    return { index: item.index, smiles: item.smiles, arm: item.arm, round, ...(item.predicted ? { predicted: item.predicted } : {}), result };
  });
  let threshold = campaign.threshold;
  if (round === 0) {
    const gaps = added
      .filter((m) => m.result.ok)
      .map((m) => m.result.gap!)
      .sort((a, b) => a - b);
    if (gaps.length < 2) {
      throw new CampaignError(`only ${gaps.length} of the ${added.length} sample molecules were measured successfully: too few to set a hit threshold`);
    }
    const gap = quantile(gaps, campaign.settings.hitPercent / 100);
    const below = gaps.filter((g) => g <= gap).length;
    threshold = { gap, hitPercent: campaign.settings.hitPercent, basePercent: (100 * below) / gaps.length, sampleMeasured: gaps.length };
  }
  const next: Campaign = { ...campaign, threshold, pending: undefined, measurements: [...campaign.measurements, ...added] };
  const hits = armCounts(added.filter((m) => isHit(next, m)));
  const calibration = calibrationOf(added);
  const calibrationRandom = calibrationOf(added.filter((m) => m.arm === 'random'));
  const record: RoundRecord = {
    round,
    decision,
    proposed,
    measured: added.length,
    failed: added.filter((m) => !m.result.ok).length,
    fromCache: added.filter((m) => m.result.cached).length,
    hits,
    ...(calibration ? { calibration } : {}),
    ...(calibrationRandom ? { calibrationRandom } : {}),
  };
  const rounds = [...campaign.rounds, record];
  const done = round >= campaign.settings.rounds;
  const exhausted = next.measurements.length >= campaign.pool.size;
  return {
    ...next,
    rounds,
    ...(done ? { stopped: { reason: 'rounds' as const, round } } : exhausted ? { stopped: { reason: 'poolExhausted' as const, round } } : {}),
  };
}

export interface ArmSummary {
  /** Molecules measured by the arm (oracle calls on the shared budget). */
  readonly calls: number;
  readonly hits: number;
  readonly failed: number;
}

/** Headline figures: hits against oracle calls for the surrogate and the random baseline. */
export function campaignSummary(campaign: Campaign) {
  const arm = (arms: readonly Arm[]): ArmSummary => {
    const ms = campaign.measurements.filter((m) => arms.includes(m.arm));
    return { calls: ms.length, hits: ms.filter((m) => isHit(campaign, m)).length, failed: ms.filter((m) => !m.result.ok).length };
  };
  const surrogate = arm(SURROGATE_ARMS);
  const random = arm(['random']);
  return {
    rounds: campaign.rounds.length,
    stopped: campaign.stopped?.reason ?? null,
    threshold: campaign.threshold?.gap ?? null,
    basePercent: campaign.threshold?.basePercent ?? null,
    sample: arm(['sample']),
    surrogate,
    exploit: arm(['exploit']),
    explore: arm(['explore']),
    random,
    /** Surrogate hits over random hits on the same budget; null when random found none. */
    hitRatio: random.hits > 0 ? surrogate.hits / random.hits : null,
    oracleCalls: campaign.measurements.filter((m) => !m.result.cached).length,
    fromCache: campaign.measurements.filter((m) => m.result.cached).length,
    failed: campaign.measurements.filter((m) => !m.result.ok).length,
  };
}
export type CampaignSummary = ReturnType<typeof campaignSummary>;

/** Cumulative hits against oracle calls, per arm, in measurement order. */
export function hitCurves(campaign: Campaign): { arm: 'surrogate' | 'random'; calls: number; hits: number; round: number }[] {
  const points: { arm: 'surrogate' | 'random'; calls: number; hits: number; round: number }[] = [
    { arm: 'surrogate', calls: 0, hits: 0, round: 0 },
    { arm: 'random', calls: 0, hits: 0, round: 0 },
  ];
  const state = { surrogate: { calls: 0, hits: 0 }, random: { calls: 0, hits: 0 } };
  for (const m of campaign.measurements) {
    if (m.arm === 'sample') continue;
    const key = m.arm === 'random' ? 'random' : 'surrogate';
    state[key].calls += 1;
    if (isHit(campaign, m)) state[key].hits += 1;
    points.push({ arm: key, ...state[key], round: m.round });
  }
  return points;
}
