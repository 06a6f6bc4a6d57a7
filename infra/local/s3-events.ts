/**
 * S3 object events through the synthesized EventBridge rules. s3rver's notifications for the
 * buckets with EventBridge notifications on become "Object Created" events shaped as S3 sends
 * them to EventBridge, and each event goes to the targets of every rule whose pattern matches,
 * at least once and retried on failure, as EventBridge delivers. Deliveries in flight are
 * tracked, so the runtime can wait until they have settled.
 *
 * Each event tells its upload apart as S3's do: on a versioned bucket a new version id per PUT
 * (s3rver keeps no versions, so the id is made here and names no stored version), and on every
 * bucket a sequencer, new for each PUT and increasing. s3rver's own sequencer is the time in
 * milliseconds, which two PUTs in the same millisecond share.
 *
 * A delivery whose attempts all fail goes to the target's dead-letter queue when the rule gives
 * it one (the event as the body, with EventBridge's attributes: RULE_ARN, TARGET_ARN, ERROR_CODE,
 * ERROR_MESSAGE, EXHAUSTED_RETRY_CONDITION, RETRY_ATTEMPTS), and is dropped otherwise. Locally a
 * target runs synchronously, so its handler's error fails the delivery; on AWS, EventBridge
 * invokes a Lambda asynchronously and the handler's errors reach the function's own dead-letter
 * queue instead (the S3 trigger gives both the same queue).
 */
import { HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { randomUUID } from 'node:crypto';
import type { S3NotificationEvent } from './emulators.ts';
import { matchesPattern } from './event-pattern.ts';
import { LOCAL_ACCOUNT, LOCAL_REGION } from './resolve.ts';
import type { QueueAttribute } from './queues.ts';
import type { EmitRuntimeEvent } from './runtime-events.ts';

/** An enabled EventBridge rule: its pattern and its targets (Lambda functions, by ARN), each with its dead-letter queue if any. */
export interface EventRule {
  arn: string;
  pattern: Record<string, unknown>;
  targets: { arn: string; input?: unknown; deadLetterArn?: string }[];
}

/** Attempts per delivery: fewer than the trigger's 8 retries on AWS, so that a failure shows quickly. */
const DELIVERY_ATTEMPTS = 3;

export interface S3EventDeps {
  readonly s3: S3Client;
  readonly rules: readonly EventRule[];
  /** Buckets with EventBridge notifications on: only their objects make events. */
  readonly eventBridgeBuckets: ReadonlySet<string>;
  readonly versionedBuckets: ReadonlySet<string>;
  readonly emit: EmitRuntimeEvent;
  invokeFunction(nameOrArn: string, event: unknown): Promise<unknown>;
  /** Sends a message to the queue with this ARN. */
  deadLetter(queueArn: string, body: string, attributes: Record<string, QueueAttribute>): void;
}

export class S3EventDelivery {
  private readonly pending = new Set<Promise<unknown>>();
  private sequence = 0;

  constructor(private readonly deps: S3EventDeps) {}

  /** Whether a delivery is still in flight. */
  get busy(): boolean {
    return this.pending.size > 0;
  }

  /** s3rver's notification: an event for each object created in a bucket with notifications on. */
  onS3Event(event: S3NotificationEvent): void {
    for (const record of event.Records) {
      if (!record.eventName.startsWith('ObjectCreated')) continue;
      const bucket = record.s3.bucket.name;
      if (!this.deps.eventBridgeBuckets.has(bucket)) continue;
      // Taken in the order s3rver reports the PUTs, before anything awaits.
      this.track(this.publishObjectCreated(bucket, record, this.nextSequencer()));
    }
  }

  private async publishObjectCreated(bucket: string, record: S3NotificationEvent['Records'][number], sequencer: string): Promise<void> {
    const o = { ...record.s3.object, sequencer };
    // s3rver's Copy events carry no ETag; S3's always do.
    if (!o.eTag) o.eTag = (await this.deps.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: o.key })).catch(() => undefined))?.ETag;
    // s3rver keeps no versions; on a versioned bucket every PUT gets a new version id, as on S3.
    if (!o.versionId && this.deps.versionedBuckets.has(bucket)) o.versionId = randomUUID().replace(/-/g, '');
    const event = {
      version: '0',
      id: randomUUID(),
      'detail-type': 'Object Created',
      source: 'aws.s3',
      account: LOCAL_ACCOUNT,
      time: record.eventTime ?? new Date().toISOString(),
      region: LOCAL_REGION,
      resources: [`arn:aws:s3:::${bucket}`],
      detail: {
        version: '0',
        bucket: { name: bucket },
        object: { key: o.key, size: o.size, etag: o.eTag?.replace(/"/g, ''), ...(o.versionId ? { 'version-id': o.versionId } : {}), sequencer: o.sequencer },
        'request-id': randomUUID(),
        requester: LOCAL_ACCOUNT,
        reason: record.eventName.split(':')[1] ?? 'PutObject',
      },
    };
    this.deps.emit('objectCreated', event);
    await this.deliver(event);
  }

  /** S3's shape (hexadecimal, compared after padding): the time in ms, then a count that breaks ties. */
  private nextSequencer(): string {
    this.sequence += 1;
    return `${Date.now().toString(16).padStart(12, '0')}${this.sequence.toString(16).padStart(8, '0')}`.toUpperCase();
  }

  /**
   * Delivers an EventBridge event to every matching rule's targets, as EventBridge would:
   * at least once (tests call this again to redeliver), retried on failure.
   */
  deliver(event: Record<string, unknown>): Promise<unknown[]> {
    const deliveries: Promise<unknown>[] = [];
    for (const rule of this.deps.rules) {
      if (!matchesPattern(rule.pattern, event)) continue;
      for (const target of rule.targets) deliveries.push(this.deliverToTarget(rule, target, target.input ?? event));
    }
    const all = Promise.allSettled(deliveries).then((results) =>
      results.map((r) => (r.status === 'fulfilled' ? r.value : { error: String((r.reason as Error)?.message) })),
    );
    this.track(all);
    return all;
  }

  /** One target's delivery: retried, then dead-lettered (the result says where) or failed. */
  private async deliverToTarget(rule: EventRule, target: EventRule['targets'][number], payload: unknown): Promise<unknown> {
    try {
      return await withRetries(() => this.deps.invokeFunction(target.arn, payload), DELIVERY_ATTEMPTS);
    } catch (error) {
      if (!target.deadLetterArn) throw error;
      const e = error as Error;
      const message = errorMessageOf(e);
      const string = (value: string): QueueAttribute => ({ DataType: 'String', StringValue: value });
      this.deps.deadLetter(target.deadLetterArn, JSON.stringify(payload), {
        RULE_ARN: string(rule.arn),
        TARGET_ARN: string(target.arn),
        ERROR_CODE: string(e.name === 'Lambda.ResourceNotFoundException' ? 'NO_RESOURCE' : 'ERROR_FROM_TARGET'),
        ERROR_MESSAGE: string(message),
        EXHAUSTED_RETRY_CONDITION: string('MaximumRetryAttempts'),
        RETRY_ATTEMPTS: string(String(DELIVERY_ATTEMPTS - 1)),
      });
      this.deps.emit('deadLettered', { queueArn: target.deadLetterArn, targetArn: target.arn, event: payload, error: message });
      return { error: message, deadLettered: target.deadLetterArn };
    }
  }

  /** Settles when every event delivery in flight has finished. */
  async settled(): Promise<void> {
    while (this.pending.size) await Promise.allSettled([...this.pending]);
  }

  private track(delivery: Promise<unknown>): void {
    this.pending.add(delivery);
    void delivery.finally(() => this.pending.delete(delivery));
  }
}

/** A Lambda error as one line: its type and message (the local error's message is Lambda's error JSON), at most 1 KiB as Lambda cuts it. */
function errorMessageOf(error: Error): string {
  let text = `${error.name}: ${error.message}`;
  try {
    const { errorType, errorMessage } = JSON.parse(error.message) as { errorType?: string; errorMessage?: string };
    if (errorMessage !== undefined) text = `${errorType ?? error.name}: ${errorMessage}`;
  } catch {
    // not Lambda's error JSON: the plain message
  }
  return text.slice(0, 1024);
}

async function withRetries<T>(fn: () => Promise<T>, attempts: number): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (error) {
      if (i >= attempts) throw error;
      await new Promise((r) => setTimeout(r, 50 * i));
    }
  }
}
