/**
 * The S3 trigger's logic: parse an EventBridge "Object Created" event, name the execution
 * after the object's identity, and build the ledger item that makes the start exactly-once.
 *
 * The identity is bucket + key + (version id, else etag). The same object delivered twice
 * yields the same ledger key and the same execution name, so the conditional put refuses the
 * second delivery, and Step Functions, which refuses a reused name for 90 days, backs it up.
 */
import { z } from 'zod';
import { canonicalJson, sha256Hex } from './json.ts';
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
  eventTime: string;
}

export function parseObjectCreatedEvent(event: unknown): CreatedObject {
  const { id, time, detail } = parseOrThrow(objectCreatedEventSchema, event, 'event');
  return {
    bucket: detail.bucket.name,
    key: detail.object.key,
    etag: detail.object.etag,
    versionId: detail.object['version-id'] ?? null,
    size: detail.object.size,
    eventId: id,
    eventTime: time,
  };
}

/** The version id on a versioned bucket; otherwise the etag, i.e. the content's hash. */
export function versionOrEtag(object: CreatedObject): string {
  return object.versionId ?? object.etag;
}

/**
 * A legal Step Functions name (at most 80 of [0-9A-Za-z_-]) fixed by the object's identity.
 * Hashing a JSON array keeps `a/b` + `c` apart from `a` + `b/c`; 160 bits cannot collide by chance.
 */
export function executionNameFor(object: CreatedObject): string {
  return `s3-${sha256Hex(canonicalJson([object.bucket, object.key, versionOrEtag(object)])).slice(0, 40)}`;
}

export function ledgerKeyFor(object: CreatedObject): { pk: string; sk: string } {
  return eventKey(object.bucket, object.key, versionOrEtag(object));
}

export function ledgerItem(object: CreatedObject, executionName: string, pipeline: string, now: Date) {
  return {
    ...ledgerKeyFor(object),
    executionName,
    pipeline,
    eventId: object.eventId,
    bucket: object.bucket,
    key: object.key,
    versionOrEtag: versionOrEtag(object),
    receivedAt: now.toISOString(),
    expiresAt: Math.floor(now.getTime() / 1000) + LEDGER_RETENTION_SECONDS,
  };
}

/** The execution's input. `versionId` is null rather than absent so JSONPath can read it. */
export function executionInput(object: CreatedObject): string {
  const { bucket, key, etag, versionId, size, eventTime } = object;
  return JSON.stringify({ trigger: { bucket, key, etag, versionId, size, eventTime } });
}

export type TriggerResult =
  | { started: true; executionName: string; executionArn: string }
  | { started: false; duplicate: true; executionName: string };

