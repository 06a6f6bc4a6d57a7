/**
 * The league's report and the champion's files: the Elo table, the head-to-head matrix, the
 * metrics indexed with the artifact, and an HTML page with three charts (Elo per generation, the
 * head-to-head heat map, the training score against the tactical bot), drawn with Vega-Lite into
 * inline SVG so the page needs nothing from the network.
 */
import type { TopLevelSpec } from 'vega-lite';
import { escapeHtml, svgOf } from '../charts.ts';
import { writeFile } from '../documents.ts';
import { ConfigError } from '../errors.ts';
import { canonicalJson, sha256Hex } from '../json.ts';
import { parseS3Uri } from '../s3uri.ts';
import { CHAMPION_FILE } from './arena.ts';
import { NoRatedSnapshot } from './errors.ts';
import { readLeague } from './league-store.ts';
import { compareLeaguePlayers, headToHead, type HeadToHead, type LeaguePlayer } from './league.ts';
import type { CompactRating, LeagueDoc } from './league-doc.ts';

export interface EloRow extends CompactRating {
  readonly kind: LeaguePlayer['kind'];
  readonly generation: number | null;
}

/** The Elo table: every rated player, highest first, with its kind and generation. */
export function eloTable(doc: LeagueDoc): EloRow[] {
  const players = new Map(doc.players.map((p) => [p.id, p]));
  return doc.ratings.map((r) => ({ ...r, kind: players.get(r.id)!.kind, generation: players.get(r.id)!.generation ?? null }));
}

/** The head-to-head matrix in the league's canonical order (bots, then generations). */
export function leagueHeadToHead(doc: LeagueDoc): HeadToHead {
  const order = [...doc.players].sort(compareLeaguePlayers).map((p) => p.id);
  return headToHead(doc.matches, order);
}

/** The score Elo predicts for a player `gap` points above its opponent (Bradley-Terry, base 10, 400 scale). */
export function expectedScore(gap: number): number {
  return 1 / (1 + 10 ** (-gap / 400));
}

export interface ChampionSummary {
  readonly champion: LeaguePlayer;
  readonly rating: CompactRating;
  readonly tactical: CompactRating | null;
  readonly evaluation: LeagueDoc['generations'][number]['train']['evaluation'];
  /** Champion against the tactical bot: the score its Elo gap predicts, and what their matches gave. */
  readonly vsTactical: { readonly predicted: number | null; readonly observed: number | null; readonly games: number };
}

export function championSummary(doc: LeagueDoc): ChampionSummary {
  if (doc.champion === null) throw new ConfigError('league.champion', null, 'no snapshot is rated yet: every match of every generation failed');
  const champion = doc.players.find((p) => p.id === doc.champion);
  const rating = doc.ratings.find((r) => r.id === doc.champion);
  const record = doc.generations.find((g) => g.player === doc.champion);
  if (!champion || !rating || !record) throw new ConfigError('league.champion', doc.champion, 'is not a rated snapshot of this league');
  const tactical = doc.ratings.find((r) => r.id === 'tactical') ?? null;
  const h2h = leagueHeadToHead(doc);
  const i = h2h.players.indexOf(champion.id);
  const j = h2h.players.indexOf('tactical');
  return {
    champion,
    rating,
    tactical,
    evaluation: record.train.evaluation,
    vsTactical: {
      predicted: tactical ? expectedScore(rating.elo - tactical.elo) : null,
      observed: i >= 0 && j >= 0 ? h2h.score[i]![j]! : null,
      games: i >= 0 && j >= 0 ? h2h.games[i]![j]! : 0,
    },
  };
}

/** Flat metrics indexed with the champion artifact. */
export function championMetrics(doc: LeagueDoc): Record<string, number | string> {
  const s = championSummary(doc);
  const round = (x: number, digits = 4) => Number(x.toFixed(digits));
  return {
    champion: s.champion.id,
    championGeneration: s.champion.generation ?? 0,
    championElo: round(s.rating.elo, 1),
    championEloLow: round(s.rating.low, 1),
    championEloHigh: round(s.rating.high, 1),
    ...(s.tactical ? { tacticalElo: round(s.tactical.elo, 1) } : {}),
    greedyVsTactical: round(s.evaluation.vsTactical.overall),
    greedyVsTacticalFirst: round(s.evaluation.vsTactical.first),
    greedyVsTacticalSecond: round(s.evaluation.vsTactical.second),
    greedyVsRandom: round(s.evaluation.vsRandom.overall),
    generations: doc.generations.length,
    players: doc.players.length,
    matches: doc.matches.length,
    games: doc.matches.reduce((n, m) => n + m.games, 0),
    failedMatches: doc.failures.length,
  };
}

function eloChart(doc: LeagueDoc): TopLevelSpec {
  const final = new Map(doc.ratings.map((r) => [r.id, r]));
  const values = doc.generations.flatMap((g) => {
    const r = final.get(g.player);
    return r ? [{ generation: g.generation, elo: r.elo, low: r.low, high: r.high, player: g.player }] : [];
  });
  const tactical = final.get('tactical');
  return {
    title: 'Elo of each generation (final joint fit, 95% bootstrap interval)',
    width: 520,
    height: 260,
    layer: [
      {
        data: { values },
        mark: { type: 'rule' },
        encoding: {
          x: { field: 'generation', type: 'ordinal' },
          y: { field: 'low', type: 'quantitative', title: 'Elo (random bot = 0)' },
          y2: { field: 'high' },
        },
      },
      {
        data: { values },
        mark: { type: 'line', point: true },
        encoding: { x: { field: 'generation', type: 'ordinal', title: 'generation' }, y: { field: 'elo', type: 'quantitative' } },
      },
      ...(tactical
        ? [
            {
              data: { values: [{ elo: tactical.elo, label: `tactical bot ${tactical.elo.toFixed(0)}` }] },
              mark: { type: 'rule' as const, strokeDash: [6, 4], color: '#c0392b' },
              encoding: { y: { field: 'elo', type: 'quantitative' as const } },
            },
          ]
        : []),
    ],
  };
}

function heatMapChart(h2h: HeadToHead): TopLevelSpec {
  const values = h2h.players
    .flatMap((row, i) => h2h.players.map((col, j) => ({ player: row, opponent: col, score: h2h.score[i]![j], games: h2h.games[i]![j] })))
    .filter((v) => v.score !== null);
  const size = Math.max(160, Math.min(560, 28 * h2h.players.length));
  return {
    title: 'Head to head: score of the row player against the column player',
    width: size,
    height: size,
    data: { values },
    encoding: {
      x: { field: 'opponent', type: 'nominal', sort: h2h.players, title: 'opponent' },
      y: { field: 'player', type: 'nominal', sort: h2h.players, title: 'player' },
    },
    layer: [
      { mark: 'rect', encoding: { color: { field: 'score', type: 'quantitative', scale: { domain: [0, 1], scheme: 'redblue' }, title: 'score' } } },
      { mark: { type: 'text', fontSize: 9 }, encoding: { text: { field: 'score', type: 'quantitative', format: '.2f' } } },
    ],
  };
}

function trainingChart(doc: LeagueDoc): TopLevelSpec {
  let offset = 0;
  const values: Array<{ iteration: number; score: number; generation: number }> = [];
  for (const g of doc.generations) {
    g.train.scoreVsTactical.forEach((score, k) => {
      if (score !== null) values.push({ iteration: offset + (g.train.iteration[k] ?? k + 1), score, generation: g.generation });
    });
    offset += g.train.iteration.at(-1) ?? g.train.scoreVsTactical.length;
  }
  return {
    title: 'Training score against the tactical bot (sampled play, per PPO iteration)',
    width: 520,
    height: 220,
    data: { values },
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'iteration', type: 'quantitative', title: 'PPO iteration (all generations)' },
      y: { field: 'score', type: 'quantitative', scale: { domain: [0, 1] }, title: 'score' },
      color: { field: 'generation', type: 'ordinal' },
    },
  };
}

const pct = (x: number | null) => (x === null ? 'n/a' : `${(100 * x).toFixed(1)} %`);

/** Why the Elo gap and the head-to-head score of the champion and the tactical bot can differ, with this league's numbers. */
export function eloGapSentence(s: ChampionSummary): string {
  const numbers =
    s.tactical && s.vsTactical.predicted !== null && s.vsTactical.observed !== null
      ? ` Here the champion is ${(s.rating.elo - s.tactical.elo).toFixed(0)} Elo above the tactical bot, which predicts a score of ${pct(s.vsTactical.predicted)}; their ${s.vsTactical.games} games gave ${pct(s.vsTactical.observed)}.`
      : '';
  return (
    'An Elo gap and a head-to-head score can differ because Elo gives each player one number, fitted to every match of the league at once: ' +
    'the gap predicts the score between two players only as well as one number per player can describe everyone. ' +
    'Strength in Connect Four is not transitive (a snapshot can beat the tactical bot yet lose to an older snapshot that beats the tactical bot less often), ' +
    'so the fit trades one pair off against the others, and each observed score also carries sampling noise from a finite number of games.' +
    numbers
  );
}

export async function leagueReportHtml(doc: LeagueDoc, config: unknown): Promise<string> {
  const summary = championSummary(doc);
  const h2h = leagueHeadToHead(doc);
  const [elo, heat, training] = await Promise.all([svgOf(eloChart(doc)), svgOf(heatMapChart(h2h)), svgOf(trainingChart(doc))]);
  const rows = eloTable(doc)
    .map(
      (r) =>
        `<tr><td>${escapeHtml(r.id)}</td><td>${r.kind}</td><td>${r.generation ?? ''}</td><td>${r.elo.toFixed(0)}</td><td>${r.low.toFixed(0)} to ${r.high.toFixed(0)}</td><td>${r.games}</td></tr>`,
    )
    .join('\n');
  const generations = doc.generations
    .map((g) => {
      const e = g.train.evaluation;
      return `<tr><td>${g.generation}</td><td>${escapeHtml(g.train.groups.join(', '))}</td><td>${pct(e.vsTactical.overall)}</td><td>${pct(e.vsTactical.first)}</td><td>${pct(e.vsTactical.second)}</td><td>${pct(e.vsRandom.overall)}</td><td>${g.train.seconds.toFixed(0)} s</td><td>${escapeHtml(g.champion ?? '')}</td></tr>`;
    })
    .join('\n');
  const failures = doc.failures.length
    ? `<h2>Failed matches</h2><ul>${doc.failures.map((f) => `<li>generation ${f.generation}, ${escapeHtml(f.pairId)}: ${escapeHtml(f.error)}: ${escapeHtml(f.cause.slice(0, 300))}</li>`).join('')}</ul>`
    : '';
  const e = summary.evaluation;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Connect Four league: ${escapeHtml(summary.champion.id)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:980px;margin:2rem auto;padding:0 1rem;color:#222}table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}th{background:#f4f4f4}figure{margin:1.5rem 0}</style>
</head><body>
<h1>Connect Four self-play league</h1>
<p id="champion">Champion: <strong>${escapeHtml(summary.champion.id)}</strong> (generation ${summary.champion.generation}), Elo ${summary.rating.elo.toFixed(0)}
(95 % interval ${summary.rating.low.toFixed(0)} to ${summary.rating.high.toFixed(0)})${summary.tactical ? `, tactical bot ${summary.tactical.elo.toFixed(0)}` : ''}.
Greedy against the tactical bot: ${pct(e.vsTactical.overall)} (first ${pct(e.vsTactical.first)}, second ${pct(e.vsTactical.second)}, ${e.vsTactical.games} games);
against the random bot: ${pct(e.vsRandom.overall)}.</p>
<p id="elo-gap">${escapeHtml(eloGapSentence(summary))}</p>
<figure id="elo-chart">${elo}</figure>
<figure id="head-to-head">${heat}</figure>
<figure id="training-chart">${training}</figure>
<h2>Elo table</h2>
<table id="elo-table"><tr><th>player</th><th>kind</th><th>generation</th><th>Elo</th><th>95 % interval</th><th>games</th></tr>
${rows}
</table>
<h2>Generations</h2>
<table id="generations"><tr><th>generation</th><th>opponent groups</th><th>greedy vs tactical</th><th>first</th><th>second</th><th>greedy vs random</th><th>training</th><th>champion after</th></tr>
${generations}
</table>
${failures}
<h2>Config</h2>
<pre>${escapeHtml(JSON.stringify(config, null, 2))}</pre>
</body></html>
`;
}

// ---------------------------------------------------------------------------------------
// The report step (step 3)

/**
 * The champion's files and the HTML report, written under a prefix named by the league document
 * and the config, and listed for the publish step. The champion's ONNX is listed where training
 * wrote it; publishing copies it into the artifact.
 */
export async function writeLeagueReport(
  store: { readonly bucket: string; readonly pipeline: string },
  input: { leagueUri: string; config: Record<string, unknown> },
) {
  const { leagueUri, config } = input;
  const doc = await readLeague(leagueUri);
  if (doc.champion === null) {
    const first = doc.failures[0];
    const reason = first ? ` (the first, ${first.pairId}: ${first.error})` : '';
    throw new NoRatedSnapshot(
      `nothing to publish: no snapshot of the league is rated, all ${doc.failures.length} matches failed${reason}; the league document records every failure: ${leagueUri}`,
    );
  }
  const summary = championSummary(doc);
  const prefix = `data/${store.pipeline}/report/${sha256Hex(canonicalJson({ leagueUri, config })).slice(0, 32)}/`;
  const put = async (name: string, body: string, contentType: string) => ({ name, ...(await writeFile(store.bucket, `${prefix}${name}`, body, contentType)) });
  const written = [
    await put('elo.json', JSON.stringify(eloTable(doc), null, 2), 'application/json'),
    await put('head-to-head.json', JSON.stringify(leagueHeadToHead(doc), null, 2), 'application/json'),
    await put(
      'config.json',
      JSON.stringify({ config, champion: summary.champion, training: doc.generations.find((g) => g.player === summary.champion.id)?.train.groups }, null, 2),
      'application/json',
    ),
    await put('report.html', await leagueReportHtml(doc, config), 'text/html; charset=utf-8'),
  ];
  const files = [
    { name: CHAMPION_FILE, uri: summary.champion.onnxUri! },
    { name: 'league.json', uri: leagueUri },
    ...written.map(({ name, uri }) => ({ name, uri })),
  ];
  return {
    files,
    metrics: championMetrics(doc),
    reportUri: written.at(-1)!.uri,
    s3Outputs: [parseS3Uri(summary.champion.onnxUri!), parseS3Uri(leagueUri), ...written.map(({ Bucket, Key }) => ({ Bucket, Key }))],
  };
}
