/**
 * The S3 trigger's logic: parse an EventBridge "Object Created" event, name the execution
 * after the object's identity, record the object in the ledger and start the run exactly once.
 *
 * The identity is bucket + key + (version id, else etag): every upload is a new object. With
 * identity 'content' it is bucket + key + etag: an unchanged re-upload (same bytes, so the same
 * etag) is the same object and starts nothing; changed bytes start a new run. The same object delivered twice
 * yields the same ledger key, the same execution name and the same input. EventBridge delivers
 * at least once, so a delivery may be a repeat of one whose start was lost (the Lambda died
 * between the ledger write and StartExecution); every delivery therefore calls StartExecution,
 * and Step Functions' name rule makes that safe: a reused name is refused for 90 days
 * (ExecutionAlreadyExists), except that the same name with the same input while the first run
 * is still RUNNING returns that run again (idempotent start, Standard workflows only).
 */
import { StartExecutionCommand } from '@aws-sdk/client-sfn';
import { DeleteCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { z } from 'zod';
import { dynamoClient, sfnClient } from './clients/aws.ts';
import { ConfigError, errorName } from './errors.ts';
import { canonicalJson, sha256Hex } from './json.ts';
import { logger } from './log.ts';
import { parseOrThrow } from './schema.ts';
import { eventKey } from './table.ts';

/** Outlives Step Functions' 90-day refusal of a reused execution name. */
export const LEDGER_RETENTION_SECONDS = 100 * 24 * 3600;

/**
 * The EventBridge shape of an S3 object-created event (not the S3 notification `Records`
 * shape). Its object key is not URL-encoded, unlike S3's direct notifications.
 */
export const objectCreatedEventSchema = z.object({
  id: z.string().min(1),
  time: z.string().min(1),
  // Optional so a hand-made event need not carry them; when present, they must be this.
  source: z.literal('aws.s3').optional(),
  'detail-type': z.literal('Object Created').optional(),
  detail: z.object({
    bucket: z.object({ name: z.string().min(1) }),
    object: z.object({
      key: z.string().min(1),
      etag: z.string().min(1),
      'version-id': z.string().min(1).optional(),
      size: z.number().int().nonnegative(),
    }),
  }),
});

export interface CreatedObject {
  bucket: string;
  key: string;
  etag: string;
  versionId: string | null;
  size: number;
  eventId: string;
}

export function parseObjectCreatedEvent(event: unknown): CreatedObject {
  const { id, detail } = parseOrThrow(objectCreatedEventSchema, event, 'event');
  return {
    bucket: detail.bucket.name,
    key: detail.object.key,
    etag: detail.object.etag,
    versionId: detail.object['version-id'] ?? null,
    size: detail.object.size,
    eventId: id,
  };
}

/** What makes two uploads the same object: each upload ('version'), or the same bytes ('content'). */
export type TriggerIdentity = 'version' | 'content';
/** The trigger Lambda's environment variable holding its identity. */
export const TRIGGER_IDENTITY_ENV = 'TRIGGER_IDENTITY';
export const TRIGGER_IDENTITIES: readonly TriggerIdentity[] = ['version', 'content'];

/** The TRIGGER_IDENTITY setting: 'version' when unset, else one of TRIGGER_IDENTITIES. */
export function parseTriggerIdentity(value: string | undefined): TriggerIdentity {
  const identity = (value ?? 'version') as TriggerIdentity;
  if (!TRIGGER_IDENTITIES.includes(identity)) throw new ConfigError(TRIGGER_IDENTITY_ENV, identity, `must be one of ${TRIGGER_IDENTITIES.join(', ')}`);
  return identity;
}

/** The version id on a versioned bucket, otherwise the etag; with identity 'content', always the etag. */
export function versionOrEtag(object: CreatedObject, identity: TriggerIdentity = 'version'): string {
  return identity === 'content' ? object.etag : (object.versionId ?? object.etag);
}

/**
 * A legal Step Functions name (at most 80 of [0-9A-Za-z_-]) fixed by the object's identity.
 * Hashing a JSON array keeps `a/b` + `c` apart from `a` + `b/c`; 160 bits cannot collide by chance.
 */
export function executionNameFor(object: CreatedObject, identity: TriggerIdentity = 'version'): string {
  return `s3-${sha256Hex(canonicalJson([object.bucket, object.key, versionOrEtag(object, identity)])).slice(0, 40)}`;
}

export function ledgerKeyFor(object: CreatedObject, identity: TriggerIdentity = 'version'): { pk: string; sk: string } {
  return eventKey(object.bucket, object.key, versionOrEtag(object, identity));
}

export function ledgerItem(object: CreatedObject, executionName: string, pipeline: string, now: Date, identity: TriggerIdentity = 'version') {
  return {
    ...ledgerKeyFor(object, identity),
    executionName,
    pipeline,
    eventId: object.eventId,
    bucket: object.bucket,
    key: object.key,
    versionOrEtag: versionOrEtag(object, identity),
    receivedAt: now.toISOString(),
    expiresAt: Math.floor(now.getTime() / 1000) + LEDGER_RETENTION_SECONDS,
  };
}

/**
 * The execution's input: a pure function of the object's identity, never of the delivery.
 * Step Functions returns a running execution for a repeated start only when the input is
 * byte-identical, so the event id and the event time (which differ when S3 announces one
 * object twice) stay out. `versionId` is null rather than absent so JSONPath can read it; with
 * identity 'content' it is always null (two uploads of the same bytes are one object), and the
 * run reads the object by key and checks its etag.
 */
export function executionInput(object: CreatedObject, identity: TriggerIdentity = 'version'): string {
  const { bucket, key, etag, size } = object;
  const versionId = identity === 'content' ? null : object.versionId;
  return JSON.stringify({ trigger: { bucket, key, etag, versionId, size } });
}

export type TriggerResult =
  /** `duplicate` when an earlier delivery had recorded the object: its start was lost, or its run is still running. */
  { started: true; duplicate?: true; executionName: string; executionArn: string } | { started: false; duplicate: true; executionName: string };

/** Where a trigger records objects and what it starts. */
export interface TriggerTarget {
  readonly table: string;
  readonly stateMachineArn: string;
  readonly pipeline: string;
  /** Default 'version'. */
  readonly identity?: TriggerIdentity;
}

/**
 * 1. record the object in the ledger (conditional put); 2. start the execution under the
 * derived name, also when the object was already recorded, since that delivery's start may
 * have been lost; 3. if a first delivery's start fails with anything but ExecutionAlreadyExists,
 * drop its ledger entry and rethrow, so that the Lambda's retry starts again from a clean slate.
 * A repeat delivery leaves the entry alone: it belongs to the delivery that wrote it.
 */
export async function startExecutionOnce(object: CreatedObject, target: TriggerTarget, now = new Date()): Promise<TriggerResult> {
  const identity = target.identity ?? 'version';
  const executionName = executionNameFor(object, identity);
  const firstDelivery = await recordInLedger(object, executionName, target, now);
  try {
    const { executionArn = '' } = await sfnClient().send(
      new StartExecutionCommand({ stateMachineArn: target.stateMachineArn, name: executionName, input: executionInput(object, identity) }),
    );
    return firstDelivery ? { started: true, executionName, executionArn } : { started: true, duplicate: true, executionName, executionArn };
  } catch (error) {
    // The name was used and that run has finished (or had another input): it ran, once.
    if (errorName(error) === 'ExecutionAlreadyExists') return { started: false, duplicate: true, executionName };
    if (firstDelivery) {
      await dynamoClient()
        .send(new DeleteCommand({ TableName: target.table, Key: ledgerKeyFor(object, identity) }))
        .catch((deleteError: unknown) => {
          logger.error('could not remove the ledger entry', { executionName, bucket: object.bucket, key: object.key, error: errorName(deleteError) });
        });
    }
    throw error;
  }
}

/** True when this delivery wrote the ledger entry; false when an earlier delivery had. */
async function recordInLedger(object: CreatedObject, executionName: string, target: TriggerTarget, now: Date): Promise<boolean> {
  try {
    await dynamoClient().send(
      new PutCommand({
        TableName: target.table,
        Item: ledgerItem(object, executionName, target.pipeline, now, target.identity ?? 'version'),
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );
    return true;
  } catch (error) {
    if (errorName(error) === 'ConditionalCheckFailedException') return false;
    throw error;
  }
}

const RESULT_MESSAGES = {
  started: 'execution started',
  restarted: 'repeat delivery: execution started or already running',
  duplicate: 'duplicate event: execution already exists',
} as const;

/** The trigger Lambda's work: start the run once for this object (startExecutionOnce) and log what happened. */
export async function triggerPipeline(object: CreatedObject, target: TriggerTarget): Promise<TriggerResult> {
  const result = await startExecutionOnce(object, target);
  const message = !result.started ? RESULT_MESSAGES.duplicate : result.duplicate ? RESULT_MESSAGES.restarted : RESULT_MESSAGES.started;
  logger.info(message, { pipeline: target.pipeline, bucket: object.bucket, key: object.key, eventId: object.eventId, ...result });
  return result;
}
