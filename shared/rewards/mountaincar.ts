/**
 * MountainCar for the reward search's trusted grader: the classic MountainCar-v0 dynamics, the
 * seeded start states, the success rule, the data-only policy format (parsed and checked), its
 * greedy forward pass, and `gradePolicy`, which replays a trained policy on fresh seeds.
 *
 * The trainer (batch-jobs/rewards-train/, Python) implements the same environment; the two are
 * held together by test/fixtures/mountaincar/vectors.json, which the Python side writes and both
 * sides' tests check. The grader never runs or unpickles anything a candidate produced: it reads
 * policy.json as numbers of a fixed architecture, and what the trainer reported about itself
 * plays no part in the grade.
 *
 * Dynamics, one step (gym's arithmetic in gym's order, so that Python and JavaScript round alike):
 *   velocity = velocity + ((action - 1) * FORCE + cos(3 * position) * -GRAVITY)
 *   velocity = clip(velocity, -MAX_SPEED, MAX_SPEED)
 *   position = clip(position + velocity, MIN_POSITION, MAX_POSITION)
 *   if position == MIN_POSITION and velocity < 0: velocity = 0
 * Actions: 0 = push left, 1 = no push, 2 = push right. An episode starts at rest at
 * START_LOW + START_WIDTH * u, and succeeds when position >= GOAL_POSITION after one of its first
 * TIME_LIMIT steps (gym also asks velocity >= 0, which always holds when the line is crossed).
 *
 * Seeds: episode k of seed s starts from the k-th draw u of `seededRandom(s)` (shared/random.ts);
 * the trainer's cars draw their starts from the same stream of their training seed, so grading
 * seeds must differ from training seeds (`excludeSeeds` enforces it).
 */
import { ConfigError, describeValue } from '#shared/errors.ts';
import { PolicyFormatError } from './errors.ts';
import { seededRandom } from '#shared/random.ts';

export const MIN_POSITION = -1.2;
export const MAX_POSITION = 0.6;
export const MAX_SPEED = 0.07;
export const GOAL_POSITION = 0.5;
export const FORCE = 0.001;
export const GRAVITY = 0.0025;
export const TIME_LIMIT = 200;
export const START_LOW = -0.6;
export const START_WIDTH = 0.2;
export const NUM_ACTIONS = 3;
export const OBSERVATION_SIZE = 2;

/** 0 = push left, 1 = no push, 2 = push right. */
export type Action = 0 | 1 | 2;

export interface CarState {
  readonly position: number;
  readonly velocity: number;
}

/** One step of one car. */
export function step(state: CarState, action: Action): CarState {
  if (action !== 0 && action !== 1 && action !== 2) throw new ConfigError('action', action, 'must be 0, 1 or 2');
  let velocity = state.velocity + ((action - 1) * FORCE + Math.cos(3 * state.position) * -GRAVITY);
  velocity = Math.min(Math.max(velocity, -MAX_SPEED), MAX_SPEED);
  const position = Math.min(Math.max(state.position + velocity, MIN_POSITION), MAX_POSITION);
  if (position === MIN_POSITION && velocity < 0) velocity = 0;
  return { position, velocity };
}

/** The success rule: the car is at or past the goal line. */
export function reachedGoal(position: number): boolean {
  return position >= GOAL_POSITION;
}

/** The stream of start positions of a seed: each call returns the next episode's. */
export function createStartStream(seed: number): () => number {
  const random = seededRandom(seed);
  return () => START_LOW + START_WIDTH * random();
}

/** The first `count` start positions of a seed. */
export function startPositions(seed: number, count: number): number[] {
  const next = createStartStream(seed);
  return Array.from({ length: count }, () => next());
}

export interface EpisodeResult {
  readonly success: boolean;
  /** Steps taken: the step that reached the goal, or TIME_LIMIT when it was not reached. */
  readonly steps: number;
}

/** Plays one episode from (startPosition, 0) with `choose` picking each action. */
export function runEpisode(choose: (state: CarState) => Action, startPosition: number): EpisodeResult {
  let state: CarState = { position: startPosition, velocity: 0 };
  for (let steps = 1; steps <= TIME_LIMIT; steps++) {
    state = step(state, choose(state));
    if (reachedGoal(state.position)) return { success: true, steps };
  }
  return { success: false, steps: TIME_LIMIT };
}

// ---- the policy file ---------------------------------------------------------------------

export const POLICY_FORMAT = 'mountaincar-mlp-v1';
export const ACTIVATION = 'tanh';
export const HIDDEN_SIZES = [64, 64] as const;
/** The fixed input normalisation, x = (obs - OBS_OFFSET) * OBS_SCALE: both ranges onto [-1, 1]. */
export const OBS_OFFSET: readonly [number, number] = [-0.3, 0];
export const OBS_SCALE: readonly [number, number] = [1 / 0.9, 1 / 0.07];
/** [rows (out), cols (in)] of each layer, input side first: 2 -> 64 -> 64 -> 3. */
export const LAYER_SHAPES: readonly (readonly [number, number])[] = [
  [HIDDEN_SIZES[0], OBSERVATION_SIZE],
  [HIDDEN_SIZES[1], HIDDEN_SIZES[0]],
  [NUM_ACTIONS, HIDDEN_SIZES[1]],
];
/** The largest policy.json accepted, in bytes (a real one is ~50 KB). */
export const MAX_POLICY_BYTES = 1024 * 1024;
/** The largest magnitude of any weight or bias: keeps every logit finite (no Infinity - Infinity). */
export const MAX_ABS_PARAMETER = 1e6;
const POLICY_KEYS = ['activation', 'format', 'layers', 'obs_offset', 'obs_scale'];

export interface DenseLayer {
  readonly rows: number;
  readonly cols: number;
  /** Row-major [rows][cols]: weight[r * cols + c] multiplies input c for output r. */
  readonly weight: Float64Array;
  readonly bias: Float64Array;
}

/** A checked policy: three dense layers, tanh after the first two, logits out. */
export interface MountainCarPolicy {
  readonly layers: readonly DenseLayer[];
}

// The policies parsePolicy built: gradePolicy takes these as checked, anything else it parses.
const checkedPolicies = new WeakSet<object>();

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checkNumber(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || Math.abs(value) > MAX_ABS_PARAMETER) {
    throw new PolicyFormatError(field, `must be a finite number of magnitude at most ${MAX_ABS_PARAMETER}`, value);
  }
  return value;
}

function checkVector(value: unknown, length: number, field: string, into?: Float64Array, offset = 0): Float64Array {
  if (!Array.isArray(value) || value.length !== length) {
    const got = Array.isArray(value) ? `a list of ${value.length}` : value === null ? 'null' : typeof value;
    throw new PolicyFormatError(field, `must be a list of ${length} numbers (got ${got})`);
  }
  const out = into ?? new Float64Array(length);
  for (let i = 0; i < length; i++) out[offset + i] = checkNumber(value[i], `${field}[${i}]`);
  return out;
}

function decodeText(input: Uint8Array): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(input);
  } catch {
    throw new PolicyFormatError('file', 'is not UTF-8 text');
  }
}

/**
 * Checks a policy document and returns its layers as float64 arrays. Accepts the file's bytes or
 * text (at most MAX_POLICY_BYTES), or an already parsed value. Throws PolicyFormatError naming
 * the first field that is not exactly the format: unknown or missing keys, another format,
 * activation or normalisation, a wrong number of layers, rows or columns, a value that is not a
 * finite number within MAX_ABS_PARAMETER.
 */
export function parsePolicy(input: unknown): MountainCarPolicy {
  let document = input;
  if (input instanceof Uint8Array || typeof input === 'string') {
    const bytes = typeof input === 'string' ? Buffer.byteLength(input, 'utf8') : input.byteLength;
    if (bytes > MAX_POLICY_BYTES) {
      throw new PolicyFormatError('file', `is ${bytes} bytes, more than the limit of ${MAX_POLICY_BYTES}`);
    }
    const text = typeof input === 'string' ? input : decodeText(input);
    try {
      document = JSON.parse(text);
    } catch (error) {
      throw new PolicyFormatError('file', `is not valid JSON: ${(error as Error).message}`);
    }
  }
  if (!isPlainObject(document)) throw new PolicyFormatError('document', 'must be a JSON object', document);
  const keys = Object.keys(document);
  const unknown = keys.filter((k) => !POLICY_KEYS.includes(k));
  if (unknown.length > 0) throw new PolicyFormatError('document', `has unknown field(s) ${unknown.join(', ')}`);
  for (const key of POLICY_KEYS) {
    if (!keys.includes(key)) throw new PolicyFormatError(key, 'is missing');
  }
  if (document.format !== POLICY_FORMAT) {
    throw new PolicyFormatError('format', `must be "${POLICY_FORMAT}"`, document.format);
  }
  if (document.activation !== ACTIVATION) {
    throw new PolicyFormatError('activation', `must be "${ACTIVATION}"`, document.activation);
  }
  for (const [key, expected] of [
    ['obs_offset', OBS_OFFSET],
    ['obs_scale', OBS_SCALE],
  ] as const) {
    const got = checkVector(document[key], OBSERVATION_SIZE, key);
    if (got[0] !== expected[0] || got[1] !== expected[1]) {
      throw new PolicyFormatError(key, `must be [${expected.join(', ')}]`, document[key]);
    }
  }
  const layers = document.layers;
  if (!Array.isArray(layers) || layers.length !== LAYER_SHAPES.length) {
    throw new PolicyFormatError('layers', `must be a list of ${LAYER_SHAPES.length} layers`, Array.isArray(layers) ? `${layers.length} layers` : layers);
  }
  const parsed = LAYER_SHAPES.map(([rows, cols], index): DenseLayer => {
    const field = `layers[${index}]`;
    const layer: unknown = layers[index];
    if (!isPlainObject(layer)) throw new PolicyFormatError(field, 'must be an object {weight, bias}', layer);
    const layerKeys = Object.keys(layer).sort();
    if (layerKeys.length !== 2 || layerKeys[0] !== 'bias' || layerKeys[1] !== 'weight') {
      throw new PolicyFormatError(field, `must have exactly the fields weight and bias (has ${layerKeys.join(', ') || 'none'})`);
    }
    const weightRows = layer.weight;
    if (!Array.isArray(weightRows) || weightRows.length !== rows) {
      const got = Array.isArray(weightRows) ? `${weightRows.length} rows` : describeValue(weightRows);
      throw new PolicyFormatError(`${field}.weight`, `must be ${rows} rows of ${cols} numbers (got ${got})`);
    }
    const weight = new Float64Array(rows * cols);
    weightRows.forEach((row, r) => {
      checkVector(row, cols, `${field}.weight[${r}]`, weight, r * cols);
    });
    const bias = checkVector(layer.bias, rows, `${field}.bias`);
    return { rows, cols, weight, bias };
  });
  const policy: MountainCarPolicy = { layers: parsed };
  checkedPolicies.add(policy);
  return policy;
}

/**
 * A greedy actor for a checked policy: (position, velocity) -> the argmax of the logits, the
 * lowest action on a tie. Float64 throughout; reuses its buffers, so one actor serves one
 * episode loop at a time.
 */
export function createGreedyActor(policy: MountainCarPolicy): (state: CarState) => Action {
  const buffers = [new Float64Array(OBSERVATION_SIZE), ...policy.layers.map((l) => new Float64Array(l.rows))];
  return (state) => {
    const logits = forward(policy, state, buffers);
    let best = 0;
    for (let a = 1; a < logits.length; a++) if (logits[a] > logits[best]) best = a;
    return best as Action;
  };
}

/** The policy's logits for one state (a new array; for loops, use createGreedyActor). */
export function policyLogits(policy: MountainCarPolicy, state: CarState): Float64Array {
  const buffers = [new Float64Array(OBSERVATION_SIZE), ...policy.layers.map((l) => new Float64Array(l.rows))];
  return forward(policy, state, buffers).slice();
}

function forward(policy: MountainCarPolicy, state: CarState, buffers: Float64Array[]): Float64Array {
  const input = buffers[0];
  input[0] = (state.position - OBS_OFFSET[0]) * OBS_SCALE[0];
  input[1] = (state.velocity - OBS_OFFSET[1]) * OBS_SCALE[1];
  const last = policy.layers.length - 1;
  for (let l = 0; l <= last; l++) {
    const { rows, cols, weight, bias } = policy.layers[l];
    const x = buffers[l];
    const out = buffers[l + 1];
    for (let r = 0; r < rows; r++) {
      let sum = 0;
      const base = r * cols;
      for (let c = 0; c < cols; c++) sum += weight[base + c] * x[c];
      sum += bias[r];
      out[r] = l < last ? Math.tanh(sum) : sum;
    }
  }
  return buffers[last + 1];
}

// ---- grading -------------------------------------------------------------------------------

export const DEFAULT_EPISODES_PER_SEED = 100;
export const MAX_EPISODES_PER_SEED = 10_000;
export const MAX_GRADE_SEEDS = 1_000;
export const MAX_GRADE_EPISODES = 100_000;

export interface GradeOptions {
  /** Greedy episodes per seed, 1 to MAX_EPISODES_PER_SEED (default DEFAULT_EPISODES_PER_SEED). */
  readonly episodesPerSeed?: number;
  /** Seeds the policy was trained on: grading on any of them is refused. */
  readonly excludeSeeds?: readonly number[];
}

export interface SeedGrade {
  readonly seed: number;
  readonly episodes: number;
  readonly successes: number;
  readonly successRate: number;
  /** Mean steps over all episodes, a failed one counting TIME_LIMIT. */
  readonly meanSteps: number;
}

export interface GradeReport {
  readonly format: typeof POLICY_FORMAT;
  readonly episodesPerSeed: number;
  readonly perSeed: readonly SeedGrade[];
  readonly episodes: number;
  readonly successes: number;
  /** successes / episodes: with the same episodes on every seed, the mean of the seeds' rates. */
  readonly successRate: number;
  /** How the seeds' success rates spread: min, max and sample standard deviation (0 for one seed). */
  readonly seedSuccessRate: { readonly min: number; readonly max: number; readonly std: number };
  readonly meanSteps: number;
}

function checkSeeds(seeds: readonly number[], excludeSeeds: readonly number[]): void {
  if (!Array.isArray(seeds) || seeds.length === 0 || seeds.length > MAX_GRADE_SEEDS) {
    throw new ConfigError('seeds', seeds, `must be a list of 1 to ${MAX_GRADE_SEEDS} seeds`);
  }
  const seen = new Set<number>();
  const excluded = new Set(excludeSeeds);
  seeds.forEach((seed, i) => {
    if (!Number.isSafeInteger(seed)) throw new ConfigError(`seeds[${i}]`, seed, 'must be a safe integer');
    if (seen.has(seed)) throw new ConfigError(`seeds[${i}]`, seed, 'is repeated: the same seed plays the same episodes');
    if (excluded.has(seed)) throw new ConfigError(`seeds[${i}]`, seed, 'was a training seed: grade on fresh seeds');
    seen.add(seed);
  });
}

/**
 * Grades a policy by the environment's own success rule: for each seed, `episodesPerSeed` greedy
 * episodes from that seed's start states. `policy` is the policy.json bytes or text, a parsed
 * document, or a policy already checked by parsePolicy. Throws PolicyFormatError for a policy
 * that is not exactly the format, ConfigError for bad seeds or sizes.
 */
export function gradePolicy(policy: unknown, seeds: readonly number[], options: GradeOptions = {}): GradeReport {
  const episodesPerSeed = options.episodesPerSeed ?? DEFAULT_EPISODES_PER_SEED;
  if (!Number.isSafeInteger(episodesPerSeed) || episodesPerSeed < 1 || episodesPerSeed > MAX_EPISODES_PER_SEED) {
    throw new ConfigError('episodesPerSeed', episodesPerSeed, `must be an integer in [1, ${MAX_EPISODES_PER_SEED}]`);
  }
  checkSeeds(seeds, options.excludeSeeds ?? []);
  if (seeds.length * episodesPerSeed > MAX_GRADE_EPISODES) {
    throw new ConfigError('episodesPerSeed', episodesPerSeed, `times ${seeds.length} seeds is more than ${MAX_GRADE_EPISODES} episodes`);
  }
  const checked = typeof policy === 'object' && policy !== null && checkedPolicies.has(policy) ? (policy as MountainCarPolicy) : parsePolicy(policy);
  const actor = createGreedyActor(checked);
  const perSeed = seeds.map((seed): SeedGrade => {
    const nextStart = createStartStream(seed);
    let successes = 0;
    let steps = 0;
    for (let e = 0; e < episodesPerSeed; e++) {
      const result = runEpisode(actor, nextStart());
      if (result.success) successes++;
      steps += result.steps;
    }
    return { seed, episodes: episodesPerSeed, successes, successRate: successes / episodesPerSeed, meanSteps: steps / episodesPerSeed };
  });
  const episodes = seeds.length * episodesPerSeed;
  const successes = perSeed.reduce((sum, s) => sum + s.successes, 0);
  const rates = perSeed.map((s) => s.successRate);
  const mean = rates.reduce((a, b) => a + b, 0) / rates.length;
  const variance = rates.length > 1 ? rates.reduce((a, r) => a + (r - mean) ** 2, 0) / (rates.length - 1) : 0;
  return {
    format: POLICY_FORMAT,
    episodesPerSeed,
    perSeed,
    episodes,
    successes,
    successRate: successes / episodes,
    seedSuccessRate: { min: Math.min(...rates), max: Math.max(...rates), std: Math.sqrt(variance) },
    meanSteps: perSeed.reduce((sum, s) => sum + s.meanSteps, 0) / perSeed.length,
  };
}
