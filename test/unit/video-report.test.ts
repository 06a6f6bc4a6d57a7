/**
 * The video report: the funnel of a curated document made by the real `curate` (every rule drops
 * one clip of the fixture), threshold lines on the score charts, the wall clock (copy included),
 * contact sheets side by side, missing captions with their reasons, escaping, metrics' size with
 * 1,000 sources, and precision and recall against the generator's truth.
 *
 * The fixture, by source (thresholds T):
 * - alpha (60 s): a1 kept (0-5 s); a2 dark (5-10); a3 kept (10-16); a4 a near duplicate of a1
 *   (16-20, each key-frame hash 2 bits from a1's); a segment too short (20-20.8, no file).
 * - beta (40 s): b1 kept (0-6); b2 static (6-12); b3 low aesthetic (12-18); b4 unscored (18-24).
 * - gamma (30 s): g1 washed out (0-5); g2 kept (5-12).
 * - a refused source whose reason holds `<script>`, and a failed one.
 * So 11 candidates, 7 dropped (one per rule), 4 kept: 5 + 6 + 6 + 7 = 24 s; 56 s of clips scored
 * (every candidate but the too-short segment).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ClipScore, type CurateThresholds, type CutClip, curate, DROP_RULES, type SourceOutcome } from '#shared/video/curate.ts';
import { dropText, MAX_SHEETS_PER_COLUMN, THRESHOLD_COLOR, type VideoReportInput, videoFigures, videoMetrics, videoReportHtml } from '#shared/video/report.ts';
import { assertClose } from '../support/floats.ts';

const TOL = { abs: 1e-12 }; // ratios of small whole numbers

const T: CurateThresholds = { minAesthetic: 4.5, minMotion: 1, darkLuma: 0.1, brightLuma: 0.9, maxDuplicateDistance: 10 };

function clip(id: string, start: number, end: number): CutClip {
  return {
    id,
    startFrame: start * 25,
    endFrame: end * 25,
    start,
    end,
    uri: `s3://b/clips/${id}.mp4`,
    sha256: id.padEnd(64, '0'),
    contactSheetUri: `s3://b/clips/${id}-sheet.jpg`,
    keyFrameUris: [0, 1, 2].map((k) => `s3://b/clips/${id}-k${k}.jpg`),
  };
}

const hash = (seed: number) => ((BigInt(seed) * 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn).toString(16).padStart(16, '0');
/** A hash with `bits` of `base`'s low bits flipped. */
const flip = (base: string, bits: number) => ((BigInt(`0x${base}`) ^ ((1n << BigInt(bits)) - 1n)) & 0xffffffffffffffffn).toString(16).padStart(16, '0');

function score(id: string, over: Partial<ClipScore> = {}, seed = 1): ClipScore {
  return { id, aesthetic: 6, motion: 8, meanLuma: 0.45, lumaStd: 0.2, phash: [hash(seed), hash(seed + 100), hash(seed + 200)], ...over };
}

const SCRIPT = '<script>alert(1)</script>';
const A1 = score('a1', { aesthetic: 7.2 }, 11);

function outcomes(): SourceOutcome[] {
  return [
    {
      id: 'alpha',
      status: 'ok',
      videoSeconds: 60,
      clips: [clip('a1', 0, 5), clip('a2', 5, 10), clip('a3', 10, 16), clip('a4', 16, 20)],
      dropped: [{ startFrame: 500, endFrame: 520, start: 20, end: 20.8, rule: 'too-short', value: 0.8, threshold: 2 }],
      scores: [
        A1,
        score('a2', { meanLuma: 0.02, motion: 0 }, 12),
        score('a3', { aesthetic: 5.5, motion: 12.5 }, 13),
        { ...score('a4', { aesthetic: 8 }), phash: A1.phash!.map((h) => flip(h, 2)) },
      ],
    },
    {
      id: 'beta',
      status: 'ok',
      videoSeconds: 40,
      clips: [clip('b1', 0, 6), clip('b2', 6, 12), clip('b3', 12, 18), clip('b4', 18, 24)],
      scores: [
        score('b1', { meanLuma: 0.6 }, 21),
        score('b2', { motion: 0.3 }, 22),
        score('b3', { aesthetic: 3.1 }, 23),
        { id: 'b4', error: 'the clip could not be decoded' },
      ],
    },
    {
      id: 'gamma',
      status: 'ok',
      videoSeconds: 30,
      clips: [clip('g1', 0, 5), clip('g2', 5, 12)],
      scores: [score('g1', { meanLuma: 0.97 }, 31), score('g2', { motion: 3 }, 32)],
    },
    { id: 'refused-one', status: 'refused', field: 'sources[3].licence', reason: `"${SCRIPT}" is not one the pipeline publishes` },
    { id: 'delta', status: 'failed', field: 'sources[4]', reason: 'the cut job failed: ffmpeg exited with 1' },
  ];
}

const sheet = (id: string) => ({ id, dataUri: `data:image/jpeg;base64,${Buffer.from(`jpeg bytes of ${id}`).toString('base64')}` });

const STEPS = [
  { name: 'generate', seconds: 30 },
  { name: 'cut', seconds: 13 },
  { name: 'score', seconds: 28 },
  { name: 'curate', seconds: 0.5 },
  { name: 'captions', seconds: 40 },
  { name: 'copy into the artifact', seconds: 25.5 },
];

function input(over: Partial<VideoReportInput> = {}): VideoReportInput {
  return {
    curated: curate(outcomes(), T),
    aestheticScorer: { name: 'quality', formula: '1 + 9 * (0.4 sharpness + 0.2 exposure + 0.2 contrast + 0.2 colourfulness)' },
    captions: {
      captioner: 'vlm',
      model: 'Qwen/Qwen2-VL-2B-Instruct',
      captioned: 2,
      missing: [
        { id: 'a3', reason: 'the model returned no text after 3 attempts' },
        { id: 'g2', reason: 'the caption job timed out' },
      ],
    },
    timings: {
      runStartedAt: '2026-03-01T10:00:00Z',
      // 2 min 30 s after the run's start: 137 s of steps and 13 s between them.
      reportAt: '2026-03-01T10:02:30.000Z',
      steps: STEPS,
      cutVideoSeconds: 130,
      cutSeconds: 13,
      scoreSeconds: 28,
    },
    contactSheets: ['a1', 'a2', 'a3', 'a4', 'b2'].map(sheet),
    artifact: { name: 'video-clips', version: 3 },
    ...over,
  };
}

/** The inside of the element with this id (a figure, section or table), up to its closing tag. */
function element(html: string, tag: string, id: string): string {
  const m = new RegExp(`<${tag} id="${id}"[^>]*>([\\s\\S]*?)</${tag}>`).exec(html);
  assert.ok(m, `no <${tag} id="${id}">`);
  return m[1]!;
}

describe('videoFigures', () => {
  it('counts the funnel in DROP_RULES order, one drop per rule', () => {
    const f = videoFigures(input());
    assert.equal(f.funnel.sources, 5);
    assert.equal(f.funnel.refused, 1);
    assert.equal(f.funnel.failed, 1);
    assert.equal(f.funnel.candidates, 11);
    assert.equal(f.funnel.kept, 4);
    assert.equal(f.funnel.keptSeconds, 24);
    assertClose(f.funnel.candidateSeconds, 56.8, TOL, 'candidate seconds');
    for (const rule of DROP_RULES) assert.equal(f.funnel.dropped[rule], 1, rule);
    assert.equal(f.funnel.addsUp, true);
    assert.deepEqual(
      f.funnel.stages.map((s) => [s.stage, s.dropped, s.remaining]),
      [
        ['candidates', 0, 11],
        ['too-short', 1, 10],
        ['unscored', 1, 9],
        ['dark', 1, 8],
        ['washed-out', 1, 7],
        ['static', 1, 6],
        ['low-aesthetic', 1, 5],
        ['near-duplicate', 1, 4],
      ],
    );
  });

  it('gives each source its kept share, its most frequent drop and, when refused or failed, its reason', () => {
    const f = videoFigures(input());
    const byId = new Map(f.sources.map((s) => [s.id, s]));
    assert.deepEqual(
      f.sources.map((s) => s.id),
      ['alpha', 'beta', 'gamma', 'refused-one', 'delta'],
    );
    assertClose(byId.get('alpha')!.keptShare!, 2 / 5, TOL, 'alpha kept share');
    assertClose(byId.get('beta')!.keptShare!, 1 / 4, TOL, 'beta kept share');
    assertClose(byId.get('gamma')!.keptShare!, 1 / 2, TOL, 'gamma kept share');
    // alpha lost one clip each to too-short, dark and near-duplicate: the first in rule order.
    assert.equal(byId.get('alpha')!.topDropRule, 'too-short');
    assert.equal(byId.get('gamma')!.topDropRule, 'washed-out');
    const refused = byId.get('refused-one')!;
    assert.equal(refused.status, 'refused');
    assert.equal(refused.keptShare, null);
    assert.equal(refused.field, 'sources[3].licence');
    assert.ok(refused.reason!.includes(SCRIPT));
    assert.equal(byId.get('delta')!.reason, 'the cut job failed: ffmpeg exited with 1');
  });

  it('bins every scored clip as kept or dropped, with the thresholds', () => {
    const f = videoFigures(input());
    const total = (name: 'aesthetic' | 'motion' | 'meanLuma', which: 'kept' | 'dropped') => f.scores[name].bins.reduce((n, b) => n + b[which], 0);
    // Scored: 11 candidates less the too-short segment and the unscored clip.
    for (const name of ['aesthetic', 'motion', 'meanLuma'] as const) {
      assert.equal(f.scores[name].n, 9, name);
      assert.equal(total(name, 'kept'), 4, name);
      assert.equal(total(name, 'dropped'), 5, name);
    }
    assert.deepEqual(
      f.scores.meanLuma.thresholds.map((t) => [t.name, t.value]),
      [
        ['darkLuma', 0.1],
        ['brightLuma', 0.9],
      ],
    );
    assert.deepEqual(
      f.scores.aesthetic.thresholds.map((t) => [t.name, t.value]),
      [['minAesthetic', 4.5]],
    );
    assert.equal(f.scores.aesthetic.min, 3.1);
    assert.equal(f.scores.aesthetic.max, 8);
    assert.equal(f.scores.meanLuma.median, 0.45);
    // The dark clip (0.02) in the first luma bin [0, 0.025), the washed-out one (0.97) in [0.95, 0.975).
    assert.deepEqual(f.scores.meanLuma.bins[0], { from: 0, to: 0.025, kept: 0, dropped: 1 });
    assert.deepEqual(f.scores.meanLuma.bins[38], { from: 0.95, to: 0.975, kept: 0, dropped: 1 });
    // Motion reaches 12.5: bins cover it.
    assert.ok(f.scores.motion.bins.at(-1)!.to >= 12.5);
  });

  it('measures the wall clock from the run start to the report, after the copy', () => {
    const f = videoFigures(input());
    const stepSum = STEPS.reduce((n, s) => n + s.seconds, 0);
    assert.equal(f.timings.wallSeconds, 150);
    assert.equal(f.timings.stepSeconds, stepSum);
    assert.ok(f.timings.wallSeconds >= stepSum, 'the wall clock covers every step, the copy included');
    assert.equal(f.timings.outsideSteps, 150 - stepSum);
    assert.deepEqual(f.timings.steps.at(-1), { name: 'copy into the artifact', seconds: 25.5, share: 25.5 / 150 });
    // 130 s of source video in 13 s of cut jobs; 56 s of clips in 28 s of score jobs.
    assert.equal(f.throughput.cutSpeed, 10);
    // Per core: per CPU second of the cut jobs, when they reported them.
    assert.equal(f.throughput.cutSpeedPerCore, null);
    const perCore = videoFigures({ ...input(), timings: { ...input().timings, cutCpuSeconds: 10 } });
    assert.equal(perCore.throughput.cutSpeedPerCore, 13);
    assert.equal(videoMetrics(perCore).cutSpeedPerCore, 13);
    assertClose(f.throughput.scoredVideoSeconds, 56, TOL, 'scored video seconds');
    assertClose(f.throughput.scoreSpeed!, 2, TOL, 'score speed');
  });

  it('puts each contact sheet in the kept or the dropped column by the curated clip', () => {
    const f = videoFigures(input());
    assert.deepEqual(
      f.sheets.kept.map((s) => s.id),
      ['a1', 'a3'],
    );
    assert.deepEqual(
      f.sheets.dropped.map((s) => [s.id, s.drop?.rule]),
      [
        ['a2', 'dark'],
        ['a4', 'near-duplicate'],
        ['b2', 'static'],
      ],
    );
    assert.equal(f.sheets.keptNotShown, 2);
    assert.equal(f.sheets.droppedNotShown, 4);
  });

  it('accounts for every kept clip in the captions', () => {
    const f = videoFigures(input());
    assert.equal(f.captions.captioned, 2);
    assert.equal(f.captions.missingTotal, 2);
    assert.equal(f.captions.unaccounted, 0);
    const short = videoFigures(input({ captions: { captioner: 'vlm', model: 'Qwen/Qwen2-VL-2B-Instruct', captioned: 1, missing: [] } }));
    assert.equal(short.captions.unaccounted, 3);
  });

  it('computes cut precision and recall, each rule recall and the good clips dropped from the truth', () => {
    const f = videoFigures(
      input({
        truth: {
          cuts: { truePositives: 18, falsePositives: 2, falseNegatives: 6, toleranceFrames: 2 },
          // Out of order: the figures list them in DROP_RULES order.
          rules: [
            { rule: 'near-duplicate', madeFor: 2, droppedByRule: 0 },
            { rule: 'dark', madeFor: 4, droppedByRule: 3 },
            { rule: 'static', madeFor: 5, droppedByRule: 5 },
          ],
          goodClips: 20,
          goodDropped: 3,
          goodDroppedBy: { 'near-duplicate': 1, 'low-aesthetic': 2 },
        },
      }),
    );
    const t = f.truth!;
    assert.deepEqual(t.goodDroppedBy, [
      { rule: 'low-aesthetic', count: 2 },
      { rule: 'near-duplicate', count: 1 },
    ]);
    assertClose(t.cuts.precision!, 18 / 20, TOL, 'precision');
    assertClose(t.cuts.recall!, 18 / 24, TOL, 'recall');
    assertClose(t.cuts.f1!, 36 / 44, TOL, 'F1');
    assert.deepEqual(
      t.rules.map((r) => [r.rule, r.recall]),
      [
        ['dark', 0.75],
        ['static', 1],
        ['near-duplicate', 0],
      ],
    );
    assert.equal(t.goodDroppedShare, 0.15);
    assert.equal(videoFigures(input()).truth, null);
    assert.throws(
      () => videoFigures(input({ truth: { cuts: t.cuts, rules: [], goodClips: 20, goodDropped: 3, goodDroppedBy: { static: 1 } } })),
      /truth\.goodDroppedBy: must add up to goodDropped \(3\) \(got 1\)/,
    );
  });

  it('refuses an inconsistent input, naming the field', () => {
    assert.throws(
      () => videoFigures(input({ timings: { ...input().timings, reportAt: '2026-03-01T09:59:59Z' } })),
      /timings\.reportAt: must not be before timings\.runStartedAt/,
    );
    assert.throws(() => videoFigures(input({ timings: { ...input().timings, runStartedAt: 'yesterday' } })), /timings\.runStartedAt: must be an ISO 8601 time/);
    assert.throws(() => videoFigures(input({ contactSheets: [sheet('nope')] })), /contactSheets\[0\]\.id: must be a clip of the curated document/);
    assert.throws(
      () => videoFigures(input({ contactSheets: [{ id: 'a1', dataUri: 'data:image/jpeg;base64,AAAA" onerror="x' }] })),
      /contactSheets\[0\]\.dataUri: must be a base64 data:image\/jpeg/,
    );
    assert.throws(
      () => videoFigures(input({ captions: { captioner: 'vlm', model: 'm/x', captioned: 0, missing: [{ id: 'a2', reason: 'dropped' }] } })),
      /captions\.missing\[0\]\.id: must be a kept clip/,
    );
    assert.throws(
      () => videoFigures(input({ captions: { captioner: 'vlm', model: 'm/x', captioned: 4, missing: [{ id: 'a1', reason: 'x' }] } })),
      /captions\.captioned: plus 1 missing must be at most the 4 kept clips/,
    );
    assert.throws(
      () =>
        videoFigures(
          input({
            truth: {
              cuts: { truePositives: 1, falsePositives: 0, falseNegatives: 0, toleranceFrames: 1 },
              rules: [{ rule: 'dark', madeFor: 1, droppedByRule: 2 }],
              goodClips: 0,
              goodDropped: 0,
            },
          }),
        ),
      /truth\.rules\[0\]\.droppedByRule: must be at most madeFor \(1\)/,
    );
  });

  it('shows at most MAX_SHEETS_PER_COLUMN sheets a column and counts the rest', () => {
    const many = Array.from({ length: MAX_SHEETS_PER_COLUMN + 5 }, (_, i) => ({
      id: `m${i}`,
      status: 'ok' as const,
      clips: [clip(`m${i}-c`, 0, 5)],
      scores: [score(`m${i}-c`, {}, 1000 + i * 7)],
    }));
    const curated = curate(many, T);
    const f = videoFigures(
      input({ curated, captions: { captioner: 'none', model: null, captioned: 0, missing: [] }, contactSheets: curated.clips.map((c) => sheet(c.id)) }),
    );
    assert.equal(curated.funnel.kept, MAX_SHEETS_PER_COLUMN + 5);
    assert.equal(f.sheets.kept.length, MAX_SHEETS_PER_COLUMN);
    assert.equal(f.sheets.keptNotShown, 5);
  });
});

describe('videoReportHtml', () => {
  it('draws the funnel and each threshold as a red rule on its histogram', async () => {
    const html = await videoReportHtml(videoFigures(input()));
    assert.match(element(html, 'figure', 'chart-funnel'), /<svg/);
    const funnel = element(html, 'table', 'funnel');
    assert.ok(funnel.includes('<tr><td>sources</td><td></td><td>5</td></tr>'));
    assert.match(funnel, /<tr><td>refused \([^<]*\)<\/td><td>1<\/td><td><\/td><\/tr>/);
    assert.match(funnel, /<tr><td>failed \([^<]*\)<\/td><td>1<\/td><td><\/td><\/tr>/);
    assert.ok(funnel.includes('<tr><td>cut and scored</td><td></td><td>3</td></tr>'));
    assert.ok(funnel.includes('<tr><td>candidate clips</td><td></td><td>11</td></tr>'));
    for (const rule of DROP_RULES) assert.ok(funnel.includes(`dropped: ${rule}</td><td>1</td>`), rule);
    assert.match(funnel, /<tr class="stage"><td>dropped: near-duplicate<\/td><td>1<\/td><td>4<\/td><\/tr>/);
    assert.match(funnel, /<strong id="funnel-kept">4<\/strong> \(24\.0 s of video\)/);
    const charts = {
      'chart-aesthetic': ['minAesthetic 4.5'],
      'chart-motion': ['minMotion 1'],
      'chart-mean-luma': ['darkLuma 0.1', 'brightLuma 0.9'],
    };
    for (const [id, labels] of Object.entries(charts)) {
      const svg = element(html, 'figure', id);
      const rules = /<g class="mark-rule role-mark[^"]*"[^>]*>([\s\S]*?)<\/g>/.exec(svg);
      assert.ok(rules, `${id}: a rule mark`);
      assert.equal((rules[1]!.match(/<line/g) ?? []).length, labels.length, `${id}: one line per threshold`);
      assert.ok(rules[1]!.includes(`stroke="${THRESHOLD_COLOR}"`), `${id}: the threshold colour`);
      for (const label of labels) assert.ok(svg.includes(label), `${id}: ${label}`);
    }
  });

  it('lists every source with its kept share, and the refused and failed ones with their reasons, escaped', async () => {
    const html = await videoReportHtml(videoFigures(input()));
    assert.match(element(html, 'figure', 'chart-sources'), /<svg/);
    const table = element(html, 'table', 'sources');
    assert.match(table, /<td>alpha<\/td><td>ok<\/td><td>60\.0<\/td><td>5<\/td><td>2<\/td><td>40\.0 %<\/td><td>too-short \(1\)<\/td>/);
    assert.ok(table.includes('&quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot; is not one the pipeline publishes'));
    assert.ok(table.includes('the cut job failed: ffmpeg exited with 1'));
    // The page holds no script: the one in the data appears escaped only.
    assert.doesNotMatch(html, /<script/i);
    assert.ok(html.includes('&lt;script&gt;'));
  });

  it('sets the contact sheets side by side: kept on the left, dropped on the right with the rule', async () => {
    const html = await videoReportHtml(videoFigures(input()));
    const kept = element(html, 'section', 'sheets-kept');
    const dropped = element(html, 'section', 'sheets-dropped');
    assert.ok(html.indexOf('id="sheets-kept"') < html.indexOf('id="sheets-dropped"'));
    assert.match(html, /<div class="sheets">\s*<section id="sheets-kept">/);
    assert.match(html, /\.sheets\{display:grid;grid-template-columns:1fr 1fr/);
    for (const id of ['a1', 'a3']) assert.ok(kept.includes(`src="${sheet(id).dataUri}"`), id);
    for (const id of ['a2', 'a4', 'b2']) assert.ok(dropped.includes(`src="${sheet(id).dataUri}"`), id);
    assert.ok(!kept.includes('sheet-a2'));
    assert.ok(dropped.includes('dark: mean luma 0.020 below 0.100'));
    assert.ok(dropped.includes('near-duplicate of a1: 2.0 bits apart, at most 10.0'));
    assert.ok(dropped.includes('static: motion 0.300 below 1.000'));
    assert.match(kept, /Kept \(2 shown, 2 more not shown\)/);
  });

  it('prints the aesthetic scorer, the captioner and every missing caption with its reason', async () => {
    const html = await videoReportHtml(videoFigures(input()));
    assert.ok(element(html, 'p', 'aesthetic-scorer').includes('<strong>quality</strong>'));
    assert.ok(element(html, 'pre', 'aesthetic-formula').includes('0.4 sharpness + 0.2 exposure'));
    const captions = element(html, 'p', 'captions');
    assert.ok(captions.includes('Qwen/Qwen2-VL-2B-Instruct'));
    assert.match(captions, /<strong id="captions-captioned">2<\/strong> of 4 kept clips captioned; 2 without a caption/);
    const missing = element(html, 'table', 'captions-missing');
    assert.ok(missing.includes('<td>a3</td><td>the model returned no text after 3 attempts</td>'));
    assert.ok(missing.includes('<td>g2</td><td>the caption job timed out</td>'));
    const none = await videoReportHtml(videoFigures(input({ captions: { captioner: 'none', model: null, captioned: 0, missing: [] } })));
    assert.match(element(none, 'p', 'captions'), /Captioner: none: no captioner ran/);
    assert.ok(!none.includes('captions-unaccounted'));
    // A captioner that left clips unlisted is called out.
    const short = await videoReportHtml(videoFigures(input({ captions: { captioner: 'vlm', model: 'Qwen/Qwen2-VL-2B-Instruct', captioned: 1, missing: [] } })));
    assert.match(short, /<strong>3 kept clips are neither captioned nor listed as missing\.<\/strong>/);
  });

  it('lists each step with the copy, and the wall clock that includes it', async () => {
    const html = await videoReportHtml(videoFigures(input()));
    const timings = element(html, 'table', 'timings');
    assert.ok(timings.includes('<td>copy into the artifact</td><td>25.5</td><td>17.0 %</td>'));
    assert.ok(timings.includes('<strong id="wall-seconds">150.0</strong>'));
    assert.ok(element(html, 'p', 'wall-clock').includes('2 min 30 s'));
    assert.match(element(html, 'p', 'throughput'), /<strong id="cut-speed">10\.0× real time<\/strong>/);
  });

  it('shows the truth section only when there is a truth', async () => {
    const truth = {
      cuts: { truePositives: 9, falsePositives: 1, falseNegatives: 3, toleranceFrames: 2 },
      rules: [{ rule: 'dark' as const, madeFor: 4, droppedByRule: 4 }],
      goodClips: 10,
      goodDropped: 2,
    };
    const html = await videoReportHtml(videoFigures(input({ truth })));
    assert.ok(html.includes('<strong id="cut-precision">90.0 %</strong>'));
    assert.ok(html.includes('<strong id="cut-recall">75.0 %</strong>'));
    assert.ok(html.includes('<strong id="good-dropped-share">20.0 %</strong>'));
    assert.ok(element(html, 'table', 'truth-rules').includes('<td>dark</td><td>4</td><td>4</td><td>100.0 %</td>'));
    assert.ok(!(await videoReportHtml(videoFigures(input()))).includes('truth-cuts'));
  });

  it('names each rule with its score and threshold', () => {
    assert.equal(dropText({ rule: 'too-short', value: 0.8, threshold: 2 }), 'too-short: 0.80 s, under 2.00 s');
    assert.equal(dropText({ rule: 'unscored', value: null, threshold: null, error: 'no video stream' }), 'unscored: no video stream');
    assert.equal(dropText({ rule: 'washed-out', value: 0.97, threshold: 0.9 }), 'washed-out: mean luma 0.970 above 0.900');
    assert.equal(dropText({ rule: 'low-aesthetic', value: 3.1, threshold: 4.5 }), 'low-aesthetic: aesthetic 3.10 below 4.50');
  });
});

describe('videoMetrics', () => {
  it('is a flat record of the funnel, the wall clock and the cut speed', () => {
    const m = videoMetrics(videoFigures(input()));
    assert.deepEqual(m, {
      sources: 5,
      refused: 1,
      failed: 1,
      candidates: 11,
      kept: 4,
      keptSeconds: 24,
      droppedTooShort: 1,
      droppedUnscored: 1,
      droppedDark: 1,
      droppedWashedOut: 1,
      droppedStatic: 1,
      droppedLowAesthetic: 1,
      droppedNearDuplicate: 1,
      wallSeconds: 150,
      cutSpeed: 10,
      captioned: 2,
    });
  });

  it('stays under 2,000 characters of JSON with 1,000 sources, and the page draws them as a histogram', async () => {
    const many: SourceOutcome[] = Array.from({ length: 1_000 }, (_, i) => {
      const id = `source-${String(i).padStart(4, '0')}-${'x'.repeat(50)}`;
      return i % 10 === 0
        ? { id, status: 'refused', field: `sources[${i}].licence`, reason: `no licence record ${'because '.repeat(40)}` }
        : {
            id,
            status: 'ok',
            videoSeconds: 100,
            clips: [clip(`${id}-c1`, 0, 5), clip(`${id}-c2`, 5, 10)],
            scores: [score(`${id}-c1`, {}, 7 * i + 1), score(`${id}-c2`, { motion: 0 }, 7 * i + 3)],
          };
    });
    const curated = curate(many, T);
    const f = videoFigures(
      input({
        curated,
        captions: { captioner: 'claude', model: 'claude-model', captioned: 900, missing: [] },
        contactSheets: [],
        truth: { cuts: { truePositives: 1, falsePositives: 1, falseNegatives: 1, toleranceFrames: 1 }, rules: [], goodClips: 1, goodDropped: 0 },
      }),
    );
    const m = videoMetrics(f);
    assert.equal(m.sources, 1_000);
    assert.equal(m.refused, 100);
    assert.equal(m.kept, 900);
    assert.equal(m.droppedStatic, 900);
    assert.equal(m.cutPrecision, 0.5);
    assert.ok(Object.keys(m).length <= 18);
    assert.ok(JSON.stringify(m).length < 2_000, `${JSON.stringify(m).length} characters`);
    const html = await videoReportHtml(f);
    assert.match(element(html, 'figure', 'chart-sources'), /across 900 sources/);
    // A header row and one row a source.
    assert.equal((element(html, 'table', 'sources').match(/<tr/g) ?? []).length, 1_001);
  });
});
