/**
 * `frontier triggers replay PIPELINE [--dry-run]`: starts the runs that uploads should have
 * started, from the S3 trigger's dead-letter queue (pipelines/steps/s3-trigger.ts).
 *
 * Each message's body is the EventBridge "Object Created" event that could not start its run.
 * The replay invokes the trigger function with it, synchronously (Lambda Invoke,
 * RequestResponse), rather than sending the event to EventBridge again: PutEvents refuses the
 * `aws.s3` source, which S3's rule matches, and its success says only that the event was
 * accepted, not that a run started; the invocation's reply says whether the run started and
 * under which name. The trigger names the run after the upload and records it in its ledger,
 * so a replay of an event whose run exists starts nothing more ("already started"), and
 * replaying twice is safe.
 *
 * A message is deleted only after its invocation succeeded. One that failed stays in the queue,
 * made visible again at the end, and the command exits 1 naming the reason. The same code runs
 * against a deployed stack (its outputs name the queue and the function) and against the local
 * runtime, whose loopback API serves SQS and Lambda's Invoke: a runtime that holds the data
 * directory, or one this command starts (it then waits for the runs it started).
 */
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { ChangeMessageVisibilityCommand, DeleteMessageCommand, type Message, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { TRIGGER_OUTPUTS } from '#pipelines/steps/s3-trigger.ts';
import { ConfigError, EmulatorStartError, errorName, MissingDeploymentError } from '#shared/errors.ts';
import { connectToLiveRuntime } from '../local/data.ts';
import { liveRuntime } from '../local/emulators.ts';
import { LocalRuntime, OUTPUTS_FILE } from '../local/runtime.ts';
import type { PipelineEntry } from '../registry.ts';
import { pipelineNamed } from './config.ts';
import type { Io } from './output.ts';
import { deployedStateMachine } from './run-aws.ts';

/** Where a pipeline's dead letters are and what replays them. */
export interface TriggerLocation {
  readonly queueUrl: string;
  readonly functionName: string;
}

export interface ReplayClients {
  readonly sqs: SQSClient;
  readonly lambda: LambdaClient;
}

export interface ReplaySummary {
  /** Messages received (each counted once). */
  readonly messages: number;
  /** Runs the replay started. */
  readonly replayed: number;
  /** Events whose run had started before (the trigger found the upload's run). */
  readonly alreadyStarted: number;
  /** Messages whose replay failed: kept in the queue. */
  readonly failed: number;
  /** Messages left in the queue: the failed ones, and any whose delete failed after its run started. */
  readonly kept: number;
  /** The execution ARNs of the runs started. */
  readonly started: readonly string[];
}

export interface TriggersOptions {
  readonly target: 'local' | 'aws';
  readonly dataDir: string;
  readonly portBase?: number;
  readonly dryRun?: boolean;
}

/**
 * Long enough for a batch of 10 replayed one after another, each up to the trigger's 30-second
 * timeout, twice over: a message in hand does not show again to this replay or another.
 */
export const REPLAY_VISIBILITY_SECONDS = 600;

/** What the trigger function answers (shared/trigger.ts TriggerResult). */
const triggerReply = z.object({
  started: z.boolean(),
  duplicate: z.boolean().optional(),
  executionName: z.string().min(1),
  executionArn: z.string().optional(),
});

export async function triggersCommand(
  sub: string | undefined,
  args: string[],
  options: TriggersOptions,
  io: Io,
  running?: LocalRuntime,
): Promise<ReplaySummary> {
  if (sub !== 'replay') throw new ConfigError('triggers', sub, 'the only subcommand is replay: frontier triggers replay PIPELINE [--dry-run]');
  const [pipeline] = args;
  if (!pipeline) throw new ConfigError('triggers replay', undefined, 'needs the PIPELINE whose dead-lettered upload events to replay');
  return replayTrigger(pipelineNamed(pipeline), options, io, running);
}

/** Replays a pipeline's dead letters on the chosen target (see the module comment). */
export async function replayTrigger(entry: PipelineEntry, options: TriggersOptions, io: Io, running?: LocalRuntime): Promise<ReplaySummary> {
  if (options.target === 'aws') {
    const where = await deployedTrigger(entry);
    return replayDeadLetters(where, { sqs: new SQSClient({}), lambda: new LambdaClient({}) }, { dryRun: options.dryRun }, io);
  }
  if (running) return replayDeadLetters(localTrigger(entry, running.stackOutputs(entry.stackId)), localClients(), { dryRun: options.dryRun }, io);
  const live = liveRuntime(options.dataDir);
  if (live) {
    connectToLiveRuntime(live);
    const file = join(options.dataDir, OUTPUTS_FILE);
    if (!existsSync(file)) {
      throw new EmulatorStartError(
        `the local runtime that holds ${options.dataDir} is still starting (it has not written ${OUTPUTS_FILE}); run this again in a moment`,
      );
    }
    const outputs = (JSON.parse(readFileSync(file, 'utf8')) as Record<string, Record<string, string>>)[entry.stackId] ?? {};
    const summary = await replayDeadLetters(localTrigger(entry, outputs), localClients(), { dryRun: options.dryRun }, io);
    if (summary.started.length) io.out(`the runs go on in the local runtime that holds ${options.dataDir}: frontier runs ${entry.name}`);
    return summary;
  }
  const runtime = await LocalRuntime.start({ dataDir: options.dataDir, portBase: options.portBase, pipelines: [entry] });
  try {
    const summary = await replayDeadLetters(localTrigger(entry, runtime.stackOutputs(entry.stackId)), localClients(), { dryRun: options.dryRun }, io);
    if (summary.started.length) {
      // Stopping the runtime would end the runs: wait for them, as `frontier run` does.
      io.out(`waiting for the ${summary.started.length} run(s) started to finish`);
      await runtime.idle();
      for (const arn of summary.started) {
        const record = runtime.executionRecord(arn);
        io.out(`  ${arn.split(':').pop()}: ${record?.status ?? 'unknown'}${record?.error ? ` (${record.error})` : ''}`);
      }
    }
    return summary;
  } finally {
    await runtime.stop();
  }
}

/** The clients of the local runtime's loopback SQS and Lambda (their endpoints are in this process's environment). */
function localClients(): ReplayClients {
  return { sqs: new SQSClient({}), lambda: new LambdaClient({}) };
}

function locationFrom(outputs: Record<string, string | undefined>): TriggerLocation | undefined {
  const queueUrl = outputs[TRIGGER_OUTPUTS.deadLetterQueueUrl];
  const functionName = outputs[TRIGGER_OUTPUTS.functionName];
  return queueUrl && functionName ? { queueUrl, functionName } : undefined;
}

function localTrigger(entry: PipelineEntry, outputs: Record<string, string>): TriggerLocation {
  const where = locationFrom(outputs);
  if (!where) throw new ConfigError('pipeline', entry.name, `has no S3 trigger (stack ${entry.stackId} has no ${TRIGGER_OUTPUTS.deadLetterQueueUrl} output)`);
  return where;
}

/** The deployed pipeline stack's trigger, from its outputs, or a clear error saying what to deploy. */
export async function deployedTrigger(entry: PipelineEntry, cfn = new CloudFormationClient({})): Promise<TriggerLocation> {
  // Says clearly when the region, the credentials or the stack are missing.
  await deployedStateMachine(entry, cfn);
  const stack = (await cfn.send(new DescribeStacksCommand({ StackName: entry.stackId }))).Stacks?.[0];
  const where = locationFrom(Object.fromEntries((stack?.Outputs ?? []).map((o) => [o.OutputKey ?? '', o.OutputValue])));
  if (!where) {
    throw new MissingDeploymentError(
      `stack ${entry.stackId} has no ${TRIGGER_OUTPUTS.deadLetterQueueUrl} output: pipeline ${entry.name} has no S3 trigger, or its stack was deployed before the trigger had a dead-letter queue (redeploy it: npx cdk deploy ${entry.stackId})`,
    );
  }
  return where;
}

/** One message's upload, as a person reads it: s3://bucket/key and its version, when the body says. */
function uploadOf(body: string | undefined): string {
  try {
    const event = JSON.parse(body ?? '') as { detail?: { bucket?: { name?: string }; object?: { key?: string; 'version-id'?: string } } };
    const { bucket, object } = event.detail ?? {};
    if (bucket?.name && object?.key) return `s3://${bucket.name}/${object.key}${object['version-id'] ? ` (version ${object['version-id']})` : ''}`;
  } catch {
    // not JSON: said where it matters
  }
  return '(not an S3 object event)';
}

/** Why it was dead-lettered: EventBridge's attributes, or Lambda's for a handler that failed its asynchronous attempts. */
function deadLetterReason(message: Message): string {
  const attribute = (name: string) => message.MessageAttributes?.[name]?.StringValue;
  const code = attribute('ERROR_CODE') ?? (attribute('ErrorCode') ? `Lambda ${attribute('ErrorCode')}` : undefined);
  const text = attribute('ERROR_MESSAGE') ?? attribute('ErrorMessage');
  return [code, text].filter(Boolean).join(': ') || 'no reason recorded';
}

type Outcome = { kind: 'replayed' | 'alreadyStarted'; executionName: string; executionArn?: string } | { kind: 'failed'; reason: string };

/** Invokes the trigger with one message's event; never throws. */
async function replayOne(message: Message, where: TriggerLocation, lambda: LambdaClient): Promise<Outcome> {
  const body = message.Body ?? '';
  try {
    JSON.parse(body);
  } catch {
    return { kind: 'failed', reason: 'the message body is not JSON, so not an EventBridge event' };
  }
  // The queue takes dead letters of this trigger only (its policy names the rule; the function's role sends);
  // a message another target left is not this trigger's to replay.
  const target = message.MessageAttributes?.TARGET_ARN?.StringValue;
  if (target && target.split(':').pop() !== where.functionName.split(':').pop()) {
    return { kind: 'failed', reason: `it was dead-lettered by the target ${target}, not by this trigger (${where.functionName})` };
  }
  let reply;
  try {
    reply = await lambda.send(new InvokeCommand({ FunctionName: where.functionName, InvocationType: 'RequestResponse', Payload: Buffer.from(body, 'utf8') }));
  } catch (error) {
    return { kind: 'failed', reason: `invoking ${where.functionName} failed: ${errorName(error)}: ${(error as Error).message}` };
  }
  const text = Buffer.from(reply.Payload ?? new Uint8Array()).toString('utf8');
  if (reply.FunctionError) {
    let reason = text;
    try {
      const { errorType, errorMessage } = JSON.parse(text) as { errorType?: string; errorMessage?: string };
      if (errorMessage !== undefined) reason = `${errorType ?? 'Error'}: ${errorMessage}`;
    } catch {
      // Lambda's reply is the error JSON; anything else is shown as it came
    }
    return { kind: 'failed', reason: `the trigger failed: ${reason.slice(0, 1000)}` };
  }
  let parsed;
  try {
    parsed = triggerReply.safeParse(JSON.parse(text));
  } catch {
    parsed = undefined;
  }
  if (!parsed?.success) return { kind: 'failed', reason: `the trigger answered ${text.slice(0, 200)}, not a trigger result` };
  const result = parsed.data;
  return { kind: result.started ? 'replayed' : 'alreadyStarted', executionName: result.executionName, executionArn: result.executionArn };
}

/**
 * Receives every message of the queue (each once), replays it unless `dryRun`, deletes it once
 * its replay succeeded, and makes the others visible again at the end.
 */
export async function replayDeadLetters(where: TriggerLocation, clients: ReplayClients, options: { dryRun?: boolean }, io: Io): Promise<ReplaySummary> {
  const { sqs, lambda } = clients;
  const seen = new Set<string>();
  /** Latest receipt handle of each message left in the queue, to show it again at the end. */
  const keep = new Map<string, string>();
  let replayed = 0;
  let alreadyStarted = 0;
  let failed = 0;
  const started: string[] = [];
  io.out(`${options.dryRun ? 'dead letters in' : 'replaying'} ${where.queueUrl}${options.dryRun ? '' : ` through ${where.functionName}`}`);
  try {
    for (;;) {
      const { Messages = [] } = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: where.queueUrl,
          MaxNumberOfMessages: 10,
          VisibilityTimeout: REPLAY_VISIBILITY_SECONDS,
          // Long polling asks every SQS server: a short poll may answer empty while messages wait.
          WaitTimeSeconds: 2,
          MessageAttributeNames: ['All'],
          MessageSystemAttributeNames: ['ApproximateReceiveCount', 'SentTimestamp'],
        }),
      );
      const fresh = Messages.filter((m) => !seen.has(m.MessageId ?? ''));
      // A message seen before shows again only when its visibility ran out: keep its newest handle.
      for (const m of Messages) if (keep.has(m.MessageId ?? '') && m.ReceiptHandle) keep.set(m.MessageId!, m.ReceiptHandle);
      if (!fresh.length) break;
      for (const message of fresh) {
        const id = message.MessageId ?? '';
        seen.add(id);
        const upload = uploadOf(message.Body);
        if (options.dryRun) {
          keep.set(id, message.ReceiptHandle ?? '');
          const sent = Number(message.Attributes?.SentTimestamp);
          const when = Number.isFinite(sent) ? ` at ${new Date(sent).toISOString()}` : '';
          io.out(
            `  ${id} ${upload}: dead-lettered${when} (${deadLetterReason(message)}), received ${message.Attributes?.ApproximateReceiveCount ?? '?'} time(s)`,
          );
          continue;
        }
        const outcome = await replayOne(message, where, lambda);
        if (outcome.kind === 'failed') {
          failed += 1;
          keep.set(id, message.ReceiptHandle ?? '');
          io.err(`  failed          ${id} ${upload}: ${outcome.reason}; kept in the queue`);
          continue;
        }
        if (outcome.kind === 'replayed') {
          replayed += 1;
          if (outcome.executionArn) started.push(outcome.executionArn);
          io.out(`  replayed        ${upload}: started ${outcome.executionName}`);
        } else {
          alreadyStarted += 1;
          io.out(`  already started ${upload}: ${outcome.executionName}`);
        }
        try {
          await sqs.send(new DeleteMessageCommand({ QueueUrl: where.queueUrl, ReceiptHandle: message.ReceiptHandle }));
        } catch (error) {
          keep.set(id, message.ReceiptHandle ?? '');
          io.err(`  could not delete ${id} (${errorName(error)}: ${(error as Error).message}); its run is started, so a later replay finds it already started`);
        }
      }
    }
  } finally {
    // Show what stays at once to the next replay, rather than after the visibility timeout.
    for (const receipt of keep.values()) {
      try {
        await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: where.queueUrl, ReceiptHandle: receipt, VisibilityTimeout: 0 }));
      } catch {
        // It shows again when its visibility timeout ends.
      }
    }
  }
  const summary = { messages: seen.size, replayed, alreadyStarted, failed, kept: keep.size, started };
  if (options.dryRun) io.out(`${seen.size} dead letter(s); dry run: nothing was invoked or deleted`);
  else
    io.out(
      `${seen.size} dead letter(s): ${replayed} replayed, ${alreadyStarted} already started, ${failed} failed${summary.kept ? ` (${summary.kept} kept in the queue)` : ''}`,
    );
  return summary;
}
