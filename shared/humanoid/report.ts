/**
 * The humanoid's report (HTML, self-contained): the training curve (return, steps upright and
 * forward speed against environment steps), tracking at each replay command, each command's film
 * embedded, the checkpoints, every way the task differs from upstream, and the credits (MuJoCo
 * Menagerie's G1, BSD-3-Clause; MuJoCo Playground's task, Apache 2.0). The live report, rewritten
 * as each checkpoint's replays finish, is the same page with `live` set.
 */
import type { TopLevelSpec } from 'vega-lite';
import { escapeHtml, svgOf } from '../charts.ts';
import type { HistoryEntry } from './checkpoint.ts';
import type { ReplayMetrics } from './replay.ts';
import { REWARD_TERM_NAMES, REWARD_WEIGHTS, TIMING, UPSTREAM_DIFFERENCES } from './task.ts';

export interface ReplayFigures {
  /** The checkpoint's step (environment steps of training). */
  readonly step: number;
  readonly metrics: ReplayMetrics;
}

export interface HumanoidReportInput {
  readonly run: string;
  readonly trainer: 'ars' | 'ppo';
  readonly live: boolean;
  /** The newest checkpoint's training curve. */
  readonly history: readonly HistoryEntry[];
  /** Replays of every checkpoint so far (live), or of the final one. */
  readonly replays: readonly ReplayFigures[];
  /** The newest checkpoint's films: forward speed -> MP4 bytes. */
  readonly films: readonly { readonly forward: number; readonly mp4: Uint8Array }[];
  readonly checkpoints: readonly { readonly step: number; readonly uri: string }[];
  readonly settings: Readonly<Record<string, string | number | boolean | null>>;
  /** Where training started from, if from a checkpoint. */
  readonly resumedFrom: string | null;
  readonly stepsPerSecond: number | null;
}

const num = (x: number | null | undefined, digits = 2) => (x === null || x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(digits));

function curveChart(history: readonly HistoryEntry[], field: 'meanReturn' | 'meanStepsUpright' | 'meanForwardSpeed', title: string): TopLevelSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    width: 300,
    height: 180,
    title,
    data: { values: history.filter((h) => h[field] !== null).map((h) => ({ steps: h.steps, value: h[field] })) },
    mark: { type: 'line', point: history.length < 40 },
    encoding: {
      x: { field: 'steps', type: 'quantitative', title: 'environment steps' },
      y: { field: 'value', type: 'quantitative', title },
    },
  };
}

function trackingChart(replays: readonly ReplayFigures[]): TopLevelSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    width: 300,
    height: 180,
    title: 'forward speed at each command, by checkpoint',
    data: { values: replays.map((r) => ({ step: r.step, command: `${r.metrics.command.forward} m/s`, speed: r.metrics.meanForwardSpeed })) },
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'step', type: 'quantitative', title: 'checkpoint (environment steps)' },
      y: { field: 'speed', type: 'quantitative', title: 'mean forward speed (m/s)' },
      color: { field: 'command', type: 'nominal', title: 'command' },
    },
  };
}

/** The flat metrics of the final checkpoint's replays (the artifact's metrics). */
export function humanoidMetrics(input: HumanoidReportInput): Record<string, number | string> {
  const last = input.history.at(-1);
  const newest = Math.max(...input.replays.map((r) => r.step), -1);
  const metrics: Record<string, number | string> = {
    run: input.run,
    trainer: input.trainer,
    steps: last?.steps ?? 0,
    checkpoints: input.checkpoints.length,
    meanReturn: last?.meanReturn ?? 0,
    meanStepsUpright: last?.meanStepsUpright ?? 0,
  };
  if (input.stepsPerSecond !== null) metrics.stepsPerSecond = input.stepsPerSecond;
  for (const r of input.replays.filter((r) => r.step === newest)) {
    const at = String(r.metrics.command.forward).replace('.', '_');
    metrics[`speedAt${at}`] = r.metrics.meanForwardSpeed;
    metrics[`trackingErrorAt${at}`] = r.metrics.trackingError;
    metrics[`stepsUprightAt${at}`] = r.metrics.stepsUpright;
  }
  return metrics;
}

export async function humanoidReportHtml(input: HumanoidReportInput): Promise<string> {
  const history = input.history;
  const charts = await Promise.all([
    history.length ? svgOf(curveChart(history, 'meanReturn', 'mean return')) : '',
    history.length ? svgOf(curveChart(history, 'meanStepsUpright', 'steps upright (of the rollout)')) : '',
    history.some((h) => h.meanForwardSpeed !== null) ? svgOf(curveChart(history, 'meanForwardSpeed', 'forward speed (m/s)')) : '',
    input.replays.length > 0 ? svgOf(trackingChart(input.replays)) : '',
  ]);
  const newest = Math.max(...input.replays.map((r) => r.step), -1);
  const rows = [...input.replays]
    .sort((a, b) => b.step - a.step || a.metrics.command.forward - b.metrics.command.forward)
    .map(
      (r) =>
        `<tr><td>${r.step.toLocaleString('en-US')}</td><td>${num(r.metrics.command.forward, 1)}</td><td>${num(r.metrics.meanForwardSpeed)}</td><td>${num(r.metrics.trackingError)}</td><td>${r.metrics.stepsUpright} / ${r.metrics.steps}</td><td>${r.metrics.fell ? `fell (${escapeHtml(r.metrics.ended ?? '')})` : 'upright'}</td></tr>`,
    )
    .join('\n');
  const films = input.films
    .map(
      (f) =>
        `<figure><video controls muted loop playsinline width="480" src="data:video/mp4;base64,${Buffer.from(f.mp4).toString('base64')}"></video><figcaption>command ${num(f.forward, 1)} m/s forward, checkpoint at ${newest.toLocaleString('en-US')} steps</figcaption></figure>`,
    )
    .join('\n');
  const differences = UPSTREAM_DIFFERENCES.map(
    (d) => `<tr><td>${escapeHtml(d.what)}</td><td>${escapeHtml(d.upstream)}</td><td>${escapeHtml(d.here)}</td><td>${escapeHtml(d.why)}</td></tr>`,
  ).join('\n');
  const weights = (Object.keys(REWARD_WEIGHTS) as (keyof typeof REWARD_WEIGHTS)[])
    .map((k) => `${escapeHtml(REWARD_TERM_NAMES[k])} ${REWARD_WEIGHTS[k]}`)
    .join(', ');
  const settings = Object.entries(input.settings)
    .map(([k, v]) => `<tr><td>${escapeHtml(k)}</td><td>${escapeHtml(String(v))}</td></tr>`)
    .join('\n');
  const checkpoints = input.checkpoints.map((c) => `<li>${c.step.toLocaleString('en-US')} steps: <code>${escapeHtml(c.uri)}</code></li>`).join('\n');
  const last = history.at(-1);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>G1 run ${escapeHtml(input.run)}${input.live ? ' (live)' : ''}</title>
<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}figure{display:inline-block;margin:0 1em 1em 0}.charts svg{margin-right:1em}</style></head>
<body>
<h1>Unitree G1 joystick run <code>${escapeHtml(input.run)}</code>${input.live ? ' — live, updated as checkpoints land' : ''}</h1>
<p>Trainer: ${input.trainer === 'ars' ? 'Augmented Random Search (V2-t, Mania, Guy and Recht 2018) over the CPU twin (MuJoCo in WebAssembly)' : 'Brax PPO over MuJoCo MJX on one GPU'}. ${last ? `${last.steps.toLocaleString('en-US')} environment steps so far; at the last evaluation the policy stayed up ${num(last.meanStepsUpright, 0)} steps on average.` : 'No evaluation yet.'}${input.stepsPerSecond !== null ? ` Environment steps per second on the job's cores: ${Math.round(input.stepsPerSecond).toLocaleString('en-US')}.` : ''}${input.resumedFrom ? ` Continued from <code>${escapeHtml(input.resumedFrom)}</code>.` : ''}</p>
<h2>Training</h2>
<div class="charts">${charts.slice(0, 3).join('\n')}</div>
<h2>Replays</h2>
<p>Each checkpoint's policy (its ONNX export) drives the CPU twin for ${TIMING.replaySteps} control steps (${TIMING.replaySteps * TIMING.ctrlDt} s) or as configured, from the keyframe, without observation noise or pushes, at each command (lateral and yaw 0). Speed: the pelvis's forward displacement over the time it stayed up; tracking error: the mean absolute difference between the commanded and the pelvis's forward velocity.</p>
<div class="charts">${charts[3]}</div>
<table><tr><th>checkpoint (steps)</th><th>command (m/s)</th><th>speed (m/s)</th><th>tracking error (m/s)</th><th>steps upright</th><th>outcome</th></tr>
${rows}
</table>
<h2>Films</h2>
${films || '<p>No film yet.</p>'}
<h2>Settings</h2>
<table>${settings}</table>
<h2>Checkpoints</h2>
<ul>${checkpoints}</ul>
<h2>The task, and how it differs from upstream</h2>
<p>MuJoCo Playground's G1 joystick task (google-deepmind/mujoco_playground at d5e6b47): control at ${1 / TIMING.ctrlDt} Hz over ${Math.round(TIMING.ctrlDt / TIMING.simDt)} physics steps of ${TIMING.simDt} s, position targets around the knees-bent keyframe. Reward weights: ${weights}. Every difference from upstream:</p>
<table><tr><th>what</th><th>upstream</th><th>here</th><th>why</th></tr>
${differences}
</table>
<h2>Credits</h2>
<p>The Unitree G1 model is from MuJoCo Menagerie (google-deepmind/mujoco_menagerie), BSD-3-Clause, copyright Unitree Robotics; the feet-only variant and the joystick task are from MuJoCo Playground, Apache License 2.0. Physics: MuJoCo (Apache License 2.0).</p>
</body></html>
`;
}
