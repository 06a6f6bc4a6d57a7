/**
 * The CPU twin of the G1 joystick task: task.ts's spec over mujoco-js, step for step as upstream
 * computes it (UPSTREAM.md): the observation after an action carries the previous action, the
 * phase before this step's advance and the command before any resample; the reward is the sum
 * of weight x term, times ctrlDt, unclipped; first contacts are judged from the air time before
 * this step; the air time grows before the reward and is cleared on contact after it.
 *
 * Instability counts as NaN: MuJoCo resets a simulation whose state blows up (it prints a warning,
 * counts it, and starts over from the model's initial state) instead of returning NaN, so a step
 * during which that count grew, or whose state holds a non-finite number, ends the episode
 * (`unstable`), and its reward terms are 0 but termination's.
 */
import { ConfigError } from '../errors.ts';
import type { Random } from '../random.ts';
import type { G1Sim } from './model.ts';
import { ACTIONS, COMMANDS, type Command, OBSERVATION_NOISE, OBSERVATION_SIZE, PUSHES, REWARD_SETTINGS, REWARD_WEIGHTS, RESET, TIMING } from './task.ts';

export type RewardTerm = keyof typeof REWARD_WEIGHTS;

export interface EnvOptions {
  /** Observation noise, multiplying OBSERVATION_NOISE (upstream's noise level: 1). */
  readonly noiseLevel?: number;
  /** Upstream's pushes (true while training). */
  readonly pushes?: boolean;
  /** Upstream's randomised reset (true while training); false starts from the keyframe, facing +x. */
  readonly randomReset?: boolean;
  /** A fixed command instead of sampled ones (replays); it must lie within COMMANDS. */
  readonly command?: Command;
  /**
   * Added to every step's reward while the episode goes on (times ctrlDt, like the terms). Not
   * upstream's (0 there): a trainer that finds falling early pays under upstream's costs may set it.
   */
  readonly survivalBonus?: number;
}

/** What G1Env.snapshot returns: qpos (36), qvel (35) and upstream's `info` fields. */
export interface EnvSnapshot {
  readonly qpos: readonly number[];
  readonly qvel: readonly number[];
  readonly command: readonly number[];
  readonly phase: readonly number[];
  readonly phaseDt: number;
  readonly stepCount: number;
  readonly lastAction: readonly number[];
  readonly feetAirTime: readonly number[];
  readonly lastContact: readonly boolean[];
}

export interface StepResult {
  readonly observation: Float64Array;
  readonly reward: number;
  readonly done: boolean;
  /** Why it ended, if it did. */
  readonly ended: 'upside-down' | 'feet-touch' | 'unstable' | null;
  /** Each term before its weight (the reward is the sum of weight x term, times ctrlDt). */
  readonly terms: Readonly<Record<RewardTerm, number>>;
}

const SENSORS = [
  'local_linvel_pelvis',
  'gyro_pelvis',
  'upvector_torso',
  'global_linvel_pelvis',
  'global_angvel_pelvis',
  'global_angvel_torso',
  'left_foot_floor_found',
  'right_foot_floor_found',
  'right_foot_left_foot_found',
  'left_foot_right_shin_found',
  'right_foot_left_shin_found',
  'left_hand_left_thigh_found',
  'right_hand_right_thigh_found',
  'left_foot_force',
  'right_foot_force',
] as const;
type Sensor = (typeof SENSORS)[number];

/** The command a replay asks for, refused (named) outside the trained ranges. */
export function checkCommand(command: Command, field = 'command'): Command {
  for (const axis of ['forward', 'lateral', 'yaw'] as const) {
    const [low, high] = COMMANDS[axis];
    const value = command[axis];
    if (!Number.isFinite(value) || value < low || value > high) {
      throw new ConfigError(`${field}.${axis}`, value, `must be within the trained range [${low}, ${high}]`);
    }
  }
  return command;
}

/** A uniform draw in [low, high). */
const uniform = (random: Random, low: number, high: number) => low + (high - low) * random();

export class G1Env {
  readonly observationSize = OBSERVATION_SIZE;
  readonly actionSize = ACTIONS.size;
  private readonly noiseLevel: number;
  private readonly pushes: boolean;
  private readonly randomReset: boolean;
  private readonly fixedCommand: Command | undefined;
  private readonly survivalBonus: number;
  private readonly sensorAdr = {} as Record<Sensor, number>;
  private readonly keyQpos: Float64Array;
  readonly defaultPose: Float64Array;
  private readonly softLow: Float64Array;
  private readonly softHigh: Float64Array;
  private readonly siteImuPelvis: number;
  private readonly siteFeet: readonly [number, number];
  private readonly knees: readonly number[];
  /** Left hip roll, left hip yaw, right hip roll, right hip yaw (joint indices, 0-28). */
  private readonly hips: readonly number[];
  private readonly substeps: number;
  // Upstream's `info`.
  command: [number, number, number] = [0, 0, 0];
  private phase: [number, number] = [0, Math.PI];
  private phaseDt = 0;
  private stepCount = 0;
  private pushStep = 0;
  private pushIntervalSteps = 1;
  private lastAction = new Float64Array(ACTIONS.size);
  private feetAirTime: [number, number] = [0, 0];
  private lastContact: [boolean, boolean] = [false, false];

  constructor(
    readonly sim: G1Sim,
    private readonly random: Random,
    options: EnvOptions = {},
  ) {
    const { mujoco, model } = sim;
    this.noiseLevel = options.noiseLevel ?? 1;
    this.pushes = options.pushes ?? true;
    this.randomReset = options.randomReset ?? true;
    this.fixedCommand = options.command ? checkCommand(options.command) : undefined;
    this.survivalBonus = options.survivalBonus ?? 0;
    if (!Number.isFinite(this.survivalBonus) || this.survivalBonus < 0) throw new ConfigError('survivalBonus', this.survivalBonus, 'must be a number >= 0');
    if (model.nu !== ACTIONS.size || model.nq !== 7 + ACTIONS.size) {
      throw new ConfigError('model', `nu ${model.nu}, nq ${model.nq}`, `must have ${ACTIONS.size} actuators and a free base (nq ${7 + ACTIONS.size})`);
    }
    const id = (type: number, name: string, what: string) => {
      const found = mujoco.mj_name2id(model, type, name);
      if (found < 0) throw new ConfigError('model', name, `has no ${what} of that name`);
      return found;
    };
    for (const name of SENSORS) this.sensorAdr[name] = model.sensor_adr[id(mujoco.mjtObj.mjOBJ_SENSOR.value, name, 'sensor')];
    this.siteImuPelvis = id(mujoco.mjtObj.mjOBJ_SITE.value, 'imu_in_pelvis', 'site');
    this.siteFeet = [id(mujoco.mjtObj.mjOBJ_SITE.value, 'left_foot', 'site'), id(mujoco.mjtObj.mjOBJ_SITE.value, 'right_foot', 'site')];
    const joint = (name: string) => model.jnt_qposadr[id(mujoco.mjtObj.mjOBJ_JOINT.value, name, 'joint')] - 7;
    this.knees = [joint('left_knee_joint'), joint('right_knee_joint')];
    this.hips = [joint('left_hip_roll_joint'), joint('left_hip_yaw_joint'), joint('right_hip_roll_joint'), joint('right_hip_yaw_joint')];
    const key = id(mujoco.mjtObj.mjOBJ_KEY.value, ACTIONS.keyframe, 'keyframe');
    const keyQpos = model.key_qpos as Float64Array;
    this.keyQpos = Float64Array.from(keyQpos.subarray(key * model.nq, (key + 1) * model.nq));
    this.defaultPose = this.keyQpos.slice(7);
    // Soft joint limits over the 29 hinges (joint 0 is the free base), factor 0.95 as upstream.
    const range = model.jnt_range as Float64Array;
    this.softLow = new Float64Array(ACTIONS.size);
    this.softHigh = new Float64Array(ACTIONS.size);
    for (let j = 0; j < ACTIONS.size; j++) {
      const [low, high] = [range[2 * (j + 1)]!, range[2 * (j + 1) + 1]!];
      const middle = (low + high) / 2;
      const half = 0.5 * (high - low) * 0.95;
      this.softLow[j] = middle - half;
      this.softHigh[j] = middle + half;
    }
    this.substeps = Math.round(TIMING.ctrlDt / model.opt.timestep);
    if (Math.abs(this.substeps * model.opt.timestep - TIMING.ctrlDt) > 1e-9) {
      throw new ConfigError('model.opt.timestep', model.opt.timestep, `must divide the control step ${TIMING.ctrlDt} s`);
    }
  }

  private sensor(name: Sensor, index = 0): number {
    return this.sim.data.sensordata[this.sensorAdr[name] + index];
  }

  private sampleCommand(): [number, number, number] {
    if (this.fixedCommand) return [this.fixedCommand.forward, this.fixedCommand.lateral, this.fixedCommand.yaw];
    const r = this.random;
    const command: [number, number, number] = [uniform(r, ...COMMANDS.forward), uniform(r, ...COMMANDS.lateral), uniform(r, ...COMMANDS.yaw)];
    return r() < COMMANDS.zeroShare ? [0, 0, 0] : command;
  }

  /** Starts an episode; returns its first observation. */
  reset(): Float64Array {
    const { mujoco, model, data } = this.sim;
    const r = this.random;
    mujoco.mj_resetData(model, data);
    const qpos = data.qpos as Float64Array;
    const qvel = data.qvel as Float64Array;
    qpos.set(this.keyQpos);
    if (this.randomReset) {
      qpos[0] += uniform(r, -RESET.xy, RESET.xy);
      qpos[1] += uniform(r, -RESET.xy, RESET.xy);
      // The keyframe's orientation turned about z by the yaw: q * (cos(yaw/2), 0, 0, sin(yaw/2)).
      const yaw = uniform(r, -RESET.yaw, RESET.yaw);
      const [c, s] = [Math.cos(yaw / 2), Math.sin(yaw / 2)];
      const [w, x, y, z] = [qpos[3]!, qpos[4]!, qpos[5]!, qpos[6]!];
      qpos.set([w * c - z * s, x * c + y * s, y * c - x * s, z * c + w * s], 3);
      for (let j = 7; j < model.nq; j++) qpos[j] *= uniform(r, RESET.jointScale[0], RESET.jointScale[1]);
      for (let j = 0; j < 6; j++) qvel[j] = uniform(r, -RESET.baseVelocity, RESET.baseVelocity);
    }
    (data.ctrl as Float64Array).set(qpos.subarray(7));
    mujoco.mj_forward(model, data);
    const gaitHz = this.randomReset ? uniform(r, RESET.gaitHz[0], RESET.gaitHz[1]) : (RESET.gaitHz[0] + RESET.gaitHz[1]) / 2;
    this.phaseDt = 2 * Math.PI * TIMING.ctrlDt * gaitHz;
    this.phase = [0, Math.PI];
    this.command = this.sampleCommand();
    this.pushIntervalSteps = Math.round(uniform(r, PUSHES.intervalSeconds[0], PUSHES.intervalSeconds[1]) / TIMING.ctrlDt);
    this.stepCount = 0;
    this.pushStep = 0;
    this.lastAction = new Float64Array(ACTIONS.size);
    this.feetAirTime = [0, 0];
    this.lastContact = [false, false];
    return this.observe();
  }

  /** The simulation's state and upstream's `info` between steps: what a test vector starts from. */
  snapshot(): EnvSnapshot {
    const { data } = this.sim;
    return {
      qpos: Array.from(data.qpos as Float64Array),
      qvel: Array.from(data.qvel as Float64Array),
      command: [...this.command],
      phase: [...this.phase],
      phaseDt: this.phaseDt,
      stepCount: this.stepCount,
      lastAction: Array.from(this.lastAction),
      feetAirTime: [...this.feetAirTime],
      lastContact: [...this.lastContact],
    };
  }

  /**
   * Starts from a snapshot in fresh data (solver warm start zero, as a new MJX state has): the
   * same step from the same snapshot is what both implementations compute. Pushes are off after it.
   */
  restore(s: EnvSnapshot): Float64Array {
    const { mujoco, model, data } = this.sim;
    mujoco.mj_resetData(model, data);
    (data.qpos as Float64Array).set(s.qpos);
    (data.qvel as Float64Array).set(s.qvel);
    mujoco.mj_forward(model, data);
    this.command = [s.command[0]!, s.command[1]!, s.command[2]!];
    this.phase = [s.phase[0]!, s.phase[1]!];
    this.phaseDt = s.phaseDt;
    this.stepCount = s.stepCount;
    this.pushStep = 0;
    this.pushIntervalSteps = Number.MAX_SAFE_INTEGER;
    this.lastAction = Float64Array.from(s.lastAction);
    this.feetAirTime = [s.feetAirTime[0]!, s.feetAirTime[1]!];
    this.lastContact = [s.lastContact[0]!, s.lastContact[1]!];
    return this.observe();
  }

  /** The `state` observation (task.ts OBSERVATION_LAYOUT), noisy by noiseLevel. */
  private observe(): Float64Array {
    const { data } = this.sim;
    const r = this.random;
    const noise = (scale: number) => (this.noiseLevel ? (2 * r() - 1) * this.noiseLevel * scale : 0);
    const out = new Float64Array(OBSERVATION_SIZE);
    const qpos = data.qpos as Float64Array;
    const qvel = data.qvel as Float64Array;
    const xmat = data.site_xmat as Float64Array;
    const m = 9 * this.siteImuPelvis;
    // Upstream draws its noise in this order: gyro, gravity, joint angles, joint velocities, linear velocity.
    for (let i = 0; i < 3; i++) out[3 + i] = this.sensor('gyro_pelvis', i) + noise(OBSERVATION_NOISE.gyro);
    // Gravity in the IMU's frame: R^T (0, 0, -1), minus the third row of the row-major R.
    for (let i = 0; i < 3; i++) out[6 + i] = -xmat[m + 6 + i]! + noise(OBSERVATION_NOISE.gravity);
    out.set(this.command, 9);
    for (let j = 0; j < ACTIONS.size; j++) out[12 + j] = qpos[7 + j]! + noise(OBSERVATION_NOISE.jointPosition) - this.defaultPose[j]!;
    for (let j = 0; j < ACTIONS.size; j++) out[41 + j] = qvel[6 + j]! + noise(OBSERVATION_NOISE.jointVelocity);
    for (let i = 0; i < 3; i++) out[i] = this.sensor('local_linvel_pelvis', i) + noise(OBSERVATION_NOISE.linearVelocity);
    out.set(this.lastAction, 70);
    out.set([Math.cos(this.phase[0]), Math.cos(this.phase[1]), Math.sin(this.phase[0]), Math.sin(this.phase[1])], 99);
    return out;
  }

  /** One control step: the action (29 numbers, in (-1, 1) from a tanh policy) as position targets. */
  step(action: ArrayLike<number>): StepResult {
    const { mujoco, model, data } = this.sim;
    if (action.length !== ACTIONS.size) throw new ConfigError('action', action.length, `must have ${ACTIONS.size} numbers`);
    const r = this.random;
    const qvel = data.qvel as Float64Array;
    // Pushes: a kick to the base's horizontal velocity every pushIntervalSteps (drawn every step, as upstream).
    const theta = uniform(r, 0, 2 * Math.PI);
    const magnitude = uniform(r, PUSHES.magnitude[0], PUSHES.magnitude[1]);
    if (this.pushes && (this.pushStep + 1) % this.pushIntervalSteps === 0) {
      qvel[0] += Math.cos(theta) * magnitude;
      qvel[1] += Math.sin(theta) * magnitude;
    }
    const ctrl = data.ctrl as Float64Array;
    for (let j = 0; j < ACTIONS.size; j++) ctrl[j] = this.defaultPose[j]! + action[j]! * ACTIONS.actionScale;
    const warned = this.instabilityWarnings();
    for (let i = 0; i < this.substeps; i++) mujoco.mj_step(model, data);
    const qpos = data.qpos as Float64Array;
    let unstable = this.instabilityWarnings() !== warned;
    for (let i = 0; i < model.nq && !unstable; i++) unstable = !Number.isFinite(qpos[i]!);
    for (let i = 0; i < model.nv && !unstable; i++) unstable = !Number.isFinite(qvel[i]!);

    const contact: [boolean, boolean] = [this.sensor('left_foot_floor_found') > 0, this.sensor('right_foot_floor_found') > 0];
    const firstContact = [0, 1].map((f) => this.feetAirTime[f]! > 0 && (contact[f] || this.lastContact[f]));
    this.feetAirTime = [this.feetAirTime[0] + TIMING.ctrlDt, this.feetAirTime[1] + TIMING.ctrlDt];
    const observation = this.observe();
    const upsideDown = this.sensor('upvector_torso', 2) < 0;
    const feetTouch =
      this.sensor('right_foot_left_foot_found') > 0 || this.sensor('left_foot_right_shin_found') > 0 || this.sensor('right_foot_left_shin_found') > 0;
    const ended = unstable ? 'unstable' : upsideDown ? 'upside-down' : feetTouch ? 'feet-touch' : null;
    const terms = unstable ? zeroTerms() : this.rewardTerms(contact, firstContact);
    terms.termination = ended ? 1 : 0;
    let reward = 0;
    for (const term of Object.keys(REWARD_WEIGHTS) as RewardTerm[]) reward += REWARD_WEIGHTS[term] * terms[term];
    if (!ended) reward += this.survivalBonus;
    reward *= TIMING.ctrlDt;

    // Upstream's bookkeeping after the reward.
    this.stepCount += 1;
    this.pushStep += 1;
    this.phase = this.phase.map((p) => mod(p + this.phaseDt + Math.PI, 2 * Math.PI) - Math.PI) as [number, number];
    this.lastAction = Float64Array.from(action);
    if (this.stepCount > COMMANDS.resampleAfterSteps) this.command = this.sampleCommand();
    if (ended || this.stepCount > COMMANDS.resampleAfterSteps) this.stepCount = 0;
    this.feetAirTime = [contact[0] ? 0 : this.feetAirTime[0], contact[1] ? 0 : this.feetAirTime[1]];
    this.lastContact = contact;
    return { observation, reward, done: ended !== null, ended, terms };
  }

  /** MuJoCo's count of bad-position, bad-velocity and bad-acceleration warnings: each one a reset of the simulation. */
  private instabilityWarnings(): number {
    const { mujoco, data } = this.sim;
    const warnings = data.warning;
    let count = 0;
    for (const kind of [mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL, mujoco.mjtWarning.mjWARN_BADQACC]) {
      const stat = warnings.get(kind.value);
      count += stat?.number ?? 0;
      stat?.delete();
    }
    warnings.delete();
    return count;
  }

  private rewardTerms(contact: [boolean, boolean], firstContact: boolean[]): Record<RewardTerm, number> {
    const { data } = this.sim;
    const qpos = data.qpos as Float64Array;
    const [cx, cy, cyaw] = this.command;
    const sigma = REWARD_SETTINGS.trackingSigma;
    const q = (j: number) => qpos[7 + j]! - this.defaultPose[j]!;
    const commandNorm = Math.hypot(cx, cy, cyaw);
    const pelvisSpeed = Math.hypot(this.sensor('global_linvel_pelvis', 0), this.sensor('global_linvel_pelvis', 1));

    let airTime = 0;
    for (const f of [0, 1]) airTime += Math.min((this.feetAirTime[f]! - 0.2) * (firstContact[f] ? 1 : 0), 0.5 - 0.2);

    // feet_phase: each foot's height against a Bezier swing arc peaking at swingHeight at phase 0.
    const xpos = data.site_xpos as Float64Array;
    let phaseError = 0;
    for (const f of [0, 1]) {
      const x = (this.phase[f]! + Math.PI) / (2 * Math.PI);
      const bezier = (t: number) => t ** 3 + 3 * t ** 2 * (1 - t);
      const target = x <= 0.5 ? REWARD_SETTINGS.swingHeight * bezier(2 * x) : REWARD_SETTINGS.swingHeight * (1 - bezier(2 * x - 1));
      phaseError += (xpos[3 * this.siteFeet[f]! + 2]! - target) ** 2;
    }
    const moving = pelvisSpeed > 0.1 || Math.abs(this.sensor('global_angvel_pelvis', 2)) > 0.1 || commandNorm > 0.01;

    const up = [0, 1, 2].map((i) => this.sensor('upvector_torso', i));
    let deviation = 0;
    let pose = 0;
    let limits = 0;
    for (let j = 0; j < ACTIONS.size; j++) {
      deviation += Math.abs(q(j));
      pose += q(j) ** 2;
      const angle = qpos[7 + j]!;
      limits += Math.max(this.softLow[j]! - angle, 0) + Math.max(angle - this.softHigh[j]!, 0);
    }
    const hipWeights = cy > 0.1 ? [0, 1, 0, 1] : [1, 1, 1, 1];
    return {
      trackingLinVel: Math.exp(-((cx - this.sensor('local_linvel_pelvis', 0)) ** 2 + (cy - this.sensor('local_linvel_pelvis', 1)) ** 2) / sigma),
      trackingAngVel: Math.exp(-((cyaw - this.sensor('gyro_pelvis', 2)) ** 2) / sigma),
      feetAirTime: airTime,
      feetPhase: moving ? Math.exp(-phaseError / 0.01) : 0,
      orientation: (up[0]! - 0.073) ** 2 + up[1]! ** 2 + (up[2]! - 1) ** 2,
      angVelXy: this.sensor('global_angvel_torso', 0) ** 2 + this.sensor('global_angvel_torso', 1) ** 2,
      feetSlip: pelvisSpeed * ((contact[0] ? 1 : 0) + (contact[1] ? 1 : 0)),
      collision: this.sensor('left_hand_left_thigh_found') > 0 || this.sensor('right_hand_right_thigh_found') > 0 ? 1 : 0,
      contactForce:
        Math.max(Math.abs(this.sensor('left_foot_force', 2)) - REWARD_SETTINGS.maxContactForce, 0) +
        Math.max(Math.abs(this.sensor('right_foot_force', 2)) - REWARD_SETTINGS.maxContactForce, 0),
      standStill: commandNorm < 0.01 ? deviation : 0,
      knee: this.knees.reduce((sum, j) => sum + Math.abs(q(j)), 0),
      hip: this.hips.reduce((sum, j, i) => sum + Math.abs(q(j)) * hipWeights[i]!, 0),
      dofPosLimits: limits,
      pose,
      termination: 0,
    };
  }
}

function zeroTerms(): Record<RewardTerm, number> {
  return Object.fromEntries(Object.keys(REWARD_WEIGHTS).map((k) => [k, 0])) as Record<RewardTerm, number>;
}

/** x mod m in [0, m) (JavaScript's % keeps the sign of x; upstream's fmod is applied to positives here). */
function mod(x: number, m: number): number {
  return ((x % m) + m) % m;
}
