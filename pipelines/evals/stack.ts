/**
 * Evaluate every checkpoint. A checkpoint's manifest.json, uploaded last under
 * checkpoints/<run>/<step>/, starts one run per upload (redelivered events start none; a
 * re-upload, even of bytes evaluated before, starts one, nearly free from the cache, and what it
 * publishes becomes the current result: the current evaluation is the manifest there now).
 *
 * 1. prepare (Lambda): the manifest, its files checked, the suite and guard read from the registry.
 * 2. The checkpoint indexed as an artifact (its manifest), the parent of every result.
 * 3. Per benchmark (fan-out): the eval job (Batch GPU, cached per checkpoint content, benchmark
 *    version, sample size and eval code), then its result indexed as an artifact. A crashed job
 *    is recorded for its benchmark and the others proceed; a rerun recomputes only it.
 * 4. leaderboard (Lambda): every result of the run so far, the guard's decision, the report,
 *    published as the run's leaderboard artifact.
 */
import { Duration } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { MANIFEST_PATTERN } from '#shared/evals/checkpoints.ts';
import { ENV } from '#shared/env.ts';
import {
  BatchJob,
  PipelineStack,
  type PipelineStackProps,
  fanOut,
  invoke,
  PipelineFunction,
  publishArtifact,
  runJob,
  S3Trigger,
  step,
} from '#pipelines/steps/index.ts';
import { acknowledgeFindings, s3GrantFindings } from '#pipelines/steps/nag-findings.ts';
import { EVALS_TRIGGER_CONFIG, EvalsConfig } from './config.ts';

export const EVALS_PIPELINE = 'evals';
/**
 * The checkpoint's manifest in its `checkpoint` artifact version (not manifest.json: that name is
 * the artifact version's own index entry, which would overwrite it).
 */
export const CHECKPOINT_MANIFEST_FILE = 'checkpoint-manifest.json';

export type EvalsStackProps = PipelineStackProps;

export class EvalsStack extends PipelineStack {
  constructor(scope: Construct, id: string, props: EvalsStackProps) {
    super(scope, id, EVALS_PIPELINE, props, EvalsConfig);
    const { resources, steps, cache } = this;
    // What the cache keys read besides the config: values the pipeline's own steps make. A URI is
    // at most MAX_S3_URI_CHARS (1,100: a bucket name and S3's 1,024-byte key), written twice over at
    // worst by JSON's escapes.
    this.bounds
      .chars('$.prep.artifacts', 300, "the run's three artifact names (ARTIFACT_NAME: at most 63 characters each)")
      .chars(
        '$.checkpointArtifact.files',
        2400,
        "the 'Checkpoint files' Pass: one entry, the manifest's URI (escaped, at most 2 x 1,100) named checkpoint-manifest.json",
      )
      .chars(
        '$.checkpointArtifact.metrics',
        3400,
        "the 'Checkpoint files' Pass: the run (at most 128, escaped), the step, the content hash and the checkpoint's URI (at most 2 x 1,100)",
      )
      .chars('$.checkpoint.contentHash', 66, 'the sha256 of the checkpoint manifest, 64 hex digits')
      // A registered benchmark (shared/evals/benchmarks.ts): the key reads these fields, not its data URI.
      .chars('$.benchmark.name', 44, 'a benchmark name, BENCHMARK_NAME: at most 41 characters')
      .chars('$.benchmark.version', 24, "the benchmark's version, a positive integer")
      .chars('$.benchmark.sampleSize', 24, 'the sample size, an integer')
      .chars('$.benchmark.scorer', 40, 'one of SCORERS, a short name')
      .chars('$.benchmark.dataSha256', 66, "the sha256 of the benchmark's data, 64 hex digits")
      .chars('$.upload', 100, "the upload of record: {} for a run from the CLI, else the run's execution name (at most 80 characters)")
      .chars('$.maxNewTokens', 24, 'config.maxNewTokens, an integer from 1 to 1024')
      .chars('$.examples', 24, 'config.examples, an integer from 0 to 50')
      .chars('$.artifacts', 300, "the run's three artifact names (ARTIFACT_NAME: at most 63 characters each)")
      .chars('$.eval.files', 2000, 'the eval job lists its few output files, each a short name and a URI under runs/evals/')
      .chars('$.metrics', 3200, "the 'Result metrics' Pass: run (at most 128), step, the benchmark's name and version, counts, accuracy and the content hash")
      .chars('$.parent', 2000, "the checkpoint artifact's publish output: its name, version, URI and sha256")
      .chars('$.steps.leaderboard.files', 2000, 'the leaderboard step writes two files (leaderboard.json, leaderboard.html) under data/evals/leaderboard/')
      .chars('$.steps.leaderboard.metrics', 4000, "the leaderboard's figures: the guard's decision and a few counts")
      .chars('$.steps.leaderboard.reportUri', 600, "leaderboard.html's URI, a content-addressed key under data/evals/leaderboard/");
    const { bucket, table } = resources;

    const prepareFn = new PipelineFunction(this, 'Prepare', {
      entry: this.handlerEntry('prepare'),
      description: 'Reads and checks a checkpoint manifest; reads the benchmark registry',
      environment: { [ENV.table]: table.tableName },
      logRetention: resources.logRetention,
    });
    bucket.grantRead(prepareFn, 'checkpoints/*');
    table.grantReadData(prepareFn);
    acknowledgeFindings(
      prepareFn,
      s3GrantFindings(
        prepareFn,
        bucket,
        ['read'],
        'checkpoints/*',
        'Reads the manifest and checks the files of any checkpoint under checkpoints/<run>/<step>/, named by the upload at run time.',
      ),
    );
    const leaderboardFn = new PipelineFunction(this, 'Leaderboard', {
      entry: this.handlerEntry('leaderboard'),
      description: "Computes a run's leaderboard and the release guard's decision",
      environment: { [ENV.table]: table.tableName, [ENV.bucket]: bucket.bucketName, [ENV.pipeline]: EVALS_PIPELINE },
      timeout: Duration.minutes(2),
      logRetention: resources.logRetention,
    });
    table.grantReadData(leaderboardFn);
    bucket.grantPut(leaderboardFn, `data/${EVALS_PIPELINE}/*`);
    acknowledgeFindings(
      leaderboardFn,
      s3GrantFindings(
        leaderboardFn,
        bucket,
        ['put'],
        `data/${EVALS_PIPELINE}/*`,
        'Writes content-addressed leaderboard files under data/evals/leaderboard/<sha256>/ only.',
      ),
    );
    const evalJob = new BatchJob(this, 'Eval', {
      job: 'evals-lm',
      command: ['python3', 'eval_main.py'],
      gpus: 1,
      vcpus: 4,
      timeout: Duration.hours(2),
      resources,
    });

    // A literal Result keeps the config's nulls (Parameters would drop them).
    const fromUpload = new sfn.Pass(this, 'Config from upload', { result: sfn.Result.fromObject(EVALS_TRIGGER_CONFIG), resultPath: '$.config' });
    // An empty trigger: Parameters cannot write a null, and JSONPath cannot read a missing field.
    const noUploadValue = new sfn.Pass(this, 'No upload event', { result: sfn.Result.fromObject({}), resultPath: '$.trigger' });
    // Each upload is an event of record, and the latest version of an artifact is the current one:
    // what a run started by an upload publishes (the checkpoint, each result, the leaderboard) is
    // keyed by the upload too, so content evaluated before (A, then B, then A again) is published
    // again as the latest, while its eval jobs stay cache hits. A run from the CLI keys by the
    // content only, and a fully cached rerun publishes nothing new.
    const uploadOfRecord = new sfn.Pass(this, 'Upload of record', { parameters: { 'execution.$': '$$.Execution.Name' }, resultPath: '$.upload' });
    const noUploadOfRecord = new sfn.Pass(this, 'No upload of record', { result: sfn.Result.fromObject({}), resultPath: '$.upload' });
    const prepare = step(this, 'prepare', {
      run: invoke(prepareFn),
      inputs: {
        'trigger.$': '$.trigger',
        'checkpoint.$': '$.config.checkpoint',
        'benchmarks.$': '$.config.benchmarks',
        guard: { 'target.$': '$.config.target', 'guard.$': '$.config.guard', 'marginPoints.$': '$.config.marginPoints' },
      },
      resultPath: '$.prep',
    });
    const checkpointFiles = new sfn.Pass(this, 'Checkpoint files', {
      parameters: {
        files: [{ 'uri.$': '$.prep.checkpoint.manifestUri', name: CHECKPOINT_MANIFEST_FILE }],
        metrics: {
          'run.$': '$.prep.checkpoint.run',
          'step.$': '$.prep.checkpoint.step',
          'contentHash.$': '$.prep.checkpoint.contentHash',
          'uri.$': '$.prep.checkpoint.uri',
        },
      },
      resultPath: '$.checkpointArtifact',
    });
    const publishCheckpoint = publishArtifact(this, 'index-checkpoint', {
      scope: steps,
      namePath: '$.prep.artifacts.checkpoint',
      filesPath: '$.checkpointArtifact.files',
      metricsPath: '$.checkpointArtifact.metrics',
      eventPath: '$.upload',
      resultPath: '$.steps.checkpoint',
    });
    const evaluate = fanOut(this, 'evaluate', {
      scope: steps,
      itemsPath: '$.prep.suite',
      failureItem: { benchmark: { 'name.$': '$.benchmark.name' } },
      itemSelector: {
        'benchmark.$': '$$.Map.Item.Value',
        'checkpoint.$': '$.prep.checkpoint',
        'artifacts.$': '$.prep.artifacts',
        'parent.$': 'States.Array($.steps.checkpoint)',
        'maxNewTokens.$': '$.config.maxNewTokens',
        'examples.$': '$.config.examples',
        'upload.$': '$.upload',
      },
      iterator: (s) => {
        const run = step(s, 'eval', {
          run: runJob(evalJob, steps, {
            // Where the checkpoint lives reaches the job but not the cache key: the key has its content hash.
            payload: {
              checkpoint: { 'uri.$': '$.checkpoint.uri', 'manifest.$': '$.checkpoint.manifest' },
              benchmark: {
                'name.$': '$.benchmark.name',
                'version.$': '$.benchmark.version',
                'sample_size.$': '$.benchmark.sampleSize',
                'scorer.$': '$.benchmark.scorer',
                'data_uri.$': '$.benchmark.dataUri',
              },
              'max_new_tokens.$': '$.maxNewTokens',
              'examples.$': '$.examples',
            },
          }),
          inputs: {
            'checkpoint.$': '$.checkpoint.contentHash',
            benchmark: {
              'name.$': '$.benchmark.name',
              'version.$': '$.benchmark.version',
              'sampleSize.$': '$.benchmark.sampleSize',
              'scorer.$': '$.benchmark.scorer',
              'dataSha256.$': '$.benchmark.dataSha256',
            },
            'maxNewTokens.$': '$.maxNewTokens',
            'examples.$': '$.examples',
          },
          resultPath: '$.eval',
          cache,
        });
        const metrics = new sfn.Pass(s, 'Result metrics', {
          parameters: {
            'run.$': '$.checkpoint.run',
            'step.$': '$.checkpoint.step',
            'benchmark.$': '$.benchmark.name',
            'benchmarkVersion.$': '$.benchmark.version',
            'sampleSize.$': '$.benchmark.sampleSize',
            'n.$': '$.eval.n',
            'accuracy.$': '$.eval.accuracy',
            'stderr.$': '$.eval.stderr',
            'baseline.$': '$.eval.baseline',
            'contentHash.$': '$.checkpoint.contentHash',
          },
          resultPath: '$.metrics',
        });
        const publish = publishArtifact(s, 'index-result', {
          scope: steps,
          namePath: '$.artifacts.eval',
          filesPath: '$.eval.files',
          metricsPath: '$.metrics',
          lineagePath: '$.parent',
          eventPath: '$.upload',
          resultPath: '$.artifact',
        });
        const result = new sfn.Pass(s, 'Result', {
          parameters: {
            'benchmark.$': '$.benchmark.name',
            'metrics.$': '$.metrics',
            'samplesPerSecond.$': '$.eval.samples_per_second',
            'artifact.$': '$.artifact',
          },
          resultPath: '$.result',
        });
        return run.next(metrics).next(publish).next(result);
      },
      resultPath: '$.steps.evaluate',
      maxConcurrency: 10,
      // Every failure is recorded for its benchmark; the leaderboard reports it.
      tolerance: { maxFailures: 1000 },
    });
    const leaderboard = step(this, 'leaderboard', {
      run: invoke(leaderboardFn),
      inputs: {
        'run.$': '$.prep.checkpoint.run',
        'step.$': '$.prep.checkpoint.step',
        'baseStep.$': '$.prep.checkpoint.baseStep',
        'evalArtifact.$': '$.prep.artifacts.eval',
        'guard.$': '$.prep.guard',
        'items.$': '$.steps.evaluate',
      },
      resultPath: '$.steps.leaderboard',
    });
    const publishLeaderboard = publishArtifact(this, 'index-leaderboard', {
      scope: steps,
      namePath: '$.prep.artifacts.leaderboard',
      filesPath: '$.steps.leaderboard.files',
      metricsPath: '$.steps.leaderboard.metrics',
      cardUriPath: '$.steps.leaderboard.reportUri',
      eventPath: '$.upload',
      resultPath: '$.steps.leaderboardArtifact',
    });
    const output = new sfn.Pass(this, 'Output', {
      parameters: {
        'run.$': '$.prep.checkpoint.run',
        'step.$': '$.prep.checkpoint.step',
        'contentHash.$': '$.prep.checkpoint.contentHash',
        'results.$': '$.steps.evaluate',
        'decision.$': '$.steps.leaderboard.decision',
        'leaderboard.$': '$.steps.leaderboardArtifact',
        'reportUri.$': '$.steps.leaderboard.reportUri',
      },
    });
    const main = this.configCheck()
      .next(prepare)
      .next(checkpointFiles)
      .next(publishCheckpoint)
      .next(evaluate)
      .next(leaderboard)
      .next(publishLeaderboard)
      .next(output);
    const start = new sfn.Choice(this, 'Started by upload?')
      .when(sfn.Condition.isPresent('$.trigger'), fromUpload.next(uploadOfRecord).next(main))
      .otherwise(noUploadValue.next(noUploadOfRecord).next(main));

    this.finish(start, { timeout: Duration.days(1) });
    new S3Trigger(this, 'Trigger', { scope: steps, keyPattern: MANIFEST_PATTERN, stateMachine: this.stateMachine });
  }
}
