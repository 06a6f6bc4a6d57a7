/**
 * The vendored G1 in mujoco-js: it compiles without its visual meshes, has the joints and
 * actuators the task expects, starts from its keyframes, steps, and bad model files are refused
 * with the file and the reason.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DOMParser } from 'linkedom';
import { compileG1, G1_DIR, G1_ROBOT, G1_SCENE, stripVisualMeshes } from '#shared/humanoid/model.ts';

function copyModel(edit?: (xml: string) => string): string {
  const dir = mkdtempSync(join(tmpdir(), 'g1-'));
  copyFileSync(join(G1_DIR, G1_SCENE), join(dir, G1_SCENE));
  copyFileSync(join(G1_DIR, 'sensor.xml'), join(dir, 'sensor.xml'));
  const robot = readFileSync(join(G1_DIR, G1_ROBOT), 'utf8');
  writeFileSync(join(dir, G1_ROBOT), edit ? edit(robot) : robot);
  return dir;
}

describe('G1 model', () => {
  it('strips only visual meshes, which weigh nothing and collide with nothing', () => {
    const xml = readFileSync(join(G1_DIR, G1_ROBOT), 'utf8');
    const doc = new DOMParser().parseFromString(xml, 'text/xml');
    // The invariant the stripping rests on, read from the file: visual geoms have density 0, and
    // the model's default geom neither collides nor is collided with (contacts are explicit pairs).
    const visual = doc.querySelector('default[class="visual"] > geom');
    assert.equal(visual?.getAttribute('density'), '0');
    const base = doc.querySelector('default[class="g1"] > geom');
    assert.deepEqual([base?.getAttribute('contype'), base?.getAttribute('conaffinity')], ['0', '0']);
    const meshGeoms = [...doc.querySelectorAll('geom[mesh]')];
    assert.equal(meshGeoms.length, 59);
    assert.ok(meshGeoms.every((g) => g.getAttribute('class') === 'visual'));
    const stripped = stripVisualMeshes(xml, G1_DIR);
    assert.deepEqual(stripped.meshFiles, []);
    assert.doesNotMatch(stripped.xml, /<mesh |mesh="/);
    assert.match(stripped.xml, /<geom name="left_foot" /);
  });

  it('compiles with 29 actuated joints and starts from the knees_bent keyframe', async () => {
    const sim = await compileG1({ timestep: 0.002, keyframe: 'knees_bent' });
    try {
      const { mujoco, model, data } = sim;
      assert.deepEqual([model.nq, model.nv, model.nu], [36, 35, 29]);
      assert.equal(model.opt.timestep, 0.002);
      assert.ok(Math.abs(data.qpos[2] - 0.755) < 1e-6, `pelvis height ${data.qpos[2]}`);
      // The keyframe's controls are its joint positions: the pose the actions are offsets from.
      for (let i = 0; i < model.nu; i++) assert.ok(Math.abs(data.ctrl[i] - data.qpos[7 + i]) < 1e-9, `ctrl ${i}`);
      for (const name of ['left_foot', 'right_foot', 'imu_in_pelvis', 'imu_in_torso']) {
        assert.ok(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE.value, name) >= 0, name);
      }
      // The foot contact sensors: both feet on the floor at rest (a box on a plane: 4 contacts).
      const found = (name: string) => data.sensordata[model.sensor_adr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR.value, name)]!];
      for (let i = 0; i < 50; i++) mujoco.mj_step(model, data);
      assert.ok(found('left_foot_floor_found') > 0 && found('right_foot_floor_found') > 0);
      assert.equal(found('right_foot_left_foot_found'), 0);
      for (let i = 50; i < 500; i++) mujoco.mj_step(model, data);
      assert.ok(Math.abs(data.time - 1.0) < 1e-9);
      for (let i = 0; i < model.nq; i++) assert.ok(Number.isFinite(data.qpos[i]));
      // Held at the keyframe's pose with its PD gains the robot is not statically stable: it
      // sinks within about 2 s (a policy has to balance it).
      assert.ok(data.qpos[2] < 0.755);
    } finally {
      sim.dispose();
    }
  });

  it('refuses a missing file, a colliding mesh without its file, and an unknown keyframe, naming each', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'g1-'));
    const meshy = copyModel((xml) =>
      xml.replace('<geom class="visual" material="black" mesh="pelvis"/>', '<geom class="collision" type="mesh" mesh="pelvis"/>'),
    );
    try {
      await assert.rejects(compileG1({ dir: empty }), new RegExp(`^ConfigError: model: is missing \\(got "${join(empty, G1_SCENE)}"\\)$`));
      await assert.rejects(
        compileG1({ dir: meshy }),
        /model: geom mesh "pelvis" collides and needs its file .*mujoco_menagerie\/unitree_g1\/assets\/pelvis\.STL, which is missing/,
      );
      await assert.rejects(compileG1({ keyframe: 'cartwheel' }), /keyframe: is not a keyframe of scene_mjx_feetonly_flat_terrain\.xml \(got "cartwheel"\)/);
      const broken = copyModel((xml) => xml.replace('<actuator>', '<actuator><position joint="no_such_joint"/>'));
      try {
        await assert.rejects(compileG1({ dir: broken }), /model: MuJoCo could not compile it/);
      } finally {
        rmSync(broken, { recursive: true });
      }
    } finally {
      rmSync(empty, { recursive: true });
      rmSync(meshy, { recursive: true });
    }
  });
});
