/**
 * EventBridge target for S3 "Object Created" events: starts the pipeline's state machine
 * exactly once per object (see startExecutionOnce in shared/trigger.ts). EventBridge's own
 * Step Functions target cannot name the execution, hence this Lambda.
 */
import { ENV, optionalEnv, requireEnv } from '#shared/env.ts';
import { ConfigError } from '#shared/errors.ts';
import { parseObjectCreatedEvent, startExecutionOnce, TRIGGER_IDENTITIES, TRIGGER_IDENTITY_ENV, type TriggerIdentity, type TriggerResult } from '#shared/trigger.ts';

const identity = (optionalEnv(TRIGGER_IDENTITY_ENV) ?? 'version') as TriggerIdentity;
if (!TRIGGER_IDENTITIES.includes(identity)) throw new ConfigError(TRIGGER_IDENTITY_ENV, identity, `must be one of ${TRIGGER_IDENTITIES.join(', ')}`);

const TARGET = {
  table: requireEnv(ENV.table),
  stateMachineArn: requireEnv(ENV.stateMachineArn),
  pipeline: requireEnv(ENV.pipeline),
  identity,
};

const MESSAGES = {
  started: 'execution started',
  restarted: 'repeat delivery: execution started or already running',
  duplicate: 'duplicate event: execution already exists',
} as const;

export async function handler(event: unknown): Promise<TriggerResult> {
  const object = parseObjectCreatedEvent(event);
  const result = await startExecutionOnce(object, TARGET);
  const message = !result.started ? MESSAGES.duplicate : result.duplicate ? MESSAGES.restarted : MESSAGES.started;
  console.log(JSON.stringify({ message, pipeline: TARGET.pipeline, bucket: object.bucket, key: object.key, eventId: object.eventId, ...result }));
  return result;
}
