/**
 * The humanoid's CPU twin on one core: the G1's compile time without its visual meshes, MuJoCo's
 * physics steps per second (reference: 10-12k with the mesh-free model), and the environment's
 * control steps per second (10 physics steps, the observation and the reward terms each) under a
 * random policy, episodes reset as they end. Run alone with `tsx bench/humanoid-physics.ts`, or
 * call `measureHumanoidPhysics()`.
 */
import { pathToFileURL } from 'node:url';
import { G1Env } from '#shared/humanoid/env.ts';
import { compileG1 } from '#shared/humanoid/model.ts';
import { TIMING } from '#shared/humanoid/task.ts';
import { seededRandom } from '#shared/random.ts';

export interface HumanoidPhysicsFigures {
  readonly compileMs: number;
  readonly physicsStepsPerSecond: number;
  readonly controlStepsPerSecond: number;
  readonly episodes: number;
}

export async function measureHumanoidPhysics(seconds = 5): Promise<HumanoidPhysicsFigures> {
  const compileStarted = performance.now();
  const sim = await compileG1({ timestep: TIMING.simDt, keyframe: 'knees_bent' });
  const compileMs = performance.now() - compileStarted;
  try {
    const { mujoco, model, data } = sim;
    // Physics alone: steps from the keyframe, back to it every 2 s of simulated time (it falls).
    let physicsSteps = 0;
    const physicsStarted = performance.now();
    while (performance.now() - physicsStarted < seconds * 1000) {
      for (let i = 0; i < 1000; i++) mujoco.mj_step(model, data);
      physicsSteps += 1000;
      if (data.time > 2) mujoco.mj_resetDataKeyframe(model, data, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY.value, 'knees_bent'));
    }
    const physicsStepsPerSecond = physicsSteps / ((performance.now() - physicsStarted) / 1000);
    // The environment under a random policy (small actions around the keyframe).
    const env = new G1Env(sim, seededRandom(1));
    const policy = seededRandom(2);
    const action = new Float64Array(env.actionSize);
    let controlSteps = 0;
    let episodes = 1;
    env.reset();
    const envStarted = performance.now();
    while (performance.now() - envStarted < seconds * 1000) {
      for (let j = 0; j < action.length; j++) action[j] = 0.3 * (2 * policy() - 1);
      controlSteps += 1;
      if (env.step(action).done) {
        env.reset();
        episodes += 1;
      }
    }
    const controlStepsPerSecond = controlSteps / ((performance.now() - envStarted) / 1000);
    return { compileMs, physicsStepsPerSecond, controlStepsPerSecond, episodes };
  } finally {
    sim.dispose();
  }
}

export function describeHumanoidPhysics(h: HumanoidPhysicsFigures): string {
  return (
    `humanoid CPU twin (one core): G1 compiled in ${h.compileMs.toFixed(0)} ms; ${Math.round(h.physicsStepsPerSecond).toLocaleString('en')} physics steps/s ` +
    `(reference 10-12k); the environment at ${Math.round(h.controlStepsPerSecond).toLocaleString('en')} control steps/s ` +
    `(${Math.round(h.controlStepsPerSecond * Math.round(TIMING.ctrlDt / TIMING.simDt)).toLocaleString('en')} physics steps/s with observations and rewards; ${h.episodes} episodes of a random policy)`
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.log(describeHumanoidPhysics(await measureHumanoidPhysics()));
}
