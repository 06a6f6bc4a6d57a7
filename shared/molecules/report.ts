/**
 * The discovery report: hits against oracle calls for the surrogate and the random baseline on
 * the same budget, the gap distribution of the pool sample with the hit threshold, the
 * surrogate's calibration per round (predictions recorded before measuring), the top molecules
 * drawn with the arm that found each, and what failed and why (with the count that failed on both
 * of the oracle's attempts, also a metric). Charts are Vega-Lite rendered to SVG here and molecule
 * drawings are data-URI images, so the page needs no network.
 *
 * reportStep writes it, with every measurement as CSV, for the pipeline's report Lambda.
 */
import type { TopLevelSpec } from 'vega-lite';
import { svgDataUri } from '../approval-page.ts';
import { escapeHtml, svgOf } from '../charts.ts';
import { writeFile } from '../documents.ts';
import { canonicalJson, sha256Hex } from '../json.ts';
import { parseS3Uri } from '../s3uri.ts';
import { readCampaign, readPool } from './store.ts';
import { campaignSummary, hitCurves, isHit, type Campaign, type Measurement } from './discovery.ts';
import { moleculeSvg } from './pool.ts';

function gapHistogram(campaign: Campaign): TopLevelSpec {
  const sample = campaign.measurements.filter((m) => m.arm === 'sample' && m.result.ok).map((m) => ({ gap: m.result.gap! }));
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: 'HOMO-LUMO gap of the random pool sample (GFN2-xTB, eV)',
    width: 560,
    height: 200,
    layer: [
      {
        data: { values: sample },
        mark: 'bar',
        encoding: {
          x: { bin: { maxbins: 30 }, field: 'gap', type: 'quantitative', title: 'gap (eV)' },
          y: { aggregate: 'count', type: 'quantitative', title: 'molecules' },
        },
      },
      {
        data: { values: [{ threshold: campaign.threshold?.gap ?? 0 }] },
        mark: { type: 'rule', color: '#b42318', strokeDash: [4, 3] },
        encoding: { x: { field: 'threshold', type: 'quantitative' } },
      },
    ],
  };
}

function hitsChart(campaign: Campaign): TopLevelSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: 'Hits against oracle calls (same budget)',
    width: 560,
    height: 220,
    data: { values: hitCurves(campaign) },
    mark: { type: 'line', interpolate: 'step-after', point: false },
    encoding: {
      x: { field: 'calls', type: 'quantitative', title: 'oracle calls by the arm' },
      y: { field: 'hits', type: 'quantitative', title: 'hits (cumulative)' },
      color: { field: 'arm', type: 'nominal', scale: { domain: ['surrogate', 'random'], range: ['#1f7a3a', '#888888'] } },
    },
  };
}

function calibrationChart(campaign: Campaign): TopLevelSpec {
  const values = campaign.rounds.flatMap((r) => [
    ...(r.calibration?.mae != null ? [{ round: r.round, metric: 'MAE (eV), all picks', value: r.calibration.mae }] : []),
    ...(r.calibrationRandom?.mae != null ? [{ round: r.round, metric: 'MAE (eV), random arm', value: r.calibrationRandom.mae }] : []),
    ...(r.calibration?.spearman != null ? [{ round: r.round, metric: 'Spearman, all picks', value: r.calibration.spearman }] : []),
  ]);
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: 'Surrogate calibration per round (predicted before measuring)',
    width: 560,
    height: 200,
    data: { values },
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'round', type: 'ordinal' },
      y: { field: 'value', type: 'quantitative' },
      color: { field: 'metric', type: 'nominal' },
    },
  };
}

const fixed = (x: number | null | undefined, digits = 3) => (x == null ? '–' : x.toFixed(digits));

async function drawing(smiles: string): Promise<string> {
  const svg = await moleculeSvg(smiles, { width: 200, height: 150 });
  return `<img alt="${escapeHtml(smiles)}" width="200" height="150" src="${svgDataUri(svg)}">`;
}

/** The molecules with the lowest measured gaps, best first. */
export function topMolecules(campaign: Campaign, n = 12): Measurement[] {
  return campaign.measurements
    .filter((m) => m.result.ok)
    .sort((a, b) => a.result.gap! - b.result.gap! || a.index - b.index)
    .slice(0, n);
}

export function failureCounts(campaign: Campaign): { reason: string; count: number }[] {
  const counts = new Map<string, number>();
  for (const m of campaign.measurements) {
    if (m.result.ok) continue;
    // Group by the kind of failure, not the atoms named in it.
    const kind = m.result
      .reason!.replace(/\(.*$/, '')
      .replace(/\d+(\.\d+)?/g, 'N')
      .trim();
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  }
  return [...counts].map(([reason, count]) => ({ reason, count })).sort((a, b) => b.count - a.count);
}

/**
 * Molecules the oracle failed to measure on both of its attempts (the second from another,
 * force-field relaxed start; shared/molecules/xtb.ts): ones the campaign can never find.
 * A malformed SMILES (no attempt) and a timeout (not retried) are not among them.
 */
export function failedBothAttempts(campaign: Campaign): number {
  return campaign.measurements.filter((m) => !m.result.ok && (m.result.attempts ?? 0) >= 2).length;
}

/** Every measured molecule as CSV (hit = gap at or below the threshold). */
export function measurementsCsv(campaign: Campaign): string {
  const quote = (s: string) => (/[",\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s);
  const rows = campaign.measurements.map((m) =>
    [
      m.index,
      quote(m.smiles),
      m.arm,
      m.round,
      m.result.ok,
      m.result.gap ?? '',
      isHit(campaign, m),
      m.predicted?.mean ?? '',
      m.predicted?.std ?? '',
      m.result.cached,
      m.result.seconds,
      quote(m.result.reason ?? ''),
    ].join(','),
  );
  return `${['pool_index,smiles,arm,round,ok,gap_ev,hit,predicted_mean_ev,predicted_std_ev,from_cache,seconds,reason', ...rows].join('\n')}\n`;
}

export interface PoolInfo {
  readonly source: string;
  readonly size: number;
  readonly skipped: Record<string, number>;
}

export async function discoveryReportHtml(campaign: Campaign, pool: PoolInfo, config: unknown): Promise<string> {
  const s = campaignSummary(campaign);
  const [histogram, hits, calibration] = await Promise.all([svgOf(gapHistogram(campaign)), svgOf(hitsChart(campaign)), svgOf(calibrationChart(campaign))]);
  const top = topMolecules(campaign);
  const topCells = [];
  for (const m of top) {
    topCells.push(
      `<figure class="mol" data-arm="${m.arm}">${await drawing(m.smiles)}<figcaption><code>${escapeHtml(m.smiles)}</code><br>` +
        `${m.result.gap!.toFixed(3)} eV${isHit(campaign, m) ? ' <strong>hit</strong>' : ''}<br>found by <strong>${m.arm}</strong> in round ${m.round}` +
        `${m.predicted ? `<br>predicted ${m.predicted.mean.toFixed(2)} ± ${m.predicted.std.toFixed(2)}` : ''}</figcaption></figure>`,
    );
  }
  const roundRows = campaign.rounds
    .map(
      (r) =>
        `<tr><td>${r.round}</td><td>${r.decision}</td><td>${r.proposed.sample || ''}</td><td>${r.proposed.exploit}</td><td>${r.proposed.explore}</td><td>${r.proposed.random}</td>` +
        `<td>${r.measured}</td><td>${r.failed}</td><td>${r.fromCache}</td><td>${r.hits.exploit + r.hits.explore}</td><td>${r.hits.random}</td>` +
        `<td>${fixed(r.calibration?.mae)}</td><td>${fixed(r.calibration?.spearman)}</td><td>${fixed(r.calibrationRandom?.mae)}</td></tr>`,
    )
    .join('\n');
  const failures = failureCounts(campaign)
    .map((f) => `<tr><td style="text-align:left">${escapeHtml(f.reason)}</td><td>${f.count}</td></tr>`)
    .join('\n');
  const skipped = Object.entries(pool.skipped)
    .map(([reason, count]) => `${escapeHtml(reason)} ${count}`)
    .join(', ');
  const t = campaign.threshold;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Molecular discovery: ${s.surrogate.hits} hits against ${s.random.hits} for random</title>
<style>body{font-family:system-ui,sans-serif;max-width:980px;margin:2rem auto;padding:0 1rem;color:#222}table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}th{background:#f4f4f4}figure{margin:1.5rem 0}.mols{display:flex;flex-wrap:wrap;gap:.5rem}.mol{margin:0;border:1px solid #ddd;padding:.25rem;width:210px;font-size:.8rem}code{word-break:break-all}</style>
</head><body>
<h1>Closed-loop molecular discovery</h1>
<p id="headline">Surrogate: <strong id="surrogate-hits">${s.surrogate.hits}</strong> hits in ${s.surrogate.calls} oracle calls;
random search: <strong id="random-hits">${s.random.hits}</strong> hits in ${s.random.calls} calls
${s.hitRatio != null ? `(<strong>${s.hitRatio.toFixed(1)}x</strong>)` : '(random found none)'}.</p>
<p id="threshold">Hit: HOMO-LUMO gap at or below <strong>${fixed(t?.gap)} eV</strong>, the ${t?.hitPercent ?? '–'} % quantile of a random sample of
${t?.sampleMeasured ?? 0} measured molecules; base rate in that sample ${fixed(t?.basePercent, 1)} %.</p>
<p>Oracle: GFN2-xTB after geometry optimisation; ${s.oracleCalls} calls in this run, ${s.fromCache} results known from earlier runs, ${s.failed} failed
(<span id="failed-both-attempts">${failedBothAttempts(campaign)}</span> of them on both attempts).
Rounds: ${s.rounds}; the loop ended: ${escapeHtml(s.stopped ?? 'running')}.
Pool: ${escapeHtml(pool.source)}, ${pool.size} molecules${skipped ? ` (skipped: ${skipped})` : ''}.</p>
<figure>${hits}</figure>
<figure>${histogram}</figure>
<h2>Rounds</h2>
<table id="rounds"><tr><th>round</th><th>decision</th><th>sample</th><th>exploit</th><th>explore</th><th>random</th><th>measured</th><th>failed</th><th>from cache</th><th>surrogate hits</th><th>random hits</th><th>MAE</th><th>Spearman</th><th>MAE random arm</th></tr>
${roundRows}</table>
<figure>${calibration}</figure>
<h2>Top molecules</h2>
<div class="mols" id="top">${topCells.join('\n')}</div>
<h2>Failed measurements</h2>
${failures ? `<table id="failures"><tr><th>reason</th><th>molecules</th></tr>${failures}</table>` : '<p>None.</p>'}
<h2>Config</h2>
<pre>${escapeHtml(JSON.stringify(config, null, 2))}</pre>
</body></html>
`;
}

export function discoveryMetrics(campaign: Campaign): Record<string, number> {
  const s = campaignSummary(campaign);
  const last = [...campaign.rounds].reverse().find((r) => r.calibration?.mae != null);
  return {
    surrogateHits: s.surrogate.hits,
    randomHits: s.random.hits,
    surrogateCalls: s.surrogate.calls,
    randomCalls: s.random.calls,
    oracleCalls: s.oracleCalls,
    failed: s.failed,
    failedBothAttempts: failedBothAttempts(campaign),
    ...(s.threshold != null ? { thresholdEv: s.threshold } : {}),
    ...(s.basePercent != null ? { basePercent: s.basePercent } : {}),
    ...(last?.calibration?.mae != null ? { lastMaeEv: last.calibration.mae } : {}),
    ...(last?.calibration?.spearman != null ? { lastSpearman: last.calibration.spearman } : {}),
  };
}

/** Where the report step writes: `data/<pipeline>/report/` in the bucket. */
export interface ReportContext {
  readonly bucket: string;
  readonly pipeline: string;
}

/**
 * The report step: the HTML report and measurements.csv under a prefix named by the campaign
 * and the config, listed with the campaign document for the publish step.
 */
export async function reportStep(ctx: ReportContext, input: { campaignUri: string; config: Record<string, unknown> }) {
  const { campaignUri, config } = input;
  const campaign = await readCampaign(campaignUri);
  const pool = await readPool(campaign.pool.uri);
  const prefix = `data/${ctx.pipeline}/report/${sha256Hex(canonicalJson({ campaignUri, config })).slice(0, 32)}/`;
  const written = [
    await writeFile(ctx.bucket, `${prefix}measurements.csv`, measurementsCsv(campaign), 'text/csv'),
    await writeFile(
      ctx.bucket,
      `${prefix}report.html`,
      await discoveryReportHtml(campaign, { source: pool.source, size: pool.smiles.length, skipped: pool.skipped }, config),
      'text/html; charset=utf-8',
    ),
  ];
  const files = [{ name: 'campaign.json', uri: campaignUri }, ...written.map((w) => ({ name: w.Key.slice(prefix.length), uri: w.uri }))];
  return {
    files,
    metrics: discoveryMetrics(campaign),
    reportUri: written.at(-1)!.uri,
    s3Outputs: [parseS3Uri(campaignUri), ...written.map(({ Bucket, Key }) => ({ Bucket, Key }))],
  };
}
