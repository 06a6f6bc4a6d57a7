/**
 * The G1 joystick locomotion task, written once: what the GPU job (JAX, MuJoCo MJX) and the CPU
 * twin (TypeScript, mujoco-js) both implement, and what the report lists against upstream.
 *
 * Upstream is MuJoCo Playground's G1 joystick task (google-deepmind/mujoco_playground at d5e6b47,
 * mujoco_playground/_src/locomotion/g1/joystick.py; its rewards and PPO settings unchanged since
 * 046a38f), described term by term in UPSTREAM.md beside this file, and its model, vendored in
 * g1/. This task differs from it in the ways `UPSTREAM_DIFFERENCES` lists, every one of them; the
 * report prints that list.
 */

/** Timing: 10 physics steps per control step. */
export const TIMING = {
  /** Seconds per control step (the policy runs at 50 Hz). */
  ctrlDt: 0.02,
  /** Seconds per physics step (the model file says 0.004; the task sets 0.002, as upstream). */
  simDt: 0.002,
  /** Control steps per training episode (20 s). */
  episodeSteps: 1_000,
  /** Control steps per replay (10 s), the steps "upright for all 500 steps" counts. */
  replaySteps: 500,
} as const;

/** Actions: position targets around the keyframe's pose, `ctrl = pose + actionScale * action`. */
export const ACTIONS = {
  keyframe: 'knees_bent',
  actionScale: 0.5,
  /** Actuated joints (29), in the model's actuator order. */
  size: 29,
} as const;

/** A velocity command in the robot's heading frame: forward (m/s), lateral (m/s), yaw rate (rad/s). */
export interface Command {
  readonly forward: number;
  readonly lateral: number;
  readonly yaw: number;
}

/**
 * The commands trained on, in the pelvis frame, sampled uniformly in each range at reset and again
 * once more than `resampleAfterSteps` control steps have passed (every 501 steps, as upstream);
 * `zeroShare` of them are zero (stand still). A replay's command must lie in these ranges.
 */
export const COMMANDS = {
  forward: [0, 2.5],
  lateral: [-0.25, 0.25],
  yaw: [-0.5, 0.5],
  zeroShare: 0.1,
  resampleAfterSteps: 500,
} as const satisfies Record<'forward' | 'lateral' | 'yaw', readonly [number, number]> & Record<string, unknown>;

/** Upstream's command ranges, for the list of differences. */
export const UPSTREAM_COMMANDS = { forward: [-1, 1], lateral: [-0.5, 0.5], yaw: [-1, 1] } as const;

/**
 * Reward weights (each term is multiplied by its weight and by ctrlDt). Upstream's where not in
 * UPSTREAM_DIFFERENCES; the nine upstream terms with weight 0 are left out.
 */
export const REWARD_WEIGHTS = {
  // Tracking: exp(-error^2 / trackingSigma).
  trackingLinVel: 1.5,
  trackingAngVel: 0.75,
  // Gait.
  feetAirTime: 2.5,
  feetPhase: 1.0,
  // Posture.
  orientation: -2.0,
  angVelXy: -0.15,
  // Contacts.
  feetSlip: -0.25,
  collision: -0.1,
  contactForce: -0.01,
  // Pose.
  standStill: -1.0,
  knee: -0.1,
  hip: -0.25,
  dofPosLimits: -1.0,
  pose: -0.1,
  termination: -100.0,
} as const;

export const UPSTREAM_REWARD_WEIGHTS = { ...REWARD_WEIGHTS, trackingLinVel: 1.0, feetAirTime: 2.0 } as const;

/** Each reward term's name in upstream's config (and so in the report). */
export const REWARD_TERM_NAMES: Record<keyof typeof REWARD_WEIGHTS, string> = {
  trackingLinVel: 'tracking_lin_vel',
  trackingAngVel: 'tracking_ang_vel',
  feetAirTime: 'feet_air_time',
  feetPhase: 'feet_phase',
  orientation: 'orientation',
  angVelXy: 'ang_vel_xy',
  feetSlip: 'feet_slip',
  collision: 'collision',
  contactForce: 'contact_force',
  standStill: 'stand_still',
  knee: 'joint_deviation_knee',
  hip: 'joint_deviation_hip',
  dofPosLimits: 'dof_pos_limits',
  pose: 'pose',
  termination: 'termination',
};

export const REWARD_SETTINGS = {
  trackingSigma: 0.25,
  /** feet_phase: the swing foot's target height at the top of its arc (m). */
  swingHeight: 0.15,
  /** contact_force: newtons above which a foot's contact force is penalised. */
  maxContactForce: 500,
} as const;

/** Observation noise, as upstream: each component plus U[-1, 1) times its scale. */
export const OBSERVATION_NOISE = { jointPosition: 0.03, jointVelocity: 1.5, gravity: 0.05, linearVelocity: 0.1, gyro: 0.2 } as const;

/**
 * The policy's `state` observation, in order (103 numbers), as upstream: the pelvis IMU's local
 * linear velocity and gyro, gravity in the pelvis IMU's frame (from its rotation, not a sensor),
 * the command, joint angles less the keyframe's, joint velocities, the previous action, and the
 * gait phase as [cos left, cos right, sin left, sin right]. The value function also reads
 * `privileged_state` (216: UPSTREAM.md section 2).
 */
export const OBSERVATION_LAYOUT = [
  ['linearVelocity', 3],
  ['gyro', 3],
  ['gravity', 3],
  ['command', 3],
  ['jointPositionOffset', 29],
  ['jointVelocity', 29],
  ['lastAction', 29],
  ['phase', 4],
] as const satisfies readonly (readonly [string, number])[];

export const OBSERVATION_SIZE = OBSERVATION_LAYOUT.reduce((sum, [, size]) => sum + size, 0);
export const PRIVILEGED_OBSERVATION_SIZE = 216;

/**
 * Resets, as upstream: the keyframe moved by U(-xy, xy) in x and y and turned by U(-yaw, yaw),
 * every joint angle multiplied by U(jointScale), base velocities U(-baseVelocity, baseVelocity),
 * a gait frequency from U(gaitHz) with the feet's phases at [0, pi].
 */
export const RESET = { xy: 0.5, yaw: 3.14, jointScale: [0.5, 1.5], baseVelocity: 0.5, gaitHz: [1.25, 1.5] } as const;

/** Pushes, as upstream: every U(intervalSeconds) the base's horizontal velocity gains U(magnitude) m/s in a random direction. */
export const PUSHES = { intervalSeconds: [5, 10], magnitude: [0.1, 2.0] } as const;

/**
 * Termination, as upstream: the torso upside down (its z axis pointing below the horizon), the
 * feet touching each other, or NaN in the state. (Upstream also tests foot-shin contacts, whose
 * sensors never fire: the model has no such contact pair.) Episodes are also cut at
 * TIMING.episodeSteps, which is truncation, not termination.
 */
export const TERMINATION = ['torso upside down', 'foot touches foot', 'NaN in the state'] as const;

/** Every way this task differs from upstream's G1 joystick task, for the report. */
export const UPSTREAM_DIFFERENCES: readonly { readonly what: string; readonly upstream: string; readonly here: string; readonly why: string }[] = [
  {
    what: 'forward command range',
    upstream: `U[${UPSTREAM_COMMANDS.forward.join(', ')}] m/s`,
    here: `U[${COMMANDS.forward.join(', ')}] m/s`,
    why: 'running forward is the goal: forward only, up to the 2.5 m/s the replays command',
  },
  {
    what: 'lateral command range',
    upstream: `U[${UPSTREAM_COMMANDS.lateral.join(', ')}] m/s`,
    here: `U[${COMMANDS.lateral.join(', ')}] m/s`,
    why: 'narrowed: sideways steps matter less than forward speed',
  },
  {
    what: 'yaw command range',
    upstream: `U[${UPSTREAM_COMMANDS.yaw.join(', ')}] rad/s`,
    here: `U[${COMMANDS.yaw.join(', ')}] rad/s`,
    why: 'narrowed: turning at speed is not the goal',
  },
  {
    what: 'tracking_lin_vel weight',
    upstream: String(UPSTREAM_REWARD_WEIGHTS.trackingLinVel),
    here: String(REWARD_WEIGHTS.trackingLinVel),
    why: 'speed tracking weighs more at running speeds',
  },
  {
    what: 'feet_air_time weight',
    upstream: String(UPSTREAM_REWARD_WEIGHTS.feetAirTime),
    here: String(REWARD_WEIGHTS.feetAirTime),
    why: 'longer flight phases for a running gait',
  },
  {
    what: 'physics engine',
    upstream: 'MuJoCo MJX (JAX)',
    here: 'MuJoCo MJX on the GPU queue; MuJoCo 3.3.8 (WebAssembly, mujoco-js) on CPU',
    why: 'the CPU twin trains and replays where no GPU is; test vectors check the two agree',
  },
  {
    what: 'model meshes',
    upstream: 'visual meshes loaded',
    here: 'visual-only meshes removed before compiling',
    why: 'they neither collide nor weigh: same physics, a tenth of the compile time',
  },
];
