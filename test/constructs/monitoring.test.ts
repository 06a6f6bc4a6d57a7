/**
 * Monitoring as a deployed account gets it, read from the synthesized app: every pipeline stack
 * has its alarms (failed and timed-out runs; expired approvals where it has an approval gate;
 * its trigger's dead letters where it has a trigger), each notifying the platform's alarm topic,
 * a notice per failed Batch job of its own job definitions, and one dashboard. The platform's
 * topic is encrypted and TLS-only, and mails someone only when an address is configured.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, Duration, type Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { Queue } from 'aws-cdk-lib/aws-sqs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { z } from 'zod';
import { buildApp } from '#infra/build-app.ts';
import { PlatformStack } from '#infra/platform-stack.ts';
import { PIPELINES, PLATFORM_STACK_ID } from '#infra/registry.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { PipelineStack, queueNotEmptyAlarm, type StepResources } from '#pipelines/steps/index.ts';
import { ConfigError } from '#shared/errors.ts';
import { minimalScope } from '../support/stacks.ts';

type Resource = { Type: string; Properties: Record<string, unknown>; Metadata?: Record<string, unknown> };
type CfnTemplate = { Resources: Record<string, Resource>; Outputs?: Record<string, { Value: unknown; Export?: { Name: string } }> };
type Alarm = {
  AlarmActions?: unknown[];
  ComparisonOperator: string;
  Threshold: number;
  EvaluationPeriods: number;
  DatapointsToAlarm?: number;
  TreatMissingData?: string;
  AlarmDescription?: string;
  // A plain alarm names its metric; an alarm through metric math lists it under Metrics.
  MetricName?: string;
  Namespace?: string;
  Statistic?: string;
  Period?: number;
  Dimensions?: { Name: string; Value: unknown }[];
  Metrics?: {
    MetricStat?: { Metric: { MetricName: string; Namespace: string; Dimensions?: { Name: string; Value: unknown }[] }; Period: number; Stat: string };
  }[];
};

const CDK_CONTEXT = (JSON.parse(readFileSync(join(REPO_ROOT, 'cdk.json'), 'utf8')) as { context: Record<string, unknown> }).context;

const ofType = (template: CfnTemplate, type: string) => Object.entries(template.Resources).filter(([, r]) => r.Type === type);

/** The one metric an alarm watches, whichever way the alarm names it. */
function watched(alarm: Alarm): { namespace: string; name: string; dimensions: Record<string, unknown>; period: number; stat: string } {
  const stat = alarm.Metrics?.find((m) => m.MetricStat)?.MetricStat;
  if (stat) {
    assert.equal(alarm.Metrics!.length, 1, 'an alarm on one metric');
    const dimensions = Object.fromEntries((stat.Metric.Dimensions ?? []).map((d) => [d.Name, d.Value]));
    return { namespace: stat.Metric.Namespace, name: stat.Metric.MetricName, dimensions, period: stat.Period, stat: stat.Stat };
  }
  const dimensions = Object.fromEntries((alarm.Dimensions ?? []).map((d) => [d.Name, d.Value]));
  return { namespace: alarm.Namespace!, name: alarm.MetricName!, dimensions, period: alarm.Period!, stat: alarm.Statistic! };
}

type Widget = { type: string; properties: { title?: string; metrics?: unknown[][]; query?: string } };

/** A dashboard's widgets, each token of its body written as `ref:Id`, `getatt:Id.Attr` or `TOKEN`. */
function widgetsOf(dashboard: Resource): Widget[] {
  const body = dashboard.Properties['DashboardBody'] as string | { 'Fn::Join': [string, unknown[]] };
  const parts = typeof body === 'string' ? [body] : body['Fn::Join'][1];
  const text = parts
    .map((part) => {
      if (typeof part === 'string') return part;
      const token = part as { Ref?: string; 'Fn::GetAtt'?: [string, string] };
      if (token.Ref) return `ref:${token.Ref}`;
      if (token['Fn::GetAtt']) return `getatt:${token['Fn::GetAtt'].join('.')}`;
      return 'TOKEN';
    })
    .join('');
  return (JSON.parse(text) as { widgets: Widget[] }).widgets;
}

/** The metrics a dashboard graphs, as `namespace name dimension=value ...`. */
function graphedMetrics(widgets: Widget[]): string[] {
  return widgets.flatMap((w) =>
    (w.properties.metrics ?? []).map((m) => {
      const [namespace, name, ...rest] = m.filter((x) => typeof x === 'string') as string[];
      const dimensions: string[] = [];
      for (let i = 0; i + 1 < rest.length; i += 2) dimensions.push(`${rest[i]}=${rest[i + 1]}`);
      return [namespace, name, ...dimensions].join(' ');
    }),
  );
}

/** Fires on the first datapoint of 5 minutes with a value of 1 or more, and not on missing data. */
function assertFiresOnOne(alarm: Alarm, what: string): void {
  const { comparisonOperator, threshold } = { comparisonOperator: alarm.ComparisonOperator, threshold: alarm.Threshold };
  assert.ok(
    (comparisonOperator === 'GreaterThanThreshold' && threshold === 0) || (comparisonOperator === 'GreaterThanOrEqualToThreshold' && threshold === 1),
    `${what}: fires at 1 (${comparisonOperator} ${threshold})`,
  );
  assert.equal(alarm.EvaluationPeriods, 1, `${what}: one period`);
  assert.equal(alarm.DatapointsToAlarm ?? 1, 1, `${what}: one datapoint`);
  assert.equal(alarm.TreatMissingData, 'notBreaching', `${what}: no data is no trouble`);
  assert.equal(watched(alarm).period, 300, `${what}: 5-minute period`);
}

describe('monitoring of every pipeline stack', () => {
  const { app } = buildApp({ skipBundling: true, fastSynth: true, nag: false });
  const assembly = app.synth();
  const templateOf = (stackId: string) => assembly.getStackByName(stackId).template as CfnTemplate;
  const platform = templateOf(PLATFORM_STACK_ID);
  const [[topicId]] = ofType(platform, 'AWS::SNS::Topic') as [[string, Resource]];
  // Pipeline stacks reach the topic through the platform's export of its Ref.
  const topicExport = Object.values(platform.Outputs ?? {}).find((o) => JSON.stringify(o.Value) === JSON.stringify({ Ref: topicId }))?.Export?.Name;
  const topicAction = { 'Fn::ImportValue': topicExport };

  it('the platform has one alarm topic, exported to the pipeline stacks', () => {
    assert.equal(ofType(platform, 'AWS::SNS::Topic').length, 1);
    assert.ok(topicExport, 'an export of the topic');
  });

  for (const entry of PIPELINES) {
    describe(entry.name, () => {
      const template = templateOf(entry.stackId);
      const alarms = ofType(template, 'AWS::CloudWatch::Alarm').map(([id, r]) => [id, r.Properties as Alarm] as const);
      const [[machineId, machine]] = ofType(template, 'AWS::StepFunctions::StateMachine') as [[string, Resource]];
      const definition = JSON.stringify(machine.Properties['DefinitionString']);
      const alarmOn = (namespace: string, name: string) => alarms.filter(([, a]) => watched(a).namespace === namespace && watched(a).name === name);
      const gated = definition.includes('.waitForTaskToken');
      const jobDefinitions = ofType(template, 'AWS::Batch::JobDefinition').map(([id]) => ({ Ref: id }));
      const queues = ofType(template, 'AWS::SQS::Queue').map(([id]) => id);
      const batchRules = ofType(template, 'AWS::Events::Rule').filter(([, r]) => JSON.stringify(r.Properties['EventPattern']).includes('aws.batch'));

      it('alarms on a failed and on a timed-out run of its state machine, to the alarm topic', () => {
        for (const metric of ['ExecutionsFailed', 'ExecutionsTimedOut']) {
          const found = alarmOn('AWS/States', metric);
          assert.equal(found.length, 1, `one alarm on ${metric}`);
          const [, alarm] = found[0]!;
          assert.deepEqual(watched(alarm).dimensions, { StateMachineArn: { Ref: machineId } });
          assert.equal(watched(alarm).stat, 'Sum');
          assertFiresOnOne(alarm, metric);
          assert.match(alarm.AlarmDescription ?? '', new RegExp(`^${entry.name}: `), 'the description names the pipeline');
        }
      });

      it('has the alarms and rules it has reason for, no more, each to the alarm topic', () => {
        const expected = 2 + (gated ? 1 : 0) + queues.length;
        assert.equal(alarms.length, expected, 'runs failed and timed out, expired approvals with a gate, dead letters per queue');
        for (const [id, alarm] of alarms) assert.deepEqual(alarm.AlarmActions, [topicAction], id);
        assert.equal(ofType(template, 'AWS::Logs::MetricFilter').length, gated ? 1 : 0, 'an expiry count with an approval gate only');
        assert.equal(batchRules.length, jobDefinitions.length ? 1 : 0, 'a job rule with Batch jobs only');
      });

      it('has one dashboard: runs, durations, and the errors and throttles of each of its functions', () => {
        const dashboards = ofType(template, 'AWS::CloudWatch::Dashboard');
        assert.equal(dashboards.length, 1);
        const graphed = graphedMetrics(widgetsOf(dashboards[0]![1]));
        for (const metric of ['ExecutionsStarted', 'ExecutionsSucceeded', 'ExecutionsFailed', 'ExecutionsAborted', 'ExecutionsTimedOut', 'ExecutionTime']) {
          assert.ok(graphed.includes(`AWS/States ${metric} StateMachineArn=ref:${machineId}`), metric);
        }
        const functions = ofType(template, 'AWS::Lambda::Function').map(([id]) => id);
        assert.ok(functions.length > 0);
        for (const metric of ['Errors', 'Throttles']) {
          for (const fn of functions) assert.ok(graphed.includes(`AWS/Lambda ${metric} FunctionName=ref:${fn}`), `${metric} of ${fn}`);
        }
      });

      if (gated) {
        it('counts expired approval requests from its log and alarms on one', () => {
          const filters = ofType(template, 'AWS::Logs::MetricFilter');
          assert.equal(filters.length, 1);
          const filter = filters[0]![1].Properties as {
            LogGroupName: unknown;
            FilterPattern: string;
            MetricTransformations: { MetricNamespace: string; MetricName: string; MetricValue: string }[];
          };
          const machineLogs = (
            machine.Properties['LoggingConfiguration'] as { Destinations: { CloudWatchLogsLogGroup: { LogGroupArn: { 'Fn::GetAtt': [string] } } }[] }
          ).Destinations[0]!.CloudWatchLogsLogGroup.LogGroupArn['Fn::GetAtt'][0];
          assert.deepEqual(filter.LogGroupName, { Ref: machineLogs }, "the state machine's log");
          assert.match(filter.FilterPattern, /\$\.type\s*=\s*"TaskTimedOut"/);
          assert.match(filter.FilterPattern, /\$\.details\.resource\s*=\s*"invoke\.waitForTaskToken"/);
          const [transform] = filter.MetricTransformations;
          const found = alarmOn(transform!.MetricNamespace, transform!.MetricName);
          assert.equal(found.length, 1, 'one alarm on the expired-approval metric');
          assertFiresOnOne(found[0]![1], 'expired approvals');
          assert.equal(watched(found[0]![1]).stat, 'Sum');
        });
      }

      if (jobDefinitions.length) {
        it('tells the alarm topic of each failed Batch job of its own job definitions', () => {
          assert.equal(batchRules.length, 1);
          const rule = batchRules[0]![1].Properties as {
            EventPattern: { source: string[]; 'detail-type': string[]; detail: { status: string[]; jobDefinition: unknown[] } };
            Targets: { Arn: unknown; InputTransformer?: { InputTemplate: string; InputPathsMap: Record<string, string> } }[];
          };
          assert.deepEqual(rule.EventPattern.source, ['aws.batch']);
          assert.deepEqual(rule.EventPattern['detail-type'], ['Batch Job State Change']);
          assert.deepEqual(rule.EventPattern.detail.status, ['FAILED']);
          assert.deepEqual(
            [...rule.EventPattern.detail.jobDefinition].map((d) => JSON.stringify(d)).sort(),
            jobDefinitions.map((d) => JSON.stringify(d)).sort(),
            'exactly its own job definitions',
          );
          assert.equal(rule.Targets.length, 1);
          assert.deepEqual(rule.Targets[0]!.Arn, topicAction);
          const transformer = rule.Targets[0]!.InputTransformer!;
          assert.match(transformer.InputTemplate, new RegExp(`^"${entry.name}: Batch job <`), 'a notice that names the pipeline');
          assert.deepEqual(Object.values(transformer.InputPathsMap).sort(), ['$.detail.jobId', '$.detail.jobName', '$.detail.statusReason']);
        });
      }

      if (queues.length) {
        it("alarms while its trigger's dead-letter queue holds an event", () => {
          const found = alarmOn('AWS/SQS', 'ApproximateNumberOfMessagesVisible');
          assert.equal(found.length, queues.length);
          for (const queue of queues) {
            const alarm = found.find(
              ([, a]) => JSON.stringify(watched(a).dimensions) === JSON.stringify({ QueueName: { 'Fn::GetAtt': [queue, 'QueueName'] } }),
            );
            assert.ok(alarm, `an alarm on ${queue}`);
            assertFiresOnOne(alarm[1], queue);
            assert.equal(watched(alarm[1]).stat, 'Maximum');
            assert.match(alarm[1].AlarmDescription ?? '', /frontier triggers replay/);
          }
        });
      }
    });
  }

  it('builds no dashboard with -c frontier:dashboards=false, and the same alarms', () => {
    const probe = PIPELINES.find((p) => p.name === 'probe')!;
    const { app: without } = buildApp({ skipBundling: true, fastSynth: true, nag: false, pipelines: [probe], context: { 'frontier:dashboards': 'false' } });
    const template = without.synth().getStackByName(probe.stackId).template as CfnTemplate;
    assert.equal(ofType(template, 'AWS::CloudWatch::Dashboard').length, 0);
    assert.equal(ofType(template, 'AWS::CloudWatch::Alarm').length, ofType(templateOf(probe.stackId), 'AWS::CloudWatch::Alarm').length);
    assert.throws(
      () => buildApp({ skipBundling: true, fastSynth: true, nag: false, pipelines: [probe], context: { 'frontier:dashboards': 'off' } }),
      /context frontier:dashboards: must be true or false/,
    );
  });

  it("monitors what a stack makes after finish(): the evals trigger's function and queue", () => {
    const template = templateOf('EvalsEveryCheckpoint');
    const graphed = graphedMetrics(widgetsOf(ofType(template, 'AWS::CloudWatch::Dashboard')[0]![1]));
    const trigger = ofType(template, 'AWS::Lambda::Function').find(([, r]) => String(r.Properties['Description']).startsWith('Starts evals'));
    assert.ok(trigger, 'the trigger function');
    assert.ok(graphed.includes(`AWS/Lambda Errors FunctionName=ref:${trigger[0]}`));
    const [[queue]] = ofType(template, 'AWS::SQS::Queue') as [[string, Resource]];
    assert.ok(graphed.includes(`AWS/SQS ApproximateNumberOfMessagesVisible QueueName=getatt:${queue}.QueueName`));
  });

  it('builds the monitoring once, however often the stack is synthesized', () => {
    for (const entry of PIPELINES) {
      const again = Template.fromStack(app.node.findChild(entry.stackId) as Stack);
      again.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
      again.resourceCountIs('AWS::CloudWatch::Alarm', ofType(templateOf(entry.stackId), 'AWS::CloudWatch::Alarm').length);
    }
  });
});

/** A pipeline stack of one Pass state, for the checks finish() makes. */
class TinyStack extends PipelineStack {
  constructor(scope: Construct, resources: StepResources) {
    super(scope, 'Tiny', 'tiny', { resources }, z.object({}));
    this.finish(new sfn.Pass(this, 'Nothing'), { timeout: Duration.hours(1) });
  }
}

describe('PipelineStack monitoring', () => {
  it('throws naming resources.alarmTopic when the resources have no alarm topic', () => {
    const { resources } = minimalScope();
    const { alarmTopic: _, ...withoutTopic } = resources;
    assert.throws(
      () => new TinyStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), withoutTopic),
      (error: unknown) => error instanceof ConfigError && error.field === 'resources.alarmTopic' && /tiny/.test(error.message),
    );
  });
});

describe('queueNotEmptyAlarm', () => {
  it('alarms to the topic while the queue holds a message, and tells it when the queue is empty again', () => {
    const { stack, resources } = minimalScope();
    const queue = new Queue(stack, 'DeadLetters');
    queueNotEmptyAlarm(stack, 'DeadLettersWaiting', {
      queue,
      topic: resources.alarmTopic!,
      description: 'events to replay with frontier triggers replay minimal',
    });
    const template = Template.fromStack(stack);
    template.resourceCountIs('AWS::CloudWatch::Alarm', 1);
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [Match.stringLikeRegexp('^DeadLetters'), 'QueueName'] } }],
      Statistic: 'Maximum',
      Period: 300,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      Threshold: 1,
      EvaluationPeriods: 1,
      TreatMissingData: 'notBreaching',
      AlarmActions: ['arn:aws:sns:us-east-1:123456789012:alarms'],
      OKActions: ['arn:aws:sns:us-east-1:123456789012:alarms'],
      AlarmDescription: Match.stringLikeRegexp('frontier triggers replay minimal'),
    });
  });
});

describe('the platform alarm topic', () => {
  const platform = (context: Record<string, unknown> = {}, alarmEmail?: string) =>
    new PlatformStack(
      new App({ builtinCloudFormationValidation: false, context: { ...CDK_CONTEXT, 'aws:cdk:bundling-stacks': [], ...context } }),
      'Platform',
      alarmEmail === undefined ? {} : { alarmEmail },
    );
  const template = Template.fromStack(platform());

  it('is encrypted with a rotated key that CloudWatch and EventBridge may use', () => {
    const [keyId] = Object.keys(template.findResources('AWS::KMS::Key'));
    template.hasResourceProperties('AWS::SNS::Topic', { KmsMasterKeyId: { 'Fn::GetAtt': [keyId, 'Arn'] } });
    template.hasResourceProperties('AWS::KMS::Key', {
      EnableKeyRotation: true,
      KeyPolicy: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Effect: 'Allow',
            Principal: { Service: ['cloudwatch.amazonaws.com', 'events.amazonaws.com'] },
            Action: ['kms:Decrypt', 'kms:GenerateDataKey*'],
          }),
        ]),
      },
    });
  });

  it("refuses plain HTTP and lets only this account's alarms and rules publish", () => {
    type Statement = { Effect: string; Principal?: unknown; Action: string | string[]; Condition?: Record<string, Record<string, unknown>> };
    const [policy] = Object.values(template.findResources('AWS::SNS::TopicPolicy')) as { Properties: { PolicyDocument: { Statement: Statement[] } } }[];
    const statements = policy!.Properties.PolicyDocument.Statement;
    assert.ok(
      statements.some((s) => s.Effect === 'Deny' && JSON.stringify(s.Condition) === JSON.stringify({ Bool: { 'aws:SecureTransport': 'false' } })),
      'TLS only',
    );
    const publish = statements.find((s) => s.Effect === 'Allow' && [s.Action].flat().includes('sns:Publish'));
    assert.deepEqual(publish?.Principal, { Service: ['cloudwatch.amazonaws.com', 'events.amazonaws.com'] });
    assert.deepEqual(publish?.Condition, { StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } } });
  });

  it('has no subscription while no alarm email is configured', () => {
    assert.equal(CDK_CONTEXT['frontier:alarmEmail'], undefined, 'cdk.json sets none');
    template.resourceCountIs('AWS::SNS::Topic', 1);
    template.resourceCountIs('AWS::SNS::Subscription', 0);
  });

  for (const [how, make] of [
    ['context frontier:alarmEmail', () => platform({ 'frontier:alarmEmail': 'oncall@example.com' })],
    ['prop alarmEmail', () => platform({}, 'oncall@example.com')],
  ] as const) {
    it(`mails the configured address (${how})`, () => {
      const custom = Template.fromStack(make());
      custom.resourceCountIs('AWS::SNS::Subscription', 1);
      const [topicId] = Object.keys(custom.findResources('AWS::SNS::Topic'));
      custom.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'oncall@example.com', TopicArn: { Ref: topicId } });
    });
  }

  for (const [how, make] of [
    ['context', () => platform({ 'frontier:alarmEmail': 'oncall.example.com' })],
    ['prop', () => platform({}, 'oncall@')],
  ] as const) {
    it(`refuses an alarm email that is not an address, naming the field (${how})`, () => {
      assert.throws(make, (error: unknown) => error instanceof ConfigError && error.field === 'alarmEmail' && /alarmEmail.*"oncall/.test(error.message));
    });
  }
});
