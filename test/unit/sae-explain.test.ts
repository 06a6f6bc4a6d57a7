/**
 * The SAE explainer and detection scorer: the contexts document's schema, the top-tokens baseline
 * with token-match detection on synthetic features that each fire on one token (own labels near
 * 1, mismatched labels near 0.5), the statistics by hand-worked numbers, the derangement; then
 * the Claude explainer and detector through the real SDK against a fake Messages API on loopback
 * (test/support/fake-explainer.ts): labels, the cached instructions, bounded concurrency, a 429
 * with retry-after, refusals and malformed answers recorded with their reason.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { anthropicClient as sdkClient, InvalidApiKeyError } from '#shared/claude-requests.ts';
import { randomInt, seededRandom } from '#shared/random.ts';
import {
  balancedAccuracy,
  claudePredictor,
  DETECT_INSTRUCTIONS,
  detectWithClaude,
  mismatchedLabels,
  scoreDetection,
  summariseScores,
  tokenMatchPredictor,
} from '#shared/sae/detection.ts';
import {
  CONTEXTS_FORMAT,
  EXPLAIN_INSTRUCTIONS,
  explainUserMessage,
  explainWithClaude,
  explainWithTopTokens,
  type FeatureContext,
  type FeatureContexts,
  highlightWindow,
  parseFeatureContexts,
  tokenMatchPredict,
  topTokensExplainer,
} from '#shared/sae/explain.ts';
import { assertClose } from '../support/floats.ts';
import { type FakeExplainer, type FakeExplainerOptions, fakePredictions, startFakeExplainer } from '../support/fake-explainer.ts';

// ---------------------------------------------------------------------------------------------
// Synthetic contexts: feature k fires on TRIGGERS[k].

const TRIGGERS = [' the', '(', ' def', ';', ' if', '=', ' and', ' of'];
const FILLER = ' river cat sat on mat blue stone runs quick dog over bridge water light green house road field bread wind'.split(' ').map((w) => ` ${w}`);

/**
 * Noise, as real features have it: the feature fires weakly (0.1-0.5) on about 5% of other
 * tokens in its activating windows; 10% of its active detect windows fire on a filler token with
 * no trigger in sight; 10% of its inactive detect windows hold the trigger without firing (the
 * context was wrong); every window holds each other feature's trigger with probability 0.2.
 */
function syntheticContexts(seed = 1, count = TRIGGERS.length): FeatureContexts {
  const random = seededRandom(seed);
  const uniform = (low: number, high: number) => low + random() * (high - low);
  const window = (k: number, kind: 'fire' | 'noise-only' | 'silent' | 'decoy', strength: [number, number]) => {
    const tokens = Array.from({ length: 16 }, () => FILLER[randomInt(random, FILLER.length)]!);
    for (let j = 0; j < count; j++) if (j !== k && random() < 0.2) tokens[randomInt(random, 16)] = TRIGGERS[j]!;
    const activations = tokens.map(() => 0);
    if (kind === 'fire') {
      const times = 1 + randomInt(random, 3);
      for (let t = 0; t < times; t++) {
        const at = randomInt(random, 16);
        tokens[at] = TRIGGERS[k]!;
        activations[at] = uniform(...strength);
      }
      tokens.forEach((token, i) => {
        if (token !== TRIGGERS[k] && random() < 0.05) activations[i] = uniform(0.1, 0.5);
      });
    } else if (kind === 'noise-only') {
      // Filler only: no trigger of this feature anywhere.
      tokens.forEach((token, i) => {
        if (token === TRIGGERS[k]) tokens[i] = FILLER[0]!;
      });
      activations[randomInt(random, 16)] = uniform(0.1, 0.5);
    } else {
      tokens.forEach((token, i) => {
        if (token === TRIGGERS[k]) tokens[i] = FILLER[0]!;
      });
      if (kind === 'decoy') tokens[randomInt(random, 16)] = TRIGGERS[k]!;
    }
    return { tokens, activations };
  };
  const features = Array.from({ length: count }, (_, k): FeatureContext => {
    const explain = [
      ...Array.from({ length: 8 }, () => ({ ...window(k, 'fire', [3.5, 5]), source: 'top' as const })),
      ...Array.from({ length: 8 }, () => ({ ...window(k, 'fire', [0.8, 3]), source: 'quantile' as const })),
      ...Array.from({ length: 6 }, () => ({ ...window(k, 'silent', [0, 0]), source: 'inactive' as const })),
    ];
    const detect = [
      ...Array.from({ length: 20 }, () => ({ ...window(k, random() < 0.1 ? 'noise-only' : 'fire', [0.8, 5]), active: true })),
      ...Array.from({ length: 20 }, () => ({ ...window(k, random() < 0.1 ? 'decoy' : 'silent', [0, 0]), active: false })),
    ];
    const maxActivation = Math.max(...[...explain, ...detect].flatMap((w) => w.activations));
    return { feature: 100 + k, firingRate: 0.01 + 0.001 * k, maxActivation, explain, detect };
  });
  return { format: CONTEXTS_FORMAT, features };
}

const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

// ---------------------------------------------------------------------------------------------

describe('parseFeatureContexts', () => {
  it('reads a valid document from its JSON text or its value', () => {
    const document = syntheticContexts();
    assert.deepEqual(parseFeatureContexts(JSON.stringify(document)), document);
    assert.equal(parseFeatureContexts(document).features.length, TRIGGERS.length);
  });

  it('names the field path and the value of a bad document', () => {
    const bad = (edit: (d: any) => void) => {
      const document = clone(syntheticContexts()) as any;
      edit(document);
      return () => parseFeatureContexts(document);
    };
    assert.throws(
      bad((d) => d.features[2].explain[3].activations.pop()),
      /^ConfigError: contexts\.features\.2\.explain\.3\.activations: has 15 values but tokens has 16: one activation per token \(got \[/,
    );
    assert.throws(
      bad((d) => (d.features[1].detect[0].tokens = Array.from({ length: 129 }, () => ' x'))),
      /contexts\.features\.1\.detect\.0\.tokens: Too big: expected array to have <=128 items \(got \[" x"/,
    );
    assert.throws(
      bad((d) => (d.features[0].explain[0].tokens[4] = 'y'.repeat(201))),
      /contexts\.features\.0\.explain\.0\.tokens\.4: .*<=200 characters \(got "yyyy/,
    );
    assert.throws(
      bad((d) => (d.features[0].detect[1].activations[0] = -0.5)),
      /contexts\.features\.0\.detect\.1\.activations\.0: .*>=0 \(got -0\.5\)/,
    );
    assert.throws(
      bad((d) => (d.format = 'sae-contexts-v2')),
      /contexts\.format: .*"sae-contexts-v1".* \(got "sae-contexts-v2"\)/,
    );
    assert.throws(
      bad((d) => (d.features[3].feature = 100)),
      /contexts\.features\.3\.feature: is also the feature of features\[0\] \(got 100\)/,
    );
    assert.throws(
      bad((d) => (d.features[0].detect[25].active = true)),
      /contexts\.features\.0\.detect\.25\.activations: must have an activation > 0 when active is true/,
    );
    assert.throws(
      bad((d) => (d.features[0].explain[20].source = 'top')),
      /contexts\.features\.0\.explain\.20\.activations: must have an activation > 0 in a "top" window/,
    );
    assert.throws(
      bad((d) => (d.features[0].firingRate = 1.5)),
      /contexts\.features\.0\.firingRate: .* \(got 1\.5\)/,
    );
    assert.throws(
      bad((d) => (d.features = Array.from({ length: 1001 }, () => d.features[0]))),
      /contexts\.features: Too big: expected array to have <=1000 items/,
    );
    assert.throws(() => parseFeatureContexts('{"format": '), /^ConfigError: contexts: is not JSON/);
  });
});

describe('the top-tokens baseline', () => {
  const { features } = syntheticContexts();

  it('recovers the token each feature fires on, and only that token', () => {
    for (const [k, feature] of features.entries()) {
      const result = topTokensExplainer(feature);
      assert.deepEqual(result.tokens, [TRIGGERS[k]], `feature ${feature.feature}`);
      assert.equal(result.label, `top tokens: ${JSON.stringify(TRIGGERS[k])}`);
      assert.equal(result.explainer, 'top-tokens');
    }
  });

  it('names up to topN tokens by summed activation, above the minimum share, ties in code-unit order', () => {
    const feature: FeatureContext = {
      feature: 1,
      firingRate: 0.1,
      maxActivation: 4,
      explain: [
        // " a": 4 + 2 = 6; " b": 3; " c": 3; " d": 0.2 (1.6% of 12.2: below 5%); "x" in an inactive window does not count.
        { tokens: [' a', ' b', ' c', ' d'], activations: [4, 3, 3, 0.2], source: 'top' },
        { tokens: [' a', ' e'], activations: [2, 0], source: 'quantile' },
        { tokens: ['x'], activations: [0], source: 'inactive' },
      ],
      detect: [],
    };
    assert.deepEqual(topTokensExplainer(feature).tokens, [' a', ' b', ' c']);
    assert.deepEqual(topTokensExplainer(feature, { topN: 2 }).tokens, [' a', ' b']);
    assert.deepEqual(topTokensExplainer(feature, { topN: 5, minShare: 0.01 }).tokens, [' a', ' b', ' c', ' d']);
    assert.equal(topTokensExplainer(feature).label, 'top tokens: " a", " b", " c"');
    assert.throws(() => topTokensExplainer(feature, { minShare: 0 }), /minShare: must be a number in \(0, 1\] \(got 0\)/);
    assert.throws(() => topTokensExplainer(feature, { topN: 0 }), /topN: must be an integer from 1 to 20 \(got 0\)/);

    const silent = { ...feature, explain: [feature.explain[2]!] };
    assert.deepEqual(topTokensExplainer(silent).tokens, []);
    assert.deepEqual(explainWithTopTokens([silent]).unlabelled, [
      { feature: 1, reason: 'no-activations', detail: 'no explain window has an activation > 0', attempts: 0 },
    ]);
  });

  it('leaves out a token the feature fires on less than half the times it appears, unless no token is that precise', () => {
    const feature: FeatureContext = {
      feature: 2,
      firingRate: 0.1,
      maxActivation: 5,
      explain: [
        // " the" carries the most activation (5 + 4 = 9) but fires at 2 of its 6 occurrences; "(" fires at both of its 2.
        { tokens: [' of', ' the', '(', ' the'], activations: [0, 5, 3, 0], source: 'top' },
        { tokens: [' of', ' the', '(', ' the'], activations: [0, 4, 2, 0], source: 'quantile' },
        { tokens: [' the', ' cat'], activations: [0, 0], source: 'inactive' },
        { tokens: [' the'], activations: [0], source: 'inactive' },
      ],
      detect: [],
    };
    assert.deepEqual(topTokensExplainer(feature).tokens, ['(']);
    assert.deepEqual(topTokensExplainer(feature, { minPrecision: 0.3 }).tokens, [' the', '(']);
    const imprecise = { ...feature, explain: feature.explain.map((w) => ({ ...w, tokens: w.tokens.map((t) => (t === '(' ? ' the' : t)) })) };
    assert.deepEqual(topTokensExplainer(imprecise).tokens, [' the']);
    assert.throws(() => topTokensExplainer(feature, { minPrecision: 2 }), /minPrecision: must be a number in \(0, 1\] \(got 2\)/);
  });

  it('token-match detection is true iff the window holds one of the tokens, exactly', () => {
    assert.equal(tokenMatchPredict([' the', '('], { tokens: ['f', '(', 'x'] }), true);
    assert.equal(tokenMatchPredict([' the'], { tokens: ['the', ' there'] }), false);
  });

  it('scores own labels near 1 and mismatched labels near 0.5 on the synthetic set', async (t) => {
    const contexts = syntheticContexts();
    const run = explainWithTopTokens(contexts.features);
    assert.equal(run.labels.length, TRIGGERS.length);
    const report = await scoreDetection({ features: contexts.features, labels: run.labels, predict: tokenMatchPredictor, seed: 3 });
    assert.equal(report.explainer, 'top-tokens');
    assert.equal(report.rows.length, TRIGGERS.length);
    assert.ok(report.rows.every((row) => row.control.labelFrom !== row.feature && row.own.labelFrom === row.feature));
    // Noise caps own at about (0.9 + 0.9) / 2; the control's trigger is independent of firing.
    assert.ok(report.own!.mean > 0.85, `own ${report.own!.mean}`);
    assert.ok(Math.abs(report.control!.mean - 0.5) < 0.1, `control ${report.control!.mean}`);
    assert.ok(report.gap! >= 0.3, `gap ${report.gap}`);
    t.diagnostic(
      `token match: own ${report.own!.mean.toFixed(3)} ± ${report.own!.standardError!.toFixed(3)}, control ${report.control!.mean.toFixed(3)} ± ${report.control!.standardError!.toFixed(3)}`,
    );
    assert.equal(report.own!.n, TRIGGERS.length);
    assert.deepEqual(report.unlabelled, []);
  });

  it('rejects labels of one feature only, a label of an unknown feature, and mixed explainers', async () => {
    const { features } = syntheticContexts();
    const labels = explainWithTopTokens(features).labels;
    await assert.rejects(scoreDetection({ features, labels: labels.slice(0, 1), predict: tokenMatchPredictor }), /labels: must label at least 2 features/);
    await assert.rejects(
      scoreDetection({ features, labels: [...labels, { feature: 7, label: 'x', explainer: 'top-tokens', tokens: ['x'] }], predict: tokenMatchPredictor }),
      /labels\[8\]\.feature: is not a feature of features \(got 7\)/,
    );
    await assert.rejects(
      scoreDetection({ features, labels: [labels[0]!, { ...labels[1]!, explainer: 'claude' }], predict: tokenMatchPredictor }),
      /labels\[1\]\.explainer: must be the explainer of labels\[0\]/,
    );
  });
});

describe('detection statistics', () => {
  it('computes balanced accuracy and its standard error by hand-worked numbers', () => {
    // P = 4 with TP = 3 (TPR 0.75); N = 2 with TN = 1 (TNR 0.5). BA = (0.75 + 0.5) / 2 = 0.625.
    // SE = 0.5 sqrt(0.75 x 0.25 / 4 + 0.5 x 0.5 / 2) = 0.5 sqrt(0.046875 + 0.125) = 0.5 x 0.414578... = 0.207289...
    const result = balancedAccuracy([true, true, true, false, true, false], [true, true, true, true, false, false]);
    assertClose(result.balancedAccuracy, 0.625, { abs: 1e-12 }, 'balanced accuracy'); // exact in binary: one rounding at most
    assertClose(result.standardError, 0.5 * Math.sqrt(0.171875), { abs: 1e-12 }, 'standard error'); // same formula, a few roundings
    assertClose(result.standardError, 0.2072891, { abs: 1e-7 }, 'standard error by hand'); // the hand value is rounded to 7 places
    assert.deepEqual([result.positives, result.negatives], [4, 2]);
    const perfect = balancedAccuracy([true, false], [true, false]);
    assert.deepEqual([perfect.balancedAccuracy, perfect.standardError], [1, 0]);
    // Always "fires": TPR 1, TNR 0, BA 0.5 however unbalanced.
    assert.equal(balancedAccuracy([true, true, true], [true, false, false]).balancedAccuracy, 0.5);
  });

  it('names P = 0, N = 0, a length mismatch and a non-boolean', () => {
    assert.throws(() => balancedAccuracy([true, false], [false, false]), /truth: has no positive \(true\) value.* \(got "P = 0"\)/);
    assert.throws(() => balancedAccuracy([true, false], [true, true]), /truth: has no negative \(false\) value.* \(got "N = 0"\)/);
    assert.throws(() => balancedAccuracy([true], [true, false]), /predictions: must have one prediction per truth value \(2\)/);
    assert.throws(() => balancedAccuracy([true, 1 as never], [true, false]), /predictions\[1\]: must be a boolean \(got 1\)/);
  });

  it('summarises scores: the mean and the standard error of the mean', () => {
    // Mean 0.7; deviations -0.1, 0.1, -0.1, 0.1; sample variance 0.04 / 3; SE = sqrt(0.04 / 12) = 0.057735...
    const summary = summariseScores([0.6, 0.8, 0.6, 0.8]);
    assertClose(summary.mean, 0.7, { abs: 1e-12 }, 'mean'); // four additions of decimals
    assertClose(summary.standardError!, Math.sqrt(0.04 / 12), { abs: 1e-12 }, 'standard error');
    assert.equal(summary.n, 4);
    assert.deepEqual(summariseScores([0.9]), { mean: 0.9, standardError: null, n: 1 });
    assert.throws(() => summariseScores([]), /scores: must be a non-empty array/);
    assert.throws(() => summariseScores([0.5, Number.NaN]), /scores\[1\]: must be a finite number/);
  });

  it('mismatches labels by a derangement: no fixed point, deterministic per seed, whatever the order', () => {
    const ids = Array.from({ length: 50 }, (_, i) => i * 3);
    const seen = new Set<string>();
    for (let seed = 0; seed < 200; seed++) {
      const sources = mismatchedLabels(ids, seed);
      assert.ok(
        sources.every((s, i) => s !== ids[i]),
        `seed ${seed} has a fixed point`,
      );
      assert.deepEqual(
        [...sources].sort((a, b) => a - b),
        ids,
        'a permutation',
      );
      assert.deepEqual(mismatchedLabels(ids, seed), sources, 'deterministic');
      seen.add(sources.join());
    }
    assert.ok(seen.size > 190, 'seeds give different derangements');
    const reversed = [...ids].reverse();
    const sources = mismatchedLabels(ids, 5);
    assert.deepEqual(mismatchedLabels(reversed, 5), [...sources].reverse());
    assert.deepEqual(mismatchedLabels([4, 9], 1), [9, 4]);
    assert.throws(() => mismatchedLabels([4], 1), /featureIds: needs at least 2 features.* \(got \[4\]\)/);
    assert.throws(() => mismatchedLabels([4, 4], 1), /featureIds\[1\]: is a duplicate \(got 4\)/);
  });
});

// ---------------------------------------------------------------------------------------------
// Claude, against the fake.

const MODEL = 'claude-sae-test';
const fakes: FakeExplainer[] = [];
async function fake(options: FakeExplainerOptions = {}): Promise<FakeExplainer> {
  const started = await startFakeExplainer(options);
  fakes.push(started);
  return started;
}
after(() => Promise.all(fakes.map((f) => f.close())));

function runOptions(concurrency = 3) {
  const slept: number[] = [];
  return { model: MODEL, concurrency, random: () => 0.5, sleep: async (ms: number) => void slept.push(ms), slept };
}

describe('explainWithClaude against the fake Messages API', () => {
  const { features } = syntheticContexts();

  it('marks tokens at >= 0.3 x the maximum activation, merging runs; inactive examples unmarked', () => {
    const window = { tokens: [' a', ' b', ' c', ' d', ' e'], activations: [0, 1.5, 2, 0.2, 3] };
    assert.equal(highlightWindow(window, 0.3 * 5), ' a<< b c>> d<< e>>');
    const message = explainUserMessage(features[0]!);
    const inactive = message.slice(message.indexOf('Non-activating examples:'));
    assert.ok(!inactive.includes('<<') && inactive.includes('<example 17>'), inactive.slice(0, 200));
    assert.ok(message.includes('<< the>>'));
  });

  it('labels every feature, caches the instructions, and reaches but never passes the concurrency', async () => {
    const server = await fake({ latencyMs: 20 });
    const options = runOptions(3);
    const run = await explainWithClaude(sdkClient('test-key', server.url), features, options);
    assert.equal(run.explainer, 'claude');
    assert.deepEqual(
      run.labels.map((l) => [l.feature, l.label]),
      features.map((f, k) => [f.feature, `the token ${JSON.stringify(TRIGGERS[k])}`]),
    );
    assert.deepEqual(run.unlabelled, []);
    assert.equal(run.stats!.maxInFlight, 3);
    assert.equal(server.peakInFlight, 3);
    const system = server.requests[0]!.body.system as { text: string; cache_control?: unknown }[];
    assert.deepEqual(system, [{ type: 'text', text: EXPLAIN_INSTRUCTIONS, cache_control: { type: 'ephemeral' } }]);
    assert.ok(server.requests.every((r) => r.body.model === MODEL && JSON.stringify(r.body.system) === JSON.stringify(system)));
    // The first request ran alone and wrote the cache; the other seven read it.
    const [first, ...rest] = server.requests;
    assert.ok(first!.usage!.cache_creation_input_tokens > 0);
    assert.ok(rest.every((r) => r.usage!.cache_read_input_tokens === first!.usage!.cache_creation_input_tokens));
    assert.equal(run.stats!.usage.cacheWriteTokens, first!.usage!.cache_creation_input_tokens);
    const format = (server.requests[0]!.body.output_config as { format: { schema: { required: string[] } } }).format;
    assert.deepEqual(format.schema.required, ['label']);
    assert.deepEqual(options.slept, []);
  });

  it('retries a 429, waiting as retry-after says', async () => {
    const server = await fake({ overload: { status: 429, first: 2, retryAfter: '0.04' } });
    const options = runOptions(1);
    const run = await explainWithClaude(sdkClient('test-key', server.url), features.slice(0, 3), options);
    assert.equal(run.labels.length, 3);
    assert.equal(run.stats!.retries, 2);
    // 40 ms plus 5% jitter (random() = 0.5 of at most 10%).
    assert.deepEqual(options.slept, [42, 42]);
  });

  it('lists a feature refused then malformed, or always refused, or with an over-long label, as unlabelled with the reason', async () => {
    const fires = (token: string) => (call: { marked: string[] }) => call.marked.includes(token);
    const server = await fake({
      refuse: (call) => (fires('(')(call) && call.attempt === 1) || fires(';')(call),
      malformed: (call) => {
        if (fires('(')(call)) return 'The feature fires on parentheses.';
        if (fires(' if')(call)) return JSON.stringify({ label: 'x'.repeat(121) });
        if (fires(' def')(call) && call.attempt === 1) return '{"label": ';
        return undefined;
      },
    });
    const run = await explainWithClaude(sdkClient('test-key', server.url), features.slice(0, 5), { ...runOptions(2), maxAttempts: 3 });
    assert.deepEqual(
      run.unlabelled.map((u) => [u.feature, u.reason, u.attempts]),
      [
        [101, 'malformed', 3],
        [103, 'refused', 3],
        [104, 'malformed', 3],
      ],
    );
    const detail = Object.fromEntries(run.unlabelled.map((u) => [u.feature, u.detail]));
    assert.match(detail[101]!, /JSON.*The feature fires on parentheses/);
    assert.match(detail[103]!, /stop_reason refusal/);
    assert.match(detail[104]!, /label/);
    // " the" first time, " def" on its second attempt.
    assert.deepEqual(
      run.labels.map((l) => l.feature),
      [100, 102],
    );
    assert.equal(server.requests.filter((r) => r.answer === 'refusal').length, 1 + 3);
  });

  it('fails the run on a 401', async () => {
    const server = await fake({ apiKey: 'right' });
    await assert.rejects(explainWithClaude(sdkClient('wrong', server.url), features, runOptions()), InvalidApiKeyError);
    assert.equal(server.requests.length, 1);
  });
});

describe('detectWithClaude against the fake Messages API', () => {
  const { features } = syntheticContexts();
  const feature = features[0]!;
  const label = 'the token " the"';

  it('shows the windows unmarked, 5 per prompt, and maps the answers back to the windows', async () => {
    const server = await fake();
    const run = await detectWithClaude(sdkClient('test-key', server.url), label, feature.detect, { ...runOptions(4), seed: 9 });
    assert.equal(server.requests.length, feature.detect.length / 5);
    assert.ok(server.requests.every((r) => r.kind === 'detect' && r.examples.length === 5 && r.label === label));
    assert.ok(server.requests.every((r) => !JSON.stringify(r.body.messages).includes('<<')));
    assert.equal((server.requests[0]!.body.system as { text: string }[])[0]!.text, DETECT_INSTRUCTIONS);
    // The fake's rule, applied to each window directly: the answers landed on the right windows.
    assert.deepEqual(
      run.predictions,
      fakePredictions(
        label,
        feature.detect.map((w) => w.tokens.join('')),
      ).map((p) => p === 1),
    );
    assert.deepEqual(run.unscored, []);
    // Shuffled: the windows come sorted (20 active, then 20 inactive), yet some prompt mixes them.
    const activeOf = new Map(feature.detect.map((w) => [w.tokens.join(''), w.active]));
    assert.ok(server.requests.some((r) => new Set(r.examples.map((text) => activeOf.get(text))).size === 2));
    assert.ok(run.maxInFlight <= 4);
  });

  it('retries a wrong-length answer, and records a prompt whose answers stay wrong as unscored with the reason', async () => {
    const target = feature.detect[7]!.tokens.join('');
    const server = await fake({
      malformed: (call) => {
        if (call.examples.includes(target)) return JSON.stringify({ predictions: [1, 0] });
        if (call.attempt === 1 && call.examples.length === 5) return JSON.stringify({ predictions: [1, 0, 1, 0, 2] });
        return undefined;
      },
    });
    const run = await detectWithClaude(sdkClient('test-key', server.url), label, feature.detect, { ...runOptions(2), maxAttempts: 3 });
    assert.equal(run.unscored.length, 1);
    const [unscored] = run.unscored;
    assert.equal(unscored!.reason, 'malformed');
    assert.equal(unscored!.attempts, 3);
    assert.match(unscored!.detail, /expected 5 predictions, one per example, got 2/);
    assert.equal(unscored!.windows.length, 5);
    assert.ok(unscored!.windows.includes(7));
    assert.deepEqual(
      run.predictions.map((p, i) => [i, p === null]).filter(([, isNull]) => isNull),
      unscored!.windows.map((i) => [i, true]),
    );
    // Every other prompt: a bad first answer (a 2), then a good one.
    assert.equal(run.retries, 7 * 1 + 2);
    assert.equal(run.predictions.filter((p) => p !== null).length, 35);
  });

  it('scores Claude labels with Claude detection end to end: own well above the control', async () => {
    const server = await fake({ latencyMs: 2 });
    const client = sdkClient('test-key', server.url);
    const explained = await explainWithClaude(client, features, runOptions(4));
    const predictor = claudePredictor(client, runOptions(4));
    const report = await scoreDetection({ features, labels: explained.labels, predict: predictor.predict, seed: 1, concurrency: 4 });
    assert.equal(report.explainer, 'claude');
    assert.ok(report.gap! >= 0.3, `gap ${report.gap}: own ${report.own!.mean}, control ${report.control!.mean}`);
    const stats = predictor.stats();
    assert.equal(stats.requests, features.length * 2 * 8);
    assert.ok(stats.maxInFlight <= 4 && server.peakInFlight <= 4, `peak ${stats.maxInFlight} / ${server.peakInFlight}`);
  });
});
