/**
 * The checkpoint producer: one Batch GPU job (batch-jobs/evals-lm/train_main.py) trains a small
 * GPT-style model as a base model (English text and string reversal), then fine-tunes it on
 * arithmetic word problems, uploading a checkpoint every few steps under checkpoints/<run>/.
 * Each upload's manifest starts the evals pipeline; this pipeline only trains. Any other
 * training job that writes the same layout is evaluated the same way.
 */
import { Duration } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { BatchJob, PipelineStack, type PipelineStackProps, runJob, step } from '#pipelines/steps/index.ts';
import { LmSftConfig } from './config.ts';

export const LM_SFT_PIPELINE = 'lm-sft';

export type LmSftStackProps = PipelineStackProps;

export class LmSftStack extends PipelineStack {
  constructor(scope: Construct, id: string, props: LmSftStackProps) {
    super(scope, id, LM_SFT_PIPELINE, props, LmSftConfig);
    const { resources, steps } = this;
    const job = new BatchJob(this, 'Train', {
      job: 'evals-lm',
      command: ['python3', 'train_main.py'],
      gpus: 1,
      vcpus: 4,
      timeout: Duration.hours(8),
      resources,
    });
    const train = step(this, 'train', {
      run: runJob(job, steps),
      inputs: {
        'run.$': '$.config.run',
        'seed.$': '$.config.seed',
        'model.$': '$.config.model',
        'arithmetic.$': '$.config.arithmetic',
        'base.$': '$.config.base',
        'finetune.$': '$.config.finetune',
        'checkpoints_uri.$': `States.Format('s3://${resources.bucket.bucketName}/checkpoints/{}/', $.config.run)`,
      },
      resultPath: '$.steps.train',
      // Cached: rerunning the same config re-uploads nothing, so it starts no evaluation.
      cache: this.cache,
    });
    const output = new sfn.Pass(this, 'Output', { parameters: { 'run.$': '$.config.run', 'train.$': '$.steps.train' } });
    // Long enough for the job's worst case (3 attempts of 8 h, spot reclaims resuming from the last
    // checkpoint), so a run never stops a training that Batch is still retrying; stopping a run
    // cancels its job (submitJob.sync's TerminateJob).
    this.finish(train.next(output), { timeout: Duration.hours(25) });
  }
}
