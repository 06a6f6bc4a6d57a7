/**
 * How `frontier run` says how a run ended, on either target. A failed run is one line: the state
 * it failed at, the error's name and a readable message. Step Functions records a Lambda's error
 * with its Cause as JSON (`{"errorType","errorMessage","trace":[...]}`) and a Batch job's with the
 * job's description; both are unwrapped to the message a person reads, and the raw cause (the
 * stack trace, the job's stderr) is printed only with --verbose. The other runs that end during
 * a local run (started by an upload's trigger, or by a StartExecution through the runtime's
 * loopback API) say who started them.
 */

import { blockedJobHint } from '#shared/batch-capacity.ts';

/** How a run ended, as the execution's record or DescribeExecution gives it. */
export interface RunEnd {
  readonly status: string;
  readonly error?: string;
  readonly cause?: string;
  /** The state the run was in when it ended (the last one entered), when known. */
  readonly state?: string;
}

/** A message longer than this is cut; --verbose prints the whole cause. */
export const MAX_MESSAGE_CHARS = 600;

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

function parseJsonObject(text: string): Record<string, unknown> | undefined {
  if (!text.trimStart().startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** One line, at most MAX_MESSAGE_CHARS: a multi-line message's lines are joined. */
function oneLine(text: string): string {
  const line = text.trim().replace(/\s*\n\s*/g, ' / ');
  return line.length > MAX_MESSAGE_CHARS ? `${line.slice(0, MAX_MESSAGE_CHARS - 3)}...` : line;
}

/**
 * The error's name and a one-line message, from Step Functions' Error and Cause. The name is the
 * Error (what Retry and Catch match), else the Lambda's errorType; when the two differ, the
 * errorType leads the message.
 */
export function readableError(error: string | undefined, cause: string | undefined): { name: string; message: string } {
  const parsed = cause === undefined ? undefined : parseJsonObject(cause);
  if (parsed && typeof parsed.errorMessage === 'string') {
    const errorType = typeof parsed.errorType === 'string' ? parsed.errorType : undefined;
    const name = error || errorType || 'Error';
    const message = oneLine(parsed.errorMessage);
    return { name, message: errorType && errorType !== name ? `${errorType}: ${message}` : message };
  }
  if (parsed && typeof parsed.StatusReason === 'string') {
    // A Batch job's description, as submitJob.sync fails with it.
    const job = typeof parsed.JobName === 'string' ? parsed.JobName : String(parsed.JobId ?? 'the job');
    const container = isObject(parsed.Container) ? parsed.Container : {};
    const exit = typeof container.ExitCode === 'number' ? ` (exit code ${container.ExitCode})` : '';
    const hint = blockedJobHint(parsed.StatusReason);
    if (hint) {
      // The hint is what a person acts on: it is kept whole and the reason is cut to make room.
      const reason = oneLine(`job ${job}: ${parsed.StatusReason}`);
      const room = MAX_MESSAGE_CHARS - hint.length - 2;
      return { name: error || 'Error', message: `${reason.length > room ? `${reason.slice(0, Math.max(0, room - 3))}...` : reason}: ${hint}` };
    }
    return { name: error || 'Error', message: oneLine(`job ${job}: ${parsed.StatusReason}${exit}`) };
  }
  return { name: error || 'Error', message: oneLine(cause ?? '') };
}

/** `<Error>: <message>` on one line (the name alone when there is no message). */
export function errorText(error: string | undefined, cause: string | undefined): string {
  const { name, message } = readableError(error, cause);
  return message ? `${name}: ${message}` : name;
}

/**
 * What to print for a run that did not succeed: `run FAILED at "<state>": <Error>: <message>`,
 * and with `verbose` the raw cause on the lines after it.
 */
export function failureLines(end: RunEnd, verbose: boolean): string[] {
  const where = end.state ? ` at "${end.state}"` : '';
  if (!end.error && !end.cause) return [`run ${end.status}${where}`];
  const lines = [`run ${end.status}${where}: ${errorText(end.error, end.cause)}`];
  if (verbose && end.cause) lines.push(`cause: ${end.cause}`);
  return lines;
}

/**
 * Who started a run the CLI did not: the S3 trigger starts a run with the upload in its input
 * (`{"trigger": {"bucket", "key", ...}}`, shared/trigger.ts), which is also how each pipeline
 * tells an upload's run apart (its "Started by upload?" choice); any other start came through
 * the Step Functions API.
 */
export function startedBy(input: unknown): string {
  const trigger = isObject(input) ? input.trigger : undefined;
  if (isObject(trigger) && typeof trigger.bucket === 'string' && typeof trigger.key === 'string') {
    return `started by an upload of s3://${trigger.bucket}/${trigger.key}`;
  }
  return 'started through the Step Functions API';
}
