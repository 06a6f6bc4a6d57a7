/**
 * The Connect Four self-play league: PPO on the GPU queue, a match fan-out, a joint Elo fit, and
 * the champion published with its report.
 *
 * 1. Start the league (Lambda): the random and tactical bots.
 * 2. Per generation, a loop in the state machine:
 *    a. train (cached Batch job, GPU queue): PPO from the previous snapshot against the chosen
 *       opponents; writes snapshot.onnx, snapshot.pt and the training curves.
 *    b. plan (Lambda): the snapshot joins the league; one match request per existing player.
 *       matches (fan-out, one cached Lambda per pair): lock-step games with onnxruntime-node.
 *       A failed pair is recorded and the league goes on, within the configured tolerance.
 *    c. elo (Lambda): every match so far fitted jointly, random = 0, bootstrap intervals.
 *    d. the next opponents: the bots and the top snapshots by Elo (chosen by the elo step).
 * 3. report (cached Lambda) and publish: the champion artifact `selfplay-champion` (ONNX, config,
 *    Elo table, head-to-head matrix, league document) with its HTML report as the card.
 * 4. The arena (API Gateway + Lambda with onnxruntime-node + the page) plays the latest champion.
 *
 * The league itself lives in S3 as a content-addressed JSON document; only its URI and small
 * summaries travel through the state.
 */
import { Duration } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { BatchJob, documentFunction, fanOut, invoke, PipelineFunction, PipelineStack, type PipelineStackProps, runJob, step } from '#pipelines/steps/index.ts';
import { acknowledgeFindings, s3GrantFindings } from '#pipelines/steps/nag-findings.ts';
import { CHAMPION_ARTIFACT } from '#shared/selfplay/arena.ts';
import { Arena, arenaPublicFromContext } from './arena.ts';
import { MAX_GENERATIONS, SelfPlayConfig } from './config.ts';
import { maxJsonCharsAt } from '#shared/schema.ts';

export const SELFPLAY_PIPELINE = 'selfplay';

export type SelfPlayStackProps = PipelineStackProps;

export class SelfPlayLeagueStack extends PipelineStack {
  readonly arena: Arena;

  constructor(scope: Construct, id: string, props: SelfPlayStackProps) {
    super(scope, id, SELFPLAY_PIPELINE, props, SelfPlayConfig);
    const { resources, steps, cache } = this;
    this.cacheRuns(
      'A league is a function of its config and its code: it starts from a fresh network and the two bots, every seed comes from the config, and it reads nothing an upload or another run can change; it has no approval gate.',
    );
    // What the cache keys read besides the config: values the league's own Lambdas make.
    this.bounds
      .chars('$.league.leagueUri', 400, "the league document's content-addressed URI (data/selfplay/league/<sha256>.json)")
      .chars(
        '$.league.trainGroups',
        4800,
        'four opponent groups: the two bots, and at most 10 snapshots (config.opponents), each an id (at most 64) and its weights URI (at most 368)',
      )
      .chars(
        '$.league.trainPpo',
        (maxJsonCharsAt(SelfPlayConfig, ['ppo']) ?? 0) + 40,
        "the config's ppo settings with the learning rate of the generation (one number) put in",
      )
      .chars('$.league.initialStateDict', 400, "null, or the newest snapshot's weights URI, which the train job wrote under runs/selfplay/")
      // What the run's Output reads of the league (its entry in the run cache holds it).
      .chars('$.league.champion', 70, "null, or the champion's player id (at most 64 characters)")
      .chars(
        '$.league.ratings',
        (MAX_GENERATIONS + 2) * 200,
        'one compact rating per player (the snapshots, at most config.generations, and the two bots): an id of at most 64 characters and four numbers',
      )
      .chars('$.league.generations', 24, 'the count of generations played, an integer')
      .chars('$.league.matches', 24, 'the count of matches played, an integer')
      .chars('$.league.failedMatches', 24, 'the count of failed matches, an integer')
      .chars('$.gen', 40, 'the generation counter, {n}: at most config.generations (40)')
      // A URI the platform makes: s3://, a bucket name (at most 63) and a key of at most 300.
      .chars('$.item.a', 1000, 'a player from plan: id (at most 64), kind, generation and two URIs the train job wrote under runs/selfplay/')
      .chars('$.item.b', 1000, 'a player from plan: id (at most 64), kind, generation and two URIs the train job wrote under runs/selfplay/')
      .chars('$.item.games', 24, 'config.matchGames, an integer from 2 to 10,000')
      .chars('$.item.seed', 24, "the pair's seed, an integer plan derives from config.seed")
      .chars('$.item.mode', 10, "'greedy' or 'sample'");
    const { bucket } = resources;
    const env = this.functionEnv;

    // The league Lambdas read snapshots and league documents wherever a step wrote them and write
    // only content-addressed documents under data/selfplay/.
    const leagueFunction = (id: string, entry: string, description: string, memorySize = 512) =>
      documentFunction(this, id, {
        entry: this.handlerEntry(entry),
        description,
        environment: env,
        memorySize,
        timeout: Duration.minutes(2),
        logRetention: resources.logRetention,
        bucket,
        readsWhy:
          'Reads league documents (data/selfplay/league/<sha256>.json) and the training job outputs they name (runs/selfplay/<execution>/train/<job id>/...), keys made at run time.',
        writes: [
          {
            prefix: `data/${SELFPLAY_PIPELINE}/*`,
            why: 'Writes content-addressed documents (named by the sha256 of their content) under data/selfplay/ only.',
          },
        ],
      });
    const eloFn = leagueFunction('Elo', 'elo', 'Starts the league; records matches, fits Elo jointly, picks the champion and next opponents');
    const planFn = leagueFunction('Plan', 'plan', 'Adds a generation snapshot to the league and pairs it with every player');
    const reportFn = leagueFunction('Report', 'report', 'Writes the champion files and the league report');
    // One vCPU's worth of memory (1,769 MB): matches are single-threaded lock-step inference.
    const matchFn = new PipelineFunction(this, 'Match', {
      entry: this.handlerEntry('match'),
      description: 'Plays one league pair in lock-step with onnxruntime-node',
      onnxRuntime: true,
      memorySize: 1769,
      timeout: Duration.minutes(5),
      logRetention: resources.logRetention,
    });
    bucket.grantRead(matchFn, 'runs/*');
    acknowledgeFindings(
      matchFn,
      s3GrantFindings(
        matchFn,
        bucket,
        ['read'],
        'runs/*',
        'Reads snapshot ONNX files written by training jobs under runs/selfplay/<execution>/train/<job id>/, keys made at run time.',
      ),
    );
    const trainJob = new BatchJob(this, 'Train', {
      job: 'selfplay-train',
      gpus: 1,
      vcpus: 4,
      timeout: Duration.hours(4),
      resources,
    });

    const startLeague = step(this, 'start', {
      run: invoke(eloFn),
      inputs: { start: true, 'ppo.$': '$.config.ppo', 'generations.$': '$.config.generations', 'lrSchedule.$': '$.config.learningRateSchedule' },
      resultPath: '$.league',
    });
    const firstGeneration = new sfn.Pass(this, 'First generation', { result: sfn.Result.fromObject({ n: 1 }), resultPath: '$.gen' });
    const train = step(this, 'train', {
      run: runJob(trainJob, steps),
      inputs: {
        'games_per_iteration.$': '$.config.gamesPerIteration',
        'iterations.$': '$.config.iterations',
        'opponent_groups.$': '$.league.trainGroups',
        'ppo.$': '$.league.trainPpo',
        policy: { 'hidden_sizes.$': '$.config.hiddenSizes' },
        // A different seed per generation: two generations never share a cache key.
        'seed.$': 'States.MathAdd($.config.seed, $.gen.n)',
        'checkpoint_every.$': '$.config.checkpointEvery',
        'initial_state_dict.$': '$.league.initialStateDict',
        'evaluation_games.$': '$.config.evaluationGames',
      },
      resultPath: '$.steps.train',
      cache,
    });
    const plan = step(this, 'plan', {
      run: invoke(planFn),
      inputs: {
        'leagueUri.$': '$.league.leagueUri',
        'generation.$': '$.gen.n',
        'train.$': '$.steps.train',
        'games.$': '$.config.matchGames',
        'seed.$': '$.config.seed',
        'mode.$': '$.config.matchMode',
        'maxFailedPercent.$': '$.config.maxFailedMatchPercent',
      },
      resultPath: '$.plan',
    });
    const matches = fanOut(this, 'matches', {
      scope: steps,
      itemsPath: '$.plan.requests',
      failureItem: { 'pairId.$': '$.item.pairId' },
      iterator: (s) =>
        step(s, 'match', {
          run: invoke(matchFn),
          inputs: { 'a.$': '$.item.a', 'b.$': '$.item.b', 'games.$': '$.item.games', 'seed.$': '$.item.seed', 'mode.$': '$.item.mode' },
          resultPath: '$.result',
          cache,
        }),
      resultPath: '$.steps.matches',
      maxConcurrency: 8,
      tolerance: { maxFailuresPath: '$.plan.maxFailures' },
    });
    const elo = step(this, 'elo', {
      run: invoke(eloFn),
      inputs: {
        'leagueUri.$': '$.plan.leagueUri',
        'generation.$': '$.gen.n',
        'results.$': '$.steps.matches',
        'bootstrapSamples.$': '$.config.bootstrapSamples',
        'seed.$': '$.config.seed',
        'opponents.$': '$.config.opponents',
        'ppo.$': '$.config.ppo',
        'generations.$': '$.config.generations',
        'lrSchedule.$': '$.config.learningRateSchedule',
      },
      resultPath: '$.league',
    });
    // The match results are in the league document now; the state keeps only its summary.
    const nextGeneration = new sfn.Pass(this, 'Next generation', {
      parameters: { 'n.$': 'States.MathAdd($.gen.n, 1)' },
      resultPath: '$.gen',
    });
    const dropMatches = new sfn.Pass(this, 'Drop match results', { result: sfn.Result.fromObject({}), resultPath: '$.steps.matches' });
    const reportAndPublish = this.reportAndPublish({
      reportFn,
      inputs: { 'leagueUri.$': '$.league.leagueUri', 'config.$': '$.config' },
      artifact: CHAMPION_ARTIFACT,
      output: {
        'champion.$': '$.league.champion',
        'ratings.$': '$.league.ratings',
        'leagueUri.$': '$.league.leagueUri',
        'generations.$': '$.league.generations',
        'matches.$': '$.league.matches',
        'failedMatches.$': '$.league.failedMatches',
      },
    });
    const more = new sfn.Choice(this, 'More generations?')
      .when(sfn.Condition.numberLessThanEqualsJsonPath('$.gen.n', '$.config.generations'), train)
      .otherwise(reportAndPublish);
    startLeague.next(firstGeneration).next(train);
    train.next(plan).next(matches).next(elo).next(dropMatches).next(nextGeneration).next(more);

    this.finish(startLeague, { timeout: Duration.days(2) });
    // 4. The arena: plays the latest published champion (sign-in required unless -c arenaPublic=true).
    this.arena = new Arena(this, 'Arena', { resources, public: arenaPublicFromContext(this) });
  }
}
