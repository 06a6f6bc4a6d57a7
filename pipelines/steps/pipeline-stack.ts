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
import { type Duration, Stack, type StackProps } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import type { z } from 'zod';
import { StateBounds } from './bounds.ts';
import { join } from 'node:path';
import { ConfigError } from '#shared/errors.ts';
import { ENV } from '#shared/env.ts';
import { REPO_ROOT } from './code-version.ts';
import { PipelineFunction } from './function.ts';
import { DASHBOARDS_CONTEXT, PipelineMonitoring } from './monitoring.ts';
import { contextFlag } from './context-flag.ts';
import { PipelineStateMachine } from './pipeline.ts';
import { publishArtifact } from './publish.ts';
import type { StepResources, StepScope } from './resources.ts';
import { RunCost } from './run-cost.ts';
import { invoke, step } from './step.ts';

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
      .chars('$.steps.report.reportUri', 600, 'an s3:// URI of the report, a content-addressed key under data/<pipeline>/');
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
    const output = new sfn.Pass(this, 'Output', {
      parameters: {
        ...options.output,
        'metrics.$': '$.steps.report.metrics',
        'reportUri.$': '$.steps.report.reportUri',
        'artifact.$': '$.steps.publish',
      },
    });
    return report.next(publish).next(output);
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
    this.checkStep = step(this, 'config', { run: invoke(fn), inputs: { 'config.$': '$.config' }, resultPath: '$.config' });
    return this.checkStep;
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
