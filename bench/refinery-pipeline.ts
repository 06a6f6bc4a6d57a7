/**
 * The corpus refinery end to end on the embedded runtime, at a named size (default `smoke`: about
 * 5,000 documents of the local Debian corpus with injected spam, near-duplicates and contaminated
 * documents), with Claude played by the fake Messages API on loopback (its labels follow a hidden
 * rule the classifier has to learn, and it answers after 20 ms, as a network would). Measures:
 * - the cold run and a rerun with a new threshold, kept apart: the rerun's share of the cold
 *   run's time (goal <= 5 %), its Batch jobs and Claude calls (goal 0 and 0);
 * - the injected material: spam recall and precision (goals >= 95 % and >= 90 %), near-duplicate
 *   pairs found at Jaccard >= 0.8 (goal >= 95 %), contaminated documents removed (goal 100 %, and
 *   no clean document removed for contamination);
 * - the classifier against the held-out labels at the threshold (goal >= 85 %), and the LLM's
 *   cost per document against the classifier's (goal >= 50x).
 * Run alone with `tsx bench/refinery-pipeline.ts [size]`, or call `measureRefineryPipeline()`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { pipelineNamed } from '#infra/cli/config.ts';
import { type ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { REFINERY_SIZES, RefineryConfig } from '#pipelines/refinery/config.ts';
import { REFINERY_PIPELINE } from '#pipelines/refinery/stack.ts';
import { readObjectBytes } from '#shared/clients/aws.ts';
import { registerBenchmark } from '#shared/evals/benchmarks.ts';
import type { RefineryFigures } from '#shared/refinery/report.ts';
import { startFakeLabeler } from '../test/support/fake-labeler.ts';

/** Word problems of 13 words and more: what the contamination is made from. */
function benchmarkRows(n: number): string {
  return Array.from({ length: n }, (_, i) =>
    JSON.stringify({
      id: `wp-${i}`,
      prompt: `A warehouse stores ${40 + i} crates of apples and ${15 + 3 * i} crates of pears; a truck takes ${5 + i} crates of apples away. How many crates are left?`,
      answer: `${40 + i + 15 + 3 * i - (5 + i)} crates are left in the warehouse after the truck leaves.`,
    }),
  ).join('\n');
}

export interface PipelineFigures {
  readonly size: string;
  readonly coldSeconds: number;
  readonly rerunSeconds: number;
  readonly rerunShare: number;
  readonly rerunBatchJobs: number;
  readonly rerunClaudeCalls: number;
  readonly coldClaudeCalls: number;
  readonly thresholds: readonly [number, number];
  readonly cold: RefineryFigures;
  readonly rerun: RefineryFigures;
}

const seconds = (r: ExecutionRecord) => (Date.parse(r.stopDate!) - Date.parse(r.startDate)) / 1000;

async function figuresOf(record: ExecutionRecord): Promise<RefineryFigures> {
  if (record.status !== 'SUCCEEDED') throw new Error(`refinery run ${record.status}: ${record.error} ${record.cause ?? ''}`);
  const out = record.output as { reportUri: string };
  return JSON.parse((await readObjectBytes(out.reportUri.replace(/report\.html$/, 'figures.json'))).toString('utf8')) as RefineryFigures;
}

export async function measureRefineryPipeline(size: keyof typeof REFINERY_SIZES = 'smoke'): Promise<PipelineFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'fp-bench-refinery-'));
  const fake = await startFakeLabeler({ latencyMs: 20 });
  const saved = { ...process.env };
  Object.assign(process.env, { ANTHROPIC_API_KEY: 'bench-key', ANTHROPIC_BASE_URL: fake.url });
  const runtime = await LocalRuntime.start({ dataDir: dir, pipelines: [pipelineNamed(REFINERY_PIPELINE)] });
  try {
    await registerBenchmark(
      { table: runtime.resources.tables[0]!, bucket: runtime.resources.buckets[0]! },
      { name: 'warehouse-sums', scorer: 'exact-string', sampleSize: 40, data: benchmarkRows(40) },
    );
    const config = RefineryConfig.parse(REFINERY_SIZES[size]);
    const threshold = config.threshold === 2 ? 3 : 2;
    const cold = await runtime.startExecution(REFINERY_PIPELINE, { config }).done;
    const coldCalls = fake.requests.length;
    const rerun = await runtime.startExecution(REFINERY_PIPELINE, { config: { ...config, threshold } }).done;
    const coldFigures = await figuresOf(cold);
    const rerunFigures = await figuresOf(rerun);
    return {
      size,
      coldSeconds: seconds(cold),
      rerunSeconds: seconds(rerun),
      rerunShare: seconds(rerun) / seconds(cold),
      rerunBatchJobs: rerun.stats.batchJobs,
      rerunClaudeCalls: fake.requests.length - coldCalls,
      coldClaudeCalls: coldCalls,
      thresholds: [config.threshold, threshold],
      cold: coldFigures,
      rerun: rerunFigures,
    };
  } finally {
    await runtime.stop();
    await fake.close();
    process.env = saved;
    rmSync(dir, { recursive: true, force: true });
  }
}

const pct = (x: number | null | undefined) => (x === null || x === undefined ? '–' : `${(100 * x).toFixed(1)} %`);
const goal = (ok: boolean) => (ok ? 'met' : 'not met');

export function describeRefineryPipeline(f: PipelineFigures): string {
  const c = f.cold;
  const i = c.injected;
  return [
    `refinery pipeline (${f.size}): ${c.accounting.documents} documents in, ${c.accounting.kept} kept at ${f.thresholds[0]}, ${f.rerun.accounting.kept} at ${f.thresholds[1]}; funnel adds up: ${c.accounting.addsUp}`,
    `  cold run ${f.coldSeconds.toFixed(1)} s (${f.coldClaudeCalls} Claude calls); threshold rerun ${f.rerunSeconds.toFixed(1)} s = ${pct(f.rerunShare)} of it, ${f.rerunBatchJobs} Batch jobs, ${f.rerunClaudeCalls} Claude calls (goal <= 5 %, 0, 0: ${goal(f.rerunShare <= 0.05 && f.rerunBatchJobs === 0 && f.rerunClaudeCalls === 0)})`,
    `  stage seconds when computed: ${Object.entries(c.timings)
      .map(([k, v]) => `${k.replace(/Seconds$/, '')} ${v.toFixed(1)}`)
      .join(', ')}`,
    `  spam: recall ${pct(i.spam.recall)}, precision ${pct(i.spam.precision)} of ${i.spam.total} (goal >= 95 % and >= 90 %: ${goal((i.spam.recall ?? 0) >= 0.95 && (i.spam.precision ?? 0) >= 0.9)})`,
    `  near duplicates at Jaccard >= 0.8: ${i.nearDuplicates.found08} of ${i.nearDuplicates.atLeast08} found, ${pct(i.nearDuplicates.recall08)} (goal >= 95 %: ${goal((i.nearDuplicates.recall08 ?? 0) >= 0.95)}); by Jaccard ${i.nearDuplicates.byJaccard
      .filter((b) => b.pairs > 0)
      .map((b) => `${b.from.toFixed(1)}+: ${b.found}/${b.pairs}`)
      .join(', ')}`,
    `  contamination: ${i.contamination.removed} of ${i.contamination.total} removed (${i.contamination.removedByDecontamination} by the n-gram check, ${i.contamination.removedEarlier} by a filter first), ${i.contamination.cleanRemoved} clean removed (goal 100 % and 0: ${goal(i.contamination.removed === i.contamination.total && i.contamination.cleanRemoved === 0)})`,
    `  dedup read ${c.dedup.bytesRead} bytes of signatures, ${c.dedup.readPercent?.toFixed(2)} % of the corpus (goal < 2 %)`,
    `  classifier vs held-out labels at ${f.thresholds[0]}: agreement ${pct(c.heldOut.agreement)} on ${c.heldOut.n} labels, F1 ${pct(c.heldOut.f1)}, MAE ${c.heldOut.mae?.toFixed(2) ?? '–'} (goal >= 85 %: ${goal((c.heldOut.agreement ?? 0) >= 0.85)})`,
    `  cost per document: LLM $${c.cost.llmPerDocumentUsd?.toPrecision(3)}, classifier $${c.cost.classifierPerDocumentUsd?.toPrecision(3)} (${c.cost.gbSecondsPerDocument?.toPrecision(3)} GB-s): ${c.cost.ratio?.toFixed(0)}x (goal >= 50x: ${goal((c.cost.ratio ?? 0) >= 50)})`,
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const size = (process.argv[2] ?? 'smoke') as keyof typeof REFINERY_SIZES;
  console.log(describeRefineryPipeline(await measureRefineryPipeline(size)));
}
