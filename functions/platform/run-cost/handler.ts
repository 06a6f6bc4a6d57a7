/**
 * Run cost: when a pipeline's execution succeeds, its cost and its cache's saving in one line,
 * and its report's copy with that line under runs/<pipeline>/<execution>/ (shared/cost/aws-run-report.ts).
 */
import { BatchClient } from '@aws-sdk/client-batch';
import { LambdaClient } from '@aws-sdk/client-lambda';
import type { Context } from 'aws-lambda';
import { s3Client, sfnClient } from '#shared/clients/aws.ts';
import { awsRunCost, instanceTypesOf } from '#shared/cost/aws-run-report.ts';
import { ENV, optionalEnv, requireEnv } from '#shared/env.ts';
import { logger, startInvocationLog } from '#shared/log.ts';

const pipeline = requireEnv(ENV.pipeline);
const instanceTypes = instanceTypesOf(optionalEnv(ENV.jobInstanceTypes));
let batch: BatchClient | undefined;
let lambda: LambdaClient | undefined;

export async function handler(event: unknown, context?: Context) {
  const executionId = (event as { detail?: { executionArn?: unknown } } | undefined)?.detail?.executionArn;
  startInvocationLog(context, { step: 'run-cost', ...(typeof executionId === 'string' ? { executionId } : {}) });
  batch ??= new BatchClient({});
  lambda ??= new LambdaClient({});
  const result = await awsRunCost(event, { clients: { sfn: sfnClient(), batch, lambda }, s3: s3Client(), pipeline, instanceTypes });
  if (!result) return { skipped: 'the execution did not succeed' };
  for (const note of result.notes) logger.warn('run cost note', { note });
  logger.info(result.line, { reportUri: result.written?.reportUri, costUri: result.written?.costUri });
  return result;
}
