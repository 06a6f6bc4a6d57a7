/**
 * S3 trigger: an EventBridge rule on the bucket's Object Created events, matching a key
 * pattern (a checkpoint's manifest, written last), that targets a small Lambda rather than
 * the state machine: EventBridge's Step Functions target cannot name the execution, and the
 * name is what makes a redelivered event start nothing (see functions/platform/trigger).
 * Every upload starts one run, also one whose bytes an earlier upload had: the latest upload's
 * run is the current one (shared/trigger.ts).
 *
 * An event that cannot start its run is kept, never dropped: it goes to `deadLetterQueue` (SQS,
 * 14 days), from which `frontier triggers replay PIPELINE` replays it. EventBridge invokes a
 * Lambda target asynchronously, so two failures lead there: a delivery EventBridge gives up on
 * (8 retries or 2 hours; a missing function or permission at once), through the target's
 * dead-letter config, and a handler that fails (the ledger or StartExecution throttled) on all of
 * Lambda's own asynchronous attempts (3 within 6 hours), through the function's. Both keep the
 * EventBridge event itself as the message body; their attributes differ (ERROR_CODE and
 * ERROR_MESSAGE from EventBridge, ErrorCode and ErrorMessage from Lambda).
 */
import { CfnOutput, Duration, Stack } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { IStateMachine } from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { join } from 'node:path';
import { ConfigError } from '#shared/errors.ts';
import { ENV } from '#shared/env.ts';
import { REPO_ROOT } from './code-version.ts';
import { PipelineFunction } from './function.ts';
import { acknowledgeFindings } from './nag-findings.ts';
import type { StepScope } from './resources.ts';

/**
 * The pipeline stack's outputs that name its trigger, read by `frontier triggers replay` from the
 * deployed stack (and from the local runtime's resolved templates): one trigger per stack.
 */
export const TRIGGER_OUTPUTS = {
  deadLetterQueueUrl: 'TriggerDeadLetterQueueUrl',
  functionName: 'TriggerFunctionName',
} as const;

/** How long a dead-lettered event waits for its replay: SQS's longest retention. */
export const DEAD_LETTER_RETENTION = Duration.days(14);

export interface S3TriggerProps {
  readonly scope: StepScope;
  /** Key pattern with `*` wildcards, e.g. `checkpoints/*\/manifest.json`. */
  readonly keyPattern: string;
  readonly stateMachine: IStateMachine;
}

export class S3Trigger extends Construct {
  readonly rule: events.Rule;
  readonly function: PipelineFunction;
  /** Events that could not start their run (delivery or handler failures): replay them with the CLI. */
  readonly deadLetterQueue: sqs.Queue;

  constructor(scope: Construct, id: string, props: S3TriggerProps) {
    super(scope, id);
    if (!/^[A-Za-z0-9!_.*'()/-]+$/.test(props.keyPattern) || props.keyPattern.startsWith('/')) {
      throw new ConfigError('keyPattern', props.keyPattern, 'must be an S3 key pattern such as "checkpoints/*/manifest.json"');
    }
    const stack = Stack.of(this);
    const others = stack.node.findAll().filter((c) => c instanceof S3Trigger && c !== this);
    if (others.length) {
      throw new ConfigError(
        'S3Trigger',
        this.node.path,
        `is a second trigger in stack ${stack.node.id} (after ${others[0]!.node.path}): the stack's outputs name its one trigger for the replay command; give the rule one key pattern, or put the pipeline's other trigger in its own stack`,
      );
    }
    const { resources, pipeline } = props.scope;
    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetters', {
      // SQS-managed keys: EventBridge and Lambda may send to the queue without a KMS key policy.
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: DEAD_LETTER_RETENTION,
    });
    acknowledgeFindings(this.deadLetterQueue, [
      {
        id: 'AwsSolutions-SQS3',
        reason:
          'This queue is itself the dead-letter queue of the trigger rule target and of the trigger function; its messages are replayed by the CLI, never consumed by a worker that could fail them again.',
      },
    ]);
    this.function = new PipelineFunction(this, 'Handler', {
      entry: join(REPO_ROOT, 'functions/platform/trigger/handler.ts'),
      description: `Starts ${pipeline} once per upload`,
      environment: {
        [ENV.table]: resources.table.tableName,
        [ENV.stateMachineArn]: props.stateMachine.stateMachineArn,
        [ENV.pipeline]: pipeline,
      },
      timeout: Duration.seconds(30),
      logRetention: resources.logRetention,
      // Lambda's asynchronous invocations (EventBridge's) keep their defaults: 2 retries within 6 hours.
      deadLetterQueue: this.deadLetterQueue,
    });
    resources.table.grantReadWriteData(this.function);
    props.stateMachine.grantStartExecution(this.function);
    this.rule = new events.Rule(this, 'Rule', {
      description: `${pipeline}: objects matching ${props.keyPattern}`,
      eventPattern: {
        source: ['aws.s3'],
        detailType: ['Object Created'],
        detail: {
          bucket: { name: [resources.bucket.bucketName] },
          object: { key: [{ wildcard: props.keyPattern }] },
        },
      },
      // Passing the queue also lets the rule send to it (a queue policy conditioned on the rule's ARN).
      targets: [new targets.LambdaFunction(this.function, { retryAttempts: 8, maxEventAge: Duration.hours(2), deadLetterQueue: this.deadLetterQueue })],
    });
    new CfnOutput(this, 'DeadLetterQueueUrl', {
      value: this.deadLetterQueue.queueUrl,
      description: `${pipeline}: upload events that could not start their run (frontier triggers replay ${pipeline})`,
    }).overrideLogicalId(TRIGGER_OUTPUTS.deadLetterQueueUrl);
    new CfnOutput(this, 'FunctionName', {
      value: this.function.functionName,
      description: `${pipeline}: the trigger function a replay invokes`,
    }).overrideLogicalId(TRIGGER_OUTPUTS.functionName);
  }
}
