/**
 * PipelineStateMachine: a Standard workflow with logging and tracing, whose definition is
 * the pipeline's chain. The embedded runtime finds it in the template by its metadata.
 */
import { ArnFormat, CfnOutput, Duration, Fn, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { acknowledgeFindings, applyStateMachineFindings, iam5Resource } from './nag-findings.ts';
import type { StepResources } from './resources.ts';

export const PIPELINE_META = 'frontier:pipeline';
/** The stack output the CLI reads to find a deployed pipeline's state machine. */
export const STATE_MACHINE_OUTPUT = 'StateMachineArn';

export interface PipelineStateMachineProps {
  readonly pipeline: string;
  readonly definition: sfn.IChainable;
  readonly resources: StepResources;
  /** Execution limit. Default: 7 days. */
  readonly timeout?: Duration;
}

export class PipelineStateMachine extends Construct {
  readonly stateMachine: sfn.StateMachine;
  readonly logGroup: LogGroup;

  constructor(scope: Construct, id: string, props: PipelineStateMachineProps) {
    super(scope, id);
    this.logGroup = new LogGroup(this, 'Logs', {
      retention: props.resources.logRetention ?? RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.stateMachine = new sfn.StateMachine(this, 'StateMachine', {
      stateMachineType: sfn.StateMachineType.STANDARD,
      definitionBody: sfn.DefinitionBody.fromChainable(props.definition),
      timeout: props.timeout ?? Duration.days(7),
      tracingEnabled: true,
      // ALL: every state transition is in the log (cdk-nag SF1), for audits and for runs older
      // than the 90 days Step Functions keeps a Standard execution's history. Without execution
      // data the events are small, and payloads (S3 URIs, configs) stay out of the log.
      logs: { destination: this.logGroup, level: sfn.LogLevel.ALL, includeExecutionData: false },
    });
    (this.stateMachine.node.defaultChild as sfn.CfnStateMachine).addMetadata(PIPELINE_META, props.pipeline);
    acknowledgeFindings(this, [
      {
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason:
          'Logging and tracing: CloudWatch Logs log-delivery actions (logs:CreateLogDelivery, ...) and X-Ray trace writes support no resource-level permissions, so CDK grants them on "*".',
      },
    ]);
    // Grants of this state machine's tasks (Lambda qualifiers, S3 prefixes, Batch definitions).
    applyStateMachineFindings(this);
    if (
      Stack.of(this)
        .node.findAll()
        .some((c) => c instanceof sfn.DistributedMap)
    ) {
      // A Distributed Map starts child executions of this state machine and manages its map runs.
      const stack = Stack.of(this);
      const name = Fn.select(6, Fn.split(':', this.stateMachine.stateMachineArn));
      const execution = (resourceName: string) =>
        stack.formatArn({ service: 'states', resource: 'execution', resourceName, arnFormat: ArnFormat.COLON_RESOURCE_NAME });
      const reason =
        'A Distributed Map starts, describes and stops child executions of its own state machine; their names are made at run time, so CDK grants the executions (and map runs) of this one state machine by wildcard.';
      acknowledgeFindings(this, [
        { id: iam5Resource(this, execution(`${name}:*`)), reason },
        { id: iam5Resource(this, execution(`${name}/*:*`)), reason },
      ]);
    }
    const output = new CfnOutput(this, 'Arn', { value: this.stateMachine.stateMachineArn, description: `State machine of ${props.pipeline}` });
    output.overrideLogicalId(STATE_MACHINE_OUTPUT);
  }
}
