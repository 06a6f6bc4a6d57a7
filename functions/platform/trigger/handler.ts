/**
 * EventBridge target for S3 "Object Created" events: starts the pipeline's state machine
 * exactly once per upload (see startExecutionOnce in shared/trigger.ts). EventBridge's own
 * Step Functions target cannot name the execution, hence this Lambda.
 */
import type { Context } from 'aws-lambda';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { parseObjectCreatedEvent, triggerPipeline, type TriggerResult } from '#shared/trigger.ts';

const target = {
  table: requireEnv(ENV.table),
  stateMachineArn: requireEnv(ENV.stateMachineArn),
  pipeline: requireEnv(ENV.pipeline),
};

export async function handler(event: unknown, context?: Context): Promise<TriggerResult> {
  startInvocationLog(context, { step: 'trigger' });
  return triggerPipeline(parseObjectCreatedEvent(event), target);
}
