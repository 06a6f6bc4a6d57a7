/**
 * Execution records on disk: one JSON file per execution under `<dataDir>/executions/`,
 * written when it starts and when it ends, so the CLI in another process can list runs and a
 * restarted runtime still refuses a reused execution name, as Step Functions does.
 */
import { existsSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import type { BatchJobUsage, ClaudeUsage, StepUsage } from '#shared/cost/usage.ts';

export type ExecutionStatus = 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'TIMED_OUT' | 'ABORTED';

export interface ExecutionRecord {
  executionArn: string;
  name: string;
  stateMachineArn: string;
  pipeline: string;
  status: ExecutionStatus;
  input: unknown;
  output?: unknown;
  error?: string;
  cause?: string;
  startDate: string;
  stopDate?: string;
  stats: {
    statesEntered: number;
    lambdaInvocations: number;
    batchJobs: number;
    mapItemsDone: number;
    mapItemsFailed: number;
    /** The largest state output of the run (Map iterations and Distributed Map children included), against the 256 KiB limit. */
    largestState: { name: string; bytes: number };
    /** Lambda billed milliseconds (each invocation rounded up to 1 ms), summed; absent in older records. */
    lambdaBilledMs?: number;
    /** Lambda billed seconds x memory size (GiB), summed. */
    lambdaGbSeconds?: number;
    /** Every Batch job's seconds and what it asks for on AWS. */
    batch?: BatchJobUsage[];
    /** Claude tokens by model, from the `claudeUsage` of the run's Lambda responses. */
    claude?: ClaudeUsage[];
    /**
     * The same figures by step: the part of a state's name before ': ' (`sum: Run job` is step
     * `sum`; a state without one is the pipeline's own), with the times the step stored a result
     * in the cache (each is one computation, which a later run's hit saves).
     */
    steps?: Record<string, StepUsage>;
    /** The cache hits of the run: the step and the execution that computed the entry. */
    cacheHits?: { step: string; executionArn: string }[];
  };
  /**
   * What the run cost and what the cache saved, in one line, and where its report with that line
   * went (run-report.ts); written when a run succeeds.
   */
  runCost?: { line: string; reportUri?: string; costUri?: string; error?: string };
}

/** The records of one data directory. */
export class ExecutionRecordStore {
  constructor(private readonly dataDir: string) {}

  private file(executionArn: string): string {
    return join(this.dataDir, 'executions', `${executionArn.split(':').slice(-2).join('__')}.json`);
  }

  has(executionArn: string): boolean {
    return existsSync(this.file(executionArn));
  }

  read(executionArn: string): ExecutionRecord | undefined {
    const file = this.file(executionArn);
    return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as ExecutionRecord) : undefined;
  }

  persist(record: ExecutionRecord): void {
    // Write then rename, so `frontier runs` in another process never reads half a record.
    const file = this.file(record.executionArn);
    writeFileSync(`${file}.tmp`, JSON.stringify(record, null, 2));
    renameSync(`${file}.tmp`, file);
  }
}

/** Every execution record under a data directory, newest first (the CLI's `runs`). */
export function listExecutionRecords(dataDir = join(REPO_ROOT, '.local')): ExecutionRecord[] {
  const dir = join(dataDir, 'executions');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as ExecutionRecord)
    .sort((a, b) => (a.startDate < b.startDate ? 1 : -1));
}
