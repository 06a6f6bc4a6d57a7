/**
 * The probe pipeline: uses every step kind, so the platform is proven without a product
 * pipeline (the tests' fixture, and the example of how a pipeline is laid out). Deployed, it verifies an account's setup without a GPU.
 *
 * 1. prepare (cached Lambda): write the data file to S3.
 * 2. square (fan-out, cached Lambda per item): square each item; failures recorded, tolerance from config.
 * 3. recheck (Distributed Map, when config.distributed): square each item again in child runs
 *    reading the items from S3, results written to S3, failures within config.maxFailurePercent.
 * 4. sum (cached Batch job on the CPU queue): sum the squares, write summary.json.
 * 5. approve (approval gate, when config.approve): email a link and wait for a decision; the
 *    page shows the items document at config.approvalItemsUri, when there is one.
 * 6. publish (publish artifact): index summary.json as the `probe-summary` artifact.
 * Starts from the CLI, or from an upload matching `uploads/probe/*\/manifest.json`.
 */
import { Duration } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { ENV } from '#shared/env.ts';
import {
  approvalGate,
  BatchJob,
  PipelineStack,
  type PipelineStackProps,
  distributedFanOut,
  fanOut,
  invoke,
  PipelineFunction,
  publishArtifact,
  runJob,
  S3Trigger,
  step,
} from '#pipelines/steps/index.ts';
import { acknowledgeFindings, s3GrantFindings } from '#pipelines/steps/nag-findings.ts';
import { ProbeConfig } from './config.ts';

export const PROBE_PIPELINE = 'probe';

export type ProbeStackProps = PipelineStackProps;

export class ProbeStack extends PipelineStack {
  constructor(scope: Construct, id: string, props: ProbeStackProps) {
    super(scope, id, PROBE_PIPELINE, props, ProbeConfig);
    const { steps, cache } = this;
    this.bounds
      .chars('$.item', 24, "one of the config's items, an integer from -1000 to 1000")
      .chars('$.squares.values', 1600, 'the squares of at most 200 items (config.items), each at most 1,000,000')
      .chars('$.steps.sum.files', 2000, 'the sum job lists its one output file, a short name and a URI under runs/probe/')
      .chars('$.steps.sum.metrics', 1000, "the sum job's figures: the total and the item count");
    const { bucket } = props.resources;

    const prepareFn = new PipelineFunction(this, 'Prepare', {
      entry: this.handlerEntry('prepare'),
      environment: { [ENV.bucket]: bucket.bucketName },
      logRetention: props.resources.logRetention,
    });
    // prepare only writes its content-addressed data file (see functions/probe/prepare/handler.ts).
    bucket.grantPut(prepareFn, 'data/probe/*');
    acknowledgeFindings(
      prepareFn,
      s3GrantFindings(
        prepareFn,
        bucket,
        ['put'],
        'data/probe/*',
        'The data file is named by the sha256 of its content (data/probe/<sha256>.json), known only at run time; the grant is limited to that prefix.',
      ),
    );
    const squareFn = new PipelineFunction(this, 'Square', {
      entry: this.handlerEntry('square'),
      logRetention: props.resources.logRetention,
    });
    const sumJob = new BatchJob(this, 'Sum', { job: 'probe-sum', resources: props.resources, timeout: Duration.minutes(30) });

    const defaults = new sfn.Pass(this, 'Config from trigger', {
      parameters: {
        config: {
          items: [1, 2, 3],
          maxFailures: 0,
          distributed: false,
          maxFailurePercent: 0,
          approve: false,
          approvalItemsUri: null,
          jobFault: 'none',
          jobTimeoutSeconds: 1800,
          padKiB: 0,
          lineage: [],
          'label.$': '$.trigger.key',
        },
        'trigger.$': '$.trigger',
      },
    });
    const prepare = step(this, 'prepare', {
      run: invoke(prepareFn),
      inputs: { 'items.$': '$.config.items', 'label.$': '$.config.label', 'padKiB.$': '$.config.padKiB' },
      resultPath: '$.steps.prepare',
      cache,
    });
    const square = fanOut(this, 'square', {
      scope: steps,
      itemsPath: '$.steps.prepare.items',
      // Squares of the probe's own numbers: a few characters each, kept inline for the sum's JSONPath filter.
      values: 'inline',
      failureItem: { 'item.$': '$.item' },
      iterator: (s) => step(s, 'square-item', { run: invoke(squareFn), inputs: { 'x.$': '$.item' }, resultPath: '$.result', cache }),
      resultPath: '$.steps.square',
      maxConcurrency: 4,
      tolerance: { maxFailuresPath: '$.config.maxFailures' },
    });
    const recheck = distributedFanOut(this, 'recheck', {
      scope: steps,
      itemsKeyPath: '$.steps.prepare.itemsKey',
      iterator: (s) => step(s, 'recheck-item', { run: invoke(squareFn), inputs: { 'x.$': '$.item' }, resultPath: '$.result' }),
      resultPath: '$.steps.recheck',
      maxConcurrency: 4,
      tolerance: { maxFailurePercentagePath: '$.config.maxFailurePercent' },
    });
    const sum = step(this, 'sum', {
      run: runJob(sumJob, steps, { timeoutPath: '$.config.jobTimeoutSeconds' }),
      inputs: { 'values.$': '$.squares.values', 'fault.$': '$.config.jobFault' },
      resultPath: '$.steps.sum',
      cache,
    });
    const gate = approvalGate(this, 'approve', {
      scope: steps,
      title: 'Publish the probe summary',
      detailsPath: '$.steps.sum.metrics',
      itemsUriPath: '$.config.approvalItemsUri',
      timeout: Duration.hours(1),
      resultPath: '$.steps.approval',
      outcomes: {
        approve: 'Publishes the summary as the next version of the probe-summary artifact.',
        reject: 'Fails the run with ApprovalRejected; nothing is published.',
        timeout: 'Fails the run with ApprovalTimedOut; nothing is published.',
      },
    });
    const publish = publishArtifact(this, 'publish', {
      scope: steps,
      name: 'probe-summary',
      filesPath: '$.steps.sum.files',
      metricsPath: '$.steps.sum.metrics',
      lineagePath: '$.config.lineage',
      resultPath: '$.steps.publish',
    });
    const output = new sfn.Pass(this, 'Output', {
      // The steps' results once (the square list is among them: twice would double the largest state).
      parameters: { 'total.$': '$.steps.sum.total', 'artifact.$': '$.steps.publish', 'steps.$': '$.steps' },
    });
    const needsApproval = new sfn.Choice(this, 'Approval required?')
      .when(sfn.Condition.booleanEquals('$.config.approve', true), gate.next(publish))
      .otherwise(publish);
    publish.next(output);
    const distributed = new sfn.Choice(this, 'Distributed check?')
      .when(sfn.Condition.booleanEquals('$.config.distributed', true), recheck.next(sum))
      .otherwise(sum);
    sum.next(needsApproval);
    // A JSONPath filter that matches nothing is an error: when every item failed, the sum is of no value.
    const anySquare = new sfn.Pass(this, 'Any square?', {
      parameters: { 'value.$': 'States.ArrayContains($.steps.square[*].ok, true)' },
      resultPath: '$.squares',
    });
    const squares = new sfn.Choice(this, 'Squares')
      .when(
        sfn.Condition.booleanEquals('$.squares.value', true),
        new sfn.Pass(this, 'Squares found', { parameters: { 'values.$': '$.steps.square[?(@.ok == true)].value.square' }, resultPath: '$.squares' }),
      )
      .otherwise(new sfn.Pass(this, 'No square', { result: sfn.Result.fromObject({ values: [] }), resultPath: '$.squares' }))
      .afterwards();
    const main = this.configCheck().next(prepare).next(square).next(anySquare).next(squares).next(distributed);
    const start = new sfn.Choice(this, 'Started by upload?').when(sfn.Condition.isPresent('$.trigger'), defaults.next(main)).otherwise(main);

    this.finish(start, { timeout: Duration.hours(2) });
    new S3Trigger(this, 'Trigger', { scope: steps, keyPattern: 'uploads/probe/*/manifest.json', stateMachine: this.stateMachine });
  }
}
