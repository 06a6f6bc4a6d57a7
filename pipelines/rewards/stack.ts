/**
 * Reward design by Claude: candidates trained in sandboxes, graded outside them.
 *
 * 1. propose (Lambda): Claude writes K reward functions for MountainCar (structured output, the
 *    task block prompt-cached), fed back the previous generation's graded results; or the reward
 *    files given in the config (no API key needed).
 * 2. runs (fan-out, one item per candidate and training seed):
 *    a. train (Batch CPU job in the sandbox, cached per source hash, seed, settings and code):
 *       PPO with the candidate's reward. On AWS the job has no role and no route out but the VPC
 *       endpoints, and moves its spec and outputs through presigned URLs; locally it runs in
 *       bubblewrap with no network. A failure in one seed becomes that seed's result.
 *    b. grade (Lambda, trusted, cached): the data-only policy read from where the runner put it,
 *       played on fresh seeds with the environment's own success rule.
 * 3. record (Lambda): the generation into the search document; loop while generations remain.
 * 4. The final: the winner and both baselines (the environment's reward and a person-written
 *    shaped reward) retrained from scratch on the same seeds, none of them a search training
 *    seed (so the luck that made the winner win does not carry over), and graded on the same
 *    fresh seeds, through the same fan-out; then the report and the artifact `reward-search`
 *    (reward.py, report.html, search.json).
 */
import { Duration } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENV } from '#shared/env.ts';
import { MAX_TRAIN_TIMEOUT_SECONDS } from '#shared/rewards/loop.ts';
import {
  BatchJob,
  documentFunction,
  PipelineStack,
  type PipelineStackProps,
  fanOut,
  invoke,
  runJob,
  step,
  type StepResources,
} from '#pipelines/steps/index.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { SandboxNetwork } from '#pipelines/steps/sandbox-network.ts';
import { RewardsConfig } from './config.ts';

export const REWARDS_PIPELINE = 'rewards';
export const REWARD_ARTIFACT = 'reward-search';
const rewardsDir = join(REPO_ROOT, 'batch-jobs', 'rewards-train', 'rewards');

export type RewardSearchStackProps = PipelineStackProps<StepResources>;

/** Its trainer runs in a SandboxNetwork, a VPC of its own (not the platform's): see sandbox-network.ts. */
export class RewardSearchStack extends PipelineStack<StepResources> {
  readonly trainJob: BatchJob;

  constructor(scope: Construct, id: string, props: RewardSearchStackProps) {
    super(scope, id, REWARDS_PIPELINE, props, RewardsConfig);
    const { resources, steps, cache } = this;
    // What the cache keys read besides the config: values the search's own Lambdas make.
    this.bounds
      .chars('$.item.specKey', 120, "the spec's content-addressed key, data/rewards/train-specs/<sha256>.json")
      .chars('$.item.seed', 24, 'a training seed of the config, an integer from 0 to 2^31 - 1')
      .chars('$.train.outputUri', 400, 'the output prefix the runner chose: s3://, the bucket (at most 63), runs/rewards/<execution>/train/<uuid>/output/')
      .chars('$.grading.gradeSeeds', 1200, 'at most 100 seeds (config.gradeSeeds or finalSeeds), each at most 10 digits')
      .chars('$.grading.episodesPerSeed', 24, 'config.episodesPerSeed, an integer from 1 to 1000')
      .chars('$.final.searchUri', 400, "the search document's content-addressed URI (data/rewards/search/<sha256>.json)");
    const { bucket } = resources;
    const env = this.functionEnv;

    const network = new SandboxNetwork(this, 'Sandbox', { bucket: resources.bucket, logRetention: resources.logRetention });
    this.trainJob = new BatchJob(this, 'Train', {
      job: 'rewards-train',
      vcpus: 1,
      timeout: Duration.seconds(MAX_TRAIN_TIMEOUT_SECONDS),
      attempts: 1,
      sandbox: {
        network,
        outputs: ['policy.json', 'curves.json'],
        // The candidate's reward runs in its own process: it cannot touch the trainer or the policy.
        worker: 'reward_channel.py',
        limits: { cpuSeconds: 1800, memoryBytes: 3 * 1024 ** 3, maxProcesses: 64 },
      },
      resources,
    });

    const searchFunction = (fnId: string, entry: string, description: string, extra: Record<string, string> = {}) =>
      documentFunction(this, fnId, {
        entry: this.handlerEntry(entry),
        description,
        environment: { ...env, ...extra },
        memorySize: 1024,
        timeout: Duration.minutes(5),
        logRetention: resources.logRetention,
        bucket,
        readsWhy:
          'Reads search documents (data/rewards/search/<sha256>.json) and policies the sandboxed jobs handed back (runs/rewards/<execution>/...), keys made at run time.',
        writes: [{ prefix: `data/${REWARDS_PIPELINE}/*`, why: 'Writes content-addressed search documents and reports under data/rewards/ only.' }],
      });
    const proposeFn = searchFunction('Propose', 'propose', 'Asks Claude for reward functions (or takes reward files) and plans their training runs', {
      [ENV.anthropicSecretArn]: resources.anthropicSecret.secretArn,
    });
    resources.anthropicSecret.grantRead(proposeFn);
    const recordFn = searchFunction('Record', 'record', 'Records a generation’s graded seeds in the search document');
    const finalFn = searchFunction('Final', 'final', 'Plans and records the final: the winner and both baselines on the same seeds');
    const reportFn = searchFunction('Report', 'report', 'Writes the reward search report and the winning reward function');
    const gradeFn = searchFunction('Grade', 'grade', 'Grades one trained policy on fresh seeds (trusted, data-only policy format)');

    // The baselines' sources, read at synth: the final trains them like any candidate.
    const baselines = new sfn.Pass(this, 'Baselines', {
      result: sfn.Result.fromObject({
        env: readFileSync(join(rewardsDir, 'env_reward.py'), 'utf8'),
        shaped: readFileSync(join(rewardsDir, 'shaped_reward.py'), 'utf8'),
      }),
      resultPath: '$.baselines',
    });
    const start = new sfn.Pass(this, 'First generation', {
      result: sfn.Result.fromObject({ generation: 1, searchUri: null, done: false }),
      resultPath: '$.loop',
    });
    const propose = step(this, 'propose', {
      run: invoke(proposeFn),
      inputs: { 'generation.$': '$.loop.generation', 'searchUri.$': '$.loop.searchUri', 'config.$': '$.config' },
      resultPath: '$.proposal',
    });
    const runs = fanOut(this, 'runs', {
      scope: steps,
      itemsPath: '$.proposal.items',
      // Each item is a seed and its spec's key; what all items share comes once, from the proposal.
      itemSelector: {
        'item.$': '$$.Map.Item.Value',
        'grading.$': '$.proposal.grading',
        'timeoutSeconds.$': '$.proposal.timeoutSeconds',
      },
      iterator: (s) =>
        step(s, 'train', {
          run: runJob(this.trainJob, steps, {
            // The spec (the candidate's source, the seed, the settings) was staged by propose; its
            // key is content-addressed, so the key is the cache key too.
            specKeyPath: '$.item.specKey',
            // The trusted grade reads the policy from the output prefix; the job's own result.json,
            // the candidate's word, is never read into the state.
            result: 'uri',
            // The run's trainTimeoutSeconds: a candidate that never returns is stopped there.
            timeoutPath: '$.timeoutSeconds',
          }),
          inputs: { 'spec.$': '$.item.specKey' },
          resultPath: '$.train',
          cache,
        }).next(
          step(s, 'grade', {
            run: invoke(gradeFn),
            inputs: {
              'seed.$': '$.item.seed',
              'policyUri.$': "States.Format('{}policy.json', $.train.outputUri)",
              'curvesUri.$': "States.Format('{}curves.json', $.train.outputUri)",
              train: { ok: true },
              'gradeSeeds.$': '$.grading.gradeSeeds',
              'episodesPerSeed.$': '$.grading.episodesPerSeed',
            },
            resultPath: '$.result',
            cache,
          }),
        ),
      resultPath: '$.steps.runs',
      maxConcurrency: 10,
      // Every failed seed is that seed's result; the generation goes on.
      tolerance: { maxFailuresPath: '$.proposal.itemCount.value' },
    });
    const countItems = new sfn.Pass(this, 'Count items', {
      parameters: { 'value.$': 'States.ArrayLength($.proposal.items)' },
      resultPath: '$.proposal.itemCount',
    });
    const record = step(this, 'record', {
      run: invoke(recordFn),
      inputs: {
        'generation.$': '$.loop.generation',
        'searchUri.$': '$.loop.searchUri',
        proposal: { 'proposalUri.$': '$.proposal.proposalUri' },
        'results.$': '$.steps.runs',
        'config.$': '$.config',
      },
      resultPath: '$.loop',
    });
    const finalPlan = step(this, 'final-plan', {
      run: invoke(finalFn),
      inputs: { action: 'plan', 'searchUri.$': '$.loop.searchUri', 'baselines.$': '$.baselines', 'config.$': '$.config' },
      resultPath: '$.proposal',
    });
    const finalRecord = step(this, 'final-record', {
      run: invoke(finalFn),
      inputs: { action: 'record', 'searchUri.$': '$.loop.searchUri', proposal: { 'proposalUri.$': '$.proposal.proposalUri' }, 'results.$': '$.steps.runs' },
      resultPath: '$.final',
    });
    const reportAndPublish = this.reportAndPublish({
      reportFn,
      inputs: { 'searchUri.$': '$.final.searchUri', 'config.$': '$.config' },
      artifact: REWARD_ARTIFACT,
      output: { 'winner.$': '$.steps.report.winner', 'searchUri.$': '$.final.searchUri' },
    });
    const dropRuns = new sfn.Pass(this, 'Drop run results', { result: sfn.Result.fromObject({}), resultPath: '$.steps.runs' });

    const phase = new sfn.Choice(this, 'Search or final?')
      .when(sfn.Condition.stringEquals('$.proposal.phase', 'final'), finalRecord.next(reportAndPublish))
      .otherwise(record);
    const more = new sfn.Choice(this, 'More generations?').when(sfn.Condition.booleanEquals('$.loop.done', true), finalPlan).otherwise(propose);
    baselines.next(start).next(propose);
    propose.next(countItems);
    finalPlan.next(countItems);
    countItems.next(runs).next(phase);
    record.next(dropRuns).next(more);

    this.finish(baselines, { timeout: Duration.days(2) });
  }
}
