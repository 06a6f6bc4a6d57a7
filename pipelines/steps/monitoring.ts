/**
 * Monitoring of one pipeline stack: alarms that tell a person a deployed run went wrong, sent to
 * the platform's alarm topic, and one CloudWatch dashboard. PipelineStack.finish() makes it.
 *
 * Alarms and notices (each says the pipeline's name):
 * 1. Failed executions: ExecutionsFailed >= 1 in 5 minutes (a rejected or, with onTimeout
 *    'fail', expired approval fails its run too).
 * 2. Timed-out executions: ExecutionsTimedOut >= 1 in 5 minutes.
 * 3. Expired approvals (stacks with an approval gate): the gate's task timing out, counted by a
 *    metric filter on the state machine's log (`TaskTimedOut` of the `.waitForTaskToken` invoke,
 *    which only approval gates use), >= 1 in 5 minutes. A timeout policy of 'continue' lets the
 *    run go on, so nothing else would show it; nobody is invoked when a request expires, so no
 *    function could count it.
 * 4. Failed Batch jobs (stacks with Batch jobs): AWS Batch publishes no job metrics to
 *    CloudWatch, so an EventBridge rule on "Batch Job State Change" to FAILED for this stack's
 *    job definitions sends a short notice to the topic, one per job (after its last attempt),
 *    naming the job and Batch's reason. A job its run cancelled (the run stopped or timed out)
 *    or the GPU queue gave up on (no capacity) ends FAILED too, and is told the same way.
 * 5. Dead letters (stacks with an S3 trigger): the trigger's dead-letter queue holds a message
 *    (ApproximateNumberOfMessagesVisible >= 1, maximum over 5 minutes) — see `queueNotEmptyAlarm`.
 * Aborted executions are on the dashboard, not alarmed: someone stopped them (StopExecution),
 * so the person who would be told already knows.
 *
 * The dashboard: executions (started, succeeded, failed, aborted, timed out) and durations, the
 * errors and throttles of the stack's functions, Batch jobs by outcome as the state machine saw
 * them (a Logs Insights query of its log), expired approvals and dead letters.
 *
 * The functions and the trigger a stack makes after finish() (the trigger needs the state
 * machine) are found when the app is synthesized: an aspect builds the monitoring once, then.
 */
import { Aspects, Duration, type IAspect, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as events from 'aws-cdk-lib/aws-events';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { DefaultDashboardFactory, MonitoringFacade, SnsAlarmActionStrategy } from 'cdk-monitoring-constructs';
import { Construct, type IConstruct } from 'constructs';
import { BatchJob } from './batch-job.ts';
import { hasApprovalGate } from './approval-gate.ts';
import { PipelineFunction } from './function.ts';
import { S3Trigger } from './s3-trigger.ts';

/** The period every alarm evaluates: one datapoint of 5 minutes, so one bad event is enough. */
export const ALARM_PERIOD = Duration.minutes(5);
/** Namespace of the metrics the stacks make themselves (metric filters); one name per pipeline. */
export const METRIC_NAMESPACE = 'frontier-pipelines';

export interface QueueNotEmptyAlarmProps {
  readonly queue: sqs.IQueue;
  /** Where the alarm goes. */
  readonly topic: sns.ITopic;
  /** What a message in the queue means and what to do, e.g. "upload events that could not start a run: frontier triggers replay evals". */
  readonly description: string;
}

/**
 * An alarm while `queue` holds a message (ApproximateNumberOfMessagesVisible >= 1, its maximum
 * over 5 minutes), to `topic`, and again to `topic` when it is empty once more. For a
 * dead-letter queue, where any message is one that something gave up on. A queue with no traffic
 * for hours may stop reporting; missing data counts as empty.
 */
export function queueNotEmptyAlarm(scope: Construct, id: string, props: QueueNotEmptyAlarmProps): cloudwatch.Alarm {
  const alarm = props.queue.metricApproximateNumberOfMessagesVisible({ statistic: cloudwatch.Stats.MAXIMUM, period: ALARM_PERIOD }).createAlarm(scope, id, {
    alarmDescription: `Messages wait in ${props.queue.node.path}: ${props.description}`,
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 1,
    datapointsToAlarm: 1,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  const action = new actions.SnsAction(props.topic);
  alarm.addAlarmAction(action);
  alarm.addOkAction(action);
  return alarm;
}

export interface PipelineMonitoringProps {
  readonly pipeline: string;
  readonly stateMachine: sfn.StateMachine;
  /** The state machine's log group (level ALL): approvals and Batch jobs are read from it. */
  readonly logGroup: logs.ILogGroup;
  /** Where alarms and notices go: the platform's alarm topic. */
  readonly alarmTopic: sns.ITopic;
  /**
   * Whether to build the dashboard (3 USD a month each beyond an account's first three; context
   * `frontier:dashboards=false` leaves them out). Alarms and notices are built either way.
   * Default: true.
   */
  readonly dashboard?: boolean;
}

/** CDK context flag: `-c frontier:dashboards=false` builds no dashboard in any pipeline stack. */
export const DASHBOARDS_CONTEXT = 'frontier:dashboards';

export class PipelineMonitoring extends Construct {
  readonly facade: MonitoringFacade;
  /** The stack's one dashboard; absent with `dashboard: false`. */
  readonly dashboard?: cloudwatch.Dashboard;
  private readonly props: PipelineMonitoringProps;
  private built = false;

  constructor(scope: Construct, id: string, props: PipelineMonitoringProps) {
    super(scope, id);
    this.props = props;
    const stackName = Stack.of(this).stackName;
    const dashboards = new DefaultDashboardFactory(this, 'Dashboards', {
      dashboardNamePrefix: stackName,
      createDashboard: props.dashboard ?? true,
      createSummaryDashboard: false,
      createAlarmDashboard: false,
    });
    this.dashboard = dashboards.dashboard;
    this.facade = new MonitoringFacade(this, 'Facade', {
      alarmFactoryDefaults: {
        alarmNamePrefix: stackName,
        actionsEnabled: true,
        action: new SnsAlarmActionStrategy({ onAlarmTopic: props.alarmTopic }),
        datapointsToAlarm: 1,
        evaluationPeriods: 1,
      },
      metricFactoryDefaults: { period: ALARM_PERIOD },
      dashboardFactory: dashboards,
    });
    const self = this;
    const aspect: IAspect = {
      visit(node: IConstruct) {
        if (node === self) self.build();
      },
    };
    Aspects.of(this).add(aspect);
  }

  /** Everything, once the stack holds all it will (at synthesis). */
  private build(): void {
    if (this.built) return;
    this.built = true;
    const { pipeline, stateMachine } = this.props;
    const stack = Stack.of(this);
    const found = stack.node.findAll();

    this.facade.monitorStepFunction({
      stateMachine,
      humanReadableName: `${pipeline}: executions`,
      alarmFriendlyName: 'Executions',
      // More than 0 in one 5-minute period: every failed or timed-out run is worth a look.
      addFailedExecutionCountAlarm: {
        Failed: {
          maxErrorCount: 0,
          alarmDescriptionOverride: `${pipeline}: a run failed. Its execution history (Step Functions console, or: frontier runs ${pipeline} --target aws) names the state and the error.`,
        },
      },
      addTimedOutExecutionCountAlarm: {
        TimedOut: {
          maxErrorCount: 0,
          alarmDescriptionOverride: `${pipeline}: a run reached its state machine's timeout; its Batch job, if one was running, was cancelled.`,
        },
      },
    });

    const functions = found.filter((c): c is PipelineFunction => c instanceof PipelineFunction);
    const label = (fn: PipelineFunction) => fn.node.path.slice(stack.node.path.length + 1);
    this.facade.monitorCustom({
      humanReadableName: `${pipeline}: functions`,
      alarmFriendlyName: 'Functions',
      metricGroups: [
        { title: 'Errors', metrics: functions.map((fn) => fn.metricErrors({ label: label(fn), statistic: cloudwatch.Stats.SUM })) },
        { title: 'Throttles', metrics: functions.map((fn) => fn.metricThrottles({ label: label(fn), statistic: cloudwatch.Stats.SUM })) },
      ],
    });

    if (hasApprovalGate(stack)) this.monitorApprovals();
    const jobs = found.filter((c): c is BatchJob => c instanceof BatchJob);
    if (jobs.length) this.monitorBatchJobs(jobs);
    for (const trigger of found.filter((c): c is S3Trigger => c instanceof S3Trigger)) this.monitorDeadLetters(trigger);
  }

  /** Approval requests nobody decided in time: the gate's `.waitForTaskToken` task timing out. */
  private monitorApprovals(): void {
    const { pipeline, logGroup } = this.props;
    const filter = new logs.MetricFilter(this, 'ApprovalsExpired', {
      logGroup,
      // The state machine logs every history event (level ALL) as JSON; without execution data
      // a TaskTimedOut event still carries its type and the task's resource.
      filterPattern: logs.FilterPattern.all(
        logs.FilterPattern.stringValue('$.type', '=', 'TaskTimedOut'),
        logs.FilterPattern.stringValue('$.details.resourceType', '=', 'lambda'),
        logs.FilterPattern.stringValue('$.details.resource', '=', 'invoke.waitForTaskToken'),
      ),
      metricNamespace: METRIC_NAMESPACE,
      metricName: `${pipeline}-ApprovalsExpired`,
      metricValue: '1',
      unit: cloudwatch.Unit.COUNT,
    });
    this.facade.monitorCustom({
      humanReadableName: `${pipeline}: approvals`,
      alarmFriendlyName: 'Approvals',
      metricGroups: [
        {
          title: 'Expired approval requests',
          metrics: [
            {
              metric: filter.metric({ statistic: cloudwatch.Stats.SUM, period: ALARM_PERIOD, label: 'expired' }),
              alarmFriendlyName: 'ApprovalsExpired',
              addAlarm: {
                Expired: {
                  threshold: 1,
                  comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                  treatMissingDataOverride: cloudwatch.TreatMissingData.NOT_BREACHING,
                  additionalDescription: `${pipeline}: an approval request expired with nobody deciding; its run failed or went on as its gate's timeout policy says.`,
                },
              },
            },
          ],
        },
      ],
    });
  }

  /** A notice per failed job of this stack's definitions, and the jobs by outcome on the dashboard. */
  private monitorBatchJobs(jobs: readonly BatchJob[]): void {
    const { pipeline, logGroup, alarmTopic } = this.props;
    const field = (path: string) => events.EventField.fromPath(path);
    const rule = new events.Rule(this, 'BatchJobFailed', {
      description: `${pipeline}: a Batch job failed (after its last attempt)`,
      eventPattern: {
        source: ['aws.batch'],
        detailType: ['Batch Job State Change'],
        detail: { status: ['FAILED'], jobDefinition: jobs.map((job) => job.jobDefinition.jobDefinitionArn) },
      },
      targets: [
        // The platform's topic policy and key policy let EventBridge of this account publish, so
        // the target needs no grant (a grant here would edit the platform stack's policies).
        {
          bind: () => ({
            arn: alarmTopic.topicArn,
            input: events.RuleTargetInput.fromText(
              `${pipeline}: Batch job ${field('$.detail.jobName')} (${field('$.detail.jobId')}) failed: ${field('$.detail.statusReason')}`,
            ),
          }),
        },
      ],
    });
    const triggered = new cloudwatch.Metric({
      namespace: 'AWS/Events',
      metricName: 'TriggeredRules',
      dimensionsMap: { RuleName: rule.ruleName },
      statistic: cloudwatch.Stats.SUM,
      period: ALARM_PERIOD,
      label: 'failed jobs',
    });
    this.facade.monitorCustom({
      humanReadableName: `${pipeline}: Batch jobs`,
      alarmFriendlyName: 'BatchJobs',
      metricGroups: [{ title: 'Failed Batch jobs (notices sent)', metrics: [triggered], graphWidgetWidth: 12 }],
    });
    this.facade.addWidget(
      new cloudwatch.LogQueryWidget({
        title: 'Batch jobs by outcome (the state machine log)',
        logGroupNames: [logGroup.logGroupName],
        view: cloudwatch.LogQueryVisualizationType.TABLE,
        queryLines: ['filter details.resourceType = "batch"', 'stats count(*) as tasks by type'],
        width: 12,
        height: 6,
      }),
    );
  }

  /** An alarm while the trigger's dead-letter queue holds an event. */
  private monitorDeadLetters(trigger: S3Trigger): void {
    const { pipeline, alarmTopic } = this.props;
    queueNotEmptyAlarm(this, 'TriggerDeadLetters', {
      queue: trigger.deadLetterQueue,
      topic: alarmTopic,
      description: `upload events that could not start a ${pipeline} run; replay them with: frontier triggers replay ${pipeline}`,
    });
    this.facade.monitorCustom({
      humanReadableName: `${pipeline}: trigger`,
      alarmFriendlyName: 'Trigger',
      metricGroups: [
        {
          title: 'Dead-lettered upload events',
          metrics: [trigger.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ statistic: cloudwatch.Stats.MAXIMUM, label: 'waiting' })],
        },
      ],
    });
  }
}
