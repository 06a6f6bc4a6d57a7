/**
 * Approval gate: a `.waitForTaskToken` invoke of the approval-request Lambda, which records
 * the request and emails a signed link; the execution waits (free on a Standard workflow)
 * until a person decides on the approval page. Reject fails the task with `ApprovalRejected`;
 * a timeout applies the pipeline's policy.
 */
import { Duration } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import type { Construct } from 'constructs';
import { join } from 'node:path';
import { ConfigError } from '#shared/errors.ts';
import { ENV } from '#shared/table.ts';
import { REPO_ROOT } from './code-version.ts';
import { PipelineFunction, stackSingleton } from './function.ts';
import { acknowledgeFindings, acknowledgeOnStateMachine, iam5Resource, invokeGrantFinding } from './nag-findings.ts';
import { checkStepId, stateName } from './names.ts';
import type { StepScope } from './resources.ts';
import { LAMBDA_SERVICE_ERRORS, retryServiceErrors } from './step.ts';

export interface ApprovalGateProps {
  readonly scope: StepScope;
  /** What is being approved, shown in the email and on the page. */
  readonly title: string;
  /** Path of a flat object of small values shown to the approver. */
  readonly detailsPath: string;
  /**
   * How long to wait for a decision. Default: 3 days, under the pipeline's 7-day default
   * execution timeout, so that the timeout policy applies before the execution times out.
   * At most 1 year (the Standard workflow limit).
   */
  readonly timeout?: Duration;
  /** On timeout: `fail` the execution (default) or `continue` with `{approved: false, timedOut: true}`. */
  readonly onTimeout?: 'fail' | 'continue';
  /** Where the decision goes: `{approved, approvalId, decidedAt, comment}`. */
  readonly resultPath: string;
}

/** The approval-request Lambda of a stack, created once and shared by its gates. */
export function approvalRequestFunction(scope: Construct, steps: StepScope): PipelineFunction {
  return stackSingleton(scope, 'ApprovalRequest', (stack) => {
    const { resources } = steps;
    const fn = new PipelineFunction(stack, 'ApprovalRequest', {
      entry: join(REPO_ROOT, 'functions/platform/approval-request/handler.ts'),
      description: 'Records an approval request and emails its signed link',
      environment: {
        [ENV.table]: resources.table.tableName,
        [ENV.signingSecretArn]: resources.signingSecret.secretArn,
        [ENV.senderEmail]: resources.senderEmail,
        [ENV.approvalBaseUrl]: resources.approvalApiUrl,
        APPROVER_EMAIL: resources.approverEmail,
      },
      logRetention: resources.logRetention,
    });
    resources.table.grantReadWriteData(fn);
    resources.signingSecret.grantRead(fn);
    const sesIdentities = `arn:${stack.partition}:ses:${stack.region}:${stack.account}:identity/*`;
    fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['ses:SendEmail', 'ses:SendRawEmail'], resources: [sesIdentities] }));
    acknowledgeFindings(fn, [
      {
        id: iam5Resource(fn, sesIdentities),
        reason: 'SES authorizes SendEmail against the identity of the From address and, in the SES sandbox, of each recipient; identity/* of this account and region covers both without hard-coding addresses.',
      },
    ]);
    return fn;
  });
}

export function approvalGate(scope: Construct, stepId: string, props: ApprovalGateProps): sfn.Chain {
  checkStepId(stepId);
  const timeout = props.timeout ?? Duration.days(3);
  if (timeout.toSeconds() < 60 || timeout.toSeconds() > 365 * 24 * 3600) {
    throw new ConfigError('timeout', `${timeout.toSeconds()} s`, 'must be between 1 minute and 1 year');
  }
  const fn = approvalRequestFunction(scope, props.scope);
  acknowledgeOnStateMachine(scope, [invokeGrantFinding(scope, fn.functionArn)]);
  const request = new tasks.LambdaInvoke(scope, stateName(stepId, 'Wait for approval'), {
    lambdaFunction: fn,
    integrationPattern: sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
    payload: sfn.TaskInput.fromObject({
      taskToken: sfn.JsonPath.taskToken,
      executionId: sfn.JsonPath.stringAt('$$.Execution.Id'),
      pipeline: props.scope.pipeline,
      title: props.title,
      details: sfn.JsonPath.objectAt(props.detailsPath),
      timeoutSeconds: timeout.toSeconds(),
    }),
    taskTimeout: sfn.Timeout.duration(timeout),
    retryOnServiceExceptions: false,
    resultPath: props.resultPath,
  });
  retryServiceErrors(request, LAMBDA_SERVICE_ERRORS);
  const done = new sfn.Pass(scope, stateName(stepId, 'Decided'));
  if ((props.onTimeout ?? 'fail') === 'fail') {
    request.addCatch(
      new sfn.Fail(scope, stateName(stepId, 'Timed out'), {
        error: 'ApprovalTimedOut',
        cause: `No decision on "${props.title}" within ${timeout.toHumanString()}`,
      }),
      { errors: ['States.Timeout'] },
    );
  } else {
    request.addCatch(
      new sfn.Pass(scope, stateName(stepId, 'Timed out'), {
        result: sfn.Result.fromObject({ approved: false, timedOut: true }),
        resultPath: props.resultPath,
      }).next(done),
      // Keep the state: the Catch's default ResultPath "$" would replace it with the error.
      { errors: ['States.Timeout'], resultPath: sfn.JsonPath.DISCARD },
    );
  }
  return sfn.Chain.start(request).next(done);
}
