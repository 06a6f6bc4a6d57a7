/**
 * S3 trigger: an EventBridge rule on the bucket's Object Created events, matching a key
 * pattern (a checkpoint's manifest, written last), that targets a small Lambda rather than
 * the state machine: EventBridge's Step Functions target cannot name the execution, and the
 * name is what makes a redelivered event start nothing (see functions/platform/trigger).
 * Every upload starts one run, also one whose bytes an earlier upload had: the latest upload's
 * run is the current one (shared/trigger.ts).
 */
import { Duration } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import type { IStateMachine } from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { join } from 'node:path';
import { ConfigError } from '#shared/errors.ts';
import { ENV } from '#shared/env.ts';
import { REPO_ROOT } from './code-version.ts';
import { PipelineFunction } from './function.ts';
import type { StepScope } from './resources.ts';

export interface S3TriggerProps {
  readonly scope: StepScope;
  /** Key pattern with `*` wildcards, e.g. `checkpoints/*\/manifest.json`. */
  readonly keyPattern: string;
  readonly stateMachine: IStateMachine;
}

export class S3Trigger extends Construct {
  readonly rule: events.Rule;
  readonly function: PipelineFunction;

  constructor(scope: Construct, id: string, props: S3TriggerProps) {
    super(scope, id);
    if (!/^[A-Za-z0-9!_.*'()/-]+$/.test(props.keyPattern) || props.keyPattern.startsWith('/')) {
      throw new ConfigError('keyPattern', props.keyPattern, 'must be an S3 key pattern such as "checkpoints/*/manifest.json"');
    }
    const { resources, pipeline } = props.scope;
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
      targets: [new targets.LambdaFunction(this.function, { retryAttempts: 8, maxEventAge: Duration.hours(2) })],
    });
  }
}
