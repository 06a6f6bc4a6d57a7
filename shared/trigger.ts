/**
 * The S3 trigger's logic: parse an EventBridge "Object Created" event, name the execution after
 * the upload, record the upload in the ledger and start one run per upload, exactly once.
 *
 * An upload is an event of record: every PUT starts a run, also when its bytes equal an earlier
 * upload's (content A, then B, then A again: the third upload evaluates A again, and the cache
 * makes known content nearly free), so that what the latest upload's run records matches the
 * object there now. What is deduplicated is the delivery, never the content:
 * EventBridge delivers at least once, and S3 may announce one upload twice (another event id and
 * time). An upload is named by bucket + key + its version id on a versioned bucket (every PUT
 * makes a new version), else by its event's `sequencer` (S3 gives each PUT of a key a new one, and
 * every delivery of that PUT's event carries the same). A bucket whose versioning is suspended
 * writes every PUT as version "null", which tells no upload apart: the sequencer does then.
 *
 * The same upload delivered twice yields the same ledger key, the same execution name and the
 * same input. A delivery may be a repeat of one whose start was lost (the Lambda died between the
 * ledger write and StartExecution); every delivery therefore calls StartExecution, and Step
 * Functions' name rule makes that safe: a reused name is refused for 90 days
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

/** The version id S3 gives every PUT while a bucket's versioning is suspended (or was never on). */
export const NULL_VERSION_ID = 'null';

/** A version id that tells one upload from another: present, and not the shared "null" version. */
const distinctVersion = (versionId: string | undefined | null): versionId is string => !!versionId && versionId !== NULL_VERSION_ID;

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
    object: z
      .object({
        key: z.string().min(1),
        etag: z.string().min(1),
        'version-id': z.string().min(1).optional(),
        // S3's sequencer: hexadecimal, ordered per key (compared after padding to equal length).
        sequencer: z
          .string()
          .regex(/^[0-9A-Fa-f]{1,64}$/, 'must be hexadecimal, as S3 writes it (at most 64 digits)')
          .optional(),
        size: z.number().int().nonnegative(),
      })
      .refine((o) => distinctVersion(o['version-id']) || o.sequencer !== undefined, {
        path: ['sequencer'],
        message:
          'is required when the event carries no version id other than "null" (a bucket without versioning): it tells one upload of the key from another',
      }),
  }),
});

export interface CreatedObject {
  bucket: string;
  key: string;
  etag: string;
  versionId: string | null;
  /** The event's sequencer; null only when a distinct version id names the upload. */
  sequencer: string | null;
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
    sequencer: detail.object.sequencer ?? null,
    size: detail.object.size,
    eventId: id,
  };
}

/**
 * What tells this upload of the key from every other: its version id on a versioned bucket, else
 * its event's sequencer. Never the etag: two uploads of the same bytes are two uploads.
 */
export function uploadIdOf(object: CreatedObject): string {
  if (distinctVersion(object.versionId)) return object.versionId;
  if (object.sequencer !== null) return object.sequencer;
  throw new ConfigError('event.detail.object.sequencer', object.sequencer, 'is required when the event carries no version id other than "null"');
}

/**
 * A legal Step Functions name (at most 80 of [0-9A-Za-z_-]) fixed by the upload.
 * Hashing a JSON array keeps `a/b` + `c` apart from `a` + `b/c`; 160 bits cannot collide by chance.
 */
export function executionNameFor(object: CreatedObject): string {
  return `s3-${sha256Hex(canonicalJson([object.bucket, object.key, uploadIdOf(object)])).slice(0, 40)}`;
}

export function ledgerKeyFor(object: CreatedObject): { pk: string; sk: string } {
  return eventKey(object.bucket, object.key, uploadIdOf(object));
}

export function ledgerItem(object: CreatedObject, executionName: string, pipeline: string, now: Date) {
  return {
    ...ledgerKeyFor(object),
    executionName,
    pipeline,
    eventId: object.eventId,
    bucket: object.bucket,
    key: object.key,
    uploadId: uploadIdOf(object),
    versionId: object.versionId,
    sequencer: object.sequencer,
    etag: object.etag,
    receivedAt: now.toISOString(),
    expiresAt: Math.floor(now.getTime() / 1000) + LEDGER_RETENTION_SECONDS,
  };
}

/**
 * The execution's input: a pure function of the upload, never of the delivery. Step Functions
 * returns a running execution for a repeated start only when the input is byte-identical, so the
 * event id and the event time (which differ when S3 announces one upload twice) stay out.
 * `versionId` is null rather than absent so JSONPath can read it. A run that reads the object
 * reads it by key and checks the etag (evals' prepare): if the object was replaced before the run
 * read it, the run fails, and the newer upload's own run evaluates the newer bytes.
 */
export function executionInput(object: CreatedObject): string {
  const { bucket, key, etag, versionId, size } = object;
  return JSON.stringify({ trigger: { bucket, key, etag, versionId, size } });
}

export type TriggerResult =
  /** `duplicate` when an earlier delivery had recorded the upload: its start was lost, or its run is still running. */
  { started: true; duplicate?: true; executionName: string; executionArn: string } | { started: false; duplicate: true; executionName: string };

/** Where a trigger records uploads and what it starts. */
export interface TriggerTarget {
  readonly table: string;
  readonly stateMachineArn: string;
  readonly pipeline: string;
}

/**
 * 1. record the upload in the ledger (conditional put); 2. start the execution under the
 * derived name, also when the upload was already recorded, since that delivery's start may
 * have been lost; 3. if a first delivery's start fails with anything but ExecutionAlreadyExists,
 * drop its ledger entry and rethrow, so that the Lambda's retry starts again from a clean slate.
 * A repeat delivery leaves the entry alone: it belongs to the delivery that wrote it.
 */
export async function startExecutionOnce(object: CreatedObject, target: TriggerTarget, now = new Date()): Promise<TriggerResult> {
  const executionName = executionNameFor(object);
  const firstDelivery = await recordInLedger(object, executionName, target, now);
  try {
    const { executionArn = '' } = await sfnClient().send(
      new StartExecutionCommand({ stateMachineArn: target.stateMachineArn, name: executionName, input: executionInput(object) }),
    );
    return firstDelivery ? { started: true, executionName, executionArn } : { started: true, duplicate: true, executionName, executionArn };
  } catch (error) {
    // The name was used and that run has finished (or had another input): it ran, once.
    if (errorName(error) === 'ExecutionAlreadyExists') return { started: false, duplicate: true, executionName };
    if (firstDelivery) {
      await dynamoClient()
        .send(new DeleteCommand({ TableName: target.table, Key: ledgerKeyFor(object) }))
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
        Item: ledgerItem(object, executionName, target.pipeline, now),
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

/** The trigger Lambda's work: start the run once for this upload (startExecutionOnce) and log what happened. */
export async function triggerPipeline(object: CreatedObject, target: TriggerTarget): Promise<TriggerResult> {
  const result = await startExecutionOnce(object, target);
  const message = !result.started ? RESULT_MESSAGES.duplicate : result.duplicate ? RESULT_MESSAGES.restarted : RESULT_MESSAGES.started;
  logger.info(message, { pipeline: target.pipeline, bucket: object.bucket, key: object.key, eventId: object.eventId, ...result });
  return result;
}
