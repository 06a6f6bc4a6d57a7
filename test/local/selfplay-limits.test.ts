/**
 * The self-play league at its limits: the most generations a run may have (MAX_GENERATIONS, 25,
 * which the execution's 25,000-event history bounds: the last one plays 26 pairs and the league
 * holds 27 players), the most snapshot opponents (10) and every
 * PPO setting given, on the smallest training a generation allows so it takes minutes. The state
 * carries the match requests, the fan-out's records and the ratings, all of which grow with the
 * league: the run completes and its largest state stays far below 256 KiB.
 *
 * Then every match fails, in a league of 5 generations (20 pairs: what failing records hold per
 * pair is bounded the same way at any size). The next opponents come from the Elo table, so a
 * league whose matches fail trains against other players: to keep every training cached, that
 * league takes no snapshot opponents (opponents 0). A run trains its 5 snapshots; each one's ONNX
 * is then corrupted and the cached matches forgotten, and a rerun that tolerates every failure
 * (maxFailedMatchPercent 100) plays its generations, records every failure with its reason in
 * the league document, and fails at the report (nothing to publish) with an error that names the
 * first failure and the league document.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { BatchWriteCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { LocalRuntime, type ExecutionRecord } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { dynamoClient, s3Client } from '#shared/clients/aws.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import { cachePartition, RUN_STEP } from '#shared/table.ts';
import { LeagueDoc } from '#shared/selfplay/league-doc.ts';
import { MAX_GENERATIONS, SelfPlayConfig } from '#pipelines/selfplay/config.ts';
import { SELFPLAY_PIPELINE } from '#pipelines/selfplay/stack.ts';
import { startTestRuntime, stopTestRuntime } from '../support/runtime.ts';

interface LeagueOutput {
  ratings: { id: string; elo: number; games: number }[];
  leagueUri: string;
  generations: number;
  matches: number;
  failedMatches: number;
}

async function readLeague(uri: string): Promise<LeagueDoc> {
  const out = await s3Client().send(new GetObjectCommand(parseS3Uri(uri)));
  return LeagueDoc.parse(JSON.parse(await out.Body!.transformToString()));
}

/** Limits of the state: AWS's 256 KiB, and the margin these runs keep under it. */
const STATE_LIMIT = 256 * 1024;

describe('self-play league at its limits', () => {
  let runtime: LocalRuntime;
  let cold: ExecutionRecord;
  const config = SelfPlayConfig.parse({
    generations: MAX_GENERATIONS,
    gamesPerIteration: 8,
    iterations: 1,
    hiddenSizes: [8],
    matchGames: 2,
    matchMode: 'greedy',
    evaluationGames: 2,
    bootstrapSamples: 1,
    opponents: 10,
    maxFailedMatchPercent: 100,
    checkpointEvery: 1,
    learningRateSchedule: 'step',
    ppo: {
      learning_rate: 1e-3,
      gamma: 0.99,
      gae_lambda: 0.95,
      clip: 0.2,
      vf_coef: 0.5,
      ent_coef: 0.01,
      max_grad_norm: 0.5,
      update_epochs: 1,
      minibatches: 1,
      normalize_advantages: true,
    },
    seed: 2 ** 30,
  });
  // Generation k plays the 2 bots and the k-1 earlier snapshots.
  const pairs = Array.from({ length: config.generations }, (_, k) => 2 + k).reduce((a, b) => a + b, 0);

  before(
    async () => {
      runtime = await startTestRuntime({ pipelines: [pipelineNamed(SELFPLAY_PIPELINE)] });
      cold = await runtime.startExecution(SELFPLAY_PIPELINE, { config }).done;
    },
    { timeout: 30 * 60_000 },
  );
  after(() => stopTestRuntime(runtime));

  it('plays the most generations a run may have against every player, and its state stays small', () => {
    assert.equal(cold.status, 'SUCCEEDED', `${cold.error}: ${cold.cause}`);
    const out = cold.output as LeagueOutput;
    assert.equal(out.generations, config.generations);
    assert.equal(out.matches, pairs);
    assert.equal(out.failedMatches, 0);
    assert.equal(out.ratings.length, config.generations + 2);
    const { largestState } = cold.stats;
    console.log(`selfplay at its limits: ${pairs} matches, largest state ${largestState.bytes} bytes (${largestState.name})`);
    assert.ok(largestState.bytes < STATE_LIMIT / 2, `${largestState.name}: ${largestState.bytes} bytes`);
  });

  it('every match failing is recorded pair by pair, and the run ends naming where', { timeout: 20 * 60_000 }, async () => {
    const alone = { ...config, generations: 5, opponents: 0 };
    const failing = Array.from({ length: alone.generations }, (_, k) => 2 + k).reduce((a, b) => a + b, 0);
    const trained = await runtime.startExecution(SELFPLAY_PIPELINE, { config: alone }).done;
    assert.equal(trained.status, 'SUCCEEDED', `${trained.error}: ${trained.cause}`);
    const league = await readLeague((trained.output as LeagueOutput).leagueUri);
    const table = runtime.resources.tables[0]!;
    const cached: Record<string, unknown>[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await dynamoClient().send(
        new QueryCommand({
          TableName: table,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': cachePartition(SELFPLAY_PIPELINE, 'match') },
          ProjectionExpression: 'pk, sk',
          ExclusiveStartKey: start,
        }),
      );
      cached.push(...page.Items!);
      start = page.LastEvaluatedKey;
    } while (start);
    // Both runs' matches: the second run's later snapshots are new players (trained against other opponents).
    assert.equal(cached.length, pairs + failing - 2, 'every match was cached (the first generation played the same pairs in both)');
    // And the runs' own entries (this config's would end the rerun with the league as it was).
    const runEntries = await dynamoClient().send(
      new QueryCommand({
        TableName: table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': cachePartition(SELFPLAY_PIPELINE, RUN_STEP) },
      }),
    );
    assert.ok(runEntries.Items!.length >= 1, "the trained league's run entry");
    const forget = [...cached, ...runEntries.Items!];
    for (let i = 0; i < forget.length; i += 25) {
      const batch = forget.slice(i, i + 25).map((item) => ({ DeleteRequest: { Key: { pk: item.pk, sk: item.sk } } }));
      await dynamoClient().send(new BatchWriteCommand({ RequestItems: { [table]: batch } }));
    }
    const snapshots = league.players.filter((p) => p.kind === 'snapshot');
    assert.equal(snapshots.length, alone.generations);
    for (const player of snapshots) {
      await s3Client().send(new PutObjectCommand({ ...parseS3Uri(player.onnxUri!), Body: Buffer.from(`${player.id}: not an onnx model`) }));
    }
    // Warm match containers keep loaded sessions by URI: a restart starts cold ones, as AWS does.
    const dataDir = runtime.dataDir;
    await runtime.stop();
    runtime = await LocalRuntime.start({ dataDir, retryDelayMs: 1, pipelines: [pipelineNamed(SELFPLAY_PIPELINE)] });

    const jobs = runtime.counters().batchJobs;
    const broken = await runtime.startExecution(SELFPLAY_PIPELINE, { config: alone }).done;
    assert.equal(runtime.counters().batchJobs, jobs, 'no training reran');
    // Nothing to publish: the run fails at the report, naming why and where every failure is.
    assert.equal(broken.status, 'FAILED');
    assert.equal(broken.error, 'NoRatedSnapshot', broken.cause);
    assert.match(broken.cause ?? '', new RegExp(`all ${failing} matches failed \\(the first, gen-1~random: InvalidPolicyModel\\)`));
    const leagueUri = /the league document records every failure: (s3:\/\/\S+\.json)/.exec(broken.cause ?? '')?.[1];
    assert.ok(leagueUri, broken.cause);
    const brokenLeague = await readLeague(leagueUri);
    assert.equal(brokenLeague.generations.length, alone.generations);
    assert.equal(brokenLeague.failures.length, failing);
    assert.equal(brokenLeague.champion, null);
    assert.ok(
      brokenLeague.failures.every((f) => f.error === 'InvalidPolicyModel'),
      JSON.stringify(brokenLeague.failures.find((f) => f.error !== 'InvalidPolicyModel')),
    );
    const { largestState } = broken.stats;
    console.log(`selfplay with every match failing: largest state ${largestState.bytes} bytes (${largestState.name})`);
    assert.ok(largestState.bytes < STATE_LIMIT / 2, `${largestState.name}: ${largestState.bytes} bytes`);
  });
});
