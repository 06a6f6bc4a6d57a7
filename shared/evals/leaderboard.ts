/**
 * A training run's leaderboard: accuracy per benchmark against step (with standard errors and
 * the always-guess-the-commonest-answer baseline), the table, and the guard's decision with a
 * reason per checkpoint. HTML with an inline SVG chart; JSON with the same numbers.
 *
 * writeLeaderboard is the pipeline's last step: the leaderboard over every result of the run
 * published so far (this checkpoint's and the others'), current benchmark versions only, written
 * as leaderboard.html and leaderboard.json for the publish step.
 */
import type { TopLevelSpec } from 'vega-lite';
import { z } from 'zod';
import { listArtifactVersions, type IndexLocation } from '../artifacts.ts';
import { escapeHtml, svgOf } from '../charts.ts';
import { writeFile } from '../documents.ts';
import { readOutcomes } from '../fan-out.ts';
import { canonicalJson, sha256Hex } from '../json.ts';
import { parseOrThrow } from '../schema.ts';
import { listBenchmarks } from './benchmarks.ts';
import { currentResults, decideRelease, EvalMetrics, type GuardDecision } from './guard.ts';

export interface EvalFailure {
  readonly step: number;
  readonly benchmark: string;
  readonly error: string;
  readonly cause: string;
}

export interface Leaderboard {
  readonly run: string;
  readonly results: EvalMetrics[];
  readonly decision: GuardDecision;
  readonly failures: EvalFailure[];
  readonly versions: Record<string, number>;
}

function chart(board: Leaderboard): TopLevelSpec {
  const values = board.results.map((r) => ({
    step: r.step,
    benchmark: `${r.benchmark} v${r.benchmarkVersion}`,
    accuracy: r.accuracy,
    low: Math.max(0, r.accuracy - 1.96 * r.stderr),
    high: Math.min(1, r.accuracy + 1.96 * r.stderr),
  }));
  return {
    title: `Accuracy per benchmark against step (${board.run}; bars: 95 % interval)`,
    width: 560,
    height: 280,
    data: { values },
    encoding: {
      x: { field: 'step', type: 'quantitative', title: 'training step' },
      color: { field: 'benchmark', type: 'nominal' },
    },
    layer: [
      { mark: { type: 'line', point: true }, encoding: { y: { field: 'accuracy', type: 'quantitative', scale: { domain: [0, 1] }, title: 'accuracy' } } },
      { mark: 'rule', encoding: { y: { field: 'low', type: 'quantitative' }, y2: { field: 'high' } } },
    ],
  };
}

const pct = (x: number) => `${(100 * x).toFixed(1)}`;

export async function leaderboardHtml(board: Leaderboard): Promise<string> {
  const svg = board.results.length ? await svgOf(chart(board)) : '<p>No results yet.</p>';
  const benchmarks = [...new Set(board.results.map((r) => r.benchmark))].sort();
  const steps = [...new Set(board.results.map((r) => r.step))].sort((a, b) => a - b);
  const cell = (step: number, name: string) => {
    const r = board.results.find((x) => x.step === step && x.benchmark === name);
    return r ? `<td title="n=${r.n}, baseline ${pct(r.baseline)}">${pct(r.accuracy)} &plusmn; ${pct(r.stderr)}</td>` : '<td>-</td>';
  };
  const verdict = new Map(board.decision.verdicts.map((v) => [v.step, v]));
  const rows = steps
    .map((step) => {
      const v = verdict.get(step);
      const mark = board.decision.candidate === step ? ' class="candidate"' : '';
      return `<tr${mark}><td>${step}</td>${benchmarks.map((b) => cell(step, b)).join('')}<td>${escapeHtml(v?.reason ?? '')}</td></tr>`;
    })
    .join('\n');
  const baselines = benchmarks
    .map((b) => {
      const rs = board.results.filter((r) => r.benchmark === b);
      return `${escapeHtml(b)} v${board.versions[b] ?? '?'}: ${pct(Math.max(...rs.map((r) => r.baseline)))} %`;
    })
    .join('; ');
  const failures = board.failures.length
    ? `<h2>Failed evaluations</h2><ul>${board.failures.map((f) => `<li>step ${f.step}, ${escapeHtml(f.benchmark)}: ${escapeHtml(f.error)}: ${escapeHtml(f.cause.slice(0, 300))}</li>`).join('')}</ul>`
    : '';
  const s = board.decision.settings;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Leaderboard: ${escapeHtml(board.run)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:1000px;margin:2rem auto;padding:0 1rem;color:#222}table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}td:last-child{text-align:left}th{background:#f4f4f4}tr.candidate{background:#e8f6e8;font-weight:600}</style>
</head><body>
<h1>Leaderboard: ${escapeHtml(board.run)}</h1>
<p id="decision">${escapeHtml(board.decision.summary)}.</p>
<p>Guard: the best checkpoint on <strong>${escapeHtml(s.target)}</strong> whose <strong>${escapeHtml(s.guard)}</strong> score stays within ${s.marginPoints} points of the base model (step ${s.baseStep}${board.decision.floorPoints !== null ? `: ${board.decision.baseGuardPoints!.toFixed(2)}, floor ${board.decision.floorPoints.toFixed(2)}` : ''}); ties go to the earlier step.</p>
<figure id="accuracy-chart">${svg}</figure>
<table id="leaderboard"><tr><th>step</th>${benchmarks.map((b) => `<th>${escapeHtml(b)} v${board.versions[b] ?? '?'} (%)</th>`).join('')}<th>guard</th></tr>
${rows}
</table>
<p id="baselines">Always answering the commonest answer of the sample scores: ${baselines || 'n/a'}.</p>
${failures}
</body></html>
`;
}

// ---------------------------------------------------------------------------------------
// The leaderboard step (the pipeline's last Lambda)

export const LeaderboardRequest = z
  .object({
    run: z.string(),
    step: z.int().min(0),
    baseStep: z.int().min(0).nullable(),
    evalArtifact: z.string(),
    guard: z.object({ target: z.string().nullable(), guard: z.string().nullable(), marginPoints: z.number() }),
    /** The evaluate fan-out's records (shared/fan-out.ts reads them back). */
    items: z.array(z.unknown()),
  })
  .strict();
export type LeaderboardRequest = z.infer<typeof LeaderboardRequest>;

/** A failed fan-out item carries the iteration's input: the benchmark it was scoring. */
const FailedItem = z.object({ benchmark: z.object({ name: z.string() }) });

/** Where the leaderboard step reads and writes: the index, and `data/<pipeline>/leaderboard/`. */
export interface LeaderboardContext extends IndexLocation {
  readonly pipeline: string;
}

/** The run's leaderboard and the guard's decision, written as JSON and HTML. */
export async function writeLeaderboard(ctx: LeaderboardContext, request: LeaderboardRequest) {
  const where = { table: ctx.table, bucket: ctx.bucket };
  const versions = new Map((await listBenchmarks(where)).map((b) => [b.name, b.version]));
  const published = await listArtifactVersions(where, request.evalArtifact);
  const all = published
    .reverse() // oldest first: the latest of a pair wins
    .map((a) => parseOrThrow(EvalMetrics, a.metrics, `${request.evalArtifact}@${a.version}.metrics`))
    .filter((m) => m.run === request.run);
  const results = currentResults(all, versions);
  const failures: EvalFailure[] = (await readOutcomes(request.items, 'items')).flatMap((i, n) =>
    i.ok ? [] : [{ step: request.step, benchmark: parseOrThrow(FailedItem, i.item, `items.${n}.item`).benchmark.name, error: i.error, cause: i.cause }],
  );
  const baseStep = request.baseStep ?? Math.min(...results.map((r) => r.step), request.step);
  const { target, guard, marginPoints } = request.guard;
  const decision: GuardDecision =
    target && guard
      ? decideRelease(results, { target, guard, marginPoints, baseStep })
      : {
          settings: { target: target ?? '-', guard: guard ?? '-', marginPoints, baseStep },
          baseGuardPoints: null,
          floorPoints: null,
          candidate: null,
          verdicts: [],
          summary: 'no guard configured (frontier benchmarks guard --target NAME --guard NAME)',
        };
  const board = { run: request.run, results, decision, failures, versions: Object.fromEntries(versions) };
  const prefix = `data/${ctx.pipeline}/leaderboard/${sha256Hex(canonicalJson(board)).slice(0, 32)}/`;
  const html = await leaderboardHtml(board);
  const files = [
    { name: 'leaderboard.json', ...(await writeFile(ctx.bucket, `${prefix}leaderboard.json`, JSON.stringify(board, null, 2), 'application/json')) },
    { name: 'leaderboard.html', ...(await writeFile(ctx.bucket, `${prefix}leaderboard.html`, html, 'text/html; charset=utf-8')) },
  ];
  return {
    files: files.map(({ name, uri }) => ({ name, uri })),
    reportUri: files[1]!.uri,
    decision: { candidate: decision.candidate, summary: decision.summary },
    metrics: {
      run: request.run,
      candidate: decision.candidate ?? -1,
      checkpoints: new Set(results.map((r) => r.step)).size,
      results: results.length,
      failures: failures.length,
    },
    s3Outputs: files.map(({ Bucket, Key }) => ({ Bucket, Key })),
  };
}
