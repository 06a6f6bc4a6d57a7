/**
 * The self-play league end to end on the embedded runtime, at the `test` size: the synthesized
 * state machine trains generations with the real PyTorch job, plays every pair with
 * onnxruntime-node, fits Elo jointly and publishes the champion with its report. Then a rerun ends
 * from the run cache (no job, no match played, one invocation), and a corrupt snapshot is recorded
 * for its pairs while the league goes on, in a partial run the run cache does not keep.
 */
import { cacheSaving, costOf, usageOfStats, usageOfStep } from '#shared/cost/usage.ts';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { DeleteCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { LocalRuntime, type ExecutionRecord } from '#infra/local/runtime.ts';
import { dynamoClient, s3Client } from '#shared/clients/aws.ts';
import { getArtifactVersion } from '#shared/artifacts.ts';
import { LeagueDoc } from '#shared/selfplay/league-doc.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import { cachePartition, RUN_STEP } from '#shared/table.ts';
import { SELFPLAY_SIZES, SelfPlayConfig } from '#pipelines/selfplay/config.ts';
import { SELFPLAY_PIPELINE } from '#pipelines/selfplay/stack.ts';
import { CHAMPION_ARTIFACT } from '#shared/selfplay/arena.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { planRun } from '#infra/cli/plan.ts';
import { startTestRuntime, stopTestRuntime } from '../support/runtime.ts';
import { assertPlanMatchesRun } from '../support/plan.ts';
import { assertRunCost } from '../support/run-cost.ts';

async function readText(uri: string): Promise<string> {
  const out = await s3Client().send(new GetObjectCommand(parseS3Uri(uri)));
  return out.Body!.transformToString();
}

interface LeagueOutput {
  champion: string;
  ratings: { id: string; elo: number; low: number; high: number; games: number }[];
  leagueUri: string;
  generations: number;
  matches: number;
  failedMatches: number;
  metrics: Record<string, number | string>;
  reportUri: string;
  artifact: { name: string; version: number };
}

describe('self-play league on the embedded runtime (test size)', () => {
  let runtime: LocalRuntime;
  let cold: ExecutionRecord;
  const config = SelfPlayConfig.parse(SELFPLAY_SIZES.test);

  before(async () => {
    runtime = await startTestRuntime({ pipelines: [pipelineNamed(SELFPLAY_PIPELINE)] });
    cold = await runtime.startExecution(SELFPLAY_PIPELINE, { config }).done;
  });
  after(() => stopTestRuntime(runtime));

  it('trains every generation, plays every pair, fits Elo and publishes the champion', async () => {
    assert.equal(cold.status, 'SUCCEEDED', cold.cause);
    await assertRunCost(cold);
    assertPlanMatchesRun(SELFPLAY_PIPELINE, config, cold);
    const out = cold.output as LeagueOutput;
    assert.equal(out.generations, config.generations);
    // Generation k plays the 2 bots and the k-1 earlier snapshots.
    const pairs = Array.from({ length: config.generations }, (_, k) => 2 + k).reduce((a, b) => a + b, 0);
    assert.equal(out.matches, pairs);
    assert.equal(out.failedMatches, 0);
    const elo = new Map(out.ratings.map((r) => [r.id, r.elo]));
    assert.equal(elo.get('random'), 0);
    assert.ok(elo.get(out.champion)! > elo.get('gen-1')! || out.champion === 'gen-1', `champion ${out.champion} above gen-1: ${JSON.stringify(out.ratings)}`);
    // Learning claims, not fixtures: every number here was computed on this machine (PyTorch's and
    // onnxruntime's CPU-chosen kernels), so no other machine's last bits are compared.
    assert.ok(elo.get(`gen-${config.generations}`)! > elo.get('gen-1')!, `the last generation is rated above the first: ${JSON.stringify(out.ratings)}`);
    assert.ok(Number(out.metrics.greedyVsRandom) >= 0.9, `champion greedy vs random ${out.metrics.greedyVsRandom}`);

    const league = LeagueDoc.parse(JSON.parse(await readText(out.leagueUri)));
    for (const m of league.matches) {
      assert.equal(m.games, config.matchGames);
      assert.equal(m.gamesAFirst, m.gamesASecond, `first-mover parity in ${m.pairId}`);
    }
    assert.equal(league.generations.length, config.generations);
    assert.equal(league.generations[0]!.train.iteration.length, config.iterations);

    const where = { table: runtime.resources.tables[0]!, bucket: runtime.resources.buckets[0]! };
    const artifact = await getArtifactVersion(where, CHAMPION_ARTIFACT);
    assert.deepEqual(artifact.files.map((f) => f.name).sort(), ['champion.onnx', 'config.json', 'elo.json', 'head-to-head.json', 'league.json', 'report.html']);
    const html = await readText(out.reportUri);
    assert.match(html, /<svg/);
    assert.match(html, /An Elo gap and a head-to-head score can differ/);
  });

  it('the arena plays the published champion, after sign-in only', async () => {
    const move = `${runtime.approvalApiUrl}/arena/move`;
    const body = JSON.stringify({ moves: [], human: 'second' });
    const anonymous = await fetch(move, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal(anonymous.status, 401);
    const signIn = await fetch(`${runtime.approvalApiUrl}/_local/sign-in`, { method: 'POST', body: '{"username":"tester"}' });
    const { access_token: token } = (await signIn.json()) as { access_token: string };
    const reply = await fetch(move, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body });
    assert.equal(reply.status, 200, await reply.clone().text());
    const state = (await reply.json()) as { moves: number[]; reply: number; toMove: string; legalMoves: number[] };
    assert.equal(state.moves.length, 1);
    assert.ok(state.reply >= 0 && state.reply < 7);
    assert.equal(state.toMove, 'human');
    assert.deepEqual(state.legalMoves, [0, 1, 2, 3, 4, 5, 6]);
  });

  it('a rerun ends from the run cache: no training job, no match, under 5 % of the cold run', async () => {
    // The cold run stored its output as the run cache's entry for this config.
    assert.equal(cold.stats.steps?.[RUN_STEP]?.stores, 1);
    const jobsBefore = runtime.counters().batchJobs;
    const invocationsBefore = runtime.counters().lambdaInvocations;
    const warm = await runtime.startExecution(SELFPLAY_PIPELINE, { config }).done;
    assert.equal(warm.status, 'SUCCEEDED', warm.cause);
    await assertRunCost(warm);
    assert.equal(runtime.counters().batchJobs - jobsBefore, 0);
    // The cold run's output, whole: ratings, league, report and the champion's version.
    assert.deepEqual(warm.output, cold.output);
    // Only the config check ran, and found the entry.
    assert.equal(runtime.counters().lambdaInvocations - invocationsBefore, 1);
    assert.deepEqual(warm.stats.cacheHits, [{ step: RUN_STEP, executionArn: cold.executionArn }]);
    // The config check's three states, the run cache's choice and its restore, as the rerun's plan says.
    assert.equal(warm.stats.statesEntered, 5);
    const rerunPlan = planRun(pipelineNamed(SELFPLAY_PIPELINE), config, { runCacheHit: true }).counts;
    assert.deepEqual([rerunPlan.transitions, rerunPlan.lambdaInvocations, rerunPlan.batchJobs], [5, 1, 0]);
    // Priced at AWS's rates: the rerun's high end against the cold run's low end, for the 5 % goal.
    const coldCost = costOf(usageOfStats(cold.stats));
    const warmCost = costOf(usageOfStats(warm.stats));
    console.log(
      `selfplay test size on AWS: cold ${coldCost.lowUsd.toFixed(4)}-${coldCost.highUsd.toFixed(4)} USD, cached rerun ${warmCost.lowUsd.toFixed(6)}-${warmCost.highUsd.toFixed(6)} USD (${((100 * warmCost.highUsd) / coldCost.lowUsd).toFixed(2)} %); states entered: cold ${cold.stats.statesEntered}, rerun ${warm.stats.statesEntered}`,
    );
    assert.ok(warmCost.highUsd < 0.05 * coldCost.lowUsd, `rerun ${warmCost.highUsd} against cold ${coldCost.lowUsd}`);
    // What it saved is what the cold run paid for every step it skipped: all but the config check
    // (and the run cache's own states, which both runs make).
    const saving = cacheSaving(warm.stats.cacheHits ?? [], (arn) => (arn === cold.executionArn ? cold.stats.steps : undefined));
    assert.equal(saving.priced, 1);
    let expected = 0;
    let kept = 0;
    for (const [step, usage] of Object.entries(cold.stats.steps ?? {})) {
      if (step === 'config' || step === RUN_STEP) kept += costOf(usageOfStep(usage)).lowUsd;
      else expected += costOf(usageOfStep(usage)).lowUsd;
    }
    assert.ok(Math.abs(saving.lowUsd - expected) < 1e-12, `${saving.lowUsd} against ${expected}`);
    // The steps' shares add up to the cold run's cost: the saving is that cost less what the rerun made again.
    assert.ok(Math.abs(coldCost.lowUsd - kept - saving.lowUsd) < 1e-9, `${coldCost.lowUsd} = ${kept} + ${saving.lowUsd}`);
    assert.ok(saving.lowUsd >= costOf({ ...usageOfStats(cold.stats), transitions: 0, lambda: { invocations: 0, billedMs: 0, gbSeconds: 0 } }).lowUsd - 1e-12);
  });

  it('a corrupt snapshot fails only its pairs, the league goes on, and a rerun recomputes only them', async () => {
    const out = cold.output as LeagueOutput;
    const league = LeagueDoc.parse(JSON.parse(await readText(out.leagueUri)));
    const last = league.players.find((p) => p.id === `gen-${config.generations}`)!;
    const onnx = parseS3Uri(last.onnxUri!);
    const good = await (await s3Client().send(new GetObjectCommand(onnx))).Body!.transformToByteArray();
    // Forget the cached result of one of its pairs, then corrupt its ONNX: only that pair replays.
    const table = runtime.resources.tables[0]!;
    const dataDir = runtime.dataDir;
    const cached = await dynamoClient().send(
      new QueryCommand({
        TableName: table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': cachePartition(SELFPLAY_PIPELINE, 'match') },
      }),
    );
    const victim = cached.Items!.find((item) => JSON.parse(item.inputs as string).a.id === last.id && JSON.parse(item.inputs as string).b.id === 'tactical')!;
    assert.ok(victim, 'the cached match of the last snapshot against the tactical bot');
    await dynamoClient().send(new DeleteCommand({ TableName: table, Key: { pk: victim.pk, sk: victim.sk } }));
    // And the run's own entry, which would end the rerun with the cold run's league.
    const runEntries = async () =>
      (
        await dynamoClient().send(
          new QueryCommand({
            TableName: table,
            KeyConditionExpression: 'pk = :pk',
            ExpressionAttributeValues: { ':pk': cachePartition(SELFPLAY_PIPELINE, RUN_STEP) },
          }),
        )
      ).Items ?? [];
    const [entry] = await runEntries();
    assert.ok(entry, "the cold run's entry");
    await dynamoClient().send(new DeleteCommand({ TableName: table, Key: { pk: entry.pk, sk: entry.sk } }));
    await s3Client().send(new PutObjectCommand({ ...onnx, Body: Buffer.from('not an onnx model') }));
    // Warm match containers keep loaded sessions by URI (snapshot keys are written once); a
    // restart on the same data directory starts cold ones, as AWS does when it recycles them.
    await runtime.stop();
    runtime = await LocalRuntime.start({ dataDir, retryDelayMs: 1, pipelines: [pipelineNamed(SELFPLAY_PIPELINE)] });

    const jobs = runtime.counters().batchJobs;
    const broken = await runtime.startExecution(SELFPLAY_PIPELINE, { config }).done;
    assert.equal(broken.status, 'SUCCEEDED', broken.cause);
    const brokenOut = broken.output as LeagueOutput;
    assert.equal(brokenOut.failedMatches, 1);
    assert.equal(brokenOut.matches, out.matches - 1);
    const brokenLeague = LeagueDoc.parse(JSON.parse(await readText(brokenOut.leagueUri)));
    assert.equal(brokenLeague.failures[0]!.pairId, `${last.id}~tactical`);
    assert.equal(brokenLeague.failures[0]!.error, 'InvalidPolicyModel');
    assert.equal(runtime.counters().batchJobs, jobs, 'no training reran');
    // A run with a failed pair is partial: it stores no run entry, so the next run plays the pair again.
    assert.equal((await runEntries()).length, 0);

    // Repaired: the next run replays that one pair and comes back to the cold run's league (the
    // same model, seed and onnxruntime on this machine give the same games, bit for bit).
    await s3Client().send(new PutObjectCommand({ ...onnx, Body: good }));
    const invocations = runtime.counters().lambdaInvocations;
    const repaired = await runtime.startExecution(SELFPLAY_PIPELINE, { config }).done;
    assert.equal(repaired.status, 'SUCCEEDED', repaired.cause);
    assert.equal((repaired.output as LeagueOutput).leagueUri, out.leagueUri);
    assert.equal(runtime.counters().lambdaInvocations - invocations, 2 + 2 * config.generations + 1, 'the config check and bookkeeping, plus the one match');
    assert.equal((await runEntries()).length, 1, 'the whole league is the run entry again');
  });
});
