/**
 * The limits, from the plans: the widest config each modelled pipeline's schema accepts plans a
 * cold run within Step Functions' 25,000 history events (the Distributed Map's items are child
 * executions, outside the parent's history) and a largest state within 256 KiB; a config past a
 * limit is refused before it starts, naming the field and the largest value that fits; and the league's schema bound, a worst case over
 * every path, is never below its plan's cold path.
 */
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { pipelineNamed } from '#infra/cli/config.ts';
import { limitBreaches, planRun, refuseOverLimits, STEP_RESULTS_RESERVE } from '#infra/cli/plan.ts';
import { PAYLOAD_LIMIT_BYTES } from '#infra/local/run-scope.ts';
import { ConfigError } from '#shared/errors.ts';
import { EvalsConfig } from '#pipelines/evals/config.ts';
import { HumanoidConfig, HUMANOID_SIZES, MAX_REPLAY_COMMANDS } from '#pipelines/humanoid/config.ts';
import { LM_SFT_SIZES, LmSftConfig } from '#pipelines/lm-sft/config.ts';
import { ProbeConfig } from '#pipelines/probe/config.ts';
import { REFINERY_SIZES, RefineryConfig } from '#pipelines/refinery/config.ts';
import { REWARDS_SIZES, RewardsConfig, rewardsHistoryEvents } from '#pipelines/rewards/config.ts';
import { MOLECULES_SIZES, MoleculesConfig, moleculesHistoryEvents } from '#pipelines/molecules/config.ts';
import { MAX_SAES, SAE_SIZES, SaeConfig } from '#pipelines/sae/config.ts';
import { LEAGUE_HISTORY_BUDGET, leagueHistoryEvents, MAX_GENERATIONS, SELFPLAY_SIZES, SelfPlayConfig } from '#pipelines/selfplay/config.ts';
import { HISTORY_EVENT_BUDGET, HISTORY_EVENT_LIMIT } from '#pipelines/steps/history.ts';
import { MAX_GENERATED_VIDEOS, VIDEO_SIZES, VideoConfig } from '#pipelines/video/config.ts';
import { GENERATED_MAX_SECONDS } from '#pipelines/video/plan.ts';
import { BLENDER_FILMS } from '#shared/video/blender.ts';
import { CONTACT_SHEET_HEIGHT, CONTACT_SHEET_MAX_TOKENS } from '#shared/video/caption.ts';
import { requestInput } from '#pipelines/steps/plan.ts';
import { labelRequestParams } from '#shared/refinery/labels.ts';
import { buildProposeParams, feedbackText, MAX_FEEDBACK_CHARS, MAX_SOURCE_CHARS } from '#shared/rewards/propose.ts';
import { MOUNTAINCAR_TASK } from '#shared/rewards/loop.ts';
import { explainRequestParams, MAX_LABEL_CHARS } from '#shared/sae/explain.ts';
import { detectRequestParams } from '#shared/sae/detection.ts';

const widest: [string, unknown, object?][] = [
  ['probe', ProbeConfig.parse({ items: Array.from({ length: 200 }, (_, i) => i), distributed: true, approve: true, maxFailures: 200 })],
  ['selfplay', SelfPlayConfig.parse({ ...SELFPLAY_SIZES.test, generations: MAX_GENERATIONS })],
  ['evals', EvalsConfig.parse({ benchmarks: Array.from({ length: 64 }, (_, i) => `bench-${i}`) })],
  ['lm-sft', LmSftConfig.parse(LM_SFT_SIZES.test)],
  ['sae', SaeConfig.parse({ ...SAE_SIZES.test, sae: { ...SAE_SIZES.test.sae, widths: [1024, 2048, 4096], ks: [8, 16, 24, 32, 48, 64] } })],
  [
    'humanoid',
    HumanoidConfig.parse({
      ...HUMANOID_SIZES.test,
      replay: { ...HUMANOID_SIZES.test.replay, forward: Array.from({ length: MAX_REPLAY_COMMANDS }, (_, i) => 0.25 * i) },
    }),
  ],
  ['video', VideoConfig.parse({ ...VIDEO_SIZES.test, sources: { kind: 'generated', videos: MAX_GENERATED_VIDEOS } }), { claudeKey: true }],
];

describe('plans against the limits', () => {
  for (const [pipeline, config, options] of widest) {
    it(`${pipeline}: the widest valid config plans within the 25,000 history events and the 256 KiB state`, () => {
      const plan = planRun(pipelineNamed(pipeline), config, options);
      assert.ok(plan.counts.historyEvents <= HISTORY_EVENT_LIMIT, `${plan.counts.historyEvents} events`);
      assert.ok(plan.counts.transitions > 0);
      assert.ok(plan.payload.bytes <= PAYLOAD_LIMIT_BYTES, `${plan.payload.bytes} bytes`);
      assert.deepEqual(limitBreaches(pipelineNamed(pipeline), config, options, plan), []);
      assert.ok(refuseOverLimits(pipelineNamed(pipeline), config, options), 'the run is let through, with its plan');
    });
  }

  it('sae: the widest grid is the largest the schema allows', () => {
    const plan = planRun(pipelineNamed('sae'), widest[4]![1]);
    assert.equal(plan.counts.mapWidths['saes: Items'], MAX_SAES);
  });

  it("selfplay: the schema's worst case bounds every cold league's plan, and its bound is the budget's", () => {
    for (const generations of [1, 2, 5, 10, 20, MAX_GENERATIONS, MAX_GENERATIONS + 1]) {
      const config = { ...SelfPlayConfig.parse({ ...SELFPLAY_SIZES.test, generations: Math.min(generations, MAX_GENERATIONS) }), generations };
      const plan = planRun(pipelineNamed('selfplay'), config);
      assert.ok(
        plan.counts.historyEvents <= leagueHistoryEvents(generations),
        `${generations}: ${plan.counts.historyEvents} > ${leagueHistoryEvents(generations)}`,
      );
    }
    assert.ok(leagueHistoryEvents(MAX_GENERATIONS) <= LEAGUE_HISTORY_BUDGET && leagueHistoryEvents(MAX_GENERATIONS + 1) > LEAGUE_HISTORY_BUDGET);
    const refused = SelfPlayConfig.safeParse({ ...SELFPLAY_SIZES.test, generations: MAX_GENERATIONS + 1 });
    assert.equal(refused.success, false);
    assert.match(
      refused.error!.issues[0]!.message,
      new RegExp(`must be at most ${MAX_GENERATIONS}: .* history events, over the .* a run plans for \\(Step Functions fails an execution past 25,000\\)`),
    );
  });

  it('a league too long for the history is refused before it starts, naming generations and the largest that fits', () => {
    const league = pipelineNamed('selfplay');
    const base = SelfPlayConfig.parse(SELFPLAY_SIZES.test);
    const over = { ...base, generations: 40 };
    assert.throws(
      () => refuseOverLimits(league, over),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.field === 'config.generations' &&
        e.value === 40 &&
        /refused before the run starts: its plan reaches [\d,]+ history events, over the 22,500 allowed \(Step Functions fails an execution past 25,000 events; a tenth is left for retries\); the largest that fits is generations (\d+)/.test(
          e.message,
        ),
    );
    const [breach] = limitBreaches(league, over);
    const largest = breach!.driver!.largestFitting!;
    // The largest that fits is the schema's bound (a worst case over every path, under the same
    // budget): its plan keeps within the budget, and one more is a config the schema refuses.
    assert.equal(largest, MAX_GENERATIONS);
    assert.ok(planRun(league, { ...base, generations: largest }).counts.historyEvents <= HISTORY_EVENT_BUDGET);
    assert.equal(SelfPlayConfig.safeParse({ ...SELFPLAY_SIZES.test, generations: largest + 1 }).success, false);
  });

  it('a state over 256 KiB is refused before it starts, naming the field that drives it and the largest that fits', () => {
    const probe = pipelineNamed('probe');
    const padded = ProbeConfig.parse({ items: [43], padKiB: 300 });
    assert.throws(
      () => refuseOverLimits(probe, padded),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.field === 'config.padKiB' &&
        /its plan reaches [\d,]+ bytes of state, over the 262,144 allowed \(Step Functions fails a state whose input or output passes 256 KiB\); the largest that fits is padKiB \d+/.test(
          e.message,
        ),
    );
    const largest = limitBreaches(probe, padded)[0]!.driver!.largestFitting!;
    assert.ok(planRun(probe, { ...padded, padKiB: largest }).payload.bytes <= PAYLOAD_LIMIT_BYTES);
    assert.ok(planRun(probe, { ...padded, padKiB: largest + 1 }).payload.bytes > PAYLOAD_LIMIT_BYTES);
    // A fan-out whose result list passes the limit with the padding: the item count is the first driver.
    const wide = ProbeConfig.parse({ items: Array.from({ length: 200 }, (_, i) => i), padKiB: 30 });
    const [breach] = limitBreaches(probe, wide);
    assert.equal(breach!.limit, 'payload');
    assert.equal(breach!.driver!.field, 'items');
    const fits = breach!.driver!.largestFitting!;
    assert.ok(fits > 0 && fits < 200);
    assert.ok(planRun(probe, { ...wide, items: wide.items.slice(0, fits) }).payload.bytes <= PAYLOAD_LIMIT_BYTES);
    assert.ok(planRun(probe, { ...wide, items: wide.items.slice(0, fits + 1) }).payload.bytes > PAYLOAD_LIMIT_BYTES);
    // The plan's parts: the fan-out's records and the padding, and the reserve for the steps' own results.
    const parts = planRun(probe, wide).payload.parts;
    assert.ok(parts.some((p) => p.what === 'the result list at $.steps.square' && p.bytes === 200 * 600));
    assert.ok(parts.some((p) => p.bytes === STEP_RESULTS_RESERVE));
  });
});

describe("a plan's high end", () => {
  it('runs every Batch attempt to the timeout its submit sets from the config, and each Claude request, retries included, to its max_tokens', () => {
    const probe = pipelineNamed('probe');
    const [job] = planRun(probe, ProbeConfig.parse({ items: [2, 3], jobTimeoutSeconds: 600 })).jobs;
    // The sum job's definition asks Batch for 3 attempts; its submit sets the config's 600 s.
    assert.deepEqual([job!.attempts, job!.timeoutSeconds], [3, 600]);
    const longer = planRun(probe, ProbeConfig.parse({ items: [2, 3], jobTimeoutSeconds: 1200 }));
    const shorter = planRun(probe, ProbeConfig.parse({ items: [2, 3], jobTimeoutSeconds: 600 }));
    const fargate = (p: typeof longer) => p.cost.high.lines.find((l) => l.item.startsWith('Batch on Fargate'))!;
    assert.equal(fargate(longer).quantity, 3 * 1200);
    assert.ok(Math.abs(fargate(longer).highUsd - 2 * fargate(shorter).highUsd) < 1e-12);
    // The reward search's jobs take the run's trainTimeoutSeconds, handed on by its proposal.
    const rewards = pipelineNamed('rewards');
    const config = RewardsConfig.parse({ ...REWARDS_SIZES.test, trainTimeoutSeconds: 300 });
    assert.equal(planRun(rewards, config).jobs[0]!.timeoutSeconds, 300);
    // Claude in the high end only: each proposal's output at 8,000 tokens and its input at its
    // most, in each of the 3 requests the SDK may send (2 retries).
    const plan = planRun(rewards, config);
    const claude = plan.cost.high.lines.find((l) => l.item.startsWith('Claude '))!;
    const input = (c: { maxInput: { cachedBytes: number; bytes: number; imageTokens: number } }) =>
      c.maxInput.cachedBytes + c.maxInput.bytes + c.maxInput.imageTokens;
    assert.equal(claude.quantity, config.generations * 3 * (8000 + input(plan.claude[0]!)));
    // The refinery's labels: 4 requests a document at most (claude-requests' retries), 1,024 tokens each.
    const refinery = planRun(pipelineNamed('refinery'), RefineryConfig.parse(REFINERY_SIZES.test), { shards: 1 });
    const labels = refinery.cost.high.lines.find((l) => l.item.startsWith('Claude '))!;
    assert.equal(labels.quantity, RefineryConfig.parse(REFINERY_SIZES.test).labels.sample * 4 * (1024 + input(refinery.claude[0]!)));
    // The video's captions: one call per clip the sources can hold (60 s a generated video over
    // 2 s clips), 4 requests each at 300 tokens; none without a key (auto) or with the VLM.
    const video = VideoConfig.parse({ ...VIDEO_SIZES.test, captions: { captioner: 'claude' } });
    const captions = planRun(pipelineNamed('video'), video).claude;
    assert.deepEqual(
      captions.map((c) => [c.step, c.calls.low, c.calls.high, c.attempts, c.maxOutputTokens]),
      [['caption-claude', 0, video.sources.kind === 'generated' ? video.sources.videos * 30 : -1, 4, 300]],
    );
    const fetched = VideoConfig.parse({ ...VIDEO_SIZES.test, sources: { kind: 'blender' }, captions: { captioner: 'claude' }, fetch: { maxSeconds: 600 } });
    assert.equal(
      planRun(pipelineNamed('video'), fetched).claude[0]!.calls.high,
      BLENDER_FILMS.length * 300,
      "Blender's films, 600 s each at most, over 2 s clips",
    );
    assert.deepEqual(
      planRun(pipelineNamed('video'), VideoConfig.parse({ ...VIDEO_SIZES.test, captions: { captioner: 'auto' } }), { claudeKey: false }).claude,
      [],
    );
    // The bound's generated length is the generator's own.
    const generator = readFileSync(new URL('../../batch-jobs/video-cut/generate.py', import.meta.url), 'utf8');
    assert.equal(Number(/^DEFAULT_SPEC_MAX_SECONDS = (\d+)$/m.exec(generator)?.[1]), GENERATED_MAX_SECONDS);
    assert.equal(
      plan.cost.low.lines.find((l) => l.item.startsWith('Claude ')),
      undefined,
    );
  });
});

describe('a plan step by step', () => {
  it("adds up to the run's: transitions, events, invocations, jobs and both ends of the cost, Claude in its step", () => {
    for (const [name, config] of [
      ['probe', ProbeConfig.parse({ items: [2, 3, 5] })],
      ['rewards', RewardsConfig.parse(REWARDS_SIZES.test)],
    ] as const) {
      const plan = planRun(pipelineNamed(name), config);
      const steps = Object.values(plan.counts.steps);
      const sum = (f: (s: (typeof steps)[number]) => number) => steps.reduce((n, s) => n + f(s), 0);
      // The execution's own 2 events are the run's, no step's.
      assert.deepEqual(
        [sum((s) => s.transitions), sum((s) => s.historyEvents) + 2, sum((s) => s.lambdaInvocations), sum((s) => s.batchJobs)],
        [plan.counts.transitions, plan.counts.historyEvents, plan.counts.lambdaInvocations, plan.counts.batchJobs],
        name,
      );
      const costs = Object.values(plan.stepCost);
      for (const end of ['low', 'high'] as const) {
        const total = costs.reduce((n, c) => n + c[end][end === 'low' ? 'lowUsd' : 'highUsd'], 0);
        const whole = plan.cost[end][end === 'low' ? 'lowUsd' : 'highUsd'];
        assert.ok(Math.abs(total - whole) < 1e-9 * Math.max(1, whole), `${name} ${end}: ${total} against ${whole}`);
      }
    }
    const rewards = planRun(pipelineNamed('rewards'), RewardsConfig.parse(REWARDS_SIZES.test));
    assert.ok(
      rewards.stepCost.propose!.high.lines.some((l) => l.item.startsWith('Claude ')),
      'the proposals are priced in their step',
    );
    assert.ok(!rewards.stepCost.train!.high.lines.some((l) => l.item.startsWith('Claude ')));
  });
});

describe("Claude's input in the high bound", () => {
  // Text of mixed widths: 1 (ASCII), 2 (Greek), 3 (CJK) and 4 (emoji, 2 UTF-16 units) bytes in UTF-8.
  const mixed = (units: number) => {
    const pieces = ['a', 'λ', '漢', '😀'];
    let out = '';
    for (let i = 0; out.length < units; i++) out += pieces[i % 4];
    return out.slice(0, units).replace(/[\uD800-\uDBFF]$/, 'a');
  };
  const within = (got: { cachedBytes: number; bytes: number; imageTokens: number }, bound: typeof got, what: string) => {
    assert.ok(
      got.cachedBytes <= bound.cachedBytes && got.bytes <= bound.bytes && got.imageTokens <= bound.imageTokens,
      `${what}: ${JSON.stringify(got)} over ${JSON.stringify(bound)}`,
    );
  };

  it("bounds the refinery's label request: a document far longer than maxChars, of every width", () => {
    for (const maxChars of [100, 1000, 20_000]) {
      const config = RefineryConfig.parse({ ...REFINERY_SIZES.test, labels: { ...REFINERY_SIZES.test.labels, maxChars } });
      const [call] = planRun(pipelineNamed('refinery'), config, { shards: 1 }).claude;
      const request = labelRequestParams(mixed(3 * maxChars), { model: config.labels.model, maxChars });
      within(requestInput(request), call!.maxInput, `maxChars ${maxChars}`);
      // A document of 4-byte characters reaches it exactly.
      assert.deepEqual(requestInput(labelRequestParams('😀'.repeat(maxChars), { model: config.labels.model, maxChars })), call!.maxInput);
    }
  });

  it("bounds the reward search's proposal: failures far over the cut, the longest sources, every seed failed", () => {
    const config = RewardsConfig.parse({ ...REWARDS_SIZES.test, candidates: 16, trainSeeds: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], generations: 1 });
    const [call] = planRun(pipelineNamed('rewards'), config).claude;
    const failure = mixed(32_768);
    const history = Array.from({ length: 17 }, (_, i) => ({
      generation: 9,
      name: `candidate-${i}`,
      source: mixed(MAX_SOURCE_CHARS),
      perSeedSuccess: config.trainSeeds.map((seed) => ({ seed, success: null, error: failure })),
      meanSuccess: null,
      verdict: failure,
      curve: mixed(5000),
    }));
    const request = buildProposeParams({ task: MOUNTAINCAR_TASK, generation: 10, candidates: 16, history, model: config.model });
    within(requestInput(request), call!.maxInput, 'proposal');
    // The cut shows where it cut, and keeps MAX_FEEDBACK_CHARS units (one fewer rather than half an emoji).
    assert.ok([MAX_FEEDBACK_CHARS - 1, MAX_FEEDBACK_CHARS].includes(feedbackText(failure).length));
    assert.equal(feedbackText('a'.repeat(40_000)).length, MAX_FEEDBACK_CHARS);
    assert.ok(feedbackText(failure).endsWith(' [cut]'));
    assert.equal(feedbackText('short'), 'short');
  });

  it("bounds the sparse autoencoders' explain and detect requests from the config's windows", () => {
    const config = SaeConfig.parse({ ...SAE_SIZES.test, labels: { ...SAE_SIZES.test.labels, explainer: 'claude' } });
    const [explain, detect] = planRun(pipelineNamed('sae'), config).claude;
    const window = (active: boolean) => {
      const tokens = Array.from({ length: config.labels.windowTokens }, (_, i) => mixed(i % 3 ? 200 : 7));
      return { tokens, activations: tokens.map((_, i) => (active && i % 3 === 0 ? 2 : 0)) };
    };
    const n = config.labels.explainExamples;
    const feature = {
      feature: 3,
      firingRate: 0.1,
      maxActivation: 2,
      explain: Array.from({ length: n }, (_, i) =>
        i < n - Math.floor(n / 4) ? { ...window(true), source: 'quantile' as const } : { ...window(false), source: 'inactive' as const },
      ),
      detect: [],
    };
    within(requestInput(explainRequestParams(feature, { model: config.labels.model })), explain!.maxInput, 'explain');
    within(
      requestInput(
        detectRequestParams(
          mixed(MAX_LABEL_CHARS),
          [1, 2, 3, 4, 5].map(() => window(false)),
          { model: config.labels.model },
        ),
      ),
      detect!.maxInput,
      'detect',
    );
  });

  it("bounds the video's caption request: one contact sheet, as tall as the cut job makes it", () => {
    const config = VideoConfig.parse({ ...VIDEO_SIZES.test, captions: { captioner: 'claude' } });
    const [call] = planRun(pipelineNamed('video'), config).claude;
    assert.equal(call!.maxInput.imageTokens, CONTACT_SHEET_MAX_TOKENS);
    const clips = readFileSync(new URL('../../batch-jobs/video-cut/clips.py', import.meta.url), 'utf8');
    const [, rows, tile] = /^SHEET_COLUMNS, SHEET_ROWS = \d+, (\d+)\nSHEET_TILE_HEIGHT = (\d+)$/m.exec(clips) ?? [];
    assert.equal(Number(rows) * Number(tile), CONTACT_SHEET_HEIGHT);
    assert.equal(CONTACT_SHEET_MAX_TOKENS, 2880, 'an 8,000 x 270 px sheet at width x height / 750');
  });
});

describe('schemas bounded by the plans', () => {
  const seeds = (n: number, from: number) => Array.from({ length: n }, (_, i) => from + i);

  it("rewards: the schema's count of history events is the plan's, and it refuses what passes the budget", () => {
    const rewards = pipelineNamed('rewards');
    const base = RewardsConfig.parse(REWARDS_SIZES.test);
    let refused = 0;
    for (const generations of [1, 3, 10])
      for (const candidates of [1, 5, 16])
        for (const trainSeeds of [1, 4, 10])
          for (const finalTrainSeeds of [1, 10]) {
            const config = { ...base, generations, candidates, trainSeeds: seeds(trainSeeds, 1), finalTrainSeeds: seeds(finalTrainSeeds, 101) };
            const events = rewardsHistoryEvents(generations, candidates, trainSeeds, finalTrainSeeds);
            assert.equal(planRun(rewards, config).counts.historyEvents, events, JSON.stringify({ generations, candidates, trainSeeds, finalTrainSeeds }));
            const parsed = RewardsConfig.safeParse(config);
            assert.equal(parsed.success, events <= HISTORY_EVENT_BUDGET, `${events} events`);
            if (!parsed.success) {
              refused += 1;
              assert.match(parsed.error.issues[0]!.message, /would record [\d,]+ history events, over the 22,500 a run plans for/);
            }
          }
    assert.ok(refused > 0);
  });

  it("molecules: the schema's count of history events is the plan's (every batch approved), and it refuses what passes the budget", () => {
    const molecules = pipelineNamed('molecules');
    const base = MoleculesConfig.parse(MOLECULES_SIZES.test);
    let refused = 0;
    for (const rounds of [0, 5, 100])
      for (const [sampleSize, batchSize, chunkSize] of [
        [12, 4, 8],
        [2000, 100, 25],
        [10_000, 500, 250],
      ] as const) {
        const config = { ...base, rounds, sampleSize, batchSize, oracle: { ...base.oracle, chunkSize } };
        const events = moleculesHistoryEvents(config);
        assert.equal(planRun(molecules, config).counts.historyEvents, events, JSON.stringify({ rounds, sampleSize, batchSize, chunkSize }));
        const parsed = MoleculesConfig.safeParse(config);
        assert.equal(parsed.success, events <= HISTORY_EVENT_BUDGET, `${events} events`);
        if (!parsed.success) {
          refused += 1;
          assert.deepEqual(parsed.error.issues[0]!.path, ['rounds']);
          assert.match(parsed.error.issues[0]!.message, /at most \d+ rounds fit/);
        }
      }
    assert.ok(refused > 0);
  });
});
