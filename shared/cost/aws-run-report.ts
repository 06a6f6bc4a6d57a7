/**
 * On AWS, the run's cost line (run-report.ts), written when its execution succeeds: EventBridge's
 * "Step Functions Execution Status Change" event starts the pipeline's run-cost function, which
 * reads the execution's history, its Distributed Map children's and its Batch jobs
 * (history-usage.ts), prices the hits from the histories of the runs that computed them, and
 * copies the report with the line. It runs after the execution has ended, so every state of the
 * run is in the figures. The embedded runtime does the same from its counters (infra/local/run-report.ts).
 */
import { DescribeExecutionCommand } from '@aws-sdk/client-sfn';
import type { S3Client } from '@aws-sdk/client-s3';
import { z } from 'zod';
import { parseOrThrow } from '../schema.ts';
import { ConfigError } from '../errors.ts';
import { awsCacheSaving, awsRunUsage, type AwsUsageClients, jobDefinitionLookup } from './history-usage.ts';
import { reportUriOf, runCostLine, type RunReportWritten, writeRunReport } from './run-report.ts';
import { costOf } from './usage.ts';

/** The event, as EventBridge delivers a Standard execution's end (only what is read of it). */
export const ExecutionStatusChange = z.object({
  'detail-type': z.literal('Step Functions Execution Status Change'),
  detail: z.object({
    executionArn: z.string().regex(/^arn:aws[a-z-]*:states:/, 'must be a Step Functions execution ARN'),
    stateMachineArn: z.string(),
    status: z.string(),
    /** The run's output; null when over the event's size limit (then read with DescribeExecution). */
    output: z.string().nullish(),
  }),
});

/**
 * The stack's job definitions, by logical id, with the instance type each GPU one is sized for
 * ('' for a Fargate or CPU job), from the function's JOB_INSTANCE_TYPES.
 */
export function instanceTypesOf(json: string | undefined): { name: string; instanceType?: string }[] {
  if (!json) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    throw new ConfigError('JOB_INSTANCE_TYPES', json, 'is not JSON; the stack sets it to {logical id: instance type}');
  }
  const map = parseOrThrow(z.record(z.string(), z.string()), parsed);
  return Object.entries(map).map(([name, instanceType]) => ({ name, ...(instanceType ? { instanceType } : {}) }));
}

export interface AwsRunCostResult {
  readonly executionArn: string;
  readonly line: string;
  /** Where the report's copy and its figures went; absent for a run whose output names no report, or when they could not be written. */
  readonly written?: RunReportWritten;
  /** Why the report's copy could not be written (the line is still made, and logged). */
  readonly error?: string;
  readonly notes: readonly string[];
}

/** The run's cost line, and its report's copy with it when its output names a report (`reportUri`). */
export async function awsRunCost(
  event: unknown,
  deps: {
    readonly clients: AwsUsageClients;
    readonly s3: S3Client;
    readonly pipeline: string;
    readonly instanceTypes: readonly { name: string; instanceType?: string }[];
  },
): Promise<AwsRunCostResult | undefined> {
  const { detail } = parseOrThrow(ExecutionStatusChange, event);
  if (detail.status !== 'SUCCEEDED') return undefined;
  const lookup = jobDefinitionLookup(deps.instanceTypes);
  const outputText = detail.output ?? (await deps.clients.sfn.send(new DescribeExecutionCommand({ executionArn: detail.executionArn }))).output;
  let output: unknown;
  try {
    output = outputText ? JSON.parse(outputText) : undefined;
  } catch {
    output = undefined;
  }
  const read = await awsRunUsage(detail.executionArn, deps.clients, lookup);
  const { saving, notes } = await awsCacheSaving(read.cacheHits, deps.clients, lookup);
  const cost = costOf(read.usage);
  const allNotes = [...read.notes, ...notes];
  // The run's own notes make the line partial; a hit not priced is said in the line already.
  const line = runCostLine(cost, saving, read.notes.length);
  const reportUri = reportUriOf(output);
  if (reportUri === undefined) return { executionArn: detail.executionArn, line, notes: allNotes };
  try {
    const written = await writeRunReport(deps.s3, {
      pipeline: deps.pipeline,
      executionArn: detail.executionArn,
      reportUri,
      usage: read.usage,
      cost,
      saving,
      line,
      notes: allNotes,
    });
    return { executionArn: detail.executionArn, line: written.line, written, notes: allNotes };
  } catch (error) {
    // The figures were read: the line is returned and logged even when the copy cannot be made.
    const e = error as Error;
    return {
      executionArn: detail.executionArn,
      line,
      notes: allNotes,
      error: `the report ${reportUri} could not be copied with its cost line: ${e?.name}: ${e?.message}`,
    };
  }
}
