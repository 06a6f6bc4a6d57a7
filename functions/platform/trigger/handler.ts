/**
 * EventBridge target for S3 "Object Created" events: starts the pipeline's state machine
 * exactly once per object (see startExecutionOnce in shared/trigger.ts). EventBridge's own
 * Step Functions target cannot name the execution, hence this Lambda.
 */
import type { Context } from 'aws-lambda';
import { ENV, optionalEnv, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { parseObjectCreatedEvent, parseTriggerIdentity, TRIGGER_IDENTITY_ENV, triggerPipeline, type TriggerResult } from '#shared/trigger.ts';

const target = {
  identity: parseTriggerIdentity(optionalEnv(TRIGGER_IDENTITY_ENV)),
  table: requireEnv(ENV.table),
  stateMachineArn: requireEnv(ENV.stateMachineArn),
  pipeline: requireEnv(ENV.pipeline),
};

export async function handler(event: unknown, context?: Context): Promise<TriggerResult> {
  startInvocationLog(context, { step: 'trigger' });
  return triggerPipeline(parseObjectCreatedEvent(event), target);
}
