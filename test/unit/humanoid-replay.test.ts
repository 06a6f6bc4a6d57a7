/**
 * Replays: an ONNX policy drives the CPU twin at a fixed command; the replay's metrics, its SVG
 * frames and the MP4 ffmpeg makes of them.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { zeroPolicy } from '#shared/humanoid/ars.ts';
import { compileG1 } from '#shared/humanoid/model.ts';
import { linearPolicyOnnx, POLICY_INPUT, POLICY_OUTPUT } from '#shared/humanoid/onnx-policy.ts';
import { drawFrame, filmMp4, replay } from '#shared/humanoid/replay.ts';
import { OBSERVATION_SIZE, TIMING } from '#shared/humanoid/task.ts';

describe('G1 replays', () => {
  it('replays an ONNX policy at a command, measures it and films it', async () => {
    const sim = await compileG1({ timestep: TIMING.simDt });
    try {
      // The zero policy holds the keyframe's pose: it cannot balance, and falls forward.
      const session = await ort.InferenceSession.create(linearPolicyOnnx(zeroPolicy(OBSERVATION_SIZE, 29)), { intraOpNumThreads: 1 });
      const actor = async (o: Float64Array) =>
        (await session.run({ [POLICY_INPUT]: new ort.Tensor('float32', Float32Array.from(o), [1, OBSERVATION_SIZE]) }))[POLICY_OUTPUT]!.data as Float32Array;
      const r = await replay(sim, actor, { command: { forward: 0.5, lateral: 0, yaw: 0 }, steps: 500, filmEvery: 2 });
      const m = r.metrics;
      assert.equal(m.fell, true);
      assert.equal(m.ended, 'upside-down');
      assert.ok(m.stepsUpright > 20 && m.stepsUpright < 200, `${m.stepsUpright} steps`);
      assert.ok(m.meanForwardSpeed > 0, 'it falls forward');
      assert.ok(m.trackingError > 0 && Number.isFinite(m.return));
      // A frame at the start and one every 2 steps, the last where it fell.
      assert.equal(r.frames.length, 1 + Math.ceil(m.stepsUpright / 2));
      assert.equal(r.framesPerSecond, 25);
      assert.match(r.frames[0]!, /^<svg [^>]*width="480" height="360".*<line .*<\/svg>$/s);
      const dir = mkdtempSync(join(tmpdir(), 'g1-replay-'));
      try {
        const path = join(dir, 'film.mp4');
        writeFileSync(path, filmMp4(r.frames, r.framesPerSecond));
        const probe = spawnSync(
          'ffprobe',
          ['-v', 'error', '-count_frames', '-show_entries', 'stream=codec_name,width,height,nb_read_frames', '-of', 'csv=p=0', path],
          {
            encoding: 'utf8',
          },
        );
        assert.equal(probe.stdout.trim(), `h264,480,360,${r.frames.length}`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    } finally {
      sim.dispose();
    }
  });

  it('refuses a command outside the trained range and bad settings, naming them', async () => {
    const sim = await compileG1({ timestep: TIMING.simDt });
    try {
      const still = () => new Float64Array(29);
      await assert.rejects(
        replay(sim, still, { command: { forward: 4, lateral: 0, yaw: 0 } }),
        /command\.forward: must be within the trained range \[0, 2\.5\] \(got 4\)/,
      );
      await assert.rejects(replay(sim, still, { command: { forward: 1, lateral: 0, yaw: 0 }, steps: 0 }), /replay\.steps: must be a positive integer/);
      assert.throws(() => filmMp4([], 25), /frames: a film needs at least one frame/);
      assert.match(drawFrame(sim, 1.5), /1\.50 s/);
    } finally {
      sim.dispose();
    }
  });
});
