/**
 * Run cost: when a pipeline's execution succeeds, its cost and its cache's saving in one line,
 * and its report's copy with that line under runs/<pipeline>/<execution>/ (shared/cost/aws-run-report.ts).
 */
import { BatchClient } from '@aws-sdk/client-batch';
import { LambdaClient } from '@aws-sdk/client-lambda';
import type { Context } from 'aws-lambda';
import { SFNClient } from '@aws-sdk/client-sfn';
import { s3Client } from '#shared/clients/aws.ts';
import { awsRunCost, instanceTypesOf } from '#shared/cost/aws-run-report.ts';
import { ENV, optionalEnv, requireEnv } from '#shared/env.ts';
import { logger, startInvocationLog } from '#shared/log.ts';

const pipeline = requireEnv(ENV.pipeline);
const instanceTypes = instanceTypesOf(optionalEnv(ENV.jobInstanceTypes));
let batch: BatchClient | undefined;
let lambda: LambdaClient | undefined;
let sfn: SFNClient | undefined;

export async function handler(event: unknown, context?: Context) {
  const executionId = (event as { detail?: { executionArn?: unknown } } | undefined)?.detail?.executionArn;
  startInvocationLog(context, { step: 'run-cost', ...(typeof executionId === 'string' ? { executionId } : {}) });
  batch ??= new BatchClient({});
  lambda ??= new LambdaClient({});
  // GetExecutionHistory is throttled per account (a bucket refilled a few calls a second): a run of
  // thousands of Distributed Map children waits for it rather than losing children to the SDK's default 3 attempts.
  sfn ??= new SFNClient({ retryMode: 'adaptive', maxAttempts: 10 });
  const result = await awsRunCost(event, { clients: { sfn, batch, lambda }, s3: s3Client(), pipeline, instanceTypes });
  if (!result) return { skipped: 'the execution did not succeed' };
  for (const note of result.notes) logger.warn('run cost note', { note });
  if (result.error) logger.error(result.error, { line: result.line });
  logger.info(result.line, { reportUri: result.written?.reportUri, costUri: result.written?.costUri });
  return result;
}
