/**
 * The league document's transitions (shared/selfplay/league-doc.ts) and the report's numbers
 * (shared/selfplay/league-report.ts), on hand-made match results: who joins, who plays whom, what a
 * failure leaves behind, and what the report says.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '#shared/errors.ts';
import {
  addSnapshot,
  latestSnapshot,
  leagueSummary,
  newLeague,
  recordMatches,
  ppoFor,
  scheduledLearningRate,
  trainingGroups,
} from '#shared/selfplay/league-doc.ts';
import { championMetrics, championSummary, eloGapSentence, expectedScore, leagueHeadToHead, leagueReportHtml } from '#shared/selfplay/league-report.ts';
import { leagueFixtures } from '../support/selfplay-league.ts';
import { assertClose } from '../support/floats.ts';
import { GAMES_MULTIPLE, SELFPLAY_SIZES, SelfPlayConfig } from '#pipelines/selfplay/config.ts';

const { URI, train, settings, rate, result, generation } = leagueFixtures;

describe('league document', () => {
  it('starts with the two bots and trains the first generation against both and itself', () => {
    const doc = newLeague();
    assert.deepEqual(
      doc.players.map((p) => p.id),
      ['random', 'tactical'],
    );
    assert.deepEqual(trainingGroups(doc.opponents), [['random', 'tactical'], ['tactical'], ['tactical'], ['self']]);
    assert.equal(leagueSummary(doc, 's3://b/k.json').initialStateDict, null);
  });

  it('each snapshot plays every player already in the league; the top snapshots become opponents', () => {
    let doc = newLeague();
    doc = generation(doc, 1, { random: 90, tactical: 30 });
    doc = generation(doc, 2, { random: 95, tactical: 60, 'gen-1': 80 });
    const added = addSnapshot(doc, 3, train(3), settings);
    assert.deepEqual(
      added.requests.map((r) => r.pairId),
      ['gen-3~random', 'gen-3~tactical', 'gen-3~gen-1', 'gen-3~gen-2'],
    );
    assert.equal(added.maxFailures, 2);
    assert.equal(doc.champion, 'gen-2');
    assert.equal(latestSnapshot(doc)?.id, 'gen-2');
    const groups = trainingGroups(doc.opponents);
    assert.deepEqual(groups.slice(0, 3), [['random', 'tactical'], ['tactical'], ['tactical']]);
    assert.deepEqual(groups[3], [
      { name: 'gen-2', state_dict: `${URI}/2/snapshot.pt` },
      { name: 'gen-1', state_dict: `${URI}/1/snapshot.pt` },
    ]);
    assert.deepEqual(
      doc.generations.map((g) => g.train.scoreVsTactical),
      [
        [0.1, 0.4],
        [0.1, 0.4],
      ],
    );
    assert.equal(doc.generations[1]!.champion, 'gen-2');
  });

  it('a failed pair is recorded, its player stays unrated when it has no match, and the league goes on', () => {
    const added = addSnapshot(newLeague(), 1, train(1), settings);
    const results = added.requests.map((r) => ({ ok: false, item: { pairId: r.pairId }, error: 'InvalidPolicyModel', cause: 'corrupt' }));
    const { doc, rating } = recordMatches(added.doc, 1, results, rate);
    assert.equal(doc.failures.length, 2);
    assert.deepEqual(rating.unrated, ['tactical', 'gen-1']);
    assert.equal(doc.champion, null);
    assert.throws(() => championSummary(doc), /league\.champion.*every match of every generation failed/);
    // The next generation still trains, from the unrated snapshot's weights, against the bots.
    assert.deepEqual(trainingGroups(doc.opponents).at(-1), ['self']);
    assert.equal(leagueSummary(doc, 's3://b/k.json').initialStateDict, `${URI}/1/snapshot.pt`);
  });

  it('refuses generations out of order, repeated results, and foreign matches, naming the field', () => {
    const doc = newLeague();
    assert.throws(
      () => addSnapshot(doc, 2, train(2), settings),
      (e: unknown) => e instanceof ConfigError && e.field === 'generation',
    );
    const added = addSnapshot(doc, 1, train(1), settings);
    const one = { ok: true, value: result('gen-1', 'random', 60) };
    assert.throws(() => recordMatches(added.doc, 1, [one, one], rate), /results\.1.*same pair appears twice/);
    assert.throws(() => recordMatches(added.doc, 1, [{ ok: true, value: result('tactical', 'random', 60) }], rate), /results\.0\.value\.a/);
    const recorded = recordMatches(added.doc, 1, [one], rate).doc;
    assert.throws(() => recordMatches(recorded, 1, [one], rate), /already recorded/);
    assert.throws(
      () => addSnapshot(doc, 1, { ...train(1), evaluation: {} }, settings),
      (e: unknown) => e instanceof ConfigError && e.field.startsWith('train.evaluation'),
    );
    assert.throws(() => addSnapshot(doc, 1, train(1), { ...settings, maxFailedPercent: 101 }), /maxFailedPercent/);
  });
});

describe('league report', () => {
  const doc = generation(generation(newLeague(), 1, { random: 90, tactical: 30 }), 2, { random: 95, tactical: 70, 'gen-1': 75 });

  it('predicts scores from Elo gaps (base 10, 400 scale)', () => {
    assert.equal(expectedScore(0), 0.5); // exact: 10 ** 0 is exactly 1 in every pow, then 1 / 2
    // pow against the closed form: 10 ** -1 is within an ulp of 0.1, so a few ulps apart at most.
    assertClose(expectedScore(400), 10 / 11, { abs: 1e-12 }, 'E(400)');
    assertClose(expectedScore(-400), 1 / 11, { abs: 1e-12 }, 'E(-400)');
  });

  it('summarises the champion against the tactical bot: predicted by the gap and observed', () => {
    const s = championSummary(doc);
    assert.equal(s.champion.id, 'gen-2');
    // Scores here are one division of exact integers (70 / 100): correctly rounded, so equal to
    // the literal's nearest float64 in any language. Compared exactly, as below.
    assert.equal(s.vsTactical.observed, 0.7);
    assert.equal(s.vsTactical.games, 100);
    // The same function of the same gap (one code path); the tolerance is only headroom.
    assertClose(s.vsTactical.predicted!, expectedScore(s.rating.elo - s.tactical!.elo), { abs: 1e-12 }, 'predicted score');
    assert.match(eloGapSentence(s), /predicts a score of \d+\.\d %; their 100 games gave 70\.0 %/);
    const metrics = championMetrics(doc);
    assert.equal(metrics.champion, 'gen-2');
    assert.equal(metrics.matches, 5);
    assert.equal(metrics.games, 500);
    assert.equal(metrics.greedyVsTacticalFirst, 0.6);
    const h2h = leagueHeadToHead(doc);
    assert.deepEqual(h2h.players, ['random', 'tactical', 'gen-1', 'gen-2']);
    assert.equal(h2h.score[3]![2], 0.75);
    assert.equal(h2h.score[2]![3], 0.25);
  });

  it('renders three inline SVG charts and the tables, with no external URL', async () => {
    const html = await leagueReportHtml(doc, { generations: 2 });
    assert.equal(html.match(/<svg /g)?.length, 3);
    assert.doesNotMatch(html, /(src|href)="https?:/);
    assert.match(html, /id="elo-table"/);
    assert.match(html, /<td>gen-2<\/td><td>snapshot<\/td><td>2<\/td>/);
  });
});

describe('learning-rate schedule', () => {
  it('steps down after 40 % and 70 % of the generations, or stays constant', () => {
    const rates = Array.from({ length: 10 }, (_, i) => scheduledLearningRate(1e-3, i + 1, 10, 'step'));
    assert.deepEqual(rates, [1e-3, 1e-3, 1e-3, 1e-3, 5e-4, 5e-4, 5e-4, 2.5e-4, 2.5e-4, 2.5e-4]);
    assert.equal(scheduledLearningRate(1e-3, 10, 10, 'constant'), 1e-3);
  });

  it('hands the next generation its PPO settings with the scheduled rate, the other fields untouched', () => {
    const plan = { ppo: { learning_rate: 1e-3, update_epochs: 2 }, generations: 10, schedule: 'step' as const };
    let doc = newLeague();
    assert.deepEqual(leagueSummary(doc, 's3://b/k.json', plan).trainPpo, { learning_rate: 1e-3, update_epochs: 2 });
    for (let g = 1; g <= 7; g++) doc = generation(doc, g, { random: 90, tactical: 50 });
    assert.deepEqual(leagueSummary(doc, 's3://b/k.json', plan).trainPpo, { learning_rate: 2.5e-4, update_epochs: 2 });
    assert.deepEqual(ppoFor({ ...plan, ppo: { update_epochs: 2 } }, 9), { update_epochs: 2 });
    assert.equal(
      SelfPlayConfig.safeParse({ ...SELFPLAY_SIZES.test, ppo: {}, learningRateSchedule: 'step' }).error?.issues[0]?.path.join('.'),
      'ppo.learning_rate',
    );
  });
});

describe('self-play config', () => {
  it('every size parses and splits its games evenly over the training groups, both seats', () => {
    for (const [name, size] of Object.entries(SELFPLAY_SIZES)) {
      const config = SelfPlayConfig.parse(size);
      assert.equal(config.gamesPerIteration % GAMES_MULTIPLE, 0, name);
      assert.equal(config.gamesPerIteration % (2 * trainingGroups(newLeague().opponents).length), 0, name);
    }
  });

  it('names a bad field and its value', () => {
    const bad = SelfPlayConfig.safeParse({ ...SELFPLAY_SIZES.test, gamesPerIteration: 100 });
    assert.equal(bad.success, false);
    assert.deepEqual(bad.error!.issues[0]!.path, ['gamesPerIteration']);
    assert.equal(SelfPlayConfig.safeParse({ ...SELFPLAY_SIZES.test, ppo: { learning_rat: 1e-3 } }).success, false);
    assert.equal(SelfPlayConfig.safeParse({ ...SELFPLAY_SIZES.test, matchGames: 401 }).success, false);
  });
});
