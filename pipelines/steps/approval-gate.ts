/**
 * Approval gate: a `.waitForTaskToken` invoke of the approval-request Lambda, which records
 * the request and emails a signed link; the execution waits (free on a Standard workflow)
 * until a person decides on the approval page. Reject fails the task with `ApprovalRejected`;
 * a timeout applies the pipeline's policy. A gate may also show a batch of items (values and
 * drawings) from an items document in S3, named by `itemsUriPath`, and says in its own words
 * what each decision does (`outcomes`), shown beside the buttons and in the email.
 */
import { Duration, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import type { Construct } from 'constructs';
import { join } from 'node:path';
import { APPROVAL_ITEMS_PREFIX, APPROVAL_REJECTED, MAX_OUTCOME_CHARS, type ApprovalOutcomes } from '#shared/approval.ts';
import { ConfigError } from '#shared/errors.ts';
import { ENV } from '#shared/env.ts';
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
   * Path of the s3:// URI of an items document (shared/approval.ts `approvalItemsSchema`: columns,
   * then up to 100 items with values and an optional SVG drawing), listed in the email and shown
   * as a table on the page. The document must be under `approvals/` of the platform bucket;
   * write it content-addressed (`approvals/<pipeline>/<sha256>.json`), since the approval is
   * bound to its exact bytes. A null value at the path means no items for that run.
   * Default: no items.
   */
  readonly itemsUriPath?: string;
  /**
   * How long to wait for a decision. Default: 3 days, under the pipeline's 7-day default
   * execution timeout, so that the timeout policy applies before the execution times out.
   * At most 1 year (the Standard workflow limit).
   */
  readonly timeout?: Duration;
  /**
   * Path of the timeout in seconds in the state (e.g. a run's config), instead of `timeout`: the
   * Task's `TimeoutSecondsPath`. The value must be an integer from 60 to the execution's timeout;
   * check it where the config is parsed.
   */
  readonly timeoutPath?: string;
  /** On timeout: `fail` the execution (default) or `continue` with `{approved: false, timedOut: true}`. */
  readonly onTimeout?: 'fail' | 'continue';
  /**
   * On Reject: `fail` the execution with `ApprovalRejected` (default) or `continue` with
   * `{approved: false, rejected: true, decision: {approved, approvalId, decidedAt, comment}}`,
   * for a loop that a Reject ends rather than fails.
   */
  readonly onReject?: 'fail' | 'continue';
  /** Where the decision goes: `{approved, approvalId, decidedAt, comment}`. */
  readonly resultPath: string;
  /**
   * What each decision does, in a sentence or two each (at most 300 characters), shown to the
   * approver beside the buttons and in the email: e.g. `reject: 'Ends the loop, keeping
   * everything measured.'`. Any one left out is said from `onReject` / `onTimeout` ("The run
   * fails with ApprovalRejected.").
   */
  readonly outcomes?: Partial<ApprovalOutcomes>;
}

/** The outcomes the page shows: the gate's words, else what the Reject and timeout policies do. */
export function gateOutcomes(props: Pick<ApprovalGateProps, 'outcomes' | 'onReject' | 'onTimeout'>): ApprovalOutcomes {
  const given = props.outcomes ?? {};
  for (const key of ['approve', 'reject', 'timeout'] as const) {
    const text = given[key];
    if (text !== undefined && (text.trim().length === 0 || text.length > MAX_OUTCOME_CHARS)) {
      throw new ConfigError(`outcomes.${key}`, text, `must be a sentence of 1 to ${MAX_OUTCOME_CHARS} characters`);
    }
  }
  return {
    approve: given.approve ?? 'The run goes on past this gate.',
    reject: given.reject ?? (props.onReject === 'continue' ? 'The run goes on without this step.' : 'The run fails with ApprovalRejected.'),
    timeout: given.timeout ?? ((props.onTimeout ?? 'fail') === 'fail' ? 'The run fails with ApprovalTimedOut.' : 'The run goes on as if nobody had approved.'),
  };
}

/** Id of a stack's approval-request Lambda, at the root of the stack. */
const APPROVAL_REQUEST_ID = 'ApprovalRequest';

/** Whether the stack of `scope` has an approval gate (its approval-request Lambda). */
export function hasApprovalGate(scope: Construct): boolean {
  return Stack.of(scope).node.tryFindChild(APPROVAL_REQUEST_ID) !== undefined;
}

/** The approval-request Lambda of a stack, created once and shared by its gates. */
export function approvalRequestFunction(scope: Construct, steps: StepScope): PipelineFunction {
  return stackSingleton(scope, APPROVAL_REQUEST_ID, (stack) => {
    const { resources } = steps;
    const fn = new PipelineFunction(stack, APPROVAL_REQUEST_ID, {
      entry: join(REPO_ROOT, 'functions/platform/approval-request/handler.ts'),
      description: 'Records an approval request and emails its signed link',
      environment: {
        [ENV.table]: resources.table.tableName,
        [ENV.bucket]: resources.bucket.bucketName,
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
    // Items documents: GetObject under approvals/ and nothing else (no List, no other prefix).
    // The platform bucket is SSE-S3, so reading needs no KMS grant.
    const itemsObjects = resources.bucket.arnForObjects(`${APPROVAL_ITEMS_PREFIX}*`);
    fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: [itemsObjects] }));
    acknowledgeFindings(fn, [
      {
        id: iam5Resource(fn, sesIdentities),
        reason:
          'SES authorizes SendEmail against the identity of the From address and, in the SES sandbox, of each recipient; identity/* of this account and region covers both without hard-coding addresses.',
      },
      {
        id: iam5Resource(fn, itemsObjects),
        reason:
          'Approval items documents are written content-addressed by each pipeline (approvals/<pipeline>/<sha256>.json), so their keys are known only at run time; the grant is GetObject under the approvals/ prefix only.',
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
  if (props.itemsUriPath !== undefined && !/^\$\$?(\.|\[|$)/.test(props.itemsUriPath)) {
    throw new ConfigError('itemsUriPath', props.itemsUriPath, 'must be a JSONPath starting with "$" (e.g. "$.steps.propose.itemsUri")');
  }
  if (props.timeoutPath !== undefined && props.timeout !== undefined) {
    throw new ConfigError('timeoutPath', props.timeoutPath, 'give timeout or timeoutPath, not both');
  }
  if (props.timeoutPath !== undefined && !/^\$(\.|\[)/.test(props.timeoutPath)) {
    throw new ConfigError('timeoutPath', props.timeoutPath, 'must be a JSONPath starting with "$." (e.g. "$.config.approvalTimeoutSeconds")');
  }
  const outcomes = gateOutcomes(props);
  const fn = approvalRequestFunction(scope, props.scope);
  acknowledgeOnStateMachine(scope, [invokeGrantFinding(scope, fn.functionArn)]);
  const within = props.timeoutPath ? 'the configured timeout' : timeout.toHumanString();
  const request = new tasks.LambdaInvoke(scope, stateName(stepId, 'Wait for approval'), {
    lambdaFunction: fn,
    integrationPattern: sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
    payload: sfn.TaskInput.fromObject({
      taskToken: sfn.JsonPath.taskToken,
      executionId: sfn.JsonPath.stringAt('$$.Execution.Id'),
      pipeline: props.scope.pipeline,
      title: props.title,
      outcomes,
      details: sfn.JsonPath.objectAt(props.detailsPath),
      ...(props.itemsUriPath === undefined ? {} : { itemsUri: sfn.JsonPath.stringAt(props.itemsUriPath) }),
      timeoutSeconds: props.timeoutPath ? sfn.JsonPath.numberAt(props.timeoutPath) : timeout.toSeconds(),
    }),
    taskTimeout: props.timeoutPath ? sfn.Timeout.at(props.timeoutPath) : sfn.Timeout.duration(timeout),
    retryOnServiceExceptions: false,
    resultPath: props.resultPath,
  });
  retryServiceErrors(request, LAMBDA_SERVICE_ERRORS);
  const done = new sfn.Pass(scope, stateName(stepId, 'Decided'));
  if ((props.onTimeout ?? 'fail') === 'fail') {
    request.addCatch(
      new sfn.Fail(scope, stateName(stepId, 'Timed out'), {
        error: 'ApprovalTimedOut',
        cause: `No decision on "${props.title}" within ${within}`,
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
  if (props.onReject === 'continue') {
    // The approval API fails the task with ApprovalRejected and the decision as its cause (JSON).
    request.addCatch(
      new sfn.Pass(scope, stateName(stepId, 'Rejected'), {
        parameters: { approved: false, rejected: true, 'decision.$': `States.StringToJson(${props.resultPath}.Cause)` },
        resultPath: props.resultPath,
      }).next(done),
      { errors: [APPROVAL_REJECTED], resultPath: props.resultPath },
    );
  }
  return sfn.Chain.start(request).next(done);
}
