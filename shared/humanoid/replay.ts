/**
 * Replays: a policy drives the CPU twin for a number of control steps at a fixed command, without
 * observation noise, pushes or a random start, and the replay measures what it did and films it.
 *
 * Metrics: the mean forward speed (the pelvis's displacement along its starting heading over the
 * time it stayed up), the tracking error (the mean absolute difference between the commanded and
 * the pelvis's forward velocity, per step), the steps it stayed up, and whether it fell.
 *
 * The film is drawn without GL: every `filmEvery` control steps, each body's position projected
 * on a side view that follows the pelvis (x forward, z up; the far side drawn lighter), the bones
 * between a body and its parent as lines, as an SVG frame; ffmpeg (its librsvg decoder) turns the
 * frames into an H.264 MP4. Ground ticks every 0.5 m show the speed.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../errors.ts';
import { seededRandom } from '../random.ts';
import { checkCommand, G1Env } from './env.ts';
import type { G1Sim } from './model.ts';
import { type Command, TIMING } from './task.ts';

/** What decides an action from an observation (a linear policy, an ONNX session's wrapper). */
export type Actor = (observation: Float64Array) => ArrayLike<number> | Promise<ArrayLike<number>>;

export interface ReplayMetrics {
  readonly command: Command;
  readonly steps: number;
  readonly stepsUpright: number;
  readonly fell: boolean;
  readonly ended: string | null;
  readonly meanForwardSpeed: number;
  readonly trackingError: number;
  readonly return: number;
}

export interface Replay {
  readonly metrics: ReplayMetrics;
  /** SVG frames, one every filmEvery control steps. */
  readonly frames: readonly string[];
  readonly framesPerSecond: number;
}

const WIDTH = 480;
const HEIGHT = 360;
const PIXELS_PER_METRE = 200;

export async function replay(sim: G1Sim, actor: Actor, options: { command: Command; steps?: number; filmEvery?: number }): Promise<Replay> {
  const command = checkCommand(options.command);
  const steps = options.steps ?? TIMING.replaySteps;
  const filmEvery = options.filmEvery ?? 2;
  if (!Number.isInteger(steps) || steps < 1) throw new ConfigError('replay.steps', steps, 'must be a positive integer');
  if (!Number.isInteger(filmEvery) || filmEvery < 1) throw new ConfigError('replay.filmEvery', filmEvery, 'must be a positive integer');
  const env = new G1Env(sim, seededRandom(0), { noiseLevel: 0, pushes: false, randomReset: false, command });
  let observation = env.reset();
  const { model, data } = sim;
  const qpos = () => data.qpos as Float64Array;
  const x0 = qpos()[0]!;
  const frames: string[] = [drawFrame(sim, 0)];
  let total = 0;
  let trackingSum = 0;
  let taken = 0;
  let ended: string | null = null;
  const linvelAdr = model.sensor_adr[sim.mujoco.mj_name2id(model, sim.mujoco.mjtObj.mjOBJ_SENSOR.value, 'local_linvel_pelvis')];
  while (taken < steps) {
    const action = await actor(observation);
    const result = env.step(action);
    taken += 1;
    total += result.reward;
    trackingSum += Math.abs(command.forward - (data.sensordata as Float64Array)[linvelAdr]!);
    observation = result.observation;
    if (taken % filmEvery === 0 || result.done) frames.push(drawFrame(sim, taken * TIMING.ctrlDt));
    if (result.done) {
      ended = result.ended;
      break;
    }
  }
  // The keyframe faces +x: the starting heading is the world's x axis.
  const seconds = taken * TIMING.ctrlDt;
  const distance = qpos()[0]! - x0;
  return {
    metrics: {
      command,
      steps,
      stepsUpright: taken,
      fell: ended !== null,
      ended,
      meanForwardSpeed: ended === 'unstable' ? 0 : distance / seconds,
      trackingError: trackingSum / taken,
      return: total,
    },
    frames,
    framesPerSecond: 1 / (TIMING.ctrlDt * filmEvery),
  };
}

/** One SVG frame: the bodies on a side view centred on the pelvis, ground ticks, the time. */
export function drawFrame(sim: G1Sim, seconds: number): string {
  const { model, data } = sim;
  const xpos = data.xpos as Float64Array;
  const parents = model.body_parentid as Int32Array;
  const pelvisX = xpos[3]!;
  const toScreen = (b: number) => [WIDTH / 2 + (xpos[3 * b]! - pelvisX) * PIXELS_PER_METRE, HEIGHT - 40 - xpos[3 * b + 2]! * PIXELS_PER_METRE] as const;
  const lines: string[] = [];
  // Far side (y < pelvis y) first, lighter, so the near side draws over it.
  const pelvisY = xpos[4]!;
  const bones = [];
  for (let b = 2; b < model.nbody; b++) {
    const p = parents[b]!;
    if (p < 1) continue;
    bones.push({ b, p, depth: (xpos[3 * b + 1]! + xpos[3 * p + 1]!) / 2 - pelvisY });
  }
  bones.sort((a, c) => a.depth - c.depth);
  for (const { b, p, depth } of bones) {
    const [x1, y1] = toScreen(p);
    const [x2, y2] = toScreen(b);
    const colour = depth < -0.02 ? '#8aa4c8' : '#1f4e8c';
    lines.push(
      `<line x1="${x1.toFixed(1)}" y1="${y1.toFixed(1)}" x2="${x2.toFixed(1)}" y2="${y2.toFixed(1)}" stroke="${colour}" stroke-width="7" stroke-linecap="round"/>`,
    );
  }
  const [px, py] = toScreen(1);
  lines.push(`<circle cx="${px.toFixed(1)}" cy="${py.toFixed(1)}" r="9" fill="#1f4e8c"/>`);
  const ground = HEIGHT - 40;
  const ticks: string[] = [];
  const first = Math.ceil((pelvisX - WIDTH / 2 / PIXELS_PER_METRE) / 0.5) * 0.5;
  for (let x = first; x <= pelvisX + WIDTH / 2 / PIXELS_PER_METRE; x += 0.5) {
    const sx = WIDTH / 2 + (x - pelvisX) * PIXELS_PER_METRE;
    ticks.push(`<line x1="${sx.toFixed(1)}" y1="${ground}" x2="${(sx - 12).toFixed(1)}" y2="${ground + 14}" stroke="#777" stroke-width="2"/>`);
  }
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}">` +
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="#ffffff"/><line x1="0" y1="${ground}" x2="${WIDTH}" y2="${ground}" stroke="#444" stroke-width="2"/>` +
    ticks.join('') +
    lines.join('') +
    `<text x="12" y="24" font-family="DejaVu Sans, sans-serif" font-size="16" fill="#333">${seconds.toFixed(2)} s  x ${pelvisX.toFixed(2)} m</text></svg>`
  );
}

/** The frames as an H.264 MP4 (yuv420p), through ffmpeg's librsvg decoder; returns its bytes. */
export function filmMp4(frames: readonly string[], framesPerSecond: number): Buffer {
  if (frames.length === 0) throw new ConfigError('frames', 0, 'a film needs at least one frame');
  const dir = mkdtempSync(join(tmpdir(), 'g1-film-'));
  try {
    frames.forEach((svg, i) => {
      writeFileSync(join(dir, `f${String(i).padStart(5, '0')}.svg`), svg);
    });
    const out = join(dir, 'film.mp4');
    const run = spawnSync(
      'ffmpeg',
      [
        '-hide_banner',
        '-nostdin',
        '-v',
        'error',
        '-y',
        '-framerate',
        String(framesPerSecond),
        '-c:v',
        'librsvg',
        '-i',
        join(dir, 'f%05d.svg'),
        '-c:v',
        'libx264',
        '-preset',
        'veryfast',
        '-crf',
        '28',
        '-pix_fmt',
        'yuv420p',
        '-threads',
        '1',
        '-movflags',
        '+faststart',
        out,
      ],
      { encoding: 'utf8' },
    );
    if (run.status !== 0)
      throw new Error(`ffmpeg could not make the film: ${(run.stderr || run.error?.message || '').trim().split('\n').slice(-3).join(' | ')}`);
    return readFileSync(out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
