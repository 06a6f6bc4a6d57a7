/**
 * The run's copy of its report, with what the run cost and what the cache saved in one line
 * (issue: plan and cost).
 *
 * A pipeline's report is a cached step's output, content-addressed under data/<pipeline>/: a
 * rerun that hits the cache restores the same report, so it cannot hold a figure that belongs to
 * one run. After a run succeeds, its report is copied to `runs/<pipeline>/<execution>/report.html`
 * with the line at the top of the page, beside `cost.json` (the figures the line is made from).
 * Locally the runtime writes it when the run ends, from its counters; on AWS a function the
 * execution's end triggers writes it, from the execution's history (history-usage.ts).
 */
import { GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { parseS3Uri } from '../s3uri.ts';
import { type CacheSaving, formatUsd, type RunCost, type RunUsage } from './usage.ts';

/** Where a run's copy of its report goes, in the bucket its report is in. */
export function runReportKey(pipeline: string, executionName: string): string {
  return `runs/${pipeline}/${executionName}/report.html`;
}

/** The report a run's output names (`reportUri`, as every pipeline's Output state has it), if any. */
export function reportUriOf(output: unknown): string | undefined {
  const uri = (output as { reportUri?: unknown } | null | undefined)?.reportUri;
  return typeof uri === 'string' ? uri : undefined;
}

/** Where the figures behind the line go. */
export function runCostKey(pipeline: string, executionName: string): string {
  return `runs/${pipeline}/${executionName}/cost.json`;
}

/**
 * The one line: "This run cost $0.0042 on AWS (us-east-1 prices of 2026-12-02); the cache's 3 hits
 * saved $0.0310, those steps' cost in the runs that computed them." A range where Batch on EC2
 * runs (spot to on-demand); hits from runs not on record are said, not priced.
 */
export function runCostLine(cost: RunCost, saving: CacheSaving, unread = 0): string {
  const unpriced = cost.unpriced.length
    ? `, leaving out ${cost.unpriced.length} item${cost.unpriced.length === 1 ? '' : 's'} the price table has no price for`
    : '';
  const run = `This run cost ${formatUsd(cost.lowUsd, cost.highUsd)} on AWS (${cost.region} prices of ${cost.pricesAsOf}${unpriced})`;
  // What the figures miss (a child history not read, a job Batch no longer describes): said, so the line is not taken as whole.
  const partial = unread ? ` Not all of it could be read (${unread} note${unread === 1 ? '' : 's'} in cost.json): the figures are at least these.` : '';
  if (!saving.hits) return `${run}; it hit no cache entry.${partial}`;
  const hits = `${saving.hits} cache hit${saving.hits === 1 ? '' : 's'}`;
  const notOnRecord = saving.hits - saving.priced;
  const unknown = notOnRecord ? ` (${notOnRecord} of them from runs no longer on record, not priced)` : '';
  return `${run}; its ${hits} saved ${formatUsd(saving.lowUsd, saving.highUsd)}${unknown}, those steps' cost in the runs that computed them.${partial}`;
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The report's HTML with the line as the first thing in its body (at the very top when it has no body tag). */
export function withCostLine(html: string, line: string): string {
  const paragraph = `<p class="run-cost" role="note">${escapeHtml(line)}</p>`;
  const body = /<body\b[^>]*>/i.exec(html);
  if (!body) return `${paragraph}\n${html}`;
  const at = body.index + body[0].length;
  return `${html.slice(0, at)}\n${paragraph}${html.slice(at)}`;
}

export interface RunReportInput {
  readonly pipeline: string;
  readonly executionArn: string;
  /** The run's report (its output's reportUri). */
  readonly reportUri: string;
  readonly usage: RunUsage;
  readonly cost: RunCost;
  readonly saving: CacheSaving;
  /** What could not be read or priced (the AWS reader's notes). */
  readonly notes?: readonly string[];
  /** The line, when the caller made it (default: runCostLine of the cost and the saving). */
  readonly line?: string;
}

export interface RunReportWritten {
  readonly reportUri: string;
  readonly costUri: string;
  readonly line: string;
}

/** Copies the run's report with its cost line to runs/<pipeline>/<execution>/, and the figures beside it. */
export async function writeRunReport(s3: S3Client, input: RunReportInput): Promise<RunReportWritten> {
  const from = parseS3Uri(input.reportUri, 'reportUri');
  const executionName = input.executionArn.split(':').pop()!;
  const line = input.line ?? runCostLine(input.cost, input.saving);
  const got = await s3.send(new GetObjectCommand(from));
  const html = await got.Body!.transformToString('utf8');
  const reportKey = runReportKey(input.pipeline, executionName);
  const costKey = runCostKey(input.pipeline, executionName);
  const figures = {
    executionArn: input.executionArn,
    pipeline: input.pipeline,
    report: input.reportUri,
    line,
    usage: input.usage,
    cost: input.cost,
    saving: input.saving,
    notes: input.notes ?? [],
  };
  await s3.send(new PutObjectCommand({ Bucket: from.Bucket, Key: costKey, Body: JSON.stringify(figures, null, 2), ContentType: 'application/json' }));
  await s3.send(new PutObjectCommand({ Bucket: from.Bucket, Key: reportKey, Body: withCostLine(html, line), ContentType: 'text/html; charset=utf-8' }));
  return { reportUri: `s3://${from.Bucket}/${reportKey}`, costUri: `s3://${from.Bucket}/${costKey}`, line };
}
