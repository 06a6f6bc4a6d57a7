/**
 * What every pipeline's local test checks of a succeeded run's cost line (shared/cost/run-report.ts):
 * the line prices the run's own counters, and where the run has a report, its copy under
 * runs/<pipeline>/<execution>/ is the report with the line first in its body, and nothing else
 * changed, beside the figures the line was made from.
 */
import assert from 'node:assert/strict';
import type { ExecutionRecord } from '#infra/local/runtime.ts';
import { readObjectBytes } from '#shared/clients/aws.ts';
import { costOf, formatUsd, usageOfStats } from '#shared/cost/usage.ts';

const LINE = /\n<p class="run-cost" role="note">([^<]*)<\/p>/;

export async function assertRunCost(record: ExecutionRecord): Promise<void> {
  assert.equal(record.status, 'SUCCEEDED');
  const runCost = record.runCost;
  assert.ok(runCost, `${record.name}: a succeeded run has a cost line`);
  assert.equal(runCost.error, undefined, runCost.error);
  const cost = costOf(usageOfStats(record.stats));
  assert.ok(cost.lowUsd > 0, 'a run pays at least its state transitions');
  assert.ok(runCost.line.startsWith(`This run cost ${formatUsd(cost.lowUsd, cost.highUsd)} on AWS (`), runCost.line);
  const reportUri = (record.output as { reportUri?: string }).reportUri;
  if (reportUri === undefined) {
    assert.equal(runCost.reportUri, undefined);
    return;
  }
  const name = record.executionArn.split(':').pop();
  const bucket = /^s3:\/\/([^/]+)\//.exec(reportUri)![1];
  assert.equal(runCost.reportUri, `s3://${bucket}/runs/${record.pipeline}/${name}/report.html`);
  const original = (await readObjectBytes(reportUri)).toString('utf8');
  const copy = (await readObjectBytes(runCost.reportUri)).toString('utf8');
  const line = LINE.exec(copy);
  assert.ok(line, 'the copy has the line');
  assert.ok(/<body\b[^>]*>\n<p class="run-cost"/i.test(copy), 'the line is the first thing in the body');
  assert.equal(line[1]!.replace(/&#39;/g, "'"), runCost.line);
  assert.equal(copy.replace(LINE, ''), original, 'the copy is the report and the line, nothing else');
  const figures = JSON.parse((await readObjectBytes(runCost.costUri!)).toString('utf8')) as { line: string; cost: { lowUsd: number; highUsd: number } };
  assert.equal(figures.line, runCost.line);
  assert.ok(Math.abs(figures.cost.lowUsd - cost.lowUsd) < 1e-12 && Math.abs(figures.cost.highUsd - cost.highUsd) < 1e-12);
}
