/**
 * The humanoid pipeline end to end on the embedded runtime (default size `smoke`): ARS on every
 * core of this machine, a checkpoint's replays fired by each upload, the final replays, report and
 * publication. Measures:
 * - the CPU trainer's environment steps per second on all cores (training and evaluation rollouts);
 * - the policy's first evaluation against its last (steps upright, forward speed): the smoke
 *   size's goal is "measurably better than its first iteration";
 * - the final policy's replays at each command (speed, tracking error, steps upright; the local
 *   size's goal: upright for all 500 steps at 0.5 m/s and moving forward);
 * - one replay with its film, in seconds on one core (goal: under 10 s);
 * - the replay runs the uploads started while training went on.
 * Run alone with `tsx bench/humanoid-pipeline.ts [size]`, or call `measureHumanoidPipeline()`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { pipelineNamed } from '#infra/cli/config.ts';
import { type ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { HUMANOID_SIZES, HumanoidConfig } from '#pipelines/humanoid/config.ts';
import { HUMANOID_PIPELINE } from '#pipelines/humanoid/stack.ts';
import { readOutcomes } from '#shared/fan-out.ts';
import { type HistoryEntry, POLICY_FILE, readCheckpoint } from '#shared/humanoid/checkpoint.ts';
import { G1Env } from '#shared/humanoid/env.ts';
import { compileG1 } from '#shared/humanoid/model.ts';
import { loadPolicyActor } from '#shared/humanoid/policy-actor.ts';
import { drawFrame, filmMp4 } from '#shared/humanoid/replay.ts';
import { TIMING } from '#shared/humanoid/task.ts';
import { seededRandom } from '#shared/random.ts';
import type { ReplayMetrics } from '#shared/humanoid/replay.ts';

export interface HumanoidPipelineFigures {
  readonly size: string;
  readonly seconds: number;
  readonly batchJobs: number;
  readonly trainSeconds: number;
  readonly trainStepsPerSecond: number;
  readonly workers: number;
  readonly steps: number;
  readonly iterations: number;
  readonly first: HistoryEntry;
  readonly last: HistoryEntry;
  readonly best: HistoryEntry;
  readonly replays: readonly (ReplayMetrics & { readonly seconds: number; readonly frames: number })[];
  readonly uploadRuns: number;
  readonly uploadRunsSucceeded: number;
  /** A full-length replay of the final policy with its film, on one core (stepping on after a fall). */
  readonly fullReplay: { readonly steps: number; readonly frames: number; readonly seconds: number; readonly filmBytes: number };
}

/**
 * The replay's worst case: all 500 control steps with the ONNX policy and a frame every second
 * step (250 frames), then the MP4. A replay ends when the robot falls, so a falling policy's
 * replays are shorter; this one steps on to the end whatever happens.
 */
async function fullReplay(checkpointUri: string): Promise<HumanoidPipelineFigures['fullReplay']> {
  const checkpoint = await readCheckpoint(checkpointUri);
  const actor = await loadPolicyActor(await checkpoint.file(POLICY_FILE), 'final policy.onnx');
  const sim = await compileG1({ timestep: TIMING.simDt });
  try {
    const started = performance.now();
    const env = new G1Env(sim, seededRandom(0), { noiseLevel: 0, pushes: false, randomReset: false, command: { forward: 0.5, lateral: 0, yaw: 0 } });
    let observation = env.reset();
    const frames = [drawFrame(sim, 0)];
    for (let t = 1; t <= TIMING.replaySteps; t++) {
      observation = env.step(await actor.act(observation)).observation;
      if (t % 2 === 0) frames.push(drawFrame(sim, t * TIMING.ctrlDt));
    }
    const film = filmMp4(frames, 1 / (2 * TIMING.ctrlDt));
    return { steps: TIMING.replaySteps, frames: frames.length, seconds: (performance.now() - started) / 1000, filmBytes: film.byteLength };
  } finally {
    sim.dispose();
    await actor.release();
  }
}

const seconds = (r: ExecutionRecord) => (Date.parse(r.stopDate!) - Date.parse(r.startDate)) / 1000;

export async function measureHumanoidPipeline(size: keyof typeof HUMANOID_SIZES = 'smoke'): Promise<HumanoidPipelineFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'fp-bench-humanoid-'));
  let runtime: LocalRuntime | undefined;
  try {
    runtime = await LocalRuntime.start({ dataDir: dir, pipelines: [pipelineNamed(HUMANOID_PIPELINE)] });
    const uploads: ExecutionRecord[] = [];
    runtime.on('executionDone', (r: ExecutionRecord) => {
      if ((r.input as { trigger?: unknown }).trigger) uploads.push(r);
    });
    const config = HumanoidConfig.parse(HUMANOID_SIZES[size]);
    const record = await runtime.startExecution(HUMANOID_PIPELINE, { config }).done;
    await runtime.idle();
    if (record.status !== 'SUCCEEDED') throw new Error(`humanoid ${record.status}: ${record.error} ${record.cause ?? ''}`);
    const state = record.output as { checkpoint: string; train: Record<string, number>; replays: unknown };
    const history = (await readCheckpoint(state.checkpoint)).manifest.history;
    const train = state.train as { seconds?: number; stepsPerSecond?: number; workers?: number; steps?: number; iterations?: number };
    const replayRecords = await readOutcomes(state.replays, 'replays');
    const replays = replayRecords.flatMap((o) =>
      o.ok
        ? [
            {
              ...(o.value as { metrics: ReplayMetrics }).metrics,
              seconds: (o.value as { seconds: number }).seconds,
              frames: (o.value as { frames: number }).frames,
            },
          ]
        : [],
    );
    const best = history.reduce((a, b) => (b.meanStepsUpright > a.meanStepsUpright ? b : a));
    return {
      size,
      seconds: seconds(record),
      batchJobs: record.stats.batchJobs,
      trainSeconds: train.seconds ?? 0,
      trainStepsPerSecond: train.stepsPerSecond ?? 0,
      workers: train.workers ?? 0,
      steps: train.steps ?? 0,
      iterations: train.iterations ?? 0,
      first: history[0]!,
      last: history.at(-1)!,
      best,
      replays,
      uploadRuns: uploads.length,
      fullReplay: await fullReplay(state.checkpoint),
      uploadRunsSucceeded: uploads.filter((u) => u.status === 'SUCCEEDED').length,
    };
  } finally {
    await runtime?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const n = (x: number | null | undefined, d = 2) => (x === null || x === undefined ? '–' : x.toFixed(d));

export function describeHumanoidPipeline(f: HumanoidPipelineFigures): string {
  const line = (h: HistoryEntry) => `${n(h.meanStepsUpright, 0)} steps upright, ${n(h.meanForwardSpeed)} m/s, return ${n(h.meanReturn)}`;
  return [
    `humanoid pipeline (${f.size}): ${n(f.seconds, 0)} s, ${f.batchJobs} Batch jobs; ARS ${f.iterations} iterations, ${f.steps.toLocaleString('en-US')} training steps in ${n(f.trainSeconds, 0)} s`,
    `  CPU trainer: ${Math.round(f.trainStepsPerSecond).toLocaleString('en-US')} environment steps/s on ${f.workers} cores`,
    `  first evaluation: ${line(f.first)}`,
    `  last evaluation:  ${line(f.last)} (better than the first: ${f.last.meanStepsUpright > f.first.meanStepsUpright ? 'yes' : 'no'})`,
    `  best evaluation:  ${line(f.best)} at ${f.best.steps.toLocaleString('en-US')} steps`,
    ...f.replays.map(
      (r) =>
        `  replay at ${n(r.command.forward, 1)} m/s: ${r.stepsUpright}/${r.steps} steps upright, speed ${n(r.meanForwardSpeed)} m/s, tracking error ${n(r.trackingError)} m/s, ${r.fell ? 'fell' : 'upright'}; ${n(r.seconds, 1)} s with its ${r.frames}-frame film (goal < 10 s)`,
    ),
    `  a full ${f.fullReplay.steps}-step replay with its ${f.fullReplay.frames}-frame film (${Math.round(f.fullReplay.filmBytes / 1024)} KiB): ${n(f.fullReplay.seconds, 1)} s on one core (goal < 10 s)`,
    `  replay runs started by checkpoint uploads: ${f.uploadRunsSucceeded} of ${f.uploadRuns} succeeded`,
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const size = (process.argv[2] ?? 'smoke') as keyof typeof HUMANOID_SIZES;
  console.log(describeHumanoidPipeline(await measureHumanoidPipeline(size)));
}
