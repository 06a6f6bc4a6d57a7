/** The reward search report: headline figures, the final comparison, seed noise before the ranking, escaping of candidate text, charts, metrics. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { sha256Hex } from '#shared/json.ts';
import { RewardSearchDoc, rewardMetrics, rewardReportHtml, seedNoiseSentence, rewardSearchSummary } from '#shared/rewards/report.ts';
import type { SeedResult } from '#shared/rewards/search.ts';
import { assertClose } from '../support/floats.ts';

const HOSTILE_SOURCE = 'def compute_reward(obs, action, next_obs):\n    # </pre><script>alert(1)</script>\n    return float(next_obs[1] ** 2) & 1\n';
const SHAPED_SOURCE = 'def compute_reward(obs, action, next_obs):\n    return next_obs[0] + 10 * abs(next_obs[1])\n';
const ENV_SOURCE = 'def compute_reward(obs, action, next_obs):\n    return -1.0\n';

const seeds = (values: (number | null)[], first = 1, failure = 'killed at the memory limit (2048 MiB)'): SeedResult[] =>
  values.map((v, i) => ({ seed: first + i, success: v, episodes: v === null ? 0 : 30, ...(v === null ? { failure } : {}) }));

function candidate(name: string, source: string, values: (number | null)[], extra: Record<string, unknown> = {}) {
  return { name, rationale: `Why ${name} works.`, source, sourceSha256: sha256Hex(source), origin: 'claude', seeds: seeds(values), ...extra };
}

/**
 * Generation 1: progress [0.5, 0.3] (mean 0.4), energy [0.6, 0.8] (0.7), a hostile candidate whose two seeds the sandbox killed (0).
 * Generation 2: momentum [0.9, 0.7] (0.8, its source tries to close the <pre>), a reward file [0.75, failed] (0.375).
 * Seed noise, failed seeds left out: progress, energy and momentum have two graded seeds each, 0.1 either side of their
 * means, so the pooled variance is 3 * 2 * 0.1^2 / (6 - 3) = 0.02, the std sqrt(0.02) = 0.1414, and with 2 seeds the
 * distinguishable difference is 2 * sqrt(2) * 0.1414 / sqrt(2) = 0.2828: energy (0.1 behind the top) is within it,
 * progress (0.4 behind) is not. fork_bomb (no graded seed) and the reward file (one) say nothing about spread.
 * Final on training seeds 11-13: momentum [0.5, 0.4, 0.3] = 0.4 (std 0.1), the environment's reward 0, the shaped reward [0.3, failed, 0.3] = 0.2.
 */
const input = {
  task: 'MountainCar-v0',
  generations: [
    {
      generation: 1,
      candidates: [
        candidate('progress', 'def compute_reward(obs, action, next_obs):\n    return next_obs[0]\n', [0.5, 0.3], { trainSeconds: [40, 50] }),
        candidate('energy', 'def compute_reward(obs, action, next_obs):\n    return next_obs[1] ** 2\n', [0.6, 0.8], {
          curves: [
            {
              seed: 1,
              points: [
                { step: 10000, envReturn: -200, success: 0 },
                { step: 20000, envReturn: -150.5, success: 0.6 },
              ],
            },
          ],
        }),
        candidate('fork_bomb', 'import os\ndef compute_reward(obs, action, next_obs):\n    while True: os.fork()\n', [null, null], {
          verdict: 'stopped: <b>process limit</b> (64 processes)',
          rationale: '<img src=x onerror=alert(2)>',
        }),
      ],
    },
    {
      generation: 2,
      candidates: [
        candidate('momentum', HOSTILE_SOURCE, [0.9, 0.7]),
        {
          ...candidate('energy "v2" <file>.py', 'def compute_reward(obs, action, next_obs):\n    return 2 * next_obs[1] ** 2\n', [0.75, null]),
          origin: 'file',
          seeds: [
            { seed: 1, success: 0.75, episodes: 30, trainSeconds: 45 },
            { seed: 2, success: null, episodes: 0, failure: 'wall-clock limit: killed after 600 s </td><script>x()</script>' },
          ],
        },
      ],
    },
  ],
  final: {
    gradeSeeds: [100, 101, 102],
    episodesPerSeed: 10,
    entries: [
      { role: 'winner', name: 'momentum', sourceSha256: sha256Hex(HOSTILE_SOURCE), seeds: seeds([0.5, 0.4, 0.3], 11) },
      { role: 'env-reward', name: 'env_reward', sourceSha256: sha256Hex(ENV_SOURCE), seeds: seeds([0, 0, 0], 11) },
      { role: 'shaped-reward', name: 'shaped_reward', sourceSha256: sha256Hex(SHAPED_SOURCE), seeds: seeds([0.3, null, 0.3], 11, 'job error: out of disk') },
    ],
  },
  usage: [
    { generation: 1, inputTokens: 1000, outputTokens: 2000, cacheReadTokens: 0, cacheWriteTokens: 900 },
    { generation: 2, inputTokens: 300, outputTokens: 2100, cacheReadTokens: 900, cacheWriteTokens: 0 },
  ],
};

const doc = RewardSearchDoc.parse(input);

const unescapeHtml = (s: string) =>
  s
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&');
/** The content of the element with this id (no element of the same tag nests inside the ones read here). */
const textOf = (html: string, id: string) => html.match(new RegExp(`<(\\w+) id="${id}"[^>]*>([\\s\\S]*?)</\\1>`))?.[2];

describe('reward search report', () => {
  it('names the winner and the final figures on the same fresh seeds', async () => {
    const html = await rewardReportHtml(doc, { generations: 2 });
    assert.equal(textOf(html, 'winner-final'), '40.0 %');
    assert.equal(textOf(html, 'env-final'), '0.0 %');
    assert.equal(textOf(html, 'shaped-final'), '20.0 %');
    assert.match(
      textOf(html, 'headline')!,
      /Winner <strong>momentum<\/strong> \(generation 2\).*std 10\.0 pp.*In the search it scored 80\.0 %, the best of 5 candidates/,
    );
    assert.match(
      textOf(html, 'final-setup')!,
      /retrained from scratch on the same 3 training seeds \(11, 12, 13\), none of them a seed the search trained on[\s\S]*same 3 fresh seeds \(100, 101, 102\), 10 episodes each/,
    );
    // A final retrained on the search's own training seeds says so.
    const reused = RewardSearchDoc.parse({
      ...input,
      final: { ...input.final, entries: input.final.entries.map((e) => ({ ...e, seeds: e.seeds.map((x, i) => ({ ...x, seed: i + 1 })) })) },
    });
    assert.match(textOf(await rewardReportHtml(reused, { generations: 2 }), 'final-setup')!, /some of them seeds the search trained on/);
    const shapedRow = html.match(/<tr data-role="shaped-reward">.*<\/tr>/)![0];
    assert.match(shapedRow, /<td>20\.0 %<\/td><td>17\.3 pp<\/td>/, 'mean 0.2, std of [0.3, 0, 0.3] = 0.1732');
    assert.match(shapedRow, /seed 11: 30\.0 %<br>seed 12: <span class="failed">failed \(job error: out of disk\)<\/span><br>seed 13: 30\.0 %/);
  });

  it('escapes everything a candidate wrote: the source shows as text and no script or handler reaches the page', async () => {
    const html = await rewardReportHtml(doc, {});
    assert.doesNotMatch(html, /<script/i);
    assert.doesNotMatch(html, /<img/i);
    assert.doesNotMatch(html, /<b>process limit/);
    assert.doesNotMatch(html, /<file>/);
    assert.equal(unescapeHtml(textOf(html, 'winner-source')!), HOSTILE_SOURCE);
    assert.match(html, /# &lt;\/pre&gt;&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
    assert.match(html, /&lt;img src=x onerror=alert\(2\)&gt;/);
    assert.match(html, /energy &quot;v2&quot; &lt;file&gt;\.py/);
    assert.match(html, /default-src 'none'/, 'a Content-Security-Policy forbids scripts and network loads');
    assert.doesNotMatch(html, /(src|href)="https?:/);
  });

  it('states the seed noise before the ranking, with the margin and who is within it', async () => {
    const html = await rewardReportHtml(doc, {});
    const noise = html.indexOf('id="seed-noise"');
    assert.ok(noise > 0 && noise < html.indexOf('id="ranking"'), 'noise sentence before the ranking table');
    assert.equal(
      textOf(html, 'seed-noise'),
      'One candidate&#39;s success varies by 14.1 pp across training seeds (standard deviation within a candidate, pooled over the 3 candidates with two or more graded seeds, ' +
        '6 seeds in all; failed seeds left out); differences in mean success below 28.3 pp are not distinguishable with 2 seeds per candidate. ' +
        '1 other candidate is within that margin of the top one, so the order among them is not meaningful.',
    );
    const ranking = html.match(/<table id="ranking">[\s\S]*?<\/table>/)![0];
    const order = [...ranking.matchAll(/<tr><td>\d+<\/td><td>\d+<\/td><td>([^<]+)<\/td>/g)].map((m) => unescapeHtml(m[1]!));
    assert.deepEqual(order, ['momentum', 'energy', 'progress', 'energy "v2" <file>.py', 'fork_bomb']);
    assert.match(
      seedNoiseSentence({
        noise: { pooledStd: null, candidates: 0, gradedSeeds: 0, seedsPerCandidate: 2, distinguishableDifference: null },
        ranking: rewardSearchSummary(doc).ranking,
      }),
      /^No candidate has two or more graded seeds .* unknown and whether a difference in mean success means anything cannot be judged/,
    );
  });

  it('with no spread observed, says the measured noise is 0 and that it does not show candidates never vary', () => {
    const flat = RewardSearchDoc.parse({
      task: 'MountainCar-v0',
      generations: [
        { generation: 1, candidates: [candidate('top', 'return 1', [1, 1]), candidate('twin', 'return 2', [1, 1]), candidate('none', 'return 3', [0, 0])] },
      ],
    });
    const summary = rewardSearchSummary(flat);
    assert.equal(summary.noise.pooledStd, 0);
    const sentence = seedNoiseSentence(summary);
    assert.match(
      sentence,
      /^No candidate's success varied across its training seeds \(the 3 candidates with two or more graded seeds, 6 seeds in all; failed seeds left out\)/,
    );
    assert.match(sentence, /does not show that candidates never vary\. 1 other candidate is within that margin/, 'a tie with the top one is within any margin');
  });

  it('draws the charts inline and lists per-generation scores, per-seed results, verdicts and collapsed sources', async () => {
    const html = await rewardReportHtml(doc, {});
    assert.equal(html.match(/<svg /g)?.length, 2, 'generation chart and final chart');
    assert.match(html, /<figure id="generation-chart"><svg /);
    assert.match(html, /<figure id="final-chart"><svg /);
    assert.match(html, /g2 energy &quot;v2&quot; &lt;file&gt;\.py/, 'the chart labels candidates escaped');
    const generations = html.match(/<table id="generations">[\s\S]*?<\/table>/)![0];
    assert.match(
      generations,
      /<td rowspan="3">1<\/td><td>energy<\/td><td>70\.0 %<\/td><td>14\.1 pp<\/td><td>0 of 2<\/td><td rowspan="3">1000 in, 2000 out, 0 cache read, 900 cache write<\/td>/,
    );
    assert.match(generations, /<td>fork_bomb<\/td><td>0\.0 %<\/td><td>0\.0 pp<\/td><td>2 of 2<\/td>/);
    const perSeed = html.match(/<table id="per-seed">[\s\S]*?<\/table>/)![0];
    assert.equal(perSeed.match(/<tr/g)!.length, 1 + 10, 'header and one row per trained seed');
    assert.match(perSeed, /<td>1<\/td><td>progress<\/td><td>2<\/td><td>30\.0 %<\/td><td>30<\/td><td>50 s<\/td>/);
    assert.match(perSeed, /wall-clock limit: killed after 600 s &lt;\/td&gt;&lt;script&gt;x\(\)&lt;\/script&gt;/);
    const verdicts = html.match(/<table id="verdicts">[\s\S]*?<\/table>/)![0];
    assert.equal(verdicts.match(/<tr>/g)!.length, 1 + 2, 'the hostile candidate and the one with a failed seed');
    assert.match(
      verdicts,
      /<td>fork_bomb<\/td><td[^>]*>stopped: &lt;b&gt;process limit&lt;\/b&gt; \(64 processes\)<\/td><td[^>]*>seed 1: <span class="failed">failed \(killed at the memory limit \(2048 MiB\)\)/,
    );
    assert.equal(html.match(/<details class="candidate">/g)?.length, 5);
    assert.doesNotMatch(html, /<details[^>]* open/, 'sources collapsed');
    assert.match(html, /step 20000: return -150\.5, success 60\.0 %/);
  });

  it('without a final comparison, names the best proposed candidate and says the comparison has not run', async () => {
    const { final: _final, ...rest } = input;
    const html = await rewardReportHtml(RewardSearchDoc.parse(rest), {});
    assert.match(html, /id="final-missing"/);
    assert.equal(textOf(html, 'winner-search'), '80.0 %');
    assert.equal(html.match(/<svg /g)?.length, 1);
  });
});

describe('reward search metrics', () => {
  it('flattens the winner, the baselines, the noise, failures and token counts', () => {
    const m = rewardMetrics(doc);
    assert.deepEqual(m, {
      task: 'MountainCar-v0',
      winner: 'momentum',
      winnerGeneration: 2,
      winnerSha256: sha256Hex(HOSTILE_SOURCE),
      winnerSearchSuccess: 0.8,
      winnerSearchStd: 0.1414,
      winnerFinalSuccess: 0.4,
      winnerFinalStd: 0.1,
      envRewardFinalSuccess: 0,
      envRewardFinalStd: 0,
      shapedRewardFinalSuccess: 0.2,
      shapedRewardFinalStd: 0.1732,
      finalTrainingSeeds: 3,
      finalGradeSeeds: 3,
      finalEpisodesPerSeed: 10,
      generations: 2,
      candidates: 5,
      trainedSeeds: 10,
      failedSeeds: 3,
      candidatesWithVerdict: 1,
      seedNoiseCandidates: 3,
      seedNoiseStd: 0.1414,
      distinguishableDifference: 0.2828,
      meanTrainSeconds: 45,
      inputTokens: 1300,
      outputTokens: 4100,
      cacheReadTokens: 900,
      cacheWriteTokens: 900,
    });
  });
});

describe('reward search seed noise', () => {
  const search = (candidates: ReturnType<typeof candidate>[]) =>
    RewardSearchDoc.parse({ task: 'MountainCar-v0', generations: [{ generation: 1, candidates }] });
  const source = (i: number) => `def compute_reward(obs, action, next_obs):\n    return ${i}\n`;

  it('measures the spread within candidates across their graded seeds, so candidates stuck at 0 or failed do not make it 0', async () => {
    // Two seeds a candidate, as in the smoke run: the winner swing [1, 0.25] (mean 0.625, std 0.75 / sqrt(2) = 0.5303),
    // energy [0.5, 0.4], half [0.3, failed], stuck and still [0, 0], a thief [failed, failed]. A median of per-candidate
    // stds with failed seeds as 0 is 0 here (0, 0, 0, 0.0707, 0.2121, 0.5303): the figures the issue reported.
    const doc = search([
      candidate('swing', source(1), [1, 0.25]),
      candidate('energy', source(2), [0.5, 0.4]),
      candidate('half', source(3), [0.3, null]),
      candidate('stuck', source(4), [0, 0]),
      candidate('still', source(5), [0, 0]),
      candidate('thief', source(6), [null, null]),
    ]);
    // By hand: swing, energy, stuck and still have two graded seeds each (8 seeds, 4 degrees of freedom); squared
    // deviations from their own means 2 * 0.375^2 + 2 * 0.05^2 + 0 + 0 = 0.28625, so the pooled variance is
    // 0.28625 / 4 = 0.0715625; with 2 seeds per candidate the distinguishable difference is 2 * sqrt(2) * std / sqrt(2).
    const std = Math.sqrt(0.0715625);
    const margin = (2 * Math.sqrt(2) * std) / Math.sqrt(2);
    const { noise } = rewardSearchSummary(doc);
    // A few sums and one sqrt of numbers <= 1 in another order: a few ulps; 1e-12 is headroom far below a wrong formula.
    assertClose(noise.pooledStd!, std, { abs: 1e-12 }, 'pooled std');
    assertClose(noise.distinguishableDifference!, margin, { abs: 1e-12 }, 'distinguishable difference');
    assert.deepEqual([noise.candidates, noise.gradedSeeds, noise.seedsPerCandidate], [4, 8, 2]);
    const m = rewardMetrics(doc);
    assert.equal(m.winner, 'swing');
    assert.equal(m.winnerSearchStd, 0.5303);
    assert.equal(m.seedNoiseCandidates, 4);
    // The metrics are rounded to 4 decimals: within half a unit of the last place.
    assertClose(m.seedNoiseStd as number, std, { abs: 5e-5 }, 'seedNoiseStd');
    assertClose(m.distinguishableDifference as number, margin, { abs: 5e-5 }, 'distinguishableDifference');
    assert.ok((m.seedNoiseStd as number) > 0 && (m.distinguishableDifference as number) > 0);
    // energy (0.175 behind the top) and half (0.475 behind) are within 0.535 of it; stuck, still and thief (0.625) are not.
    assert.equal(
      textOf(await rewardReportHtml(doc, {}), 'seed-noise'),
      'One candidate&#39;s success varies by 26.8 pp across training seeds (standard deviation within a candidate, pooled over the 4 candidates with two or more graded seeds, ' +
        '8 seeds in all; failed seeds left out); differences in mean success below 53.5 pp are not distinguishable with 2 seeds per candidate. ' +
        '2 other candidates are within that margin of the top one, so the order among them is not meaningful.',
    );
  });

  it('is unknown, not 0, when no candidate has two graded seeds, and the report says no difference can be judged', async () => {
    // Two seeds each but one or both failed, and a candidate with a single seed: nothing to measure a spread on.
    const doc = search([candidate('once', source(1), [0.7]), candidate('half', source(2), [0.5, null]), candidate('thief', source(3), [null, null])]);
    const { noise } = rewardSearchSummary(doc);
    assert.deepEqual(noise, { pooledStd: null, candidates: 0, gradedSeeds: 0, seedsPerCandidate: 1, distinguishableDifference: null });
    const m = rewardMetrics(doc);
    assert.equal(m.seedNoiseCandidates, 0);
    assert.ok(!('seedNoiseStd' in m) && !('distinguishableDifference' in m), `unknown noise is left out, never published as 0: ${JSON.stringify(m)}`);
    const sentence = textOf(await rewardReportHtml(doc, {}), 'seed-noise')!;
    assert.match(sentence, /^No candidate has two or more graded seeds \(a failed seed is not graded\)/);
    assert.match(sentence, /whether a difference in mean success means anything cannot be judged/);
    assert.doesNotMatch(sentence, /0\.0 pp/);
  });
});

describe('reward search document', () => {
  const issueOf = (value: unknown) => {
    const issue = RewardSearchDoc.safeParse(value).error?.issues[0];
    return issue && `${issue.path.join('.')}: ${issue.message}`;
  };

  it('refuses a source whose hash does not match, duplicate names, and a winner that is no candidate', () => {
    const tampered = structuredClone(input);
    tampered.generations[0]!.candidates[0]!.source += '\n# changed after training';
    assert.equal(issueOf(tampered), 'generations.0.candidates.0.sourceSha256: is not the sha256 of the source');
    const twice = structuredClone(input);
    twice.generations[1]!.candidates[1]!.name = 'momentum';
    assert.match(issueOf(twice)!, /^generations\.1\.candidates\.1\.name: is used by an earlier candidate of generation 2/);
    const stranger = structuredClone(input);
    stranger.final.entries[0]!.sourceSha256 = 'f'.repeat(64);
    assert.equal(issueOf(stranger), 'final.entries.0.sourceSha256: is not the source of any candidate of the search');
  });

  it('refuses a final whose entries train on different seeds or grade on a training seed', () => {
    const uneven = structuredClone(input);
    uneven.final.entries[1]!.seeds = seeds([0, 0], 11);
    assert.equal(issueOf(uneven), 'final.entries.1.seeds: must use the same training seeds as winner (11,12,13), got 11,12');
    const stale = structuredClone(input);
    stale.final.gradeSeeds = [100, 12];
    assert.equal(issueOf(stale), 'final.gradeSeeds.1: seed 12 is also a training seed; grading seeds must be fresh');
  });
});
