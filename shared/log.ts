/**
 * The one logger of every Lambda: Powertools for AWS Lambda's Logger, one JSON object per line
 * (INFO on stdout, WARN and ERROR on stderr), each with `message`, `level`, `timestamp`,
 * `service` and these keys:
 *
 * - `pipeline`: PIPELINE_NAME where the function's construct sets it; the approval gate's
 *   functions serve every pipeline and add the pipeline their request or item names.
 * - `step`: the function's step (functions/<pipeline>/<step>), given by its handler.
 * - `executionId`: the execution, where the event carries it (the approval request, the
 *   publish step, molecules' record step) or the approval item names it; the state machines
 *   pass no more than that, and the logs of one execution are found by the function's log
 *   group and the time.
 * - from the invocation's context: `function_name`, `function_request_id`, `cold_start`.
 *
 * The event is never logged as a whole: the approval request carries a task token, which is a
 * capability, as is the approval link. Locally each sandbox is a worker thread whose stdout and
 * stderr Node forwards to the main thread's, so the runtime and its tests see the same lines.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import type { Context } from 'aws-lambda';
import { ENV, optionalEnv } from './env.ts';

/** The `service` of every line. */
export const SERVICE_NAME = 'frontier-pipelines';

const pipeline = optionalEnv(ENV.pipeline);

export const logger = new Logger({ serviceName: SERVICE_NAME, persistentKeys: pipeline ? { pipeline } : {} });

/** What a handler knows about where its invocation runs. */
export interface InvocationKeys {
  readonly step: string;
  readonly executionId?: string;
  /** For functions that serve every pipeline (no PIPELINE_NAME): the one the event names. */
  readonly pipeline?: string;
}

/**
 * Called by every handler before its work (after parsing the event, where the event names the
 * execution): drops the previous invocation's keys (a warm container reuses the logger) and
 * sets this one's, with the Lambda context when there is one (tests call handlers without).
 */
export function startInvocationLog(context: Context | undefined, keys: InvocationKeys): void {
  logger.resetKeys();
  if (context) logger.addContext(context);
  appendInvocationKeys(keys);
}

/** Adds keys learnt during the invocation (the approval item's execution and pipeline); undefined ones are left out. */
export function appendInvocationKeys(keys: Partial<InvocationKeys>): void {
  logger.appendKeys(Object.fromEntries(Object.entries(keys).filter(([, value]) => value !== undefined)));
}
