/**
 * The app's SQS queues, locally (today: each S3 trigger's dead-letter queue), served on the
 * runtime's loopback AWS API in SQS's JSON protocol, so that the CLI reaches them with the real
 * SQS client, as it reaches a deployed queue. Served: SendMessage, ReceiveMessage, DeleteMessage
 * and ChangeMessageVisibility, on standard queues.
 *
 * What it promises:
 * - A message persists until deleted: one JSON file under `<dataDir>/queues/<queue>/`, written
 *   whole (a temporary file, then a rename), so a dead letter outlives the runtime that wrote it
 *   and waits for a replay run later, as SQS keeps it for the queue's retention period. A message
 *   older than the queue's MessageRetentionPeriod is deleted when the queue is next read.
 * - A received message stays invisible for the visibility timeout and gets a new receipt handle
 *   at each receive. A delete with an older handle succeeds and deletes nothing, as SQS documents
 *   it: only the latest receiver deletes. Visibility is kept in memory, so a restart makes every
 *   message visible again, as an expired timeout would.
 * - Oldest first (a standard queue promises no order; this one is easier to read).
 * Not served: FIFO queues, batch actions, delays, purge, redrive. WaitTimeSeconds is not waited:
 * an empty queue answers at once.
 */
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApiError } from './aws-api.ts';
import type { TemplateResolver } from './resolve.ts';

/** A queue of the synthesized app. */
export interface LocalQueue {
  readonly name: string;
  readonly arn: string;
  readonly retentionSeconds: number;
  readonly visibilityTimeoutSeconds: number;
}

/** A message attribute as SQS carries it. */
export interface QueueAttribute {
  readonly DataType: 'String' | 'Number';
  readonly StringValue: string;
}

interface StoredMessage {
  readonly MessageId: string;
  readonly Body: string;
  readonly MessageAttributes: Record<string, QueueAttribute>;
  readonly SentTimestamp: number;
  ReceiveCount: number;
  FirstReceiveTimestamp?: number;
}

/** SQS's defaults: 4 days of retention, 30 seconds of visibility. */
const DEFAULT_RETENTION_SECONDS = 345_600;
const DEFAULT_VISIBILITY_SECONDS = 30;
/** SQS's longest visibility timeout: 12 hours. */
const MAX_VISIBILITY_SECONDS = 43_200;

/** Every AWS::SQS::Queue of the templates. */
export function loadQueues(resolver: TemplateResolver): LocalQueue[] {
  return resolver.resourcesOfType('AWS::SQS::Queue').map(({ stack, logicalId, resource }) => {
    const props = (resource.Properties ?? {}) as { MessageRetentionPeriod?: number; VisibilityTimeout?: number };
    return {
      name: resolver.attrOf(stack, logicalId, resource, 'QueueName')!,
      arn: resolver.attrOf(stack, logicalId, resource, 'Arn')!,
      retentionSeconds: Number(props.MessageRetentionPeriod ?? DEFAULT_RETENTION_SECONDS),
      visibilityTimeoutSeconds: Number(props.VisibilityTimeout ?? DEFAULT_VISIBILITY_SECONDS),
    };
  });
}

const md5 = (text: string) => createHash('md5').update(text, 'utf8').digest('hex');

export class LocalQueues {
  private readonly queues = new Map<string, LocalQueue>();
  /** `<queue>/<message id>` -> the latest receipt handle and when the message shows again. */
  private readonly inFlight = new Map<string, { receipt: string; visibleAt: number }>();

  constructor(
    private readonly dir: string,
    queues: readonly LocalQueue[],
  ) {
    for (const queue of queues) {
      this.queues.set(queue.name, queue);
      mkdirSync(join(dir, queue.name), { recursive: true });
    }
  }

  /** Adds a message to the queue named by `arn` (as EventBridge and Lambda send dead letters). */
  sendByArn(arn: string, body: string, attributes: Record<string, QueueAttribute>): { MessageId: string } {
    const queue = [...this.queues.values()].find((q) => q.arn === arn);
    if (!queue) throw new ApiError('QueueDoesNotExist', `no queue has the ARN ${arn}`);
    return this.send(queue, body, attributes);
  }

  /** SQS's JSON protocol: `action` from X-Amz-Target (after `AmazonSQS.`), `body` the request. */
  async handle(action: string, body: Record<string, unknown>): Promise<unknown> {
    switch (action) {
      case 'SendMessage': {
        if (typeof body.MessageBody !== 'string' || !body.MessageBody) throw new ApiError('MissingParameter', 'MessageBody is required');
        const attributes = (body.MessageAttributes ?? {}) as Record<string, QueueAttribute>;
        const { MessageId } = this.send(this.queueOf(body), body.MessageBody, attributes);
        return { MessageId, MD5OfMessageBody: md5(body.MessageBody) };
      }
      case 'ReceiveMessage':
        return this.receive(this.queueOf(body), body);
      case 'DeleteMessage':
        this.delete(this.queueOf(body), receiptOf(body));
        return {};
      case 'ChangeMessageVisibility':
        this.changeVisibility(this.queueOf(body), receiptOf(body), visibilitySeconds(body.VisibilityTimeout, 0));
        return {};
      default:
        throw new ApiError(
          'UnsupportedOperation',
          `the local SQS serves SendMessage, ReceiveMessage, DeleteMessage and ChangeMessageVisibility, not ${action}`,
        );
    }
  }

  private queueOf(body: Record<string, unknown>): LocalQueue {
    const url = String(body.QueueUrl ?? '');
    const queue = this.queues.get(url.split('/').pop() ?? '');
    if (!queue) throw new ApiError('QueueDoesNotExist', `The specified queue does not exist: ${url || '(no QueueUrl)'}`);
    return queue;
  }

  private send(queue: LocalQueue, body: string, attributes: Record<string, QueueAttribute>): { MessageId: string } {
    const message: StoredMessage = { MessageId: randomUUID(), Body: body, MessageAttributes: attributes, SentTimestamp: Date.now(), ReceiveCount: 0 };
    this.write(queue, message);
    return { MessageId: message.MessageId };
  }

  private receive(queue: LocalQueue, body: Record<string, unknown>): { Messages?: unknown[] } {
    const max = body.MaxNumberOfMessages === undefined ? 1 : Number(body.MaxNumberOfMessages);
    if (!Number.isInteger(max) || max < 1 || max > 10) {
      throw new ApiError('InvalidParameterValue', `MaxNumberOfMessages must be an integer from 1 to 10 (got ${String(body.MaxNumberOfMessages)})`);
    }
    const visibility = visibilitySeconds(body.VisibilityTimeout, queue.visibilityTimeoutSeconds);
    const wanted = (names: unknown) => (Array.isArray(names) ? names.map(String) : []);
    const attributeNames = wanted(body.MessageAttributeNames);
    const systemNames = [...wanted(body.MessageSystemAttributeNames), ...wanted(body.AttributeNames)];
    const now = Date.now();
    const messages = [];
    for (const message of this.list(queue, now)) {
      if (messages.length >= max) break;
      const key = `${queue.name}/${message.MessageId}`;
      if ((this.inFlight.get(key)?.visibleAt ?? 0) > now) continue;
      const receipt = Buffer.from(`${message.MessageId} ${randomUUID()}`).toString('base64url');
      this.inFlight.set(key, { receipt, visibleAt: now + visibility * 1000 });
      message.ReceiveCount += 1;
      message.FirstReceiveTimestamp ??= now;
      this.write(queue, message);
      const attributes = Object.fromEntries(
        Object.entries(message.MessageAttributes).filter(([name]) => attributeNames.some((n) => n === 'All' || n === '.*' || n === name)),
      );
      messages.push({
        MessageId: message.MessageId,
        ReceiptHandle: receipt,
        MD5OfBody: md5(message.Body),
        Body: message.Body,
        ...(systemNames.length
          ? {
              Attributes: {
                ApproximateReceiveCount: String(message.ReceiveCount),
                SentTimestamp: String(message.SentTimestamp),
                ApproximateFirstReceiveTimestamp: String(message.FirstReceiveTimestamp),
              },
            }
          : {}),
        ...(Object.keys(attributes).length ? { MessageAttributes: attributes } : {}),
      });
    }
    return messages.length ? { Messages: messages } : {};
  }

  private delete(queue: LocalQueue, receipt: string): void {
    const id = messageIdOf(receipt);
    const key = `${queue.name}/${id}`;
    // An older handle: SQS answers success and keeps the message for its latest receiver.
    if (this.inFlight.get(key)?.receipt !== receipt) return;
    this.inFlight.delete(key);
    rmSync(this.fileOf(queue, id), { force: true });
  }

  private changeVisibility(queue: LocalQueue, receipt: string, seconds: number): void {
    const key = `${queue.name}/${messageIdOf(receipt)}`;
    const held = this.inFlight.get(key);
    if (!held || held.receipt !== receipt || !existsSync(this.fileOf(queue, messageIdOf(receipt)))) {
      throw new ApiError('ReceiptHandleIsInvalid', `the receipt handle is not the latest one of a message in flight: ${receipt}`);
    }
    held.visibleAt = Date.now() + seconds * 1000;
  }

  /** The queue's messages, oldest first; those past the retention period deleted. */
  private list(queue: LocalQueue, now: number): StoredMessage[] {
    const dir = join(this.dir, queue.name);
    const messages: StoredMessage[] = [];
    for (const file of readdirSync(dir)) {
      if (!file.endsWith('.json')) continue;
      let message: StoredMessage;
      try {
        message = JSON.parse(readFileSync(join(dir, file), 'utf8')) as StoredMessage;
      } catch {
        continue; // deleted meanwhile
      }
      if (message.SentTimestamp + queue.retentionSeconds * 1000 < now) {
        rmSync(join(dir, file), { force: true });
        this.inFlight.delete(`${queue.name}/${message.MessageId}`);
        continue;
      }
      messages.push(message);
    }
    return messages.sort((a, b) => a.SentTimestamp - b.SentTimestamp || a.MessageId.localeCompare(b.MessageId));
  }

  private fileOf(queue: LocalQueue, messageId: string): string {
    return join(this.dir, queue.name, `${messageId}.json`);
  }

  private write(queue: LocalQueue, message: StoredMessage): void {
    const file = this.fileOf(queue, message.MessageId);
    const partial = `${file}.${process.pid}.tmp`;
    writeFileSync(partial, JSON.stringify(message));
    renameSync(partial, file);
  }
}

function receiptOf(body: Record<string, unknown>): string {
  if (typeof body.ReceiptHandle !== 'string' || !body.ReceiptHandle) throw new ApiError('MissingParameter', 'ReceiptHandle is required');
  return body.ReceiptHandle;
}

function messageIdOf(receipt: string): string {
  const id = Buffer.from(receipt, 'base64url').toString('utf8').split(' ')[0] ?? '';
  if (!/^[0-9a-f-]{36}$/.test(id)) throw new ApiError('ReceiptHandleIsInvalid', `the receipt handle is not one this queue gave: ${receipt}`);
  return id;
}

function visibilitySeconds(value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  const seconds = Number(value);
  if (!Number.isInteger(seconds) || seconds < 0 || seconds > MAX_VISIBILITY_SECONDS) {
    throw new ApiError('InvalidParameterValue', `VisibilityTimeout must be an integer from 0 to ${MAX_VISIBILITY_SECONDS} seconds (got ${String(value)})`);
  }
  return seconds;
}
