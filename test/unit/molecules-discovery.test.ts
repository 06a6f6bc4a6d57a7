/**
 * The discovery loop's pure steps on a real pool (the 1-substituent default pool, RDKit Morgan
 * fingerprints) with a known structure-gap relation standing in for xTB, so the surrogate has
 * something to learn and the test can check that it beats random search on the same budget.
 */
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { buildDefaultPool, morganFingerprint } from '#shared/molecules/pool.ts';
import {
  campaignSummary,
  hitCurves,
  newCampaign,
  parseCampaign,
  proposeRound,
  quantile,
  recordRound,
  toMeasure,
  withKnownResults,
  type Campaign,
  type CampaignSettings,
  type OracleResult,
} from '#shared/molecules/discovery.ts';
import { discoveryMetrics, discoveryReportHtml, failureCounts, measurementsCsv, topMolecules } from '#shared/molecules/report.ts';
import { seededRandom } from '#shared/random.ts';
import type { Fingerprint } from '#shared/molecules/surrogate.ts';

let smiles: string[];
let fingerprints: Fingerprint[];
let truth: number[];

const settings: CampaignSettings = { sampleSize: 40, rounds: 4, batchSize: 10, explorationFraction: 0.2, hitPercent: 5, acquisition: 'ei', seed: 3 };
const poolRef = () => ({ uri: 's3://b/pool.json', fingerprintsUri: 's3://b/pool.fp', size: smiles.length, nBytes: 256, source: 'test pool' });

/** A structure-gap relation: a fixed random set of fingerprint bits lowers the gap, plus noise. */
function syntheticGaps(fps: readonly Fingerprint[]): number[] {
  const random = seededRandom(11);
  const weights = Array.from({ length: 2048 }, () => (random() < 0.05 ? random() : 0));
  return fps.map((fp) => {
    let g = 5;
    for (let bit = 0; bit < 2048; bit++) if (fp[bit >> 3]! & (1 << (bit & 7))) g -= weights[bit]!;
    return g + 0.05 * (random() - 0.5);
  });
}

/** Measures the pending round with the synthetic oracle; `fail` molecules fail with a reason. */
function oracle(campaign: Campaign, fail: ReadonlySet<number> = new Set()): Map<number, OracleResult> {
  return new Map(
    toMeasure(campaign).map((item) => [
      item.index,
      fail.has(item.index)
        ? { ok: false, reason: 'optimisation changed the bonds (made: C1-H9; broken: none)', attempts: 2, seconds: 0.1, cached: false }
        : { ok: true, gap: truth[item.index]!, attempts: 1, seconds: 0.1, cached: false },
    ]),
  );
}

function runCampaign(s: CampaignSettings): Campaign {
  let c = newCampaign(poolRef(), s, (i) => smiles[i]!);
  c = recordRound(c, 'approved', oracle(c));
  while (!c.stopped) {
    c = proposeRound(c, fingerprints, (i) => smiles[i]!);
    c = recordRound(c, 'approved', oracle(c));
  }
  return c;
}

before(async () => {
  const pool = await buildDefaultPool({ maxSubstituents: 1 });
  smiles = pool.molecules.map((m) => m.smiles);
  fingerprints = [];
  for (const s of smiles) fingerprints.push(await morganFingerprint(s));
  truth = syntheticGaps(fingerprints);
});

describe('discovery: round 0 and the hit threshold', () => {
  it('draws a seeded sample of distinct pool molecules, the same for the same seed', () => {
    const a = newCampaign(poolRef(), settings, (i) => smiles[i]!);
    const b = newCampaign(poolRef(), settings, (i) => smiles[i]!);
    const indices = a.pending!.items.map((i) => i.index);
    assert.equal(new Set(indices).size, settings.sampleSize);
    assert.deepEqual(
      indices,
      b.pending!.items.map((i) => i.index),
    );
    assert.ok(a.pending!.items.every((i) => i.arm === 'sample' && i.smiles === smiles[i.index] && !i.predicted));
    const other = newCampaign(poolRef(), { ...settings, seed: 4 }, (i) => smiles[i]!);
    assert.notDeepEqual(
      other.pending!.items.map((i) => i.index),
      indices,
    );
  });

  it('names the field when the sample is larger than the pool', () => {
    assert.throws(() => newCampaign({ ...poolRef(), size: 10 }, settings, (i) => smiles[i]!), /sampleSize: must not exceed the pool's 10 molecules \(got 40\)/);
  });

  it('sets the threshold at the hitPercent quantile of the measured sample, failures left out', () => {
    const c0 = newCampaign(poolRef(), settings, (i) => smiles[i]!);
    const failing = new Set(c0.pending!.items.slice(0, 3).map((i) => i.index));
    const c1 = recordRound(c0, 'approved', oracle(c0, failing));
    const gaps = c0
      .pending!.items.filter((i) => !failing.has(i.index))
      .map((i) => truth[i.index]!)
      .sort((a, b) => a - b);
    assert.equal(c1.threshold!.sampleMeasured, 37);
    assert.equal(c1.threshold!.gap, quantile(gaps, 0.05)); // exact: the same function of the same sorted gaps
    assert.ok(c1.threshold!.basePercent > 0 && c1.threshold!.basePercent <= 10, String(c1.threshold!.basePercent));
    assert.equal(c1.rounds[0]!.failed, 3);
    assert.equal(c1.measurements.length, 40);
    assert.equal(c1.pending, undefined);
    assert.deepEqual(failureCounts(c1), [{ reason: 'optimisation changed the bonds', count: 3 }]);
  });

  it('refuses a round with a molecule left unmeasured, naming it', () => {
    const c0 = newCampaign(poolRef(), settings, (i) => smiles[i]!);
    const results = oracle(c0);
    const missing = c0.pending!.items[5]!;
    results.delete(missing.index);
    assert.throws(
      () => recordRound(c0, 'approved', results),
      new RegExp(`no oracle result for pool molecule ${missing.index} \\(${missing.smiles.replace(/[()[\]=#+\\]/g, '\\$&')}\\)`),
    );
  });

  it('interpolates quantiles', () => {
    assert.equal(quantile([1, 2, 3, 4, 5], 0.5), 3);
    assert.equal(quantile([1, 2], 0.25), 1.25);
    assert.equal(quantile([7], 0.02), 7);
  });
});

describe('discovery: surrogate rounds', () => {
  it('proposes batchSize surrogate picks and as many random ones, none measured before, each predicted', () => {
    let c = newCampaign(poolRef(), settings, (i) => smiles[i]!);
    c = recordRound(c, 'approved', oracle(c));
    const p = proposeRound(c, fingerprints, (i) => smiles[i]!);
    const items = p.pending!.items;
    assert.equal(p.pending!.round, 1);
    assert.equal(items.filter((i) => i.arm === 'exploit').length, 8);
    assert.equal(items.filter((i) => i.arm === 'explore').length, 2);
    assert.equal(items.filter((i) => i.arm === 'random').length, 10);
    const measured = new Set(c.measurements.map((m) => m.index));
    assert.ok(items.every((i) => !measured.has(i.index) && i.predicted && i.predicted.std >= 0));
    assert.equal(new Set(items.map((i) => i.index)).size, 20);
    assert.throws(() => proposeRound(p, fingerprints, (i) => smiles[i]!), /round 1 is still pending/);
  });

  it('finds more hits than random search on the same budget, never measuring a molecule twice', () => {
    const c = runCampaign(settings);
    const s = campaignSummary(c);
    assert.equal(c.stopped?.reason, 'rounds');
    assert.equal(c.rounds.length, 5);
    assert.equal(s.surrogate.calls, 40);
    assert.equal(s.random.calls, 40);
    assert.equal(new Set(c.measurements.map((m) => m.index)).size, c.measurements.length);
    assert.ok(s.surrogate.hits >= 2 * Math.max(1, s.random.hits), `surrogate ${s.surrogate.hits} vs random ${s.random.hits}`);
    // Calibration is recorded from predictions made before measuring.
    const later = c.rounds.slice(1);
    assert.ok(later.every((r) => r.calibration && r.calibration.n === 20 && r.calibration.mae !== null && r.calibrationRandom?.n === 10));
    assert.ok(later.at(-1)!.calibration!.spearman! > 0.3, String(later.at(-1)!.calibration!.spearman));
    // The hit curves end at each arm's totals.
    const curves = hitCurves(c);
    assert.deepEqual(curves.filter((p) => p.arm === 'surrogate').at(-1), { arm: 'surrogate', calls: 40, hits: s.surrogate.hits, round: 4 });
    assert.equal(curves.filter((p) => p.arm === 'random').at(-1)!.hits, s.random.hits);
    parseCampaign(JSON.parse(JSON.stringify(c)));
  });

  it('ends the loop on reject or timeout, skipping the batch and keeping what was measured', () => {
    let c = newCampaign(poolRef(), settings, (i) => smiles[i]!);
    c = recordRound(c, 'approved', oracle(c));
    for (const decision of ['rejected', 'timedOut'] as const) {
      const p = proposeRound(c, fingerprints, (i) => smiles[i]!);
      const stopped = recordRound(p, decision, new Map());
      assert.deepEqual(stopped.stopped, { reason: decision, round: 1 });
      assert.equal(stopped.measurements.length, 40);
      assert.equal(stopped.pending, undefined);
      assert.equal(stopped.rounds.at(-1)!.decision, decision);
      assert.equal(stopped.rounds.at(-1)!.measured, 0);
      assert.throws(() => proposeRound(stopped, fingerprints, (i) => smiles[i]!), /stopped at round 1 \(rejected|timedOut\)/);
    }
  });

  it('takes molecules known from earlier runs from the cache: nothing left to measure', () => {
    const c0 = newCampaign(poolRef(), settings, (i) => smiles[i]!);
    const known = new Map(c0.pending!.items.map((i) => [i.smiles, { ok: true, gap: truth[i.index]!, seconds: 0.2 }]));
    const c1 = withKnownResults(c0, known);
    assert.equal(toMeasure(c1).length, 0);
    const recorded = recordRound(c1, 'nothingToMeasure', new Map());
    assert.equal(recorded.rounds[0]!.fromCache, 40);
    assert.equal(campaignSummary(recorded).oracleCalls, 0);
  });
});

describe('discovery: report', () => {
  it('shows the hits of both arms, the threshold, the rounds and the top molecules drawn', async () => {
    const c = runCampaign({ ...settings, rounds: 2 });
    const s = campaignSummary(c);
    const html = await discoveryReportHtml(c, { source: 'test pool', size: smiles.length, skipped: { malformed: 2 } }, { seed: 3 });
    assert.match(html, new RegExp(`<strong id="surrogate-hits">${s.surrogate.hits}</strong> hits in ${s.surrogate.calls} oracle calls`));
    assert.match(html, new RegExp(`<strong id="random-hits">${s.random.hits}</strong> hits in ${s.random.calls} calls`));
    assert.match(html, new RegExp(`at or below <strong>${c.threshold!.gap.toFixed(3)} eV</strong>`));
    assert.equal((html.match(/<figure class="mol"/g) ?? []).length, 12);
    assert.equal((html.match(/src="data:image\/svg\+xml;base64,/g) ?? []).length, 12);
    assert.ok(!/<script/i.test(html));
    assert.match(html, /skipped: malformed 2/);
    assert.equal((html.match(/<svg/g) ?? []).length, 3, 'three charts');
    assert.equal(topMolecules(c)[0]!.result.gap, Math.min(...c.measurements.map((m) => m.result.gap!)));
    const csv = measurementsCsv(c).trim().split('\n');
    assert.equal(csv.length, c.measurements.length + 1);
    assert.equal(discoveryMetrics(c).surrogateHits, s.surrogate.hits);
  });
});
