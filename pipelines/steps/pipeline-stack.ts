/**
 * PipelineStack: what every pipeline's stack repeats, written once, so that a pipeline's stack is
 * its steps and little else.
 *
 * - the preamble: the pipeline's name, the platform's resources, the step scope every step and
 *   cache key is named in, the functions folder (functions/<pipeline>/<step>/handler.ts) and the
 *   environment every pipeline function gets (the bucket and the pipeline's name);
 * - the tail most pipelines end with (`reportAndPublish`): a cached report step, publishing its
 *   files as an artifact with the report as its card, and an Output state;
 * - `finish`: the Standard workflow (PipelineStateMachine) around the first state, and the stack's
 *   monitoring (monitoring.ts): alarms to the platform's alarm topic and one dashboard.
 *
 * A new pipeline: `class XStack extends PipelineStack`, its functions and jobs, its states, then
 * `this.finish(first, { timeout })`. pipelines/probe/stack.ts is the smallest complete example.
 */
import { type Duration, Lazy, Stack, type StackProps } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import type { Construct } from 'constructs';
import type { z } from 'zod';
import { StateBounds } from './bounds.ts';
import { join } from 'node:path';
import { ConfigError } from '#shared/errors.ts';
import { ENV } from '#shared/env.ts';
import { sha256Hex } from '#shared/json.ts';
import { RUN_PARTIAL_PATH, RUN_STATE, RUN_VERSION_ENV } from '#shared/run-cache.ts';
import { CONFIG_STEP, cachePartition, RUN_STEP } from '#shared/table.ts';
import { BatchJob } from './batch-job.ts';
import { REPO_ROOT } from './code-version.ts';
import { PipelineFunction } from './function.ts';
import { DASHBOARDS_CONTEXT, PipelineMonitoring } from './monitoring.ts';
import { contextFlag } from './context-flag.ts';
import { PipelineStateMachine } from './pipeline.ts';
import { publishArtifact } from './publish.ts';
import type { StepResources, StepScope } from './resources.ts';
import { acknowledgeFindings, iam5Resource } from './nag-findings.ts';
import { stateName } from './names.ts';
import { RunCost } from './run-cost.ts';
import { invoke, retryServiceErrors, SERVICE_ERRORS, step } from './step.ts';

export interface PipelineStackProps<R extends StepResources = StepResources> extends StackProps {
  readonly resources: R;
}

export interface ReportAndPublishOptions {
  /** The pipeline's report function: returns `{ files, metrics, reportUri }` (see shared/artifacts.ts). */
  readonly reportFn: PipelineFunction;
  /** The report step's inputs (its cache key). */
  readonly inputs: Record<string, unknown>;
  /** The artifact the report's files are published as. */
  readonly artifact: string;
  /** The run's output besides the report's metrics, its URI and the published artifact. */
  readonly output: Record<string, string>;
  /** Path of `[{name, version}]`: the artifact versions this one was made from. Default: none. */
  readonly lineagePath?: string;
  /** Characters the report's `files` list may take in the state (the publish step's key). Default: 2,000, a few files. */
  readonly filesChars?: number;
}

export abstract class PipelineStack<R extends StepResources = StepResources> extends Stack {
  /** The pipeline's one name (the CLI's, the folders', the state machine metadata's). */
  readonly pipeline: string;
  readonly resources: R;
  /** What steps and cache keys are named in. */
  readonly steps: StepScope;
  /** Pass as a step's `cache` to cache it. */
  readonly cache: { readonly scope: StepScope };
  /**
   * What the state holds, bounded: `$.config` by the pipeline's config schema; the stack declares
   * the values its own steps make that a cached step's key reads (each cache key is checked at synth).
   */
  readonly bounds: StateBounds;
  /** The environment every pipeline function gets: the bucket and the pipeline's name. */
  readonly functionEnv: Readonly<Record<string, string>>;
  private machine?: sfn.StateMachine;
  private monitor?: PipelineMonitoring;
  private checkStep?: sfn.Chain;
  private checkFn?: PipelineFunction;
  /** Why this pipeline's runs may be cached whole (cacheRuns); undefined when they are not. */
  private runCacheReason?: string;
  private runOutputMade = false;

  protected constructor(scope: Construct, id: string, pipeline: string, props: PipelineStackProps<R>, config: z.ZodType) {
    super(scope, id, props);
    if (!/^[a-z][a-z0-9-]*$/.test(pipeline)) throw new ConfigError('pipeline', pipeline, 'must be a lowercase name (letters, digits, dashes)');
    this.pipeline = pipeline;
    this.resources = props.resources;
    this.bounds = new StateBounds().schema('$.config', config, "the run's config, parsed with the pipeline's schema before the run starts");
    this.steps = { pipeline, resources: props.resources, bounds: this.bounds };
    this.cache = { scope: this.steps };
    this.functionEnv = { [ENV.bucket]: props.resources.bucket.bucketName, [ENV.pipeline]: pipeline };
  }

  /** The pipeline's state machine; there once `finish` has run. */
  get stateMachine(): sfn.StateMachine {
    if (!this.machine) throw new ConfigError('stateMachine', this.pipeline, 'is made by finish(), which the stack has not called yet');
    return this.machine;
  }

  /** The stack's alarms and dashboard; there once `finish` has run. */
  get monitoring(): PipelineMonitoring {
    if (!this.monitor) throw new ConfigError('monitoring', this.pipeline, 'is made by finish(), which the stack has not called yet');
    return this.monitor;
  }

  /** The handler of one of the pipeline's steps: functions/<pipeline>/<step>/handler.ts. */
  protected handlerEntry(stepName: string): string {
    return join(REPO_ROOT, 'functions', this.pipeline, stepName, 'handler.ts');
  }

  /**
   * The tail: `report` (cached), `publish` of the report's files as `artifact` with the report as
   * its card, and `Output`: the given fields, then the metrics, the report's URI and the artifact.
   */
  protected reportAndPublish(options: ReportAndPublishOptions): sfn.Chain {
    // What the publish step's key reads of the report's output (shared/artifacts.ts: files and metrics).
    this.bounds
      .chars(
        '$.steps.report.files',
        options.filesChars ?? 2000,
        options.filesChars === undefined
          ? 'the report lists at most a few files, each a short name and an s3:// URI under data/ or runs/'
          : "the report's files, as many as the pipeline's config bounds, each a short name and an s3:// URI under data/ or runs/",
      )
      .chars('$.steps.report.metrics', 4000, "the report's figures: a flat record of a few dozen numbers and short names (ids, slugs)")
      .chars('$.steps.report.reportUri', 600, 'an s3:// URI of the report, a content-addressed key under data/<pipeline>/')
      .chars('$.steps.publish', 1000, 'the published version: the artifact name (at most 64), its version, its s3:// URI under artifacts/ and a sha256');
    const report = step(this, 'report', {
      run: invoke(options.reportFn),
      inputs: options.inputs,
      resultPath: '$.steps.report',
      cache: this.cache,
    });
    const publish = publishArtifact(this, 'publish', {
      scope: this.steps,
      name: options.artifact,
      filesPath: '$.steps.report.files',
      metricsPath: '$.steps.report.metrics',
      cardUriPath: '$.steps.report.reportUri',
      ...(options.lineagePath ? { lineagePath: options.lineagePath } : {}),
      resultPath: '$.steps.publish',
    });
    const output = this.output('Output', {
      ...options.output,
      'metrics.$': '$.steps.report.metrics',
      'reportUri.$': '$.steps.report.reportUri',
      'artifact.$': '$.steps.publish',
    });
    return report.next(publish).next(output);
  }

  /**
   * Declares that this pipeline's output is a function of its config and its code, and says why
   * (no approval gate, no data read whose content may change under the same config, no event the
   * run records): a rerun of a config that succeeded before then ends with that run's output from
   * the run cache (shared/run-cache.ts), checked in the config step it makes anyway. Call before
   * `configCheck`, `output` and `reportAndPublish`. The run's state then starts as `{config, _run}`:
   * fields of the execution's input besides the config are not read.
   */
  protected cacheRuns(reason: string): void {
    if (reason.trim().length < 40)
      throw new ConfigError('cacheRuns', reason, "must say why the pipeline's output is a function of its config and code (40 characters at least)");
    if (this.checkStep || this.runOutputMade)
      throw new ConfigError('cacheRuns', this.pipeline, 'must be called before configCheck, output and reportAndPublish');
    this.runCacheReason = reason;
  }

  /**
   * The run's Output state: `parameters` are its output. In a stack that caches runs, the output is
   * also stored as the run's cache entry (`run: Cache store`, a direct DynamoDB put; one that fails
   * is caught: the next run of the config computes), unless a fan-out tolerated failed items
   * (`run: Complete?`), then made the run's output (`run: Output`).
   */
  protected output(id: string, parameters: Record<string, unknown>): sfn.Chain {
    if (!this.runCacheReason) return sfn.Chain.start(new sfn.Pass(this, id, { parameters }));
    if (this.runOutputMade) throw new ConfigError('output', id, 'a stack that caches runs has one Output: its entry is stored once per run');
    this.runOutputMade = true;
    // The put's parameters carry the output and the config as JSON strings (escaped again: twice
    // their characters at most) and must stay under the 256 KiB a state's input or output takes,
    // which no Catch can take.
    const chars = 2 * (this.bounds.templateChars(parameters) + this.bounds.pathChars('$.config')) + 1024;
    if (chars > 200 * 1024) {
      throw new ConfigError(
        `${this.pipeline}: run cache entry`,
        chars,
        "may pass 200 KiB (the output and the config, escaped as the put's strings): a run whose output and config are that large is not cached whole",
      );
    }
    const out = new sfn.Pass(this, id, { parameters, resultPath: `${RUN_STATE}.output` });
    const table = this.resources.table;
    const store = new tasks.CallAwsService(this, stateName(RUN_STEP, 'Cache store'), {
      service: 'dynamodb',
      action: 'putItem',
      parameters: {
        TableName: table.tableName,
        Item: {
          pk: { S: cachePartition(this.pipeline, RUN_STEP) },
          sk: { S: sfn.JsonPath.stringAt(`${RUN_STATE}.key`) },
          pipeline: { S: this.pipeline },
          step: { S: RUN_STEP },
          inputs: { S: sfn.JsonPath.jsonToString(sfn.JsonPath.objectAt('$.config')) },
          output: { S: sfn.JsonPath.jsonToString(sfn.JsonPath.objectAt(`${RUN_STATE}.output`)) },
          executionId: { S: sfn.JsonPath.stringAt('$$.Execution.Id') },
          createdAt: { S: sfn.JsonPath.stringAt('$$.Execution.StartTime') },
        },
      },
      iamResources: [table.tableArn],
      resultPath: sfn.JsonPath.DISCARD,
    });
    retryServiceErrors(store, SERVICE_ERRORS);
    const done = new sfn.Pass(this, stateName(RUN_STEP, 'Output'), { inputPath: `${RUN_STATE}.output` });
    store.addCatch(done, { errors: ['States.ALL'], resultPath: `${RUN_STATE}.storeError` });
    store.next(done);
    const complete = new sfn.Choice(this, stateName(RUN_STEP, 'Complete?')).when(sfn.Condition.isPresent(RUN_PARTIAL_PATH), done).otherwise(store);
    out.next(complete);
    return sfn.Chain.custom(out, [done], done);
  }

  /**
   * The `config` step: the run's config parsed with the pipeline's schema by
   * functions/<pipeline>/config/handler.ts, defaults filled in, written back to `$.config`. A run
   * started by StartExecution with a config the CLI would refuse (or one far over the schema's
   * sizes, which the cache keys rely on) fails here, before anything runs, naming the field.
   * Not cached: a config's key could not be bounded by the config itself (the probe's largest is
   * over the 10,000 characters States.Hash takes), and the check costs one small invocation.
   * `finish` puts it first; a stack whose runs make their config in the state machine (from an
   * upload event) chains it itself, after that.
   */
  protected configCheck(): sfn.Chain {
    if (this.checkStep) throw new ConfigError('configCheck', this.pipeline, 'was called twice');
    const fn = new PipelineFunction(this, 'ConfigCheck', {
      entry: this.handlerEntry('config'),
      description: "Parses the run's config with the pipeline's schema, defaults filled in",
      logRetention: this.resources.logRetention,
    });
    this.checkFn = fn;
    if (!this.runCacheReason) {
      this.checkStep = step(this, CONFIG_STEP, { run: invoke(fn), inputs: { 'config.$': '$.config' }, resultPath: '$.config' });
      return this.checkStep;
    }
    // The check looks the parsed config up in the run cache: a hit ends the run with the output
    // the entry holds; a miss goes on with the parsed config and the key its Output stores under.
    const check = step(this, CONFIG_STEP, { run: invoke(fn), inputs: { 'config.$': '$.config' }, resultPath: RUN_STATE });
    const restore = new sfn.Pass(this, stateName(RUN_STEP, 'Restore'), { inputPath: `${RUN_STATE}.hit.output` });
    const miss = new sfn.Pass(this, stateName(RUN_STEP, 'Miss'), {
      parameters: { 'config.$': `${RUN_STATE}.config`, _run: { 'key.$': `${RUN_STATE}.key` } },
    });
    const cached = new sfn.Choice(this, stateName(RUN_STEP, 'Cached?')).when(sfn.Condition.isPresent(`${RUN_STATE}.hit`), restore).otherwise(miss);
    check.next(cached);
    this.checkStep = sfn.Chain.custom(check.startState, [miss], miss);
    return this.checkStep;
  }

  /**
   * The run cache's grants and run version: the config check reads the stack's run entries and
   * checks that the objects a hit's output names exist; the version hashes the state machine's
   * definition and the code version of every function and job of the stack, at synth.
   */
  private enableRunCache(machine: sfn.StateMachine): void {
    const fn = this.checkFn!;
    if (!this.runOutputMade)
      throw new ConfigError('cacheRuns', this.pipeline, "needs the run's Output made with this.output (or reportAndPublish): it stores the run's entry");
    // An inline fan-out marks a run whose tolerated items failed as partial (not stored); a
    // Distributed Map tolerates failures in Step Functions itself, where nothing marks the run.
    if (this.node.findAll().some((c) => c instanceof sfn.DistributedMap)) {
      throw new ConfigError(
        'cacheRuns',
        this.pipeline,
        "cannot cache runs with a Distributed Map: its tolerated failures would be stored as the config's result",
      );
    }
    const { table, bucket } = this.resources;
    fn.addEnvironment(ENV.table, table.tableName);
    fn.addEnvironment(ENV.bucket, bucket.bucketName);
    fn.addEnvironment(ENV.pipeline, this.pipeline);
    fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:GetItem'],
        resources: [table.tableArn],
        conditions: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [cachePartition(this.pipeline, RUN_STEP)] } },
      }),
    );
    // HeadObject is authorized by s3:GetObject; a run's output may name objects under any prefix.
    fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: [bucket.arnForObjects('*')] }));
    acknowledgeFindings(fn, [
      {
        id: iam5Resource(fn, bucket.arnForObjects('*')),
        reason:
          "A run cache hit checks that the objects its output names still exist (HeadObject, authorized by s3:GetObject); a run's output may name objects under any prefix (data/, runs/, artifacts/), known only from the entry at run time.",
      },
    ]);
    const definition = (machine.node.defaultChild as sfn.CfnStateMachine).definitionString;
    const stack = Stack.of(this);
    fn.addEnvironment(
      RUN_VERSION_ENV,
      Lazy.string({
        produce: () => {
          const code = stack.node
            .findAll()
            .filter((c): c is PipelineFunction | BatchJob => c instanceof PipelineFunction || c instanceof BatchJob)
            .map((c) => `${c.node.path.slice(stack.node.path.length)}=${c.codeVersion.hash}`)
            .sort();
          return sha256Hex(`${JSON.stringify(stack.resolve(definition))}|${code.join(',')}`).slice(0, 32);
        },
      }),
    );
  }

  /**
   * The Standard workflow that runs `definition`, and its monitoring; call once, after the states
   * are built. What the stack adds later (an S3 trigger, its functions) is monitored too.
   */
  protected finish(definition: sfn.IChainable, options: { readonly timeout: Duration }): sfn.StateMachine {
    if (this.machine) throw new ConfigError('finish', this.pipeline, 'was called twice');
    const alarmTopic = this.resources.alarmTopic;
    if (!alarmTopic) throw new ConfigError('resources.alarmTopic', alarmTopic, `is required by the ${this.pipeline} stack: its alarms go there`);
    const checked = this.checkStep ? definition : this.configCheck().next(definition);
    const workflow = new PipelineStateMachine(this, 'Pipeline', {
      pipeline: this.pipeline,
      definition: checked,
      resources: this.resources,
      timeout: options.timeout,
    });
    this.machine = workflow.stateMachine;
    if (this.runCacheReason) this.enableRunCache(workflow.stateMachine);
    new RunCost(this, 'RunCost', { pipeline: this.pipeline, resources: this.resources, stateMachine: workflow.stateMachine });
    this.monitor = new PipelineMonitoring(this, 'Monitoring', {
      pipeline: this.pipeline,
      stateMachine: workflow.stateMachine,
      logGroup: workflow.logGroup,
      alarmTopic,
      dashboard: contextFlag(this, DASHBOARDS_CONTEXT, true, 'cdk deploy -c frontier:dashboards=false leaves the dashboards out'),
    });
    return this.machine;
  }
}
