/**
 * The reward search's report and the metrics indexed with the winning reward: the winner and its
 * source, the final comparison (the winner against the environment's reward and the person-written
 * shaped reward, on the same training seeds and the same fresh grading seeds), how noisy one
 * candidate is across seeds (stated before the ranking, so the ranking is read with it), the
 * ranking, per-generation scores, every seed's result, the sandbox's verdicts on hostile or broken
 * candidates, and every candidate's source and rationale.
 *
 * Everything a candidate supplied (name, rationale, source, and the failures and verdicts its code
 * provoked) is untrusted text and is escaped wherever it appears. Charts are Vega-Lite rendered to
 * inline SVG, the page carries no script, and its Content-Security-Policy forbids scripts and
 * network loads, so a missed escape still could not run anything or call home.
 */
import type { TopLevelSpec } from 'vega-lite';
import { z } from 'zod';
import { escapeHtml, svgOf } from '#shared/charts.ts';
import { sha256Hex } from '#shared/json.ts';
import {
  CurvePoint,
  MAX_CURVE_POINTS,
  RANK_TIE,
  rank,
  seedNoise,
  summarize,
  SeedResult,
  type CandidateResult,
  type Ranked,
  type SeedNoise,
} from '#shared/rewards/search.ts';

const sha256String = z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits');

/** Where a candidate came from: proposed by the model, read from a reward file, or one of the two baselines. */
export const RewardOrigin = z.enum(['claude', 'file', 'baseline']);
export type RewardOrigin = z.infer<typeof RewardOrigin>;

export const SearchCandidate = z
  .object({
    name: z.string().min(1).max(200),
    rationale: z.string().max(10_000),
    source: z.string().min(1),
    /** sha256 of the source's UTF-8 bytes; checked, so the source shown is the source that was trained. */
    sourceSha256: sha256String,
    origin: RewardOrigin,
    seeds: z.array(SeedResult).min(1),
    /** The sandbox's verdict when the candidate was hostile or broken (memory, wall time, network, processes...). */
    verdict: z.string().optional(),
    /** Training seconds per seed, in the order of `seeds` (a seed's own `trainSeconds` is used when this is absent). */
    trainSeconds: z.array(z.number().min(0)).optional(),
    /** A few points of each seed's training curve. */
    curves: z.array(z.object({ seed: z.int().min(0), points: z.array(CurvePoint).max(MAX_CURVE_POINTS) }).strict()).optional(),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (sha256Hex(c.source) !== c.sourceSha256) ctx.addIssue({ code: 'custom', path: ['sourceSha256'], message: 'is not the sha256 of the source' });
    if (c.trainSeconds && c.trainSeconds.length !== c.seeds.length) {
      ctx.addIssue({ code: 'custom', path: ['trainSeconds'], message: `must have one entry per seed (${c.seeds.length}), got ${c.trainSeconds.length}` });
    }
  });
export type SearchCandidate = z.infer<typeof SearchCandidate>;

export const SearchGeneration = z
  .object({
    generation: z.int().min(0),
    candidates: z.array(SearchCandidate).min(1),
  })
  .strict()
  .superRefine((g, ctx) => {
    const seen = new Set<string>();
    g.candidates.forEach((c, i) => {
      if (seen.has(c.name))
        ctx.addIssue({ code: 'custom', path: ['candidates', i, 'name'], message: `is used by an earlier candidate of generation ${g.generation}` });
      seen.add(c.name);
    });
  });
export type SearchGeneration = z.infer<typeof SearchGeneration>;

export const FinalRole = z.enum(['winner', 'env-reward', 'shaped-reward']);
export type FinalRole = z.infer<typeof FinalRole>;

export const FinalEntry = z
  .object({
    role: FinalRole,
    name: z.string().min(1).max(200),
    sourceSha256: sha256String,
    /** One result per training seed; every policy graded on the final's grading seeds. */
    seeds: z.array(SeedResult).min(1),
  })
  .strict();
export type FinalEntry = z.infer<typeof FinalEntry>;

/**
 * The final comparison. A best-of-many winner is only comparable with the baselines when all of
 * them train on the same seeds and are graded on the same fresh seeds, so the schema refuses a
 * final whose entries differ in training seeds or whose grading seeds include a training seed.
 */
export const FinalComparison = z
  .object({
    gradeSeeds: z.array(z.int().min(0)).min(1),
    episodesPerSeed: z.int().min(1),
    entries: z.array(FinalEntry).min(1).max(3),
  })
  .strict()
  .superRefine((f, ctx) => {
    const roles = new Set<string>();
    f.entries.forEach((e, i) => {
      if (roles.has(e.role)) ctx.addIssue({ code: 'custom', path: ['entries', i, 'role'], message: `"${e.role}" appears twice` });
      roles.add(e.role);
    });
    if (!roles.has('winner')) ctx.addIssue({ code: 'custom', path: ['entries'], message: 'must include the winner' });
    const seedsOf = (e: FinalEntry) => e.seeds.map((s) => s.seed).join(',');
    const first = f.entries[0]!;
    f.entries.forEach((e, i) => {
      if (seedsOf(e) !== seedsOf(first)) {
        ctx.addIssue({
          code: 'custom',
          path: ['entries', i, 'seeds'],
          message: `must use the same training seeds as ${first.role} (${seedsOf(first)}), got ${seedsOf(e)}`,
        });
      }
    });
    const training = new Set(f.entries.flatMap((e) => e.seeds.map((s) => s.seed)));
    f.gradeSeeds.forEach((s, i) => {
      if (training.has(s)) ctx.addIssue({ code: 'custom', path: ['gradeSeeds', i], message: `seed ${s} is also a training seed; grading seeds must be fresh` });
    });
  });
export type FinalComparison = z.infer<typeof FinalComparison>;

/** Model tokens spent proposing one generation (the same names as the proposal step's usage). */
export const GenerationUsage = z
  .object({
    generation: z.int().min(0),
    inputTokens: z.int().min(0),
    outputTokens: z.int().min(0),
    cacheReadTokens: z.int().min(0),
    cacheWriteTokens: z.int().min(0),
  })
  .strict();
export type GenerationUsage = z.infer<typeof GenerationUsage>;

/** The whole search as one document: what the report and the artifact's metrics are made from. */
export const RewardSearchDoc = z
  .object({
    task: z.string().min(1),
    generations: z.array(SearchGeneration).min(1),
    /** Absent while the search runs, or when the final comparison did not run. */
    final: FinalComparison.optional(),
    usage: z.array(GenerationUsage).optional(),
  })
  .strict()
  .superRefine((doc, ctx) => {
    const seen = new Set<number>();
    doc.generations.forEach((g, i) => {
      if (seen.has(g.generation)) ctx.addIssue({ code: 'custom', path: ['generations', i, 'generation'], message: `generation ${g.generation} appears twice` });
      seen.add(g.generation);
    });
    const winner = doc.final?.entries.find((e) => e.role === 'winner');
    if (winner && !doc.generations.some((g) => g.candidates.some((c) => c.sourceSha256 === winner.sourceSha256))) {
      const i = doc.final!.entries.indexOf(winner);
      ctx.addIssue({ code: 'custom', path: ['final', 'entries', i, 'sourceSha256'], message: 'is not the source of any candidate of the search' });
    }
  });
export type RewardSearchDoc = z.infer<typeof RewardSearchDoc>;

interface Located {
  readonly generation: number;
  readonly candidate: SearchCandidate;
}

function allCandidates(doc: RewardSearchDoc): Located[] {
  return doc.generations.flatMap((g) => g.candidates.map((candidate) => ({ generation: g.generation, candidate })));
}

function asResult(l: Located): CandidateResult {
  return { generation: l.generation, name: l.candidate.name, sourceSha256: l.candidate.sourceSha256, seeds: l.candidate.seeds };
}

function entryRanked(e: FinalEntry): Ranked {
  return summarize({ generation: 0, name: e.name, sourceSha256: e.sourceSha256, seeds: e.seeds });
}

const keyOf = (generation: number, name: string) => `${generation}\u0000${name}`;

export interface RewardSearchSummary {
  /** Every candidate of every generation, best first (mean success over training seeds, failed seeds as 0). */
  readonly ranking: Ranked[];
  /** The final's winner when the final ran, else the best proposed (non-baseline) candidate of the search. */
  readonly winner: { readonly located: Located; readonly search: Ranked; readonly final: Ranked | null };
  readonly final: { readonly role: FinalRole; readonly entry: FinalEntry; readonly ranked: Ranked }[];
  readonly noise: SeedNoise;
}

export function rewardSearchSummary(doc: RewardSearchDoc): RewardSearchSummary {
  const located = allCandidates(doc);
  const byKey = new Map(located.map((l) => [keyOf(l.generation, l.candidate.name), l]));
  const ranking = rank(located.map(asResult));
  const final = (doc.final?.entries ?? []).map((entry) => ({ role: entry.role, entry, ranked: entryRanked(entry) }));
  const finalWinner = final.find((f) => f.role === 'winner');
  let winnerRanked: Ranked;
  if (finalWinner) {
    // The best-ranked candidate with the winner's source (the same source can be proposed twice).
    winnerRanked = ranking.find((r) => r.sourceSha256 === finalWinner.entry.sourceSha256)!;
  } else {
    winnerRanked = ranking.find((r) => byKey.get(keyOf(r.generation, r.name))!.candidate.origin !== 'baseline') ?? ranking[0]!;
  }
  return {
    ranking,
    winner: { located: byKey.get(keyOf(winnerRanked.generation, winnerRanked.name))!, search: winnerRanked, final: finalWinner?.ranked ?? null },
    final,
    noise: seedNoise(located.map(asResult)),
  };
}

const ROLE_LABEL: Record<FinalRole, string> = { winner: 'winner', 'env-reward': "environment's reward", 'shaped-reward': 'person-written shaped reward' };

const pct = (x: number | null | undefined) => (x == null ? 'n/a' : `${(100 * x).toFixed(1)} %`);
const pp = (x: number) => `${(100 * x).toFixed(1)} pp`;
const round = (x: number, digits = 4) => Number(x.toFixed(digits));

function seedCell(s: SeedResult): string {
  return s.success === null
    ? `seed ${s.seed}: <span class="failed">failed (${escapeHtml(s.failure ?? 'no reason recorded')})</span>`
    : `seed ${s.seed}: ${pct(s.success)}`;
}

function trainSecondsOf(c: SearchCandidate): (number | undefined)[] {
  return c.seeds.map((s, i) => c.trainSeconds?.[i] ?? s.trainSeconds);
}

function meanTrainSeconds(doc: RewardSearchDoc): number | null {
  const all = allCandidates(doc)
    .flatMap((l) => trainSecondsOf(l.candidate))
    .filter((x): x is number => x !== undefined);
  return all.length ? all.reduce((a, b) => a + b, 0) / all.length : null;
}

/**
 * The seed-noise sentence, shown before the ranking: how much one candidate's success varies
 * across training seeds, and how far apart two candidates must be before their order means
 * anything. When no candidate has two graded seeds the noise is unknown and the sentence says
 * that no difference can be judged; it never reads an unknown noise as none.
 */
export function seedNoiseSentence(summary: Pick<RewardSearchSummary, 'noise' | 'ranking'>): string {
  const { pooledStd, candidates, gradedSeeds, seedsPerCandidate, distinguishableDifference } = summary.noise;
  if (pooledStd === null || seedsPerCandidate === null || distinguishableDifference === null) {
    return (
      'No candidate has two or more graded seeds (a failed seed is not graded), so how much one candidate varies across seeds is unknown ' +
      'and whether a difference in mean success means anything cannot be judged: read the ranking as one draw per candidate, not as an order.'
    );
  }
  const top = summary.ranking[0]!;
  const within = (r: Ranked) => top.mean - r.mean < distinguishableDifference || top.mean - r.mean <= RANK_TIE;
  const close = summary.ranking.filter((r) => r !== top && within(r)).length;
  const measured = `the ${candidates} candidate${candidates === 1 ? '' : 's'} with two or more graded seeds, ${gradedSeeds} seeds in all; failed seeds left out`;
  const spread =
    pooledStd > 0
      ? `One candidate's success varies by ${pp(pooledStd)} across training seeds (standard deviation within a candidate, pooled over ${measured}); ` +
        `differences in mean success below ${pp(distinguishableDifference)} are not distinguishable with ${seedsPerCandidate} seeds per candidate. `
      : `No candidate's success varied across its training seeds (${measured}), so the measured seed noise is 0 and so is the margin ` +
        'below which differences in mean success are not distinguishable; that rests on these seeds alone and does not show that candidates never vary. ';
  return (
    spread +
    (close
      ? `${close} other candidate${close === 1 ? ' is' : 's are'} within that margin of the top one, so the order among them is not meaningful.`
      : 'No other candidate is within that margin of the top one.')
  );
}

function errorBarLayers(
  values: object[],
  seedValues: object[],
  x: { field: string; title: string; sort: string[] },
  color: { field: string; type: 'nominal' | 'ordinal'; title: string },
) {
  const xEnc = { field: x.field, type: 'nominal' as const, sort: x.sort, title: x.title, axis: { labelAngle: -40, labelLimit: 180 } };
  const y = { type: 'quantitative' as const, scale: { domain: [0, 1] }, title: 'success rate on fresh seeds' };
  return [
    {
      data: { values },
      mark: { type: 'rule' as const },
      encoding: { x: xEnc, y: { field: 'low', ...y }, y2: { field: 'high' }, color: { field: color.field, type: color.type, title: color.title } },
    },
    {
      data: { values },
      mark: { type: 'point' as const, filled: true, size: 70 },
      encoding: { x: xEnc, y: { field: 'mean', ...y }, color: { field: color.field, type: color.type, title: color.title } },
    },
    {
      data: { values: seedValues },
      mark: { type: 'tick' as const, color: '#777', opacity: 0.7, size: 10 },
      encoding: { x: xEnc, y: { field: 'success', ...y } },
    },
  ];
}

const clamp01 = (x: number) => Math.min(1, Math.max(0, x));

/** Mean success per candidate per generation, bars ±1 standard deviation across seeds, ticks the seeds. */
function generationChart(doc: RewardSearchDoc): TopLevelSpec {
  const located = allCandidates(doc);
  const label = (l: Located) => `g${l.generation} ${l.candidate.name}`;
  const values = located.map((l) => {
    const r = summarize(asResult(l));
    return { candidate: label(l), generation: String(l.generation), mean: r.mean, low: clamp01(r.mean - r.std), high: clamp01(r.mean + r.std) };
  });
  const seedValues = located.flatMap((l) => l.candidate.seeds.map((s) => ({ candidate: label(l), success: s.success ?? 0 })));
  return {
    title: 'Mean success per candidate (bar: ±1 std across seeds; ticks: seeds, a failed seed as 0)',
    width: Math.max(320, Math.min(900, 34 * located.length)),
    height: 240,
    layer: errorBarLayers(
      values,
      seedValues,
      { field: 'candidate', title: 'candidate (by generation)', sort: located.map(label) },
      { field: 'generation', type: 'ordinal', title: 'generation' },
    ),
  };
}

function finalChart(summary: RewardSearchSummary): TopLevelSpec {
  const label = (f: RewardSearchSummary['final'][number]) => `${f.entry.name} (${f.role})`;
  const values = summary.final.map((f) => ({
    entry: label(f),
    role: f.role,
    mean: f.ranked.mean,
    low: clamp01(f.ranked.mean - f.ranked.std),
    high: clamp01(f.ranked.mean + f.ranked.std),
  }));
  const seedValues = summary.final.flatMap((f) => f.entry.seeds.map((s) => ({ entry: label(f), success: s.success ?? 0 })));
  return {
    title: 'Final comparison on the same fresh seeds (bar: ±1 std across training seeds)',
    width: 360,
    height: 220,
    layer: errorBarLayers(
      values,
      seedValues,
      { field: 'entry', title: 'reward', sort: summary.final.map(label) },
      { field: 'role', type: 'nominal', title: 'role' },
    ),
  };
}

/** Whether the final's training seeds are all new to the search (its winner's luck does not carry over). */
function freshFinalTraining(doc: RewardSearchDoc): boolean {
  const searched = new Set(doc.generations.flatMap((g) => g.candidates.flatMap((c) => c.seeds.map((s) => s.seed))));
  return !!doc.final && doc.final.entries.every((e) => e.seeds.every((s) => !searched.has(s.seed)));
}

function curvesHtml(c: SearchCandidate): string {
  if (!c.curves?.length) return '';
  const rows = c.curves
    .map(
      (curve) =>
        `<tr><td>${curve.seed}</td><td style="text-align:left">${curve.points.map((p) => `step ${p.step}: return ${p.envReturn.toFixed(1)}, success ${pct(p.success)}`).join('; ')}</td></tr>`,
    )
    .join('');
  return `<table class="curves"><tr><th>seed</th><th>training curve (environment's return, success)</th></tr>${rows}</table>`;
}

export async function rewardReportHtml(doc: RewardSearchDoc, config: unknown): Promise<string> {
  const summary = rewardSearchSummary(doc);
  const located = allCandidates(doc);
  const byKey = new Map(located.map((l) => [keyOf(l.generation, l.candidate.name), l]));
  const [generationSvg, finalSvg] = await Promise.all([svgOf(generationChart(doc)), summary.final.length ? svgOf(finalChart(summary)) : Promise.resolve('')]);
  const w = summary.winner;
  const winnerSource = w.located.candidate;
  const role = (r: FinalRole) => summary.final.find((f) => f.role === r);

  const headline = doc.final
    ? `Winner <strong>${escapeHtml(winnerSource.name)}</strong> (generation ${w.located.generation}): <strong id="winner-final">${pct(w.final!.mean)}</strong> success on fresh seeds` +
      ` (std ${pp(w.final!.std)}); the environment's reward <strong id="env-final">${pct(role('env-reward')?.ranked.mean)}</strong>, the person-written shaped reward <strong id="shaped-final">${pct(role('shaped-reward')?.ranked.mean)}</strong>.` +
      ` In the search it scored ${pct(w.search.mean)}, the best of ${summary.ranking.length} candidates, which flatters it: the final comparison is the figure to quote.`
    : `Best candidate of the search: <strong>${escapeHtml(winnerSource.name)}</strong> (generation ${w.located.generation}), <strong id="winner-search">${pct(w.search.mean)}</strong> mean success over ${w.search.seeds} seeds` +
      ` (std ${pp(w.search.std)}). The final comparison against the baselines has not run, and a best-of-${summary.ranking.length} score flatters the winner.`;

  const finalSection = doc.final
    ? `<h2>Final comparison</h2>
<p id="final-setup">Each reward retrained from scratch on the same ${doc.final.entries[0]!.seeds.length} training seeds (${doc.final.entries[0]!.seeds.map((s) => s.seed).join(', ')}), ${freshFinalTraining(doc) ? 'none of them a seed the search trained on' : "<strong>some of them seeds the search trained on: the winner's lucky runs count again</strong>"};
every policy graded by the environment's success rule on the same ${doc.final.gradeSeeds.length} fresh seeds (${doc.final.gradeSeeds.join(', ')}), ${doc.final.episodesPerSeed} episodes each. A failed seed counts as 0.</p>
<figure id="final-chart">${finalSvg}</figure>
<table id="final"><tr><th>role</th><th>reward</th><th>mean success</th><th>std</th><th>std. error</th><th>failed seeds</th><th>per seed</th></tr>
${summary.final
  .map(
    (f) =>
      `<tr data-role="${f.role}"><td>${ROLE_LABEL[f.role]}</td><td>${escapeHtml(f.entry.name)}</td><td>${pct(f.ranked.mean)}</td><td>${pp(f.ranked.std)}</td><td>${pp(f.ranked.stderr)}</td><td>${f.ranked.failedSeeds}</td>` +
      `<td style="text-align:left">${f.entry.seeds.map(seedCell).join('<br>')}</td></tr>`,
  )
  .join('\n')}
</table>`
    : '<h2>Final comparison</h2>\n<p id="final-missing">Not run: the baselines have not been re-evaluated on fresh seeds beside the winner.</p>';

  const rankingRows = summary.ranking
    .map((r, i) => {
      const c = byKey.get(keyOf(r.generation, r.name))!.candidate;
      return `<tr><td>${i + 1}</td><td>${r.generation}</td><td>${escapeHtml(r.name)}</td><td>${c.origin}</td><td>${pct(r.mean)}</td><td>${pp(r.std)}</td><td>${pp(r.stderr)}</td><td>${r.failedSeeds} of ${r.seeds}</td></tr>`;
    })
    .join('\n');

  const usage = new Map((doc.usage ?? []).map((u) => [u.generation, u]));
  const generationRows = doc.generations
    .map((g) => {
      const ranked = rank(g.candidates.map((candidate) => asResult({ generation: g.generation, candidate })));
      const u = usage.get(g.generation);
      return ranked
        .map(
          (r, i) =>
            `<tr>${i === 0 ? `<td rowspan="${ranked.length}">${g.generation}</td>` : ''}<td>${escapeHtml(r.name)}</td><td>${pct(r.mean)}</td><td>${pp(r.std)}</td><td>${r.failedSeeds} of ${r.seeds}</td>` +
            `${i === 0 ? `<td rowspan="${ranked.length}">${u ? `${u.inputTokens} in, ${u.outputTokens} out, ${u.cacheReadTokens} cache read, ${u.cacheWriteTokens} cache write` : ''}</td>` : ''}</tr>`,
        )
        .join('\n');
    })
    .join('\n');

  const seedRows = located
    .flatMap((l) => {
      const seconds = trainSecondsOf(l.candidate);
      return l.candidate.seeds.map(
        (s, i) =>
          `<tr${s.success === null ? ' class="failed"' : ''}><td>${l.generation}</td><td>${escapeHtml(l.candidate.name)}</td><td>${s.seed}</td><td>${s.success === null ? 'failed' : pct(s.success)}</td><td>${s.episodes}</td>` +
          `<td>${seconds[i] === undefined ? '' : `${seconds[i]!.toFixed(0)} s`}</td><td style="text-align:left">${escapeHtml(s.failure ?? '')}</td></tr>`,
      );
    })
    .join('\n');

  const troubled = located.filter((l) => l.candidate.verdict !== undefined || l.candidate.seeds.some((s) => s.success === null));
  const verdictRows = troubled
    .map(
      (l) =>
        `<tr><td>${l.generation}</td><td>${escapeHtml(l.candidate.name)}</td><td style="text-align:left">${escapeHtml(l.candidate.verdict ?? '')}</td>` +
        `<td style="text-align:left">${l.candidate.seeds.map(seedCell).join('<br>')}</td></tr>`,
    )
    .join('\n');

  const candidateDetails = located
    .map((l) => {
      const c = l.candidate;
      const r = summarize(asResult(l));
      return `<details class="candidate"><summary>generation ${l.generation}: ${escapeHtml(c.name)} (${c.origin}), ${pct(r.mean)}</summary>
<p class="rationale">${escapeHtml(c.rationale) || '<em>no rationale given</em>'}</p>
<p class="sha">sha256 <code>${c.sourceSha256}</code></p>
<pre>${escapeHtml(c.source)}</pre>
${curvesHtml(c)}
</details>`;
    })
    .join('\n');

  const trainSeconds = meanTrainSeconds(doc);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>Reward search for ${escapeHtml(doc.task)}: ${escapeHtml(winnerSource.name)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:2rem auto;padding:0 1rem;color:#222}table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:right;vertical-align:top}th{background:#f4f4f4}figure{margin:1.5rem 0;overflow-x:auto}pre{background:#f7f7f7;padding:.75rem;overflow-x:auto;white-space:pre}.failed{color:#b42318}details{margin:.5rem 0}summary{cursor:pointer}</style>
</head><body>
<h1>Reward search: ${escapeHtml(doc.task)}</h1>
<p id="headline">${headline}</p>
<p>${doc.generations.length} generation${doc.generations.length === 1 ? '' : 's'}, ${located.length} candidates, ${located.reduce((n, l) => n + l.candidate.seeds.length, 0)} trained seeds,
${located.reduce((n, l) => n + l.candidate.seeds.filter((s) => s.success === null).length, 0)} failed${trainSeconds === null ? '' : `; ${trainSeconds.toFixed(0)} s of training per seed on average`}.
Scores come from the trusted grader on fresh seeds, never from what a candidate's code reported.</p>
<h2>Winner</h2>
<p id="winner">${escapeHtml(winnerSource.name)}, generation ${w.located.generation}, ${winnerSource.origin}; sha256 <code>${winnerSource.sourceSha256}</code>.</p>
<p class="rationale">${escapeHtml(winnerSource.rationale)}</p>
<pre id="winner-source">${escapeHtml(winnerSource.source)}</pre>
${finalSection}
<h2>Ranking</h2>
<p id="seed-noise">${escapeHtml(seedNoiseSentence(summary))}</p>
<table id="ranking"><tr><th>rank</th><th>generation</th><th>candidate</th><th>origin</th><th>mean success</th><th>std</th><th>std. error</th><th>failed seeds</th></tr>
${rankingRows}
</table>
<h2>Generations</h2>
<figure id="generation-chart">${generationSvg}</figure>
<table id="generations"><tr><th>generation</th><th>candidate</th><th>mean success</th><th>std</th><th>failed seeds</th><th>proposal tokens</th></tr>
${generationRows}
</table>
<h2>Per-seed results</h2>
<table id="per-seed"><tr><th>generation</th><th>candidate</th><th>seed</th><th>success</th><th>episodes</th><th>training</th><th>failure</th></tr>
${seedRows}
</table>
<h2>Hostile and broken candidates</h2>
${verdictRows ? `<table id="verdicts"><tr><th>generation</th><th>candidate</th><th>sandbox verdict</th><th>per seed</th></tr>\n${verdictRows}\n</table>` : '<p id="verdicts-none">None: every seed of every candidate trained and was graded.</p>'}
<h2>Candidates</h2>
<div id="candidates">
${candidateDetails}
</div>
<h2>Config</h2>
<pre>${escapeHtml(JSON.stringify(config, null, 2) ?? 'null')}</pre>
</body></html>
`;
}

/** Flat metrics indexed with the winning reward's artifact. */
export function rewardMetrics(doc: RewardSearchDoc): Record<string, number | string> {
  const summary = rewardSearchSummary(doc);
  const located = allCandidates(doc);
  const w = summary.winner;
  const role = (r: FinalRole) => summary.final.find((f) => f.role === r)?.ranked;
  const env = role('env-reward');
  const shaped = role('shaped-reward');
  const trainSeconds = meanTrainSeconds(doc);
  const tokens = (doc.usage ?? []).reduce(
    (t, u) => ({
      input: t.input + u.inputTokens,
      output: t.output + u.outputTokens,
      cacheRead: t.cacheRead + u.cacheReadTokens,
      cacheWrite: t.cacheWrite + u.cacheWriteTokens,
    }),
    { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  );
  return {
    task: doc.task,
    winner: w.located.candidate.name,
    winnerGeneration: w.located.generation,
    winnerSha256: w.located.candidate.sourceSha256,
    winnerSearchSuccess: round(w.search.mean),
    winnerSearchStd: round(w.search.std),
    ...(w.final ? { winnerFinalSuccess: round(w.final.mean), winnerFinalStd: round(w.final.std) } : {}),
    ...(env ? { envRewardFinalSuccess: round(env.mean), envRewardFinalStd: round(env.std) } : {}),
    ...(shaped ? { shapedRewardFinalSuccess: round(shaped.mean), shapedRewardFinalStd: round(shaped.std) } : {}),
    ...(doc.final
      ? {
          finalTrainingSeeds: doc.final.entries[0]!.seeds.length,
          finalGradeSeeds: doc.final.gradeSeeds.length,
          finalEpisodesPerSeed: doc.final.episodesPerSeed,
        }
      : {}),
    generations: doc.generations.length,
    candidates: located.length,
    trainedSeeds: located.reduce((n, l) => n + l.candidate.seeds.length, 0),
    failedSeeds: located.reduce((n, l) => n + l.candidate.seeds.filter((s) => s.success === null).length, 0),
    candidatesWithVerdict: located.filter((l) => l.candidate.verdict !== undefined).length,
    // Unknown seed noise (no candidate with two graded seeds) leaves both figures out rather than
    // publishing 0, which would read as "no noise"; seedNoiseCandidates 0 says why they are absent.
    seedNoiseCandidates: summary.noise.candidates,
    ...(summary.noise.pooledStd !== null && summary.noise.distinguishableDifference !== null
      ? { seedNoiseStd: round(summary.noise.pooledStd), distinguishableDifference: round(summary.noise.distinguishableDifference) }
      : {}),
    ...(trainSeconds !== null ? { meanTrainSeconds: round(trainSeconds, 1) } : {}),
    ...(doc.usage?.length
      ? { inputTokens: tokens.input, outputTokens: tokens.output, cacheReadTokens: tokens.cacheRead, cacheWriteTokens: tokens.cacheWrite }
      : {}),
  };
}
