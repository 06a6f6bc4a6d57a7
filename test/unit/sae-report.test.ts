/**
 * The SAE report: Pareto fronts and the best SAE under the L0 target on a hand-checked grid, the
 * top-five order, escaping of labels and tokens, a chart per figure, the explainer named beside
 * the scores, unlabelled and unscored features with reasons, licences, timings, metrics' size.
 *
 * The detection report is the real one: top-tokens labels (explainWithTopTokens) scored by token
 * match (scoreDetection + tokenMatchPredictor) on synthetic contexts where each feature fires on
 * one token. Each feature f has 4 active and 4 inactive detect windows:
 * - fn active windows fire on a filler token instead of f's token (token match misses them);
 * - fp inactive windows hold f's token without firing (token match calls them active);
 * - m inactive windows hold every other feature's token (any other feature's label, the control,
 *   calls them active); active windows hold no other feature's token, so the control's TPR is 0.
 * So own = ((4 - fn)/4 + (4 - fp)/4) / 2 and control = (4 - m)/8, whichever label the seeded
 * derangement hands each feature.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { scoreDetection, tokenMatchPredictor } from '#shared/sae/detection.ts';
import { type DetectWindow, type ExplainWindow, explainWithTopTokens, type FeatureContext, parseFeatureContexts } from '#shared/sae/explain.ts';
import { paretoFront, type SaeReportInput, type SaeResult, saeFigures, saeMetrics, saeReportHtml, shadedWindowHtml } from '#shared/sae/report.ts';
import { assertClose } from '../support/floats.ts';

const TOL = { abs: 1e-12 }; // sums and ratios of a few small fractions

/** feature: [its token, fn, fp, m]; expected own and control below. */
const DESIGN: [number, string, number, number, number][] = [
  [3, ' the', 0, 0, 2], // own 1, control 0.25, gap 0.75
  [5, ' cat', 0, 0, 2], // own 1, control 0.25, gap 0.75 (ties with 3: the lower id first)
  [8, '<script>', 0, 0, 1], // own 1, control 0.375, gap 0.625
  [13, ' &', 1, 0, 0], // own 0.875, control 0.5, gap 0.375
  [21, '\n', 0, 1, 2], // own 0.875, control 0.25, gap 0.625
  [34, ' dog', 2, 1, 0], // own 0.625
  [55, ' 42', 1, 1, 0], // own 0.75
];
const UNSCORED = { feature: 233, token: ' sat' }; // all detect windows active: no score
const NO_ACTIVATIONS = 144; // no explain window fires: unlabelled
const FILLER = [' a', ' b', ' c', '.', ' is'];
const ALL_TOKENS = [...DESIGN.map((d) => d[1]), UNSCORED.token];

const win = (tokens: string[], activations: number[]) => ({ tokens, activations });

function explainWindows(token: string): ExplainWindow[] {
  return [
    { ...win([' a', token, ' b', '.'], [0, 3, 0, 0]), source: 'top' },
    { ...win([token, ' c', token], [2, 0, 1]), source: 'top' },
    { ...win([' is', ' a', token], [0, 0, 0.5]), source: 'quantile' },
    { ...win([' b', ' c'], [0, 0]), source: 'inactive' },
  ];
}

function detectWindows(token: string, fn: number, fp: number, m: number): DetectWindow[] {
  const others = ALL_TOKENS.filter((t) => t !== token);
  const active = [0, 1, 2, 3].map((i) =>
    i < fn ? { ...win([' a', ' b', '.'], [0, 1.5, 0]), active: true } : { ...win([' c', token, ' is'], [0, 2 + i, 0]), active: true },
  );
  const inactive = [0, 1, 2, 3].map((i) => {
    const tokens = i < fp ? [' a', token, '.'] : i < fp + m ? [' a', ...others] : [...FILLER];
    return {
      ...win(
        tokens,
        tokens.map(() => 0),
      ),
      active: false,
    };
  });
  return [...active, ...inactive];
}

function contexts() {
  const features: FeatureContext[] = DESIGN.map(([feature, token, fn, fp, m]) => ({
    feature,
    firingRate: 0.01 * (1 + (feature % 7)),
    maxActivation: 3,
    explain: explainWindows(token),
    detect: detectWindows(token, fn, fp, m),
  }));
  features.push({
    feature: UNSCORED.feature,
    firingRate: 0.2,
    maxActivation: 3,
    explain: explainWindows(UNSCORED.token),
    detect: [0, 1, 2, 3].map(() => ({ ...win([' x', UNSCORED.token], [0, 1]), active: true })),
  });
  features.push({
    feature: NO_ACTIVATIONS,
    firingRate: 0.0001,
    maxActivation: 0.5,
    explain: [{ ...win([' a', ' b'], [0, 0]), source: 'inactive' }],
    detect: [
      { ...win([' a'], [0.5]), active: true },
      { ...win([' b'], [0]), active: false },
    ],
  });
  // Through the real parser, so the document is one the pipeline would accept.
  return parseFeatureContexts({ format: 'sae-contexts-v1', features, width: 1024, eligible: 900, saeUri: 's3://bucket/sae/w1024-k32' });
}

/**
 * The grid, hand-checked:
 * (L0, FVU): A (8, .30) is dominated by C (8, .27); B (31, .18) by D (30, .15); the front is C, E, D, F.
 * (L0, loss recovered): A by C (8, .83); E (9, .82) by C; B (31, .90) by D (30, .93); F (32, .95) is
 * the highest of all: the front is C, D, F. At L0 <= 31 the best is D (.93): F is better but above the target.
 */
const SAES: SaeResult[] = [
  { width: 512, k: 8, l0: 8, fvu: 0.3, lossRecovered: 0.8, deadShare: 0.01, tokensPerSecond: 50_000, trainSeconds: 10 }, // A
  { width: 512, k: 32, l0: 31, fvu: 0.18, lossRecovered: 0.9, deadShare: 0.02, tokensPerSecond: 40_000, trainSeconds: 12 }, // B
  { width: 1024, k: 8, l0: 8, fvu: 0.27, lossRecovered: 0.83, deadShare: 0.05, tokensPerSecond: 45_000, trainSeconds: 11 }, // C
  { width: 1024, k: 32, l0: 30, fvu: 0.15, lossRecovered: 0.93, deadShare: 0.06, tokensPerSecond: 35_000, trainSeconds: 14 }, // D
  { width: 2048, k: 8, l0: 9, fvu: 0.25, lossRecovered: 0.82, deadShare: 0.12, tokensPerSecond: 30_000, trainSeconds: 16 }, // E
  { width: 2048, k: 32, l0: 32, fvu: 0.14, lossRecovered: 0.95, deadShare: 0.2, tokensPerSecond: 20_000, trainSeconds: 20 }, // F
];

async function buildInput(): Promise<SaeReportInput> {
  const doc = contexts();
  const run = explainWithTopTokens(doc.features);
  const detection = await scoreDetection({ features: doc.features, labels: run.labels, predict: tokenMatchPredictor, seed: 7 });
  return {
    corpus: { artifact: 'refined-corpus', version: 'v3', documents: 12_000, tokens: 9_500_000 },
    lm: { kind: 'local', name: 'local GPT', layers: 4, width: 256, layer: 2, parameters: 3_200_000, heldOutLoss: 3.41, trainSeconds: 420 },
    harvest: { trainTokens: 2_000_000, heldOutTokens: 200_000, ceClean: 3.2, ceZeroAblated: 9.5, ceMeanAblated: 7.1, seconds: 95.5 },
    ablation: 'mean',
    saes: SAES,
    chosen: { width: 1024, k: 32, targetL0: 31 },
    explainer: run.explainer,
    model: null,
    labels: run.labels,
    unlabelled: run.unlabelled,
    detection,
    contexts: doc,
    licences: {
      model: 'trained here on the corpus below; no third-party weights',
      corpus: 'the refined corpus from Debian documentation, each document under its package’s own licence',
    },
    timings: { harvest: 95.5, train: 83, contexts: null, explain: 0.02, detect: 0.05, lm: null },
  };
}

describe('saeFigures', () => {
  it('computes both Pareto fronts and the best SAE under the L0 target', async () => {
    const f = saeFigures(await buildInput());
    assert.deepEqual(f.paretoFvu, ['w1024 k8', 'w2048 k8', 'w1024 k32', 'w2048 k32']);
    assert.deepEqual(f.paretoLossRecovered, ['w1024 k8', 'w1024 k32', 'w2048 k32']);
    assert.equal(f.best?.name, 'w1024 k32');
    assert.ok(f.best!.l0 <= f.targetL0);
    assert.equal(f.chosen.name, 'w1024 k32');
    // Implied CE with the SAE: 7.1 - 0.93 * (7.1 - 3.2).
    assertClose(f.best!.ceSae, 7.1 - 0.93 * 3.9, TOL, 'ceSae');
    // Median of 20k, 30k, 35k, 40k, 45k, 50k.
    assertClose(f.throughput.medianTokensPerSecond, 37_500, TOL, 'median tokens/s');
    assert.equal(f.throughput.minTokensPerSecond, 20_000);
    assert.equal(f.throughput.maxTokensPerSecond, 50_000);
    assertClose(f.throughput.trainSeconds!, 83, TOL, 'train seconds');
  });

  it('respects the L0 target at its boundary and when nothing qualifies', async () => {
    const input = await buildInput();
    // At 32, F (L0 32, .95) qualifies and wins; at 29.9 only the k=8 SAEs do, and C (.83) is best.
    assert.equal(saeFigures({ ...input, chosen: { ...input.chosen, targetL0: 32 } }).best?.name, 'w2048 k32');
    assert.equal(saeFigures({ ...input, chosen: { ...input.chosen, targetL0: 29.9 } }).best?.name, 'w1024 k8');
    const none = saeFigures({ ...input, chosen: { ...input.chosen, targetL0: 5 } });
    assert.equal(none.best, null);
    assert.ok(!('bestLossRecovered' in saeMetrics(none)));
  });

  it('paretoFront keeps equal points and handles both directions', () => {
    const points = [
      { x: 1, y: 5 },
      { x: 1, y: 5 },
      { x: 2, y: 4 },
      { x: 2, y: 6 },
      { x: 3, y: 3 },
    ];
    assert.deepEqual(paretoFront(points, true), [0, 1, 2, 4]);
    assert.deepEqual(paretoFront(points, false), [0, 1, 3]);
  });

  it('reads the detection scores and ranks the top five by own score, then gap, then feature id', async () => {
    const f = saeFigures(await buildInput());
    const expected: Record<number, [number, number]> = {
      3: [1, 0.25],
      5: [1, 0.25],
      8: [1, 0.375],
      13: [0.875, 0.5],
      21: [0.875, 0.25],
      34: [0.625, 0.5],
      55: [0.75, 0.5],
    };
    for (const row of f.detection.features) {
      if (row.feature === UNSCORED.feature) {
        assert.equal(row.own, null);
        continue;
      }
      const [own, control] = expected[row.feature]!;
      assertClose(row.own!, own, TOL, `own of ${row.feature}`);
      assertClose(row.control!, control, TOL, `control of ${row.feature}`);
    }
    assert.deepEqual(
      f.topFeatures.map((t) => t.feature),
      [3, 5, 8, 21, 13],
    );
    const owns = Object.values(expected).map((e) => e[0]);
    const controls = Object.values(expected).map((e) => e[1]);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    assertClose(f.detection.own!.mean, mean(owns), TOL, 'own mean');
    assertClose(f.detection.control!.mean, mean(controls), TOL, 'control mean');
    assertClose(f.detection.gap!, mean(owns) - mean(controls), TOL, 'gap');
    assert.equal(f.detection.own!.n, 7);
    assert.equal(f.topFeatures[0]!.explain.length, 3);
    assert.deepEqual(
      f.topFeatures[0]!.detect.map((w) => w.tag),
      ['active', 'active', 'active', 'inactive', 'inactive'],
    );
  });

  it('accounts for every unlabelled and unscored feature', async () => {
    const f = saeFigures(await buildInput());
    assert.deepEqual(f.unlabelled, [{ feature: NO_ACTIVATIONS, reason: 'no-activations', detail: 'no explain window has an activation > 0', attempts: 0 }]);
    assert.deepEqual(
      f.unscored.map((u) => [u.feature, u.which, u.reason]),
      [
        [UNSCORED.feature, 'own', 'no-score'],
        [UNSCORED.feature, 'control', 'no-score'],
      ],
    );
    assert.equal(f.counts.sampled, 9);
    assert.equal(f.counts.eligible, 900);
    assert.equal(f.counts.labelled, 8);
    assert.equal(f.counts.scored, 7);
    assert.equal(f.counts.unscored, 1);
    assert.deepEqual(f.counts.unlabelledByReason, { 'no-activations': 1 });
    assert.deepEqual(f.timings?.cached, ['contexts', 'lm']);
    assertClose(f.timings!.coldSeconds, 95.5 + 83 + 0.02 + 0.05, TOL, 'cold seconds');
  });

  it('refuses an inconsistent input', async () => {
    const input = await buildInput();
    assert.throws(() => saeFigures({ ...input, chosen: { width: 4096, k: 8, targetL0: 31 } }), /chosen/);
    assert.throws(() => saeFigures({ ...input, saes: [] }), /saes/);
    assert.throws(() => saeFigures({ ...input, saes: [...SAES, SAES[0]!] }), /duplicate/);
    assert.throws(() => saeFigures({ ...input, explainer: 'claude', model: 'claude-x' }), /explainer/);
  });
});

describe('saeReportHtml', () => {
  it('renders every section, escaped, with the explainer beside the scores', async () => {
    const f = saeFigures(await buildInput());
    const html = await saeReportHtml(f);
    for (const id of ['chart-l0-fvu', 'chart-l0-loss-recovered', 'chart-dead', 'chart-detection'])
      assert.match(html, new RegExp(`<figure id="${id}"><svg `), id);
    assert.equal(html.match(/<svg /g)?.length, 4);
    // Labels and tokens escaped: no raw <script> anywhere, the label as text.
    assert.ok(!/<script/i.test(html), 'no raw <script>');
    assert.ok(html.includes('top tokens: &quot;&lt;script&gt;&quot;'), 'the <script> label, escaped');
    assert.ok(html.includes('top tokens: &quot; &amp;&quot;'), 'the & label, escaped');
    assert.ok(html.includes('>&lt;script&gt;</span>'), 'the <script> token, escaped in its span');
    assert.ok(html.includes('⏎</span>'), 'a newline token shown as ⏎');
    // The five top features, in order, each with its shaded contexts.
    const positions = [3, 5, 8, 21, 13].map((id) => html.indexOf(`<section class="feature" id="feature-${id}">`));
    assert.ok(
      positions.every((p, i) => p > 0 && (i === 0 || p > positions[i - 1]!)),
      `top five in order: ${positions}`,
    );
    assert.ok(!html.includes('id="feature-55"'), 'only five');
    assert.ok(html.includes('style="background:rgba(255,140,0,1.000)">&lt;script&gt;</span>'), 'the maximum activation fully shaded');
    // The explainer is named in the summary beside the detection scores.
    const summary = html.match(/<p id="summary">([\s\S]*?)<\/p>/)![1]!;
    assert.match(summary, /Best loss recovered at L0 &le; 31\.0: <strong id="best-loss-recovered">93\.0 %<\/strong>/);
    assert.match(summary, /labels by the top-tokens explainer \(non-LLM baseline\): own labels <strong id="detection-own">0\.875 ± 0\.0\d\d<\/strong>/);
    assert.match(html, /<th>label \(top-tokens\)<\/th>/);
    // Unlabelled and unscored, with reasons.
    assert.match(html, /<table id="unlabelled">[\s\S]*<td>144<\/td><td>no-activations<\/td><td>no explain window has an activation &gt; 0<\/td>/);
    assert.match(html, /<table id="unscored">[\s\S]*<td>233<\/td><td>own<\/td><td>no-score<\/td><td>the scored windows have 4 active and 0 inactive/);
    // Licences, model and harvest, the chosen SAE, timings kept apart.
    assert.ok(html.includes('trained here on the corpus below; no third-party weights'));
    assert.ok(html.includes('Debian documentation, each document under its package’s own licence'));
    assert.match(html, /clean 3\.200, layer zero-ablated 9\.500, mean-ablated 7\.100/);
    assert.match(html, /<tr class="chosen"><td>1024<\/td><td>32<\/td>/);
    assert.match(html, /<table id="timings-cold">[\s\S]*<td>harvest<\/td><td>95\.50<\/td>/);
    assert.match(html, /<p id="timings-cached">Reused from the cache: contexts, lm\.<\/p>/);
  });

  it('names the Claude model when Claude wrote the labels', async () => {
    const input = await buildInput();
    const claude: SaeReportInput = {
      ...input,
      explainer: 'claude',
      model: 'claude-test-model',
      labels: input.labels.map((l) => ({ feature: l.feature, label: l.label, explainer: 'claude' })),
      detection: { ...input.detection, explainer: 'claude' },
      lm: { kind: 'hf', name: 'EleutherAI/pythia-70m@main', layers: 6, width: 512, layer: 3 },
      licences: { model: 'Apache 2.0', corpus: 'ODC-By 1.0' },
      timings: undefined,
    };
    const f = saeFigures(claude);
    const html = await saeReportHtml(f);
    assert.match(html, /labels by the Claude explainer \(claude-test-model\): own labels/);
    assert.match(html, /<th>label \(claude, claude-test-model\)<\/th>/);
    assert.ok(html.includes('EleutherAI/pythia-70m@main (published weights)'));
    assert.ok(!html.includes('timings-cold'));
    assert.equal(saeMetrics(f).model, 'claude-test-model');
  });

  it('shades each token by activation over the maximum, whitespace visible', () => {
    const html = shadedWindowHtml({ tokens: [' a', '\n', '  ', 'x&y'], activations: [0, 1.5, 3, 6] }, 3);
    assert.equal(
      html,
      '<span class="win"><span class="tok" title="0.000" style="background:rgba(255,140,0,0.000)"> a</span>' +
        '<span class="tok" title="1.500" style="background:rgba(255,140,0,0.500)">⏎</span>' +
        '<span class="tok" title="3.000" style="background:rgba(255,140,0,1.000)">␣␣</span>' +
        '<span class="tok" title="6.000" style="background:rgba(255,140,0,1.000)">x&amp;y</span></span>',
    );
  });
});

describe('saeMetrics', () => {
  it('is a flat record of the figures, under 4,000 characters as JSON', async () => {
    const f = saeFigures(await buildInput());
    const m = saeMetrics(f);
    const json = JSON.stringify(m);
    assert.ok(json.length < 4000, `${json.length} characters`);
    for (const v of Object.values(m)) assert.ok(typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v)));
    assert.equal(m.bestSae, 'w1024 k32');
    assertClose(m.bestLossRecovered as number, 0.93, TOL, 'bestLossRecovered');
    assertClose(m.bestL0 as number, 30, TOL, 'bestL0');
    assertClose(m.bestFvu as number, 0.15, TOL, 'bestFvu');
    assertClose(m.detectionOwn as number, f.detection.own!.mean, { abs: 1e-5 }, 'detectionOwn'); // rounded to 6 significant digits
    assertClose(m.detectionControl as number, f.detection.control!.mean, { abs: 1e-5 }, 'detectionControl');
    assertClose(m.detectionGap as number, f.detection.gap!, { abs: 1e-5 }, 'detectionGap');
    assert.equal(m.explainer, 'top-tokens');
    assert.equal(m.saes, 6);
    assert.equal(m.featuresLabelled, 8);
    assert.equal(m.unlabelled, 1);
    assert.equal(m.unscored, 1);
    assert.equal(m.chosenIsBest, 1);
    assert.equal(m.medianTokensPerSecond, 37_500);
    assert.equal(m.topFeature, 3);
    assert.equal(m.cachedSteps, 2);
    assert.ok(!('model' in m), 'no model for top-tokens');
  });
});
