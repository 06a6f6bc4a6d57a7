/** Hand-made league inputs for tests: training outputs, match results, whole generations. */
import { addSnapshot, recordMatches, type LeagueDoc } from '#shared/selfplay/league-doc.ts';
import { pairIdOf, type MatchResult } from '#shared/selfplay/league.ts';

const URI = 's3://b/runs/selfplay/e/train';
const train = (gen: number, vsTactical = [0.1, 0.4]) => ({
  snapshotOnnx: `${URI}/${gen}/snapshot.onnx`,
  stateDict: `${URI}/${gen}/snapshot.pt`,
  curves: { groups: ['tactical', 'random', 'self'], iteration: vsTactical.map((_, i) => i + 1), scoreByGroup: vsTactical.map((t) => [t, 0.9, 0.5]) },
  evaluation: { vsTactical: { first: 0.6, second: 0.4, overall: 0.5, games: 100 }, vsRandom: { first: 1, second: 0.9, overall: 0.95, games: 100 } },
  envStepsPerSecond: 5000,
  seconds: 12,
});
const settings = { games: 100, seed: 1, mode: 'sample' as const, maxFailedPercent: 50 };
const rate = { bootstrapSamples: 20, seed: 1, opponents: 3 };

/** A match result with A scoring `winsA` of 100 games, no draws, seats split evenly. */
function result(a: string, b: string, winsA: number): MatchResult {
  const firstWins = Math.ceil(winsA / 2);
  return {
    pairId: pairIdOf(a, b),
    a,
    b,
    games: 100,
    winsA,
    winsB: 100 - winsA,
    draws: 0,
    gamesAFirst: 50,
    gamesASecond: 50,
    firstMoverWinsA: firstWins,
    firstMoverDraws: 0,
    secondMoverWinsA: winsA - firstWins,
    secondMoverDraws: 0,
    scoreA: winsA / 100,
    scoreAFirst: firstWins / 50,
    scoreASecond: (winsA - firstWins) / 50,
    illegalA: 0,
    illegalB: 0,
    plies: 2000,
  };
}

function generation(doc: LeagueDoc, gen: number, wins: Record<string, number>): LeagueDoc {
  const added = addSnapshot(doc, gen, train(gen), settings);
  const results = added.requests.map((r) => ({ ok: true, value: result(r.a.id, r.b.id, wins[r.b.id] ?? 50) }));
  return recordMatches(added.doc, gen, results, rate).doc;
}

export const leagueFixtures = { URI, train, settings, rate, result, generation };
