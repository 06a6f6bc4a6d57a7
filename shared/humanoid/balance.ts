/**
 * A balance controller for the G1, computed rather than searched: the linear policy ARS starts
 * from, so that random search tunes a robot that already stands instead of looking for balance.
 *
 * The standing pose comes from the task's keyframe: its feet turned flat, then the height and the
 * feet's pitch and roll found by Newton's method so that MuJoCo's inverse dynamics needs no force
 * on the free base (the contacts carry the robot, its centre of pressure under its centre of mass).
 * The joints' inverse-dynamics torques over the actuators' kp give the position targets that hold
 * that pose: the policy's bias. Around that equilibrium, one control step (ten physics steps) is
 * linearised by central differences, and a discrete LQR gain (the Riccati equation, solved by
 * doubling) stabilises it. The gain acts on the full state; the policy sees only its observation,
 * so the gain is carried over through the observation's least-squares inverse: what the policy
 * cannot see (the base's position and heading, which the flat floor makes irrelevant, and its
 * height, which the joints nearly fix) is left out.
 *
 * Measured (bench/humanoid-physics.ts): computed in about 0.5 s on one core; it holds the
 * keyframe start upright for all 500 replay steps.
 */
import { EigenvalueDecomposition, inverse, Matrix, pseudoInverse, solve } from 'ml-matrix';
import { ConfigError } from '../errors.ts';
import { seededRandom } from '../random.ts';
import type { LinearPolicy } from './ars.ts';
import { G1Env } from './env.ts';
import type { G1Sim } from './model.ts';
import { ACTIONS, OBSERVATION_LAYOUT, OBSERVATION_NOISE, OBSERVATION_SIZE, TIMING } from './task.ts';

/** The LQR's costs: per unit of state deviation squared, and per unit of action squared. */
export const BALANCE_COSTS = {
  /** The base's height (m). */
  height: 10,
  /** The base's roll and pitch (rad); its heading and position on the floor cost nothing. */
  tilt: 100,
  /** Each joint's angle from the pose (rad). */
  joint: 1,
  /** The base's linear and angular velocity. */
  baseVelocity: 1,
  /** Each joint's velocity (rad/s). */
  jointVelocity: 0.01,
  /** Each action (in policy units: actionScale rad of position target). */
  action: 1,
} as const;

/**
 * The normaliser the balance policy is written against, per observation group: the task's
 * observation noise scales, where it has them (a change the size of the sensors' noise is one
 * unit), and 1 for the command, the previous action and the phase (which the controller does not read).
 */
export const BALANCE_SCALES: Record<(typeof OBSERVATION_LAYOUT)[number][0], number> = {
  linearVelocity: OBSERVATION_NOISE.linearVelocity,
  gyro: OBSERVATION_NOISE.gyro,
  gravity: OBSERVATION_NOISE.gravity,
  command: 1,
  jointPositionOffset: OBSERVATION_NOISE.jointPosition,
  jointVelocity: OBSERVATION_NOISE.jointVelocity,
  lastAction: 1,
  phase: 1,
};

/** The observation groups the controller reads (the robot's state, not the task's inputs). */
const READ = new Set(['linearVelocity', 'gyro', 'gravity', 'jointPositionOffset', 'jointVelocity']);

export interface BalanceResult {
  readonly policy: LinearPolicy;
  /** The standing pose (qpos, 36). */
  readonly pose: readonly number[];
  /** The largest of the six free-base forces and torques inverse dynamics still needs at that pose (N or N m). */
  readonly residual: number;
  /** The closed loop's spectral radius under the full-state gain (below 1: stable, bar the floor's symmetries at 1). */
  readonly closedLoopRadius: number;
  readonly seconds: number;
}

type Vec = number[];

const quatMul = (a: Vec, b: Vec): Vec => [
  a[0]! * b[0]! - a[1]! * b[1]! - a[2]! * b[2]! - a[3]! * b[3]!,
  a[0]! * b[1]! + a[1]! * b[0]! + a[2]! * b[3]! - a[3]! * b[2]!,
  a[0]! * b[2]! - a[1]! * b[3]! + a[2]! * b[0]! + a[3]! * b[1]!,
  a[0]! * b[3]! + a[1]! * b[2]! - a[2]! * b[1]! + a[3]! * b[0]!,
];

/**
 * The discrete algebraic Riccati equation's solution for (A, B, Q, R) by the structure-preserving
 * doubling algorithm: each round doubles the horizon of the Riccati recursion, so 2^rounds steps.
 */
export function solveDare(A: Matrix, B: Matrix, Q: Matrix, R: Matrix, rounds = 40, tolerance = 1e-10): Matrix {
  const n = A.rows;
  const I = Matrix.eye(n, n);
  let a = A.clone();
  let g = B.mmul(solve(R, B.transpose()));
  let h = Q.clone();
  for (let k = 0; k < rounds; k++) {
    const w = inverse(I.clone().add(g.mmul(h)));
    const aw = a.mmul(w);
    const nextA = aw.mmul(a);
    const nextG = g.clone().add(aw.mmul(g).mmul(a.transpose()));
    const nextH = h.clone().add(a.transpose().mmul(h).mmul(w).mmul(a));
    const change = nextH.clone().sub(h).abs().max();
    a = nextA;
    g = nextG.add(nextG.transpose()).mul(0.5);
    h = nextH.add(nextH.transpose()).mul(0.5);
    if (change <= tolerance * h.clone().abs().max()) break;
  }
  return h;
}

/** The LQR gain K (u = -K x) for (A, B, Q, R). */
export function lqrGain(A: Matrix, B: Matrix, Q: Matrix, R: Matrix): Matrix {
  const P = solveDare(A, B, Q, R);
  const btp = B.transpose().mmul(P);
  return solve(R.clone().add(btp.mmul(B)), btp.mmul(A));
}

/** The spectral radius (largest eigenvalue magnitude) of a square matrix. */
export function spectralRadius(m: Matrix): number {
  const e = new EigenvalueDecomposition(m);
  return Math.max(...e.realEigenvalues.map((re, i) => Math.hypot(re, e.imaginaryEigenvalues[i]!)));
}

/**
 * The balance policy for the twin's model (compiled with the task's timing). The sim's data is
 * left at the standing pose.
 */
export function balancePolicy(sim: G1Sim): BalanceResult {
  const started = performance.now();
  const { mujoco, model, data } = sim;
  const nv = model.nv;
  const nu = model.nu;
  const nx = 2 * nv;
  if (nu !== ACTIONS.size || model.nq !== 7 + nu)
    throw new ConfigError('model', `nu ${nu}, nq ${model.nq}`, `must have ${ACTIONS.size} actuators and a free base`);
  const env = new G1Env(sim, seededRandom(0), { noiseLevel: 0, pushes: false, randomReset: false, command: { forward: 0, lateral: 0, yaw: 0 } });
  const substeps = Math.round(TIMING.ctrlDt / model.opt.timestep);
  const qpos = data.qpos as Float64Array;
  const qvel = data.qvel as Float64Array;
  const name = (type: number, n: string) => {
    const id = mujoco.mj_name2id(model, type, n);
    if (id < 0) throw new ConfigError('model', n, 'is missing (the balance controller needs it)');
    return id;
  };
  const jointIndex = (n: string) => model.jnt_qposadr[name(mujoco.mjtObj.mjOBJ_JOINT.value, n)] - 7;
  const anklePitch = [jointIndex('left_ankle_pitch_joint'), jointIndex('right_ankle_pitch_joint')];
  const ankleRoll = [jointIndex('left_ankle_roll_joint'), jointIndex('right_ankle_roll_joint')];
  const feet = [name(mujoco.mjtObj.mjOBJ_GEOM.value, 'left_foot'), name(mujoco.mjtObj.mjOBJ_GEOM.value, 'right_foot')];
  const kp = Array.from({ length: nu }, (_, i) => (model.actuator_gainprm as Float64Array)[10 * i]!);

  // The keyframe (env.reset without randomness), its feet turned flat on the floor.
  env.reset();
  const key = Float64Array.from(qpos);
  const geomMat = data.geom_xmat as Float64Array;
  const flatPitch = feet.map((g) => Math.atan2(-geomMat[9 * g + 2]!, geomMat[9 * g + 8]!));
  const flatRoll = feet.map((g) => Math.atan2(geomMat[9 * g + 5]!, geomMat[9 * g + 8]!));
  const standing = (p: Vec): Float64Array => {
    const q = Float64Array.from(key);
    q[2] = key[2]! + p[0]!;
    anklePitch.forEach((j, f) => {
      q[7 + j] = key[7 + j]! + flatPitch[f]! + p[2]!;
    });
    ankleRoll.forEach((j, f) => {
      q[7 + j] = key[7 + j]! + flatRoll[f]! + p[1]!;
    });
    return q;
  };
  const inverseAt = (q: Float64Array): Float64Array => {
    qpos.set(q);
    qvel.fill(0);
    (data.qacc as Float64Array).fill(0);
    mujoco.mj_inverse(model, data);
    return Float64Array.from(data.qfrc_inverse as Float64Array);
  };
  // Lowered from 2 cm above the keyframe until the floor carries at least the robot's weight (the
  // base then needs no upward force), then Newton's method on (height, roll, pitch).
  let p: Vec = [0, 0, 0];
  for (let dz = 0.02; dz >= -0.02; dz -= 0.0005) {
    if (inverseAt(standing([dz, 0, 0]))[2]! <= 0) {
      p = [dz, 0, 0];
      break;
    }
  }
  const baseResidual = (x: Vec): Vec => {
    const f = inverseAt(standing(x));
    return [f[2]!, f[3]!, f[4]!];
  };
  for (let it = 0; it < 50; it++) {
    const r0 = baseResidual(p);
    if (Math.max(...r0.map(Math.abs)) < 1e-4) break;
    const J = [0, 1, 2].map(() => [0, 0, 0]);
    for (let k = 0; k < 3; k++) {
      const x = [...p];
      x[k]! += 1e-8;
      const r1 = baseResidual(x);
      for (let i = 0; i < 3; i++) J[i]![k] = (r1[i]! - r0[i]!) / 1e-8;
    }
    const d = solve(new Matrix(J), Matrix.columnVector(r0.map((v) => -v))).to1DArray();
    const scale = Math.min(1, 5e-4 / Math.abs(d[0]!), 5e-4 / Math.max(Math.abs(d[1]!), Math.abs(d[2]!)));
    p = p.map((v, k) => v + scale * d[k]!);
  }
  const q0 = standing(p);
  const hold = inverseAt(q0);
  // All six of the base's forces and torques at the pose found (the floor's friction holds x, y and yaw).
  const residual = Math.max(...Array.from(hold.subarray(0, 6), Math.abs));
  if (!(residual < 1e-2))
    throw new ConfigError('model', `base force ${residual} N`, 'has no standing equilibrium near its keyframe (the balance controller needs one)');
  const pose = env.defaultPose;
  const u0 = Array.from({ length: nu }, (_, j) => (q0[7 + j]! + hold[6 + j]! / kp[j]! - pose[j]!) / ACTIONS.actionScale);
  const beyond = u0.findIndex((u) => Math.abs(u) >= 0.99);
  if (beyond >= 0)
    throw new ConfigError('model', `actuator ${beyond} needs action ${u0[beyond]}`, 'cannot hold the standing pose within the actions (|action| < 1)');

  // The state: base position and rotation (in the base's frame), joint angles, then velocities.
  const setState = (dx: Vec) => {
    qpos.set(q0);
    for (let i = 0; i < 3; i++) qpos[i]! += dx[i]!;
    const w = [dx[3]!, dx[4]!, dx[5]!];
    const angle = Math.hypot(...w);
    const turn = angle < 1e-15 ? [1, w[0]! / 2, w[1]! / 2, w[2]! / 2] : [Math.cos(angle / 2), ...w.map((c) => (Math.sin(angle / 2) * c) / angle)];
    qpos.set(quatMul([q0[3]!, q0[4]!, q0[5]!, q0[6]!], turn), 3);
    for (let j = 0; j < nu; j++) qpos[7 + j] = q0[7 + j]! + dx[6 + j]!;
    for (let i = 0; i < nv; i++) qvel[i] = dx[nv + i]!;
    (data.qacc_warmstart as Float64Array).fill(0);
    (data.qacc as Float64Array).fill(0);
  };
  const getState = (): Vec => {
    const out = new Array<number>(nx).fill(0);
    for (let i = 0; i < 3; i++) out[i] = qpos[i]! - q0[i]!;
    const r = quatMul([q0[3]!, -q0[4]!, -q0[5]!, -q0[6]!], [qpos[3]!, qpos[4]!, qpos[5]!, qpos[6]!]);
    const s = Math.hypot(r[1]!, r[2]!, r[3]!);
    const angle = 2 * Math.atan2(s, r[0]!);
    for (let i = 0; i < 3; i++) out[3 + i] = s < 1e-15 ? 2 * r[1 + i]! : (angle * r[1 + i]!) / s;
    for (let j = 0; j < nu; j++) out[6 + j] = qpos[7 + j]! - q0[7 + j]!;
    for (let i = 0; i < nv; i++) out[nv + i] = qvel[i]!;
    return out;
  };
  const ctrl = data.ctrl as Float64Array;
  const controlStep = (dx: Vec, du: Vec): Vec => {
    setState(dx);
    for (let j = 0; j < nu; j++) ctrl[j] = pose[j]! + ACTIONS.actionScale * (u0[j]! + du[j]!);
    for (let k = 0; k < substeps; k++) mujoco.mj_step(model, data);
    return getState();
  };
  const eps = 1e-5;
  const zx = new Array<number>(nx).fill(0);
  const zu = new Array<number>(nu).fill(0);
  const A = new Matrix(nx, nx);
  const B = new Matrix(nx, nu);
  const column = (target: Matrix, k: number, f: (sign: number) => Vec) => {
    const plus = f(1);
    const minus = f(-1);
    for (let i = 0; i < nx; i++) target.set(i, k, (plus[i]! - minus[i]!) / (2 * eps));
  };
  for (let k = 0; k < nx; k++)
    column(A, k, (sign) =>
      controlStep(
        zx.map((_, i) => (i === k ? sign * eps : 0)),
        zu,
      ),
    );
  for (let k = 0; k < nu; k++)
    column(B, k, (sign) =>
      controlStep(
        zx,
        zu.map((_, i) => (i === k ? sign * eps : 0)),
      ),
    );

  const c = BALANCE_COSTS;
  const q = new Array<number>(nx).fill(0);
  q[2] = c.height;
  q[3] = c.tilt;
  q[4] = c.tilt;
  for (let j = 0; j < nu; j++) q[6 + j] = c.joint;
  for (let i = 0; i < 6; i++) q[nv + i] = c.baseVelocity;
  for (let j = 0; j < nu; j++) q[nv + 6 + j] = c.jointVelocity;
  const K = lqrGain(A, B, Matrix.diag(q), Matrix.eye(nu, nu).mul(c.action));
  const closedLoopRadius = spectralRadius(A.clone().sub(B.mmul(K)));

  // The observation's derivative in the state (the components the controller reads).
  const groups: { name: string; start: number; size: number }[] = [];
  let start = 0;
  for (const [group, size] of OBSERVATION_LAYOUT) {
    groups.push({ name: group, start, size });
    start += size;
  }
  const read = groups.filter((g) => READ.has(g.name)).flatMap((g) => Array.from({ length: g.size }, (_, i) => g.start + i));
  const snapshot = env.snapshot();
  const observeAt = (dx: Vec) => {
    setState(dx);
    return env.restore({ ...snapshot, qpos: Array.from(qpos), qvel: Array.from(qvel) });
  };
  const C = new Matrix(read.length, nx);
  for (let k = 0; k < nx; k++) {
    const plus = observeAt(zx.map((_, i) => (i === k ? eps : 0)));
    const minus = observeAt(zx.map((_, i) => (i === k ? -eps : 0)));
    for (const [i, o] of read.entries()) C.set(i, k, (plus[o]! - minus[o]!) / (2 * eps));
  }
  const observation0 = observeAt(zx);
  const gain = K.mul(-1).mmul(pseudoInverse(C));

  // As the trainer's policy: action = tanh(bias + W (obs - mean) / std), linear about u0.
  const mean = new Float64Array(OBSERVATION_SIZE);
  const std = new Float64Array(OBSERVATION_SIZE).fill(1);
  for (const g of groups) for (let i = 0; i < g.size; i++) std[g.start + i] = BALANCE_SCALES[g.name as keyof typeof BALANCE_SCALES];
  for (const o of read) mean[o] = observation0[o]!;
  const n = OBSERVATION_SIZE;
  const weights = new Float64Array((n + 1) * nu);
  for (let j = 0; j < nu; j++) {
    // tanh's slope at the bias atanh(u0).
    const slope = 1 - u0[j]! ** 2;
    read.forEach((o, i) => {
      weights[j * (n + 1) + o] = (gain.get(j, i) * std[o]!) / slope;
    });
    weights[j * (n + 1) + n] = Math.atanh(u0[j]!);
  }
  setState(zx);
  mujoco.mj_forward(model, data);
  return {
    policy: { observationSize: n, actionSize: nu, weights, mean, std },
    pose: Array.from(q0),
    residual,
    closedLoopRadius,
    seconds: (performance.now() - started) / 1000,
  };
}
