/**
 * The humanoid's CPU twin on one core: the G1's compile time without its visual meshes, MuJoCo's
 * physics steps per second (reference: 10-12k with the mesh-free model), and the environment's
 * control steps per second (10 physics steps, the observation and the reward terms each) under a
 * random policy, episodes reset as they end; then the balance controller ARS starts from
 * (balance.ts): the seconds to compute it, its equilibrium's residual force, the closed loop's
 * spectral radius, and the steps it stands (of 500, at 0.5 m/s, 4 seeds each) in the trainer's
 * default episodes and with each of upstream's harder settings. Run alone with
 * `tsx bench/humanoid-physics.ts`, or call `measureHumanoidPhysics()`.
 */
import { pathToFileURL } from 'node:url';
import { balancePolicy } from '#shared/humanoid/balance.ts';
import { type EnvOptions, G1Env } from '#shared/humanoid/env.ts';
import { compileG1 } from '#shared/humanoid/model.ts';
import { rollout } from '#shared/humanoid/rollouts.ts';
import { TIMING } from '#shared/humanoid/task.ts';
import { seededRandom } from '#shared/random.ts';

export interface HumanoidPhysicsFigures {
  readonly compileMs: number;
  readonly physicsStepsPerSecond: number;
  readonly controlStepsPerSecond: number;
  readonly episodes: number;
  readonly balance: {
    readonly seconds: number;
    readonly residualNewtons: number;
    readonly closedLoopRadius: number;
    /** Steps upright of 500 at 0.5 m/s, per setting, one per seed. */
    readonly standing: Readonly<Record<string, readonly number[]>>;
  };
}

/** Upstream's harder episode settings, one at a time, against the trainer's defaults (the first). */
const BALANCE_SETTINGS: Record<string, EnvOptions> = {
  'default episodes': { noiseLevel: 0, pushes: false, randomReset: false },
  'with pushes': { noiseLevel: 0, pushes: true, randomReset: false },
  'with random resets': { noiseLevel: 0, pushes: false, randomReset: true },
  'with observation noise': { noiseLevel: 1, pushes: false, randomReset: false },
};

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
    const controller = balancePolicy(sim);
    const { weights, mean, std } = controller.policy;
    const standing = Object.fromEntries(
      Object.entries(BALANCE_SETTINGS).map(([name, options]) => [
        name,
        [0, 1, 2, 3].map(
          (seed) =>
            rollout(sim, { weights, mean, std, seed, steps: TIMING.replaySteps, env: { ...options, command: { forward: 0.5, lateral: 0, yaw: 0 } } }).steps,
        ),
      ]),
    );
    return {
      compileMs,
      physicsStepsPerSecond,
      controlStepsPerSecond,
      episodes,
      balance: { seconds: controller.seconds, residualNewtons: controller.residual, closedLoopRadius: controller.closedLoopRadius, standing },
    };
  } finally {
    sim.dispose();
  }
}

export function describeHumanoidPhysics(h: HumanoidPhysicsFigures): string {
  return (
    `humanoid CPU twin (one core): G1 compiled in ${h.compileMs.toFixed(0)} ms; ${Math.round(h.physicsStepsPerSecond).toLocaleString('en')} physics steps/s ` +
    `(reference 10-12k); the environment at ${Math.round(h.controlStepsPerSecond).toLocaleString('en')} control steps/s ` +
    `(${Math.round(h.controlStepsPerSecond * Math.round(TIMING.ctrlDt / TIMING.simDt)).toLocaleString('en')} physics steps/s with observations and rewards; ${h.episodes} episodes of a random policy)\n` +
    `  balance controller: computed in ${h.balance.seconds.toFixed(2)} s, equilibrium residual ${h.balance.residualNewtons.toExponential(1)} N, closed-loop spectral radius ${h.balance.closedLoopRadius.toFixed(6)}; ` +
    `steps upright of ${TIMING.replaySteps} at 0.5 m/s (4 seeds): ${Object.entries(h.balance.standing)
      .map(([name, steps]) => `${name} ${steps.join('/')}`)
      .join(', ')}`
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.log(describeHumanoidPhysics(await measureHumanoidPhysics()));
}
