/**
 * The SAE pipeline end to end on the embedded runtime, on the refinery's own output: the
 * refinery runs first (at `refinerySize`, Claude played by the fake labeler) and publishes
 * `refined-corpus`; the SAE pipeline then trains its local model on that artifact, harvests once,
 * trains its grid and labels the chosen SAE. Measures, at the SAE size (default `smoke`):
 * - the best SAE's loss recovered at L0 <= 64 (goal >= 90 %), with FVU and dead latents;
 * - detection with the top-tokens explainer (no key): own labels against mismatched labels,
 *   with standard errors (goal: a gap of at least 0.15);
 * - a rerun with another k grid: harvest and model cache hits, Batch jobs for the new SAEs only;
 * - a rerun with Claude (the fake explainer on loopback) and then another Claude model: no Batch
 *   job, and only labels, detection and the report recomputed;
 * - SAE training throughput, tokens per second on one core (each job runs one thread).
 * Run alone with `tsx bench/sae-pipeline.ts [saeSize] [refinerySize]`, or call `measureSaePipeline()`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { pipelineNamed } from '#infra/cli/config.ts';
import { type ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { REFINERY_SIZES, RefineryConfig } from '#pipelines/refinery/config.ts';
import { REFINERY_PIPELINE } from '#pipelines/refinery/stack.ts';
import { SAE_SIZES, SaeConfig } from '#pipelines/sae/config.ts';
import { SAE_PIPELINE } from '#pipelines/sae/stack.ts';
import { readObjectBytes } from '#shared/clients/aws.ts';
import type { SaeFigures } from '#shared/sae/report.ts';
import { startFakeExplainer } from '../test/support/fake-explainer.ts';
import { startFakeLabeler } from '../test/support/fake-labeler.ts';

export interface SaePipelineFigures {
  readonly size: string;
  readonly refinerySize: string;
  readonly refinerySeconds: number;
  readonly coldSeconds: number;
  readonly coldBatchJobs: number;
  readonly cold: SaeFigures;
  readonly grid: {
    readonly ks: readonly number[];
    readonly seconds: number;
    readonly batchJobs: number;
    readonly harvestCached: boolean;
    readonly lmCached: boolean;
  };
  readonly claude: { readonly seconds: number; readonly batchJobs: number; readonly requests: number; readonly figures: SaeFigures };
  readonly newModel: {
    readonly seconds: number;
    readonly batchJobs: number;
    readonly requests: number;
    readonly computed: readonly string[];
    readonly figures: SaeFigures;
  };
}

const seconds = (r: ExecutionRecord) => (Date.parse(r.stopDate!) - Date.parse(r.startDate)) / 1000;

async function figuresOf(record: ExecutionRecord, what: string): Promise<SaeFigures> {
  if (record.status !== 'SUCCEEDED') throw new Error(`${what} ${record.status}: ${record.error} ${record.cause ?? ''}`);
  const out = record.output as { reportUri: string };
  return JSON.parse((await readObjectBytes(out.reportUri.replace(/report\.html$/, 'figures.json'))).toString('utf8')) as SaeFigures;
}

async function recording(runtime: LocalRuntime, run: () => Promise<ExecutionRecord>): Promise<{ record: ExecutionRecord; states: string[] }> {
  const states: string[] = [];
  const listener = (e: { state: string }) => states.push(e.state);
  runtime.on('stateEntered', listener);
  try {
    return { record: await run(), states };
  } finally {
    runtime.off('stateEntered', listener);
  }
}

export async function measureSaePipeline(
  size: keyof typeof SAE_SIZES = 'smoke',
  refinerySize: keyof typeof REFINERY_SIZES = 'smoke',
): Promise<SaePipelineFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'fp-bench-sae-'));
  const saved = { ...process.env };
  const labeler = await startFakeLabeler({ latencyMs: 20 });
  const explainer = await startFakeExplainer({ latencyMs: 20 });
  const pipelines = [pipelineNamed(REFINERY_PIPELINE), pipelineNamed(SAE_PIPELINE)];
  let runtime: LocalRuntime | undefined;
  try {
    // The refinery labels with Claude (the fake labeler); the SAE run that follows has no key.
    Object.assign(process.env, { ANTHROPIC_API_KEY: 'bench-key', ANTHROPIC_BASE_URL: labeler.url });
    runtime = await LocalRuntime.start({ dataDir: dir, pipelines });
    const refinery = await runtime.startExecution(REFINERY_PIPELINE, { config: RefineryConfig.parse(REFINERY_SIZES[refinerySize]) }).done;
    if (refinery.status !== 'SUCCEEDED') throw new Error(`refinery ${refinery.status}: ${refinery.error} ${refinery.cause ?? ''}`);
    await runtime.stop();
    delete process.env.ANTHROPIC_API_KEY;
    delete process.env.ANTHROPIC_BASE_URL;
    runtime = await LocalRuntime.start({ dataDir: dir, pipelines });
    const config = SaeConfig.parse(SAE_SIZES[size]);
    const cold = await runtime.startExecution(SAE_PIPELINE, { config }).done;
    const coldFigures = await figuresOf(cold, 'cold SAE run');
    // Another k grid: the last k replaced by one between the last two (the smallest k, which the
    // label rule may need, stays).
    const sorted = [...config.sae.ks].sort((a, b) => a - b);
    const last = sorted.at(-1)!;
    const between = Math.max(1, Math.round(((sorted.at(-2) ?? Math.floor(last / 2)) + last) / 2));
    const ks = [...new Set([...sorted.slice(0, -1), between])];
    const rt = runtime;
    const grid = await recording(rt, () => rt.startExecution(SAE_PIPELINE, { config: { ...config, sae: { ...config.sae, ks } } }).done);
    await figuresOf(grid.record, 'k-grid rerun');

    // With a key: Claude (the fake explainer) labels the same features, then another model does.
    await runtime.stop();
    Object.assign(process.env, { ANTHROPIC_API_KEY: 'bench-key', ANTHROPIC_BASE_URL: explainer.url });
    runtime = await LocalRuntime.start({ dataDir: dir, pipelines });
    const claudeConfig = { ...config, labels: { ...config.labels, explainer: 'claude' as const, model: 'claude-bench-a' } };
    const claude = await runtime.startExecution(SAE_PIPELINE, { config: claudeConfig }).done;
    const claudeRequests = explainer.requests.length;
    const rt2 = runtime;
    const newModel = await recording(
      rt2,
      () => rt2.startExecution(SAE_PIPELINE, { config: { ...claudeConfig, labels: { ...claudeConfig.labels, model: 'claude-bench-b' } } }).done,
    );
    const computed = [...new Set(newModel.states.filter((s) => / Invoke$|: Run job$/.test(s)).map((s) => s.replace(/: (Invoke|Run job)$/, '')))].sort();
    return {
      size,
      refinerySize,
      refinerySeconds: seconds(refinery),
      coldSeconds: seconds(cold),
      coldBatchJobs: cold.stats.batchJobs,
      cold: coldFigures,
      grid: {
        ks,
        seconds: seconds(grid.record),
        batchJobs: grid.record.stats.batchJobs,
        harvestCached: grid.states.includes('harvest: Cache hit'),
        lmCached: grid.states.includes('lm: Cache hit'),
      },
      claude: { seconds: seconds(claude), batchJobs: claude.stats.batchJobs, requests: claudeRequests, figures: await figuresOf(claude, 'Claude run') },
      newModel: {
        seconds: seconds(newModel.record),
        batchJobs: newModel.record.stats.batchJobs,
        requests: explainer.requests.length - claudeRequests,
        computed,
        figures: await figuresOf(newModel.record, 'new-model run'),
      },
    };
  } finally {
    await runtime?.stop();
    await labeler.close();
    await explainer.close();
    process.env = saved;
    // KEEP_BENCH_DATA keeps the runtime's data directory (the harvest, contexts, labels) to study.
    if (process.env.KEEP_BENCH_DATA) console.log(`kept ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

const pct = (x: number | null | undefined) => (x === null || x === undefined ? '–' : `${(100 * x).toFixed(1)} %`);
const num = (x: number | null | undefined, digits = 3) => (x === null || x === undefined ? '–' : x.toFixed(digits));
const goal = (ok: boolean) => (ok ? 'met' : 'not met');

function detectionLine(name: string, f: SaeFigures): string {
  const d = f.detection;
  return `  detection (${name}): own ${num(d.own?.mean)} ± ${num(d.own?.standardError)}, mismatched ${num(d.control?.mean)} ± ${num(d.control?.standardError)}, gap ${num(d.gap)} over ${d.own?.n ?? 0} features`;
}

export function describeSaePipeline(f: SaePipelineFigures): string {
  const c = f.cold;
  const best = c.best;
  const saes = [...c.saes].sort((a, b) => a.width - b.width || a.k - b.k);
  const best64 = saes.filter((s) => s.l0 <= 64 + 1e-9).sort((a, b) => b.lossRecovered - a.lossRecovered)[0];
  return [
    `sae pipeline (${f.size}, on the refinery's ${f.refinerySize} output; refinery ${f.refinerySeconds.toFixed(0)} s): ${c.lm.name}, ${c.lm.layers} layers x ${c.lm.width}, layer ${c.lm.layer}; harvest ${c.harvest.trainTokens} + ${c.harvest.heldOutTokens} held-out tokens`,
    `  cold run ${f.coldSeconds.toFixed(1)} s, ${f.coldBatchJobs} Batch jobs; CE clean ${num(c.harvest.ceClean)}, ${c.ablation}-ablated ${num(c.harvest.ceAblated)} nats`,
    ...saes.map(
      (s) =>
        `    w ${String(s.width).padStart(5)} k ${String(s.k).padStart(3)}: L0 ${num(s.l0, 1).padStart(5)}, FVU ${num(s.fvu)}, loss recovered ${pct(s.lossRecovered)}, dead ${pct(s.deadShare)}, ${s.tokensPerSecond.toFixed(0)} tokens/s`,
    ),
    `  best at L0 <= 64: ${best64 ? `w ${best64.width} k ${best64.k}, loss recovered ${pct(best64.lossRecovered)} (goal >= 90 %: ${goal(best64.lossRecovered >= 0.9)})` : 'none'}`,
    `  labelled (best at L0 <= ${c.targetL0}): ${best ? `w ${best.width} k ${best.k}, loss recovered ${pct(best.lossRecovered)}` : 'none'}`,
    `  SAE training throughput: median ${c.throughput.medianTokensPerSecond?.toFixed(0)} tokens/s on one core (${c.throughput.minTokensPerSecond?.toFixed(0)}-${c.throughput.maxTokensPerSecond?.toFixed(0)})`,
    `${detectionLine('top-tokens', c)} (goal >= 0.15: ${goal((c.detection.gap ?? 0) >= 0.15)})`,
    `  k grid [${f.grid.ks.join(', ')}]: ${f.grid.seconds.toFixed(1)} s, ${f.grid.batchJobs} Batch jobs; model cached ${f.grid.lmCached}, harvest cached ${f.grid.harvestCached} (goal: 0 harvest jobs: ${goal(f.grid.harvestCached)})`,
    `  Claude (fake explainer): ${f.claude.seconds.toFixed(1)} s, ${f.claude.batchJobs} Batch jobs, ${f.claude.requests} requests`,
    detectionLine('fake Claude', f.claude.figures),
    `  another Claude model: ${f.newModel.seconds.toFixed(1)} s, ${f.newModel.batchJobs} Batch jobs, ${f.newModel.requests} requests; computed: ${f.newModel.computed.join(', ')}`,
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const size = (process.argv[2] ?? 'smoke') as keyof typeof SAE_SIZES;
  const refinerySize = (process.argv[3] ?? 'smoke') as keyof typeof REFINERY_SIZES;
  console.log(describeSaePipeline(await measureSaePipeline(size, refinerySize)));
}
