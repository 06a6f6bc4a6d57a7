import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '#shared/errors.ts';
import {
  GOAL_POSITION,
  LAYER_SHAPES,
  MAX_POLICY_BYTES,
  MAX_SPEED,
  MIN_POSITION,
  OBS_OFFSET,
  OBS_SCALE,
  POLICY_FORMAT,
  TIME_LIMIT,
  createGreedyActor,
  gradePolicy,
  parsePolicy,
  policyLogits,
  runEpisode,
  startPositions,
  step,
  type Action,
  type CarState,
} from '#shared/rewards/mountaincar.ts';
import { PolicyFormatError } from '#shared/rewards/errors.ts';
import { assertClose } from '../support/floats.ts';

const fixture = (name: string): string => fileURLToPath(new URL(`../fixtures/mountaincar/${name}`, import.meta.url));

interface Vectors {
  /** Absolute tolerances, stated by the generator and read by both languages' tests (see below). */
  tolerances: { step: number; trajectory: number; logit: number; decisionMargin: number };
  starts: { seed: number; positions: number[] }[];
  steps: { state: [number, number]; action: Action; next: [number, number]; goalReached: boolean }[];
  trajectories: {
    name: string;
    seed: number;
    start: [number, number];
    actions: Action[];
    states: [number, number][];
    done: boolean[];
    goalReached: boolean[];
  }[];
  policy: {
    file: string;
    observations: [number, number][];
    logits: number[][];
    actions: Action[];
    grade: {
      seeds: number[];
      episodesPerSeed: number;
      perSeed: { seed: number; episodes: number; successes: number; meanSteps: number }[];
      successRate: number;
    };
  };
}

const vectors = JSON.parse(readFileSync(fixture('vectors.json'), 'utf8')) as Vectors;
const velocityPolicyText = readFileSync(fixture(vectors.policy.file), 'utf8');

/**
 * The vectors' floats come from Python (math.cos from libm, numpy's CPU-chosen kernels for cos,
 * tanh and the matrix products); this side computes them with V8's Math.cos and Math.tanh and
 * plain loops. Each may be an ulp or so off the true value, so the two agree within the
 * tolerances the generator states (batch-jobs/rewards-train/make_vectors.py explains each), never
 * bit for bit. A real bug (a wrong force, a missed clip) moves them by 1e-6 or more.
 */
const TOL = vectors.tolerances;
assert.ok(TOL, 'vectors.json states its tolerances (rerun batch-jobs/rewards-train/make_vectors.py)');
/**
 * Every discrete outcome the vectors record (a goal flag, a greedy action, a grade) is at least
 * this far from its boundary: far above how far the two languages' floats can be apart, so no
 * last-bit difference can flip it. The tests below check the margin on this side's numbers too.
 */
const MARGIN = TOL.decisionMargin;

/** The gap between the largest and the second largest of the logits (a greedy choice's margin). */
function topTwoGap(logits: ArrayLike<number>): number {
  const sorted = Array.from(logits).sort((a, b) => b - a);
  return sorted[0]! - sorted[1]!;
}

/** A policy document with every weight 0 and the given output biases: a constant action. */
function constantPolicy(outputBias: [number, number, number]): Record<string, unknown> {
  return {
    format: POLICY_FORMAT,
    obs_offset: [...OBS_OFFSET],
    obs_scale: [...OBS_SCALE],
    activation: 'tanh',
    layers: LAYER_SHAPES.map(([rows, cols], i) => ({
      weight: Array.from({ length: rows }, () => new Array(cols).fill(0)),
      bias: i === LAYER_SHAPES.length - 1 ? [...outputBias] : new Array(rows).fill(0),
    })),
  };
}

describe('MountainCar dynamics (shared vectors with the Python trainer)', () => {
  it('the stated tolerances are tight enough to catch a real bug, and far below the decision margin', () => {
    for (const name of ['step', 'trajectory', 'logit'] as const) {
      assert.ok(TOL[name] > 0 && TOL[name] <= 1e-12, `${name} tolerance ${TOL[name]}`);
      assert.ok(TOL[name] * 1000 <= MARGIN, `${name} tolerance ${TOL[name]} vs margin ${MARGIN}`);
    }
    assert.ok(MARGIN <= 1e-6, `decision margin ${MARGIN}`);
  });

  it('start positions of every seed equal the Python stream, negative and huge seeds too', () => {
    assert.ok(vectors.starts.length >= 8);
    // Bit for bit: integer arithmetic, a division by 2^32 (exact), then one multiply and one add,
    // IEEE basic operations in the same order in both languages (no fused multiply-add in either).
    for (const { seed, positions } of vectors.starts) {
      assert.deepEqual(startPositions(seed, positions.length), positions, `seed ${seed}`);
    }
  });

  it('single steps, including the speed limit, both clips and the goal line', () => {
    for (const c of vectors.steps) {
      const next = step({ position: c.state[0], velocity: c.state[1] }, c.action);
      const what = `after ${JSON.stringify(c.state)} a=${c.action}`;
      // One step from the same state: libm's and V8's cos are each within an ulp of the truth
      // (an ulp of |cos| <= 1 is <= 1.1e-16), scaled by GRAVITY, then two additions round: the
      // results are an ulp or two apart (< 5e-16 for |position| <= 1.2), within the stated 1e-15.
      assertClose(next.position, c.next[0], { abs: TOL.step }, `position ${what}`);
      assertClose(next.velocity, c.next[1], { abs: TOL.step }, `velocity ${what}`);
      // The goal test is discrete: only asserted with the position far from the line.
      assert.ok(Math.abs(next.position - GOAL_POSITION) > MARGIN, `position ${what} is ${next.position}, near the goal line`);
      assert.equal(next.position >= GOAL_POSITION, c.goalReached, `goal ${what}`);
    }
    assert.ok(vectors.steps.some((c) => Math.abs(c.next[1]) === MAX_SPEED));
    assert.ok(vectors.steps.some((c) => c.next[0] === MIN_POSITION && c.next[1] === 0 && c.state[1] < 0));
  });

  for (const t of vectors.trajectories) {
    it(`trajectory ${t.name}: every state and done flag`, () => {
      assert.deepEqual(t.start, [startPositions(t.seed, 1)[0], 0]); // exact, as the start positions above
      let state: CarState = { position: t.start[0], velocity: 0 };
      t.actions.forEach((action, i) => {
        state = step(state, action);
        // This side's own states, step after step: each step's last-bit difference in cos
        // carries on and compounds. The generator replays every case with cos 1e-15 off both
        // ways and measures at most ~5e-15; the stated 1e-12 leaves a wide margin. A wall clip
        // decided the other way would zero one side's velocity and show up here too.
        assertClose(state.position, t.states[i][0], { abs: TOL.trajectory }, `${t.name} step ${i + 1} position`);
        assertClose(state.velocity, t.states[i][1], { abs: TOL.trajectory }, `${t.name} step ${i + 1} velocity`);
        assert.ok(Math.abs(state.position - GOAL_POSITION) > MARGIN, `${t.name} step ${i + 1}: ${state.position} is near the goal line`);
        const goal = state.position >= GOAL_POSITION;
        assert.equal(goal, t.goalReached[i], `${t.name} step ${i + 1} goal`);
        assert.equal(goal || i + 1 === TIME_LIMIT, t.done[i], `${t.name} step ${i + 1} done`);
      });
      assert.equal(t.done.at(-1), true);
    });
  }

  it('refuses an action other than 0, 1 or 2', () => {
    assert.throws(() => step({ position: -0.5, velocity: 0 }, 3 as Action), ConfigError);
  });

  it('runEpisode: pushing along the velocity succeeds, pushing right alone runs out of time', () => {
    for (const start of startPositions(5, 10)) {
      const pump = runEpisode((s) => (s.velocity >= 0 ? 2 : 0), start);
      assert.ok(pump.success && pump.steps < TIME_LIMIT);
      assert.deepEqual(
        runEpisode(() => 2, start),
        { success: false, steps: TIME_LIMIT },
      );
    }
  });
});

describe('parsePolicy: the data-only format', () => {
  it('parses the fixture and computes the logits and greedy actions the Python side computed', () => {
    const policy = parsePolicy(velocityPolicyText);
    assert.deepEqual(
      policy.layers.map((l) => [l.rows, l.cols]),
      LAYER_SHAPES,
    );
    const act = createGreedyActor(policy);
    vectors.policy.observations.forEach(([position, velocity], i) => {
      const logits = policyLogits(policy, { position, velocity });
      // numpy's matrix products (BLAS: its own summation order, FMA or not) and SIMD tanh
      // against plain loops and V8's tanh: sums of 64 rounded products of small weights, so
      // well under 1e-13 apart; the stated tolerance is 1e-12.
      logits.forEach((v, a) => {
        assertClose(v, vectors.policy.logits[i][a], { abs: TOL.logit }, `logit ${a} at observation ${i}`);
      });
      // The greedy action is an argmax: asserted only with the top two logits far apart.
      assert.ok(topTwoGap(logits) > MARGIN, `observation ${i}: top two logits ${[...logits]} nearly tie`);
      assert.equal(act({ position, velocity }), vectors.policy.actions[i], `action at observation ${i}`);
    });
  });

  it('takes bytes, text or a parsed document alike', () => {
    const fromText = parsePolicy(velocityPolicyText);
    const fromBytes = parsePolicy(new TextEncoder().encode(velocityPolicyText));
    const fromObject = parsePolicy(JSON.parse(velocityPolicyText));
    assert.deepEqual(fromBytes.layers, fromText.layers);
    assert.deepEqual(fromObject.layers, fromText.layers);
  });

  const cases: [string, (d: any) => void, RegExp][] = [
    ['another format', (d) => (d.format = 'mountaincar-mlp-v2'), /^policy format: must be "mountaincar-mlp-v1"/],
    ['another activation', (d) => (d.activation = 'relu'), /^policy activation:/],
    ['an unknown field', (d) => (d.code = 'import os'), /^policy document: has unknown field\(s\) code/],
    ['a missing field', (d) => delete d.layers, /^policy layers: is missing/],
    ['another normalisation', (d) => (d.obs_scale = [1, 1]), /^policy obs_scale: must be/],
    ['a short obs_offset', (d) => (d.obs_offset = [-0.3]), /^policy obs_offset: must be a list of 2 numbers/],
    ['four layers', (d) => d.layers.push(d.layers[2]), /^policy layers: must be a list of 3 layers/],
    ['a missing row', (d) => d.layers[1].weight.pop(), /^policy layers\[1\]\.weight: must be 64 rows of 64 numbers \(got 63 rows\)/],
    ['a long row', (d) => d.layers[1].weight[5].push(0), /^policy layers\[1\]\.weight\[5\]: must be a list of 64 numbers \(got a list of 65\)/],
    ['a short bias', (d) => d.layers[2].bias.pop(), /^policy layers\[2\]\.bias: must be a list of 3 numbers/],
    ['an extra layer field', (d) => (d.layers[0].scale = 2), /^policy layers\[0\]: must have exactly the fields weight and bias/],
    ['a weight as text', (d) => (d.layers[0].weight[3][1] = '0.5'), /^policy layers\[0\]\.weight\[3\]\[1\]: must be a finite number .*\(got "0\.5"\)/],
    ['a NaN weight', (d) => (d.layers[0].weight[3][1] = NaN), /^policy layers\[0\]\.weight\[3\]\[1\]: must be a finite number/],
    ['an infinite bias', (d) => (d.layers[2].bias[0] = Infinity), /^policy layers\[2\]\.bias\[0\]: must be a finite number/],
    ['a huge weight', (d) => (d.layers[2].weight[0][0] = 2e6), /^policy layers\[2\]\.weight\[0\]\[0\]: must be a finite number of magnitude at most 1000000/],
    ['a null layer', (d) => (d.layers[1] = null), /^policy layers\[1\]: must be an object/],
  ];
  for (const [name, change, message] of cases) {
    it(`refuses ${name}, naming the field`, () => {
      const document = JSON.parse(velocityPolicyText);
      change(document);
      assert.throws(
        () => parsePolicy(document),
        (error: unknown) => {
          assert.ok(error instanceof PolicyFormatError, String(error));
          assert.equal(error.name, 'PolicyFormatError');
          assert.match(error.message, message);
          return true;
        },
      );
    });
  }

  it('refuses a __proto__ key in the text as an unknown field', () => {
    const text = velocityPolicyText.replace('{', '{"__proto__":{"format":"x"},');
    assert.throws(() => parsePolicy(text), /policy document: has unknown field\(s\) __proto__/);
  });

  it('refuses text that is too long, not JSON, not UTF-8 or not an object', () => {
    assert.throws(() => parsePolicy(' '.repeat(MAX_POLICY_BYTES + 1)), /^PolicyFormatError: policy file: is 1048577 bytes/);
    assert.throws(() => parsePolicy('{"format": '), /policy file: is not valid JSON/);
    assert.throws(() => parsePolicy(new Uint8Array([0x7b, 0xff, 0x7d])), /policy file: is not UTF-8 text/);
    assert.throws(() => parsePolicy('[1, 2, 3]'), /policy document: must be a JSON object/);
    assert.throws(() => parsePolicy(null), /policy document: must be a JSON object \(got null\)/);
  });
});

describe('gradePolicy', () => {
  it('grades the fixture exactly as the Python trainer evaluates it', () => {
    const { seeds, episodesPerSeed, perSeed, successRate } = vectors.policy.grade;
    // The grade is discrete (which step each episode reaches the goal, through ~100 greedy
    // argmaxes each), computed there with numpy's vectorised cos, tanh and BLAS. It can be
    // compared exactly only because no episode passes near a boundary: replayed on this side,
    // every greedy choice's top two logits and every position after a step stay MARGIN apart from a
    // tie and from the goal line (the generator checks the same with cos nudged both ways).
    const policy = parsePolicy(velocityPolicyText);
    const act = createGreedyActor(policy);
    let closestTie = Infinity;
    let closestGoal = Infinity;
    for (const seed of seeds) {
      for (const start of startPositions(seed, episodesPerSeed)) {
        let state: CarState = { position: start, velocity: 0 };
        for (let t = 1; t <= TIME_LIMIT && state.position < GOAL_POSITION; t++) {
          closestTie = Math.min(closestTie, topTwoGap(policyLogits(policy, state)));
          state = step(state, act(state));
          closestGoal = Math.min(closestGoal, Math.abs(state.position - GOAL_POSITION));
        }
      }
    }
    assert.ok(closestTie > MARGIN, `a greedy choice is ${closestTie} from a tie`);
    assert.ok(closestGoal > MARGIN, `a position is ${closestGoal} from the goal line`);
    // Then counts, means of counts and a rate, each one division of exact integers, are the same
    // float in both languages: compared exactly.
    const report = gradePolicy(velocityPolicyText, seeds, { episodesPerSeed });
    assert.deepEqual(
      report.perSeed.map(({ seed, episodes, successes, meanSteps }) => ({ seed, episodes, successes, meanSteps })),
      perSeed,
    );
    assert.equal(report.successRate, successRate);
    assert.equal(report.episodes, seeds.length * episodesPerSeed);
    assert.equal(report.format, POLICY_FORMAT);
  });

  it('a policy that always pushes right never succeeds; one that pushes along the velocity does', () => {
    const right = gradePolicy(constantPolicy([0, 0, 1]), [3, 4], { episodesPerSeed: 5 });
    assert.equal(right.successes, 0);
    assert.equal(right.meanSteps, TIME_LIMIT);
    assert.deepEqual(right.seedSuccessRate, { min: 0, max: 0, std: 0 });
    const pump = gradePolicy(parsePolicy(velocityPolicyText), [3, 4], { episodesPerSeed: 5 });
    assert.equal(pump.successRate, 1);
    assert.ok(pump.meanSteps < TIME_LIMIT);
  });

  it('ties go to the lowest action, so an all-zero policy pushes left and fails', () => {
    const zero = parsePolicy(constantPolicy([0, 0, 0]));
    assert.equal(createGreedyActor(zero)({ position: -0.5, velocity: 0.01 }), 0);
    assert.equal(gradePolicy(zero, [9], { episodesPerSeed: 3 }).successes, 0);
  });

  it('reports per-seed results and their spread, episode k of a seed from its k-th start', () => {
    // Push right when velocity > 0.01, else left: enough energy from some starts, not from all.
    // layer 0: h = tanh(velocity / 0.07 - 0.01 / 0.07); layer 1 passes its sign on; layer 2 puts
    // 10 * that on "right" and -1 on "no push", so "left" (0) wins whenever the sign is not positive.
    const document = constantPolicy([0, -1, 0]) as { layers: { weight: number[][]; bias: number[] }[] };
    document.layers[0].weight[0] = [0, 1];
    document.layers[0].bias[0] = -0.01 / 0.07;
    document.layers[1].weight[0][0] = 1;
    document.layers[2].weight[2][0] = 10;
    const seeds = [1, 2, 3, 4];
    const report = gradePolicy(document, seeds, { episodesPerSeed: 20 });
    // Two computations of one decision: the network's sign of velocity / 0.07 - 0.01 / 0.07
    // against velocity > 0.01. Rounding can split them within ~1e-17 of 0.01, so every velocity
    // this rule sees must be far from it (it is, by more than 1e-9).
    let closest = Infinity;
    const expected = seeds.map((seed) =>
      startPositions(seed, 20).map((start) =>
        runEpisode((s) => {
          closest = Math.min(closest, Math.abs(s.velocity - 0.01));
          return s.velocity > 0.01 ? 2 : 0;
        }, start),
      ),
    );
    assert.ok(closest > 1e-9, `a velocity ${closest} from the switch at 0.01`);
    const rates = expected.map((episodes) => episodes.filter((e) => e.success).length / 20);
    assert.deepEqual(
      report.perSeed.map((s) => s.successRate),
      rates,
    );
    assert.deepEqual(
      report.perSeed.map((s) => s.meanSteps),
      expected.map((episodes) => episodes.reduce((sum, e) => sum + e.steps, 0) / 20),
    );
    assert.ok(Math.min(...rates) > 0 && Math.max(...rates) < 1 && new Set(rates).size > 1, `rates ${rates}`);
    const mean = rates.reduce((a, b) => a + b) / rates.length;
    assert.equal(report.successRate, report.successes / 80);
    // Basic operations only, but in another order (successes / 80 against the mean of four
    // rates; the std's sums likewise): a few roundings of numbers <= 1 apart, each <= 1.1e-16.
    assertClose(report.successRate, mean, { abs: 1e-15 }, 'overall rate');
    assertClose(report.seedSuccessRate.std, Math.sqrt(rates.reduce((a, r) => a + (r - mean) ** 2, 0) / 3), { abs: 1e-15 }, 'std');
    assert.deepEqual([report.seedSuccessRate.min, report.seedSuccessRate.max], [Math.min(...rates), Math.max(...rates)]);
  });

  it('refuses training seeds, repeated seeds and sizes out of range', () => {
    assert.throws(() => gradePolicy(velocityPolicyText, [5, 6], { excludeSeeds: [6] }), /seeds\[1\]: was a training seed/);
    assert.throws(() => gradePolicy(velocityPolicyText, [5, 5]), /seeds\[1\]: is repeated/);
    assert.throws(() => gradePolicy(velocityPolicyText, []), ConfigError);
    assert.throws(() => gradePolicy(velocityPolicyText, [1.5]), /seeds\[0\]: must be a safe integer/);
    assert.throws(() => gradePolicy(velocityPolicyText, [1], { episodesPerSeed: 0 }), /episodesPerSeed/);
    assert.throws(
      () =>
        gradePolicy(
          velocityPolicyText,
          Array.from({ length: 20 }, (_, i) => i),
          { episodesPerSeed: 10_000 },
        ),
      /episodesPerSeed/,
    );
  });

  it('refuses a policy that is not the format before playing anything', () => {
    const document = JSON.parse(velocityPolicyText);
    document.layers[0].weight[0][0] = 'x';
    assert.throws(() => gradePolicy(document, [1]), PolicyFormatError);
    // A hand-built object that looks parsed is parsed again, not trusted.
    const lookalike = { layers: parsePolicy(velocityPolicyText).layers.map((l) => ({ ...l, bias: l.bias.map(() => NaN) })) };
    assert.throws(() => gradePolicy(lookalike, [1]), PolicyFormatError);
  });
});
