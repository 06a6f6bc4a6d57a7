/**
 * The video pipeline end to end on the embedded runtime, on generated videos (default: the
 * `smoke` size, 12 videos). Measures, against the generator's truth:
 * - cut detection's precision and recall within 2 frames (goal >= 0.95 each);
 * - each drop rule's recall on the clips made for it (goal >= 0.9), and the share of good clips
 *   dropped (goal <= 5 %);
 * - cutting and scoring throughput: video seconds per second of job time, each job on one core
 *   (goal: cutting at >= 10x real time per core at 360p);
 * - a rerun with a stricter aesthetic threshold: its time against the cold run's (goal <= 5 %)
 *   and its Batch jobs (goal: none).
 * Run alone with `tsx bench/video-pipeline.ts [size]`, or call `measureVideoPipeline()`.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { pipelineNamed } from '#infra/cli/config.ts';
import { type ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { VIDEO_SIZES, VideoConfig } from '#pipelines/video/config.ts';
import { VIDEO_PIPELINE } from '#pipelines/video/stack.ts';
import { readObjectBytes } from '#shared/clients/aws.ts';
import type { VideoFigures } from '#shared/video/report.ts';

export interface VideoPipelineFigures {
  readonly size: string;
  readonly videos: number;
  readonly coldSeconds: number;
  readonly coldBatchJobs: number;
  readonly cuts: {
    readonly precision: number;
    readonly recall: number;
    readonly truePositives: number;
    readonly falsePositives: number;
    readonly falseNegatives: number;
  };
  readonly rules: readonly { readonly rule: string; readonly madeFor: number; readonly droppedByRule: number; readonly recall: number | null }[];
  readonly goodClips: number;
  readonly goodDropped: number;
  readonly goodDroppedBy: readonly { readonly rule: string; readonly count: number }[];
  readonly funnel: VideoFigures['funnel'];
  readonly throughput: VideoFigures['throughput'];
  readonly strict: { readonly minAesthetic: number; readonly seconds: number; readonly batchJobs: number; readonly kept: number; readonly share: number };
  /** The cut job's own code on the same generated set, one job at a time (measure.py). */
  readonly alone: CutAlone | null;
}

/** What batch-jobs/video-cut/measure.py prints: the cut stage run alone, video after video. */
export interface CutAlone {
  readonly videoSeconds: number;
  readonly detectSpeedCpu: number;
  readonly encodeSpeedCpu: number;
  readonly cutSpeedCpu: number;
  readonly precision: number;
  readonly recall: number;
}

/**
 * The cut stage alone: measure.py generates the same set (same seed and count) and cuts it video
 * after video in one process, over an in-memory S3, so each cut has a core to itself, as each
 * Batch job has its vCPUs on AWS. In the pipeline run two jobs, the emulators and the state
 * machine share this machine's cores, and each job's CPU seconds are inflated by that sharing.
 */
export function measureCutAlone(videos: number, seed: number): CutAlone | null {
  const python = process.env.FRONTIER_PYTHON ?? '/usr/bin/python3';
  const run = spawnSync(python, ['measure.py', String(videos), String(seed)], {
    cwd: join(REPO_ROOT, 'batch-jobs', 'video-cut'),
    env: { ...process.env, PYTHONPATH: join(REPO_ROOT, 'batch-jobs', 'common'), OMP_NUM_THREADS: '1' },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (run.status !== 0) {
    console.warn(`the cut stage alone (measure.py) failed: ${run.stderr?.slice(-2000)}`);
    return null;
  }
  return JSON.parse(run.stdout) as CutAlone;
}

const seconds = (r: ExecutionRecord) => (Date.parse(r.stopDate!) - Date.parse(r.startDate)) / 1000;

async function figuresOf(
  record: ExecutionRecord,
  what: string,
): Promise<
  VideoFigures & {
    truth?: {
      cuts: Record<string, number>;
      rules: { rule: string; madeFor: number; droppedByRule: number }[];
      goodClips: number;
      goodDropped: number;
      goodDroppedBy?: { rule: string; count: number }[];
    };
  }
> {
  if (record.status !== 'SUCCEEDED') throw new Error(`${what} ${record.status}: ${record.error} ${record.cause ?? ''}`);
  const out = record.output as { reportUri: string };
  return JSON.parse((await readObjectBytes(out.reportUri.replace(/report\.html$/, 'figures.json'))).toString('utf8'));
}

export async function measureVideoPipeline(size: keyof typeof VIDEO_SIZES = 'smoke'): Promise<VideoPipelineFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'fp-bench-video-'));
  const saved = { ...process.env };
  delete process.env.ANTHROPIC_API_KEY;
  let runtime: LocalRuntime | undefined;
  try {
    runtime = await LocalRuntime.start({ dataDir: dir, pipelines: [pipelineNamed(VIDEO_PIPELINE)] });
    const config = VideoConfig.parse(VIDEO_SIZES[size]);
    const cold = await runtime.startExecution(VIDEO_PIPELINE, { config }).done;
    const f = await figuresOf(cold, 'cold video run');
    if (!f.truth) throw new Error('the cold run has no truth figures: generated sources expected');
    const c = f.truth.cuts as { truePositives: number; falsePositives: number; falseNegatives: number };
    const minAesthetic = 6;
    const strict = await runtime.startExecution(VIDEO_PIPELINE, { config: { ...config, curate: { ...config.curate, minAesthetic } } }).done;
    const s = await figuresOf(strict, 'stricter rerun');
    return {
      size,
      videos: f.funnel.sources,
      coldSeconds: seconds(cold),
      coldBatchJobs: cold.stats.batchJobs,
      cuts: {
        precision: c.truePositives / Math.max(1, c.truePositives + c.falsePositives),
        recall: c.truePositives / Math.max(1, c.truePositives + c.falseNegatives),
        ...c,
      },
      rules: f.truth.rules.map((r) => ({ ...r, recall: r.madeFor ? r.droppedByRule / r.madeFor : null })),
      goodClips: f.truth.goodClips,
      goodDropped: f.truth.goodDropped,
      goodDroppedBy: f.truth.goodDroppedBy ?? [],
      funnel: f.funnel,
      throughput: f.throughput,
      strict: { minAesthetic, seconds: seconds(strict), batchJobs: strict.stats.batchJobs, kept: s.funnel.kept, share: seconds(strict) / seconds(cold) },
      alone: config.sources.kind === 'generated' ? measureCutAlone(config.sources.videos, config.sources.seed) : null,
    };
  } finally {
    await runtime?.stop();
    process.env = saved;
    if (process.env.KEEP_BENCH_DATA) console.log(`kept ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

const pct = (x: number | null) => (x === null ? '–' : `${(100 * x).toFixed(1)} %`);
const goal = (ok: boolean) => (ok ? 'met' : 'not met');

export function describeVideoPipeline(v: VideoPipelineFigures): string {
  const t = v.throughput;
  const cutSpeed = t.cutSpeedPerCore ?? t.cutSpeed ?? 0;
  const scoreSpeed = t.scoreSeconds > 0 ? t.scoredVideoSeconds / t.scoreSeconds : 0;
  const goodShare = v.goodClips ? v.goodDropped / v.goodClips : 0;
  return [
    `video pipeline (${v.size}, ${v.videos} generated videos): cold run ${v.coldSeconds.toFixed(1)} s, ${v.coldBatchJobs} Batch jobs; ${v.funnel.candidates} candidate clips, ${v.funnel.kept} kept (${v.funnel.keptSeconds.toFixed(1)} s)`,
    `  cuts within 2 frames: precision ${v.cuts.precision.toFixed(3)}, recall ${v.cuts.recall.toFixed(3)} (${v.cuts.truePositives} found, ${v.cuts.falsePositives} spurious, ${v.cuts.falseNegatives} missed; goal >= 0.95: ${goal(v.cuts.precision >= 0.95 && v.cuts.recall >= 0.95)})`,
    ...v.rules.map(
      (r) =>
        `    rule ${r.rule.padEnd(14)}: ${r.droppedByRule} of ${r.madeFor} made for it (${pct(r.recall)}; goal >= 90 %: ${goal(r.recall === null || r.recall >= 0.9)})`,
    ),
    `  good clips dropped: ${v.goodDropped} of ${v.goodClips} (${pct(goodShare)}; goal <= 5 %: ${goal(goodShare <= 0.05)})${
      v.goodDroppedBy.length ? `, by ${v.goodDroppedBy.map((g) => `${g.rule} ${g.count}`).join(', ')}` : ''
    }`,
    `  cutting in the pipeline: ${cutSpeed.toFixed(1)}x real time per core (${t.cutVideoSeconds.toFixed(0)} s of video in ${(t.cutCpuSeconds ?? t.cutSeconds).toFixed(1)} CPU seconds of jobs, each on one core, two jobs and the emulators sharing the machine), ${(t.cutSpeed ?? 0).toFixed(1)}x per second of job wall time; scoring: ${scoreSpeed.toFixed(1)}x (${t.scoredVideoSeconds.toFixed(0)} s in ${t.scoreSeconds.toFixed(1)} s)`,
    v.alone
      ? `  cutting alone (the same job code, one video at a time on one core): ${v.alone.cutSpeedCpu.toFixed(1)}x real time per CPU second (detection ${v.alone.detectSpeedCpu.toFixed(1)}x, encoding ${v.alone.encodeSpeedCpu.toFixed(1)}x; ${v.alone.videoSeconds.toFixed(0)} s of video; goal >= 10x: ${goal(v.alone.cutSpeedCpu >= 10)})`
      : '  cutting alone: not measured',
    `  stricter aesthetic threshold (${v.strict.minAesthetic}): ${v.strict.seconds.toFixed(1)} s (${pct(v.strict.share)} of the cold run; goal <= 5 %: ${goal(v.strict.share <= 0.05)}), ${v.strict.batchJobs} Batch jobs (goal 0: ${goal(v.strict.batchJobs === 0)}), ${v.strict.kept} kept`,
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const size = (process.argv[2] ?? 'smoke') as keyof typeof VIDEO_SIZES;
  console.log(describeVideoPipeline(await measureVideoPipeline(size)));
}
