/**
 * The events the runtime emits as an EventEmitter, for the CLI's progress lines and for tests:
 * states entered, Map items done, Batch job progress, emails written to the outbox, S3 objects
 * created, events dead-lettered, executions ended.
 */
import type { ExecutionRecord } from './execution-records.ts';

export interface RuntimeEvents {
  stateEntered: { executionArn: string; state: string };
  mapItem: { executionArn: string; state: string; index: number; ok: boolean };
  jobProgress: { jobName: string; progress: unknown };
  email: { file: string };
  /** The EventBridge event built for an S3 object created in a bucket with notifications on. */
  objectCreated: Record<string, unknown>;
  /** An event whose delivery failed on every attempt, sent to the target's dead-letter queue. */
  deadLettered: { queueArn: string; targetArn: string; event: unknown; error: string };
  executionDone: ExecutionRecord;
}

/** Emits one of the runtime's events (the runtime is the EventEmitter; its parts get this). */
export type EmitRuntimeEvent = <K extends keyof RuntimeEvents>(name: K, payload: RuntimeEvents[K]) => void;
