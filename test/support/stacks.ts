/** Stacks and state machine definitions for construct tests. */
import { App, Stack } from 'aws-cdk-lib';
import type { Template } from 'aws-cdk-lib/assertions';
import { JobQueue } from 'aws-cdk-lib/aws-batch';
import { TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { Bucket } from 'aws-cdk-lib/aws-s3';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { Topic } from 'aws-cdk-lib/aws-sns';
import type { StepResources, StepScope } from '#pipelines/steps/resources.ts';

/** A fresh stack with imported stand-ins for the platform's resources. */
export function minimalScope(): { stack: Stack; resources: StepResources; steps: StepScope } {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(app, 'Minimal', { env: { account: '123456789012', region: 'us-east-1' } });
  const resources: StepResources = {
    bucket: Bucket.fromBucketName(stack, 'Bucket', 'pipelines-bucket'),
    table: TableV2.fromTableName(stack, 'Table', 'pipelines-table'),
    gpuQueue: JobQueue.fromJobQueueArn(stack, 'GpuQueue', 'arn:aws:batch:us-east-1:123456789012:job-queue/gpu'),
    cpuQueue: JobQueue.fromJobQueueArn(stack, 'CpuQueue', 'arn:aws:batch:us-east-1:123456789012:job-queue/cpu'),
    signingSecret: Secret.fromSecretNameV2(stack, 'Signing', 'approval-signing-key'),
    anthropicSecret: Secret.fromSecretNameV2(stack, 'Anthropic', 'anthropic-api-key'),
    senderEmail: 'pipelines@example.com',
    approverEmail: 'approver@example.com',
    approvalApiUrl: 'https://approvals.example.com',
    alarmTopic: Topic.fromTopicArn(stack, 'Alarms', 'arn:aws:sns:us-east-1:123456789012:alarms'),
  };
  return { stack, resources, steps: { pipeline: 'minimal', resources } };
}

export interface AslState {
  readonly Type: string;
  readonly Parameters?: Record<string, unknown>;
  readonly [key: string]: unknown;
}

/** The template's one state machine definition, every token (ARN, name) written as TOKEN. */
export function definitionOf(template: Template): { StartAt: string; States: Record<string, AslState> } {
  const [machine] = Object.values(template.findResources('AWS::StepFunctions::StateMachine')) as { Properties: { DefinitionString: unknown } }[];
  const parts = (machine!.Properties.DefinitionString as { 'Fn::Join': [string, unknown[]] })['Fn::Join'][1];
  return JSON.parse(parts.map((p) => (typeof p === 'string' ? p : 'TOKEN')).join('')) as { StartAt: string; States: Record<string, AslState> };
}
