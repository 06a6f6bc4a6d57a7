/**
 * A stepping gait for ARS to search, built on the balance controller (balance.ts): the linear
 * policy stays linear, and random search moves it only along a few directions that each change
 * the gait as a whole, instead of along all 3,016 weights, where every small step of the balance
 * start kept it standing still (measured: 300 iterations, 0.01 m/s).
 *
 * The gait is a reference for the leg joints, tracked through the controller's own gains. Each of
 * the left leg's six joints follows `a cos(phase) + c sin(phase) + b` radians around the standing
 * pose, in the left foot's gait phase (the observation's phase inputs); the right leg mirrors it
 * half a cycle later (its roll and yaw joints with their signs turned). Tracking means the policy
 * moves each joint's position target by its reference and takes the reference (and its rate of
 * change) off the joint angle and velocity its gains act on, so the controller balances around the
 * moving pose instead of pulling it back to standing. Every term is a sum of observation inputs
 * times numbers, so the gait is a linear policy of the same shape, exported the same way.
 *
 * Beside the references, the velocity terms: the controller's own forward-velocity term read
 * against `vref` times the commanded speed instead of zero, and hip feedback on the pelvis's
 * forward and lateral velocity (the hip pitch as a reference, taken off what the gains see; the
 * hip roll as a plain gain).
 *
 * The start is a march in place: each knee bends 0.3 rad at the top of its foot's swing, with the
 * hip and ankle taking half of it each so the foot stays level. The knee's amplitude is held (the
 * basis leaves it out), so the search cannot settle back into standing still; everything else,
 * including which way the legs swing, is the search's (TRAIN_OBJECTIVES.progress in train-ars.ts
 * says what it looks for).
 */
import { ConfigError } from '../errors.ts';
import type { LinearPolicy } from './ars.ts';
import { ACTIONS, OBSERVATION_LAYOUT, OBSERVATION_SIZE, RESET } from './task.ts';

/** The left leg's joints, in actuator order (the right leg's are the next six). */
export const LEG_JOINTS = ['hipPitch', 'hipRoll', 'hipYaw', 'knee', 'anklePitch', 'ankleRoll'] as const;
/** The right leg's joint mirrors the left's: pitch and knee as they are, roll and yaw with their signs turned. */
const MIRROR = [1, -1, -1, 1, 1, -1] as const;

/** Where each observation group starts. */
const AT = Object.fromEntries(OBSERVATION_LAYOUT.map(([name], i) => [name, OBSERVATION_LAYOUT.slice(0, i).reduce((sum, [, size]) => sum + size, 0)])) as Record<
  (typeof OBSERVATION_LAYOUT)[number][0],
  number
>;
/** The left foot's phase inputs: cos at `phase`, sin two further on ([cos left, cos right, sin left, sin right]). */
const COS_LEFT = AT.phase;
const SIN_LEFT = AT.phase + 2;

/** A gait's numbers (radians, or radians per m/s for the velocity gains). */
export interface GaitParameters {
  /** cos(phase) amplitude of each left-leg joint (LEG_JOINTS order). */
  readonly cos: readonly number[];
  /** sin(phase) amplitude. */
  readonly sin: readonly number[];
  /** Constant offset. */
  readonly offset: readonly number[];
  /** The forward-velocity reference as a share of the commanded speed. */
  readonly velocityReference: number;
  /** Hip pitch reference per m/s of forward velocity above the command (both legs). */
  readonly hipPitchOnSpeed: number;
  /** Hip pitch gain on forward velocity (both legs, a plain gain). */
  readonly hipPitchOnVelocity: number;
  /** Hip roll gain on lateral velocity (both legs, a plain gain). */
  readonly hipRollOnVelocity: number;
}

/** The march the gait start begins from. */
export const MARCH: GaitParameters = {
  cos: [-0.15, 0, 0, 0.3, -0.15, 0],
  sin: [0, 0, 0, 0, 0, 0],
  offset: [0, 0, 0, 0, 0, 0],
  velocityReference: 0,
  hipPitchOnSpeed: 0,
  hipPitchOnVelocity: 0,
  hipRollOnVelocity: 0,
};

/** The parameters ARS searches (each a basis direction), by name; the knee's cos amplitude is held. */
export const GAIT_DIRECTIONS: readonly string[] = [
  ...LEG_JOINTS.filter((j) => j !== 'knee').map((j) => `cos.${j}`),
  ...LEG_JOINTS.map((j) => `sin.${j}`),
  ...LEG_JOINTS.map((j) => `offset.${j}`),
  'velocityReference',
  'hipPitchOnSpeed',
  'hipPitchOnVelocity',
  'hipRollOnVelocity',
];

function unit(name: string): GaitParameters {
  const zeros = () => [0, 0, 0, 0, 0, 0];
  const p = { cos: zeros(), sin: zeros(), offset: zeros(), velocityReference: 0, hipPitchOnSpeed: 0, hipPitchOnVelocity: 0, hipRollOnVelocity: 0 };
  const [group, joint] = name.split('.') as [string, string | undefined];
  if (joint !== undefined) (p[group as 'cos' | 'sin' | 'offset'] as number[])[LEG_JOINTS.indexOf(joint as (typeof LEG_JOINTS)[number])] = 1;
  else (p as Record<string, unknown>)[group] = 1;
  return p;
}

/**
 * The weights a gait adds to the balance policy's (linear in the gait's numbers, so the same
 * function gives the basis). `balance` is the policy the gait is tracked through.
 */
export function gaitDelta(balance: LinearPolicy, gait: GaitParameters): Float64Array {
  const { observationSize: n, actionSize: m, weights, std } = balance;
  if (n !== OBSERVATION_SIZE || m !== ACTIONS.size) throw new ConfigError('policy', `${n} x ${m}`, `must be the task's ${OBSERVATION_SIZE} x ${ACTIONS.size}`);
  const w = (row: number, column: number) => row * (n + 1) + column;
  // Each joint's reference as cos, sin and constant parts; the right leg mirrors the left half a cycle on.
  const cos = new Float64Array(m);
  const sin = new Float64Array(m);
  const offset = new Float64Array(m);
  for (let k = 0; k < LEG_JOINTS.length; k++) {
    cos[k] = gait.cos[k]!;
    sin[k] = gait.sin[k]!;
    offset[k] = gait.offset[k]!;
    // Half a cycle on, cos and sin change sign.
    cos[6 + k] = -MIRROR[k] * gait.cos[k]!;
    sin[6 + k] = -MIRROR[k] * gait.sin[k]!;
    offset[6 + k] = MIRROR[k] * gait.offset[k]!;
  }
  // The hip pitch references on speed: -k (v - command), both legs.
  const onSpeed = new Float64Array(m);
  onSpeed[0] = -gait.hipPitchOnSpeed;
  onSpeed[6] = -gait.hipPitchOnSpeed;
  // The phase's rate (rad/s) at the reset's middle gait frequency: what the references' rate is taken against.
  const omega = 2 * Math.PI * ((RESET.gaitHz[0] + RESET.gaitHz[1]) / 2);
  // Pre-activation units per radian of position target, through tanh's slope at each action's bias.
  const perRadian = Array.from({ length: m }, (_, i) => 1 / (ACTIONS.actionScale * (1 - Math.tanh(weights[w(i, n)]!) ** 2)));
  const delta = new Float64Array(weights.length);
  for (let i = 0; i < m; i++) {
    let c = cos[i]! * perRadian[i]!;
    let s = sin[i]! * perRadian[i]!;
    let b = offset[i]! * perRadian[i]!;
    let velocity = onSpeed[i]! * perRadian[i]!;
    let command = -onSpeed[i]! * perRadian[i]!;
    for (let k = 0; k < m; k++) {
      // What the gains see of the reference: joint angle less it, joint velocity less its rate.
      const angle = weights[w(i, AT.jointPositionOffset + k)]! / std[AT.jointPositionOffset + k]!;
      const rate = weights[w(i, AT.jointVelocity + k)]! / std[AT.jointVelocity + k]!;
      c += -angle * cos[k]! - rate * omega * sin[k]!;
      s += -angle * sin[k]! + rate * omega * cos[k]!;
      b += -angle * offset[k]!;
      velocity += -angle * onSpeed[k]!;
      command += angle * onSpeed[k]!;
    }
    delta[w(i, COS_LEFT)] += c;
    delta[w(i, SIN_LEFT)] += s;
    delta[w(i, n)] += b;
    // Velocity: the hip pitch reference's share, then the controller's own forward term read against the command.
    delta[w(i, AT.linearVelocity)] += velocity * std[AT.linearVelocity]!;
    delta[w(i, AT.command)] += command - (weights[w(i, AT.linearVelocity)]! / std[AT.linearVelocity]!) * gait.velocityReference;
  }
  for (const row of [0, 6]) delta[w(row, AT.linearVelocity)] += gait.hipPitchOnVelocity * perRadian[row]! * std[AT.linearVelocity]!;
  for (const row of [1, 7]) delta[w(row, AT.linearVelocity + 1)] += gait.hipRollOnVelocity * perRadian[row]! * std[AT.linearVelocity + 1]!;
  return delta;
}

/** The gait start: the balance policy marching (MARCH), and the basis ARS searches along (GAIT_DIRECTIONS). */
export function gaitStart(balance: LinearPolicy): { policy: LinearPolicy; basis: Float64Array[] } {
  const march = gaitDelta(balance, MARCH);
  const weights = Float64Array.from(balance.weights, (v, i) => v + march[i]!);
  return {
    policy: { ...balance, weights },
    basis: GAIT_DIRECTIONS.map((name) => gaitDelta(balance, unit(name))),
  };
}
