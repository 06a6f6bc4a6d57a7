/**
 * The run's cost line on AWS (shared/cost/aws-run-report.ts): a function EventBridge starts when
 * one of the stack's executions succeeds, which reads the execution's history, its Distributed
 * Map children's, its Batch jobs and the memory sizes of the functions it invoked, and writes the
 * report's copy with the line under runs/<pipeline>/<execution>/. It runs beside the state
 * machine, not in it: the report step is cached and content-addressed, the line belongs to one
 * run, and the figures include every state of the run, the last ones too.
 */
import { type CfnElement, Duration, Lazy, Stack, Token } from 'aws-cdk-lib';
import { CfnJobDefinition } from 'aws-cdk-lib/aws-batch';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { join } from 'node:path';
import { ENV } from '#shared/env.ts';
import { REPO_ROOT } from './code-version.ts';
import { documentFunction, META, type PipelineFunction } from './function.ts';
import { acknowledgeFindings } from './nag-findings.ts';
import type { StepResources } from './resources.ts';

/**
 * The run-cost function reads the run's history and its computing runs', Distributed Map children
 * included, 8 at a time. GetExecutionHistory is throttled per account, a burst then a few calls a
 * second: a refinery of 5,000 shards is 5,000 children, and as many again for the run whose entries
 * a rerun restores, which can take more than this. Lambda's most; a run too large to read in it has
 * no line from the function (its figures are still `frontier runs show ARN --target aws`).
 */
export const RUN_COST_TIMEOUT = Duration.minutes(15);

export class RunCost extends Construct {
  readonly function: PipelineFunction;
  readonly rule: events.Rule;

  constructor(scope: Construct, id: string, props: { readonly pipeline: string; readonly resources: StepResources; readonly stateMachine: sfn.StateMachine }) {
    super(scope, id);
    const stack = Stack.of(this);
    const { pipeline, resources, stateMachine } = props;
    this.function = documentFunction(this, 'Handler', {
      entry: join(REPO_ROOT, 'functions/platform/run-cost/handler.ts'),
      description: `${pipeline}: a succeeded run's cost and its cache's saving, with its report`,
      environment: {
        [ENV.bucket]: resources.bucket.bucketName,
        [ENV.pipeline]: pipeline,
        // Resolved at synth, when every job of the stack exists (the lookup the CLI makes from the app).
        [ENV.jobInstanceTypes]: Lazy.string({ produce: () => instanceTypesJson(stack) }),
      },
      timeout: RUN_COST_TIMEOUT,
      logRetention: resources.logRetention,
      bucket: resources.bucket,
      readsWhy: "It reads the run's report, whose content-addressed key is made at run time under data/<pipeline>/.",
      writes: [
        {
          prefix: `runs/${pipeline}/*`,
          why: "It writes each run's cost figures and report copy under runs/<pipeline>/<execution>/, keys made from the execution's name.",
        },
      ],
    });
    const machineName = stateMachine.stateMachineName;
    const executions = [
      `arn:${stack.partition}:states:${stack.region}:${stack.account}:execution:${machineName}:*`,
      `arn:${stack.partition}:states:${stack.region}:${stack.account}:execution:${machineName}/*`,
    ];
    const mapRuns = `arn:${stack.partition}:states:${stack.region}:${stack.account}:mapRun:${machineName}/*`;
    this.function.addToRolePolicy(new iam.PolicyStatement({ actions: ['states:GetExecutionHistory', 'states:DescribeExecution'], resources: executions }));
    this.function.addToRolePolicy(new iam.PolicyStatement({ actions: ['states:ListExecutions'], resources: [mapRuns] }));
    this.function.addToRolePolicy(new iam.PolicyStatement({ actions: ['batch:DescribeJobs'], resources: ['*'] }));
    const functions = `arn:${stack.partition}:lambda:${stack.region}:${stack.account}:function:*`;
    this.function.addToRolePolicy(new iam.PolicyStatement({ actions: ['lambda:GetFunctionConfiguration'], resources: [functions] }));
    // The findings' text, as the rule flattens these ARNs (iam5Resource maps references, not pseudo parameters).
    const flat = (arn: string) =>
      arn
        .replace(stack.partition, '<AWS::Partition>')
        .replace(stack.region, Token.isUnresolved(stack.region) ? '<AWS::Region>' : stack.region)
        .replace(stack.account, Token.isUnresolved(stack.account) ? '<AWS::AccountId>' : stack.account)
        .replace(machineName, `<${stack.getLogicalId(stateMachine.node.defaultChild as CfnElement)}.Name>`);
    acknowledgeFindings(this.function, [
      ...executions.map((r) => ({
        id: `AwsSolutions-IAM5[Resource::${flat(r)}]`,
        reason:
          "An execution's name is chosen when it starts (and a Distributed Map child's by Step Functions): the grant is this pipeline's state machine's executions, read only.",
      })),
      {
        id: `AwsSolutions-IAM5[Resource::${flat(mapRuns)}]`,
        reason: "A map run's ARN is made by Step Functions when the run starts: the grant lists the children of this pipeline's map runs, read only.",
      },
      {
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason: 'batch:DescribeJobs supports no resource-level permissions; it reads the seconds and resources of the jobs a run submitted.',
      },
      {
        id: `AwsSolutions-IAM5[Resource::${flat(functions)}]`,
        reason:
          "A run invokes this stack's functions and the platform's shared ones (publish, approval); GetFunctionConfiguration reads their memory size to price them, and changes nothing.",
      },
    ]);
    this.rule = new events.Rule(this, 'Rule', {
      description: `${pipeline}: a run succeeded; write its cost line`,
      eventPattern: {
        source: ['aws.states'],
        detailType: ['Step Functions Execution Status Change'],
        detail: { status: ['SUCCEEDED'], stateMachineArn: [stateMachine.stateMachineArn] },
      },
      // EventBridge retries a delivery it could not make, and Lambda an invocation that failed, each
      // twice; a line lost past those is not written, and `frontier runs show ARN --target aws` still prints it.
      targets: [new targets.LambdaFunction(this.function, { retryAttempts: 2, maxEventAge: Duration.hours(2) })],
    });
  }
}

/**
 * JSON {logical id: instance type} of the stack's job definitions: a GPU one's `frontier:jobInstanceType`,
 * '' for the others (named by their logical id, as `runs show` names them).
 */
function instanceTypesJson(stack: Stack): string {
  const map: Record<string, string> = {};
  for (const c of stack.node.findAll()) {
    if (!(c instanceof CfnJobDefinition)) continue;
    const type: unknown = c.getMetadata(META.jobInstanceType);
    map[stack.getLogicalId(c)] = typeof type === 'string' ? type : '';
  }
  return JSON.stringify(map);
}
