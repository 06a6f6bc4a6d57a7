/**
 * A local run's cost line and its report's copy with it (shared/cost/run-report.ts), written
 * when the run succeeds, from the runtime's counters: the run's own, and for each cache hit the
 * counters of the run that computed the entry. On AWS a function the execution's end triggers
 * does the same from the execution's history.
 */
import type { S3Client } from '@aws-sdk/client-s3';
import { reportUriOf, runCostLine, writeRunReport } from '#shared/cost/run-report.ts';
import { cacheSaving, costOf, usageOfStats } from '#shared/cost/usage.ts';
import type { ExecutionRecord } from './execution-records.ts';

/**
 * The execution a cache entry names, as the records know it: a local Distributed Map child's id
 * (`...:mapRun:<machine>:<run>/<state>:<map run>:<index>`) is its parent's execution, whose record
 * holds the children's counters.
 */
export function parentExecutionArn(arn: string): string {
  if (!arn.includes(':mapRun:')) return arn;
  return arn.split('/')[0]!.replace(':mapRun:', ':execution:');
}

/** A run's record by its execution ARN, where there is one. */
export type RecordLookup = (executionArn: string) => ExecutionRecord | undefined;

/** The run's cost and its cache's saving, from its record and the records of the runs its hits name. */
export function localRunCost(record: ExecutionRecord, recordOf: RecordLookup) {
  const usage = usageOfStats(record.stats);
  const cost = costOf(usage);
  const saving = cacheSaving(record.stats.cacheHits ?? [], (arn) => recordOf(parentExecutionArn(arn))?.stats.steps);
  return { usage, cost, saving, line: runCostLine(cost, saving) };
}

/**
 * Sets `record.runCost`: the line, and when the run's output names a report (`reportUri`), the
 * report's copy with the line and the figures beside it. A report that cannot be copied is said
 * in the record (`error`); the run stays as it ended.
 */
export async function writeLocalRunCost(s3: S3Client, record: ExecutionRecord, recordOf: RecordLookup): Promise<void> {
  let line = '';
  try {
    const figures = localRunCost(record, recordOf);
    line = figures.line;
    const reportUri = reportUriOf(record.output);
    if (reportUri === undefined) {
      record.runCost = { line };
      return;
    }
    const written = await writeRunReport(s3, { pipeline: record.pipeline, executionArn: record.executionArn, ...figures, reportUri });
    record.runCost = { line, reportUri: written.reportUri, costUri: written.costUri };
  } catch (error) {
    const e = error as Error;
    record.runCost = { line, error: `the run's cost line or its report's copy could not be written: ${e?.name}: ${e?.message}` };
  }
}
