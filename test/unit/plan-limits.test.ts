/**
 * The limits, from the plans: the widest config each modelled pipeline's schema accepts plans a
 * cold run within Step Functions' 25,000 history events (the Distributed Map's items are child
 * executions, outside the parent's history), and the league's schema bound, a worst case over
 * every path, is never below its plan's cold path.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { pipelineNamed } from '#infra/cli/config.ts';
import { planRun } from '#infra/cli/plan.ts';
import { EvalsConfig } from '#pipelines/evals/config.ts';
import { HumanoidConfig, HUMANOID_SIZES, MAX_REPLAY_COMMANDS } from '#pipelines/humanoid/config.ts';
import { LM_SFT_SIZES, LmSftConfig } from '#pipelines/lm-sft/config.ts';
import { ProbeConfig } from '#pipelines/probe/config.ts';
import { MAX_SAES, SAE_SIZES, SaeConfig } from '#pipelines/sae/config.ts';
import { LEAGUE_HISTORY_BUDGET, leagueHistoryEvents, MAX_GENERATIONS, SELFPLAY_SIZES, SelfPlayConfig } from '#pipelines/selfplay/config.ts';
import { HISTORY_EVENT_LIMIT } from '#pipelines/steps/history.ts';
import { MAX_GENERATED_VIDEOS, VIDEO_SIZES, VideoConfig } from '#pipelines/video/config.ts';

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
    it(`${pipeline}: the widest valid config plans within the 25,000 history events`, () => {
      const plan = planRun(pipelineNamed(pipeline), config, options);
      assert.ok(plan.counts.historyEvents <= HISTORY_EVENT_LIMIT, `${plan.counts.historyEvents} events`);
      assert.ok(plan.counts.transitions > 0);
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
});
