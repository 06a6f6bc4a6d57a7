/**
 * PipelineStateMachine: a Standard workflow with logging and tracing, whose definition is
 * the pipeline's chain. The embedded runtime finds it in the template by its metadata.
 */
import { ArnFormat, CfnOutput, Duration, Fn, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import { Construct } from 'constructs';
import { ConfigError } from '#shared/errors.ts';
import { BatchJob } from './batch-job.ts';
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
          'Logging and tracing: CloudWatch Logs log-delivery actions (logs:CreateLogDelivery, ...) and X-Ray trace writes support no resource-level permissions, so CDK grants them on "*"; so does batch:DescribeJobs, which submitJob.sync polls with.',
      },
    ]);
    // Grants of this state machine's tasks (Lambda qualifiers, S3 prefixes, Batch definitions).
    applyStateMachineFindings(this);
    const stack = Stack.of(this);
    const found = stack.node.findAll();
    if (found.some((c) => c instanceof tasks.BatchSubmitJob)) {
      // submitJob.sync polls the job and, when the execution stops, times out or fails, cancels
      // it: without these a stopped run leaves its GPU job billing through every attempt. CDK
      // grants only batch:SubmitJob. DescribeJobs has no resource-level permissions; job ids are
      // made at submit, so TerminateJob is granted on this account's jobs in this region.
      this.stateMachine.addToRolePolicy(new iam.PolicyStatement({ actions: ['batch:DescribeJobs'], resources: ['*'] }));
      this.stateMachine.addToRolePolicy(
        new iam.PolicyStatement({ actions: ['batch:TerminateJob'], resources: [stack.formatArn({ service: 'batch', resource: 'job', resourceName: '*' })] }),
      );
      acknowledgeFindings(this, [
        {
          id: iam5Resource(this, stack.formatArn({ service: 'batch', resource: 'job', resourceName: '*' })),
          reason:
            'submitJob.sync cancels the job it submitted when the execution stops, times out or fails (batch:TerminateJob); Batch makes job ids at submit, so the grant covers the jobs of this account and region.',
        },
      ]);
    }
    // Each job fits inside its run: a run that times out while a job may still be retrying would
    // cancel it mid-attempt, and a longer job could never finish.
    const timeoutSeconds = (props.timeout ?? Duration.days(7)).toSeconds();
    for (const job of found.filter((c): c is BatchJob => c instanceof BatchJob)) {
      if (job.worstCaseSeconds > timeoutSeconds) {
        throw new ConfigError(
          `${props.pipeline}.timeout`,
          `${timeoutSeconds} s`,
          `is shorter than the ${job.node.id} job's worst case (${job.attempts} attempts of ${job.timeoutSeconds} s = ${job.worstCaseSeconds} s): lengthen the state machine's timeout or shorten the job's`,
        );
      }
    }
    if (found.some((c) => c instanceof sfn.DistributedMap)) {
      // A Distributed Map starts child executions of this state machine and manages its map runs.
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
