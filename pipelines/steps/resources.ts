/**
 * What the step constructs need from the platform. The platform stack's resources satisfy
 * this interface; pipelines receive it as props, so one pipeline stack deploys alone.
 */
import type { IJobQueue } from 'aws-cdk-lib/aws-batch';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import type { IBucket } from 'aws-cdk-lib/aws-s3';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import type { StateBounds } from './bounds.ts';

export interface StepResources {
  readonly bucket: IBucket;
  readonly table: ITable;
  readonly gpuQueue: IJobQueue;
  readonly cpuQueue: IJobQueue;
  readonly signingSecret: ISecret;
  readonly anthropicSecret: ISecret;
  readonly senderEmail: string;
  readonly approverEmail: string;
  /** Base URL of the approval API, without a trailing slash. */
  readonly approvalApiUrl: string;
  readonly logRetention?: RetentionDays;
  /** The platform's alarm topic: a pipeline stack's alarms and failure notices (PipelineStack needs it). */
  readonly alarmTopic?: ITopic;
}

/** Where a step runs: the pipeline it belongs to and the platform it uses. */
export interface StepScope {
  readonly pipeline: string;
  readonly resources: StepResources;
  /** What the pipeline's state holds, bounded: a cached step's key is checked against it at synth. */
  readonly bounds?: StateBounds;
}
