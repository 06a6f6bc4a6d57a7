/**
 * The S3 trigger's dead-letter queue in the synthesized template: the rule's target and the
 * trigger function both dead-letter to one SQS queue (encrypted, TLS only, 14 days), the rule
 * may send to it and nothing else may, and the stack's outputs name the queue and the function
 * for `frontier triggers replay`.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { ConfigError } from '#shared/errors.ts';
import { S3Trigger, TRIGGER_OUTPUTS } from '#pipelines/steps/s3-trigger.ts';
import { minimalScope } from '../support/stacks.ts';

function triggerStack() {
  const { stack, steps } = minimalScope();
  const stateMachine = sfn.StateMachine.fromStateMachineArn(stack, 'Machine', 'arn:aws:states:us-east-1:123456789012:stateMachine:minimal');
  const trigger = new S3Trigger(stack, 'Trigger', { scope: steps, keyPattern: 'uploads/*/manifest.json', stateMachine });
  return { stack, steps, stateMachine, trigger, template: Template.fromStack(stack) };
}

describe('S3 trigger dead-letter queue', () => {
  const { stack, steps, stateMachine, trigger, template } = triggerStack();
  const queueId = stack.getLogicalId(trigger.deadLetterQueue.node.defaultChild as never);
  const functionId = stack.getLogicalId(trigger.function.node.defaultChild as never);

  it('the rule target keeps its retries and dead-letters to the SQS queue', () => {
    const [rule] = Object.values(template.findResources('AWS::Events::Rule')) as { Properties: { Targets: Record<string, unknown>[] } }[];
    assert.equal(rule!.Properties.Targets.length, 1);
    const target = rule!.Properties.Targets[0]!;
    assert.deepEqual(target.Arn, { 'Fn::GetAtt': [functionId, 'Arn'] });
    assert.deepEqual(target.DeadLetterConfig, { Arn: { 'Fn::GetAtt': [queueId, 'Arn'] } });
    assert.deepEqual(target.RetryPolicy, { MaximumRetryAttempts: 8, MaximumEventAgeInSeconds: 7200 });
    assert.equal(template.findResources('AWS::SQS::Queue')[queueId]?.Type, 'AWS::SQS::Queue');
  });

  it('the queue is encrypted, keeps messages 14 days, and has no dead-letter queue of its own', () => {
    template.hasResourceProperties('AWS::SQS::Queue', {
      SqsManagedSseEnabled: true,
      MessageRetentionPeriod: 14 * 24 * 3600,
      RedrivePolicy: Match.absent(),
    });
  });

  it('only the rule may send, over TLS only', () => {
    const policies = Object.values(template.findResources('AWS::SQS::QueuePolicy')) as {
      Properties: { Queues: unknown[]; PolicyDocument: { Statement: Record<string, unknown>[] } };
    }[];
    assert.equal(policies.length, 1);
    assert.deepEqual(policies[0]!.Properties.Queues, [{ Ref: queueId }]);
    const statements = policies[0]!.Properties.PolicyDocument.Statement;
    const tls = statements.find((s) => s.Effect === 'Deny');
    assert.deepEqual(tls?.Condition, { Bool: { 'aws:SecureTransport': 'false' } });
    const send = statements.find((s) => s.Effect === 'Allow');
    assert.deepEqual(send?.Principal, { Service: 'events.amazonaws.com' });
    assert.equal(send?.Action, 'sqs:SendMessage');
    const ruleId = stack.getLogicalId(trigger.rule.node.defaultChild as never);
    assert.deepEqual(send?.Condition, { ArnEquals: { 'aws:SourceArn': { 'Fn::GetAtt': [ruleId, 'Arn'] } } });
  });

  it("the function's own failed asynchronous invocations go to the same queue, which it may send to", () => {
    template.hasResourceProperties('AWS::Lambda::Function', { DeadLetterConfig: { TargetArn: { 'Fn::GetAtt': [queueId, 'Arn'] } } });
    template.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: {
        Statement: Match.arrayWith([Match.objectLike({ Action: 'sqs:SendMessage', Effect: 'Allow', Resource: { 'Fn::GetAtt': [queueId, 'Arn'] } })]),
      },
    });
  });

  it("the stack's outputs name the queue and the function", () => {
    template.hasOutput(TRIGGER_OUTPUTS.deadLetterQueueUrl, { Value: { Ref: queueId } });
    template.hasOutput(TRIGGER_OUTPUTS.functionName, { Value: { Ref: functionId } });
  });

  it('throws when a stack gets a second trigger, naming both', () => {
    assert.throws(
      () => new S3Trigger(stack, 'Other', { scope: steps, keyPattern: 'other/*/manifest.json', stateMachine }),
      (error: Error) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.field, 'S3Trigger');
        assert.equal(error.value, 'Minimal/Other');
        assert.match(error.message, /second trigger in stack Minimal \(after Minimal\/Trigger\)/);
        return true;
      },
    );
  });
});
