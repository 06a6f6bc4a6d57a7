/**
 * Reward search bookkeeping: training items (candidates x seeds, grading on fresh seeds only),
 * outcomes turned into seed results with the sandbox's verdict, the search document, the feedback
 * for the next proposal (graded figures only), and the final on the same seeds for all three.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import {
  candidateResults,
  feedbackFrom,
  finalCandidates,
  MOUNTAINCAR_TASK,
  recordFinal,
  recordGeneration,
  trainItems,
  winnerOf,
  type ProposedCandidate,
} from '#shared/rewards/loop.ts';
import { buildProposeParams } from '#shared/rewards/propose.ts';

const source = (body: string) => `def reward(obs, action, next_obs, done, info):\n    return ${body}\n`;
const cand = (name: string, body: string, origin: ProposedCandidate['origin'] = 'claude'): ProposedCandidate => ({
  name,
  rationale: `why ${name}`,
  source: source(body),
  origin,
});
const settings = {
  trainSeeds: [1, 2],
  gradeSeeds: [1001, 1002],
  episodesPerSeed: 20,
  train: { total_steps: 4000, num_envs: 8, evaluation_episodes: 10 },
  timeoutSeconds: 600,
};
/** The grader's seed result, with the curve it read from the job's log: success climbing to `success` over 32 iterations. */
const graded = (seed: number, success: number) => ({
  ok: true,
  value: {
    seed,
    success,
    episodes: 40,
    trainSeconds: 3.5,
    curve: Array.from({ length: 10 }, (_, i) => ({
      step: 256 + Math.round((i * (8192 - 256)) / 9),
      envReturn: -200 + (i * 80) / 9,
      success: (i * success) / 9,
    })),
  },
});
const wall = {
  ok: false,
  error: 'States.TaskFailed',
  cause: JSON.stringify({ StatusReason: 'the sandbox stopped the job: wall limit (ran past 60 s)', SandboxLimit: 'wall' }),
};
const baselineSource = (file: string) => readFileSync(join(REPO_ROOT, 'batch-jobs/rewards-train/rewards', file), 'utf8');

describe('reward search loop bookkeeping', () => {
  const gen1 = [cand('height', 'next_obs[0]'), cand('forever', '0.0'), cand('energy', 'next_obs[1] ** 2')];
  const items1 = trainItems(gen1, settings);
  const outcomes1 = [
    graded(1, 0.5),
    graded(2, 0.7),
    wall,
    wall,
    graded(1, 0.9),
    { ok: false, error: 'States.TaskFailed', cause: JSON.stringify({ StderrTail: 'RewardCallError: reward() raised at step 3' }) },
  ];
  const doc1 = recordGeneration(undefined, 1, candidateResults(gen1, items1, outcomes1));

  it('makes one training item per candidate and seed, graded on fresh seeds only', () => {
    assert.equal(items1.length, 6);
    assert.deepEqual(
      items1.map((i) => [i.candidate, i.seed]),
      [
        [0, 1],
        [0, 2],
        [1, 1],
        [1, 2],
        [2, 1],
        [2, 2],
      ],
    );
    assert.throws(() => trainItems(gen1, { ...settings, gradeSeeds: [2, 1001] }), /gradeSeeds\[0\]: is a training seed/);
    assert.ok(items1.every((i) => i.timeoutSeconds === 600));
    for (const bad of [59, 1801, 90.5]) assert.throws(() => trainItems(gen1, { ...settings, timeoutSeconds: bad }), new RegExp(`trainTimeoutSeconds.*${bad}`));
  });

  it('records each seed: the trusted grade, or the failure with the sandbox verdict; the generation goes on', () => {
    const [height, forever, energy] = doc1.generations[0]!.candidates;
    assert.deepEqual(
      height!.seeds.map((s) => s.success),
      [0.5, 0.7],
    );
    // The curves move from the seeds to the candidate; the seeds keep the grade and the time.
    assert.deepEqual(
      height!.curves!.map((c) => [c.seed, c.points.length]),
      [
        [1, 10],
        [2, 10],
      ],
    );
    assert.ok(height!.seeds.every((s) => !('curve' in s) && s.trainSeconds === 3.5));
    assert.equal(forever!.curves, undefined);
    assert.deepEqual(
      forever!.seeds.map((s) => s.success),
      [null, null],
    );
    assert.equal(forever!.verdict, 'the sandbox stopped the job: wall limit (ran past 60 s)');
    assert.deepEqual(
      energy!.seeds.map((s) => s.failure ?? s.success),
      [0.9, 'States.TaskFailed: RewardCallError: reward() raised at step 3'],
    );
    assert.equal(energy!.verdict, undefined);
    assert.throws(() => candidateResults(gen1, items1, outcomes1.slice(1)), /results\.length: must equal the 6 training items/);
  });

  it('feeds back the graded figures of the last generation and the best so far', () => {
    const gen2 = [cand('speed', 'abs(next_obs[1])')];
    const items2 = trainItems(gen2, settings);
    const doc2 = recordGeneration(doc1, 2, candidateResults(gen2, items2, [graded(1, 0.1), graded(2, 0.2)]));
    const feedback = feedbackFrom(doc2);
    assert.deepEqual(
      feedback.map((f) => [f.generation, f.name]),
      [
        [1, 'height'],
        [2, 'speed'],
      ],
    );
    assert.equal(feedback[0]!.meanSuccess, 0.6); // exact: (0.5 + 0.7) / 2, basic operations only, the same float everywhere
    const text = JSON.stringify(buildProposeParams({ task: MOUNTAINCAR_TASK, generation: 3, candidates: 2, history: feedback, model: 'm' }));
    assert.match(text, /generation 1, height: mean success 0\.60/);
    assert.match(
      text,
      /training curve \(the job's own log, not graded\): seed 1: step 256 return -200 success 0%; .*step 8192 return -120 success 50% \| seed 2: .*success 70%/,
    );
    assert.equal(winnerOf(doc2).name, 'height');
  });

  it('compares the winner with both baselines retrained on the same fresh training seeds and graded on the same fresh seeds', () => {
    const roles = finalCandidates(doc1, {
      env: { name: 'env-reward', rationale: "the environment's own", source: baselineSource('env_reward.py'), origin: 'baseline' },
      shaped: { name: 'shaped-reward', rationale: 'person-written', source: baselineSource('shaped_reward.py'), origin: 'baseline' },
    });
    assert.deepEqual(
      roles.map((r) => [r.role, r.candidate.name]),
      [
        ['winner', 'height'],
        ['env-reward', 'env-reward'],
        ['shaped-reward', 'shaped-reward'],
      ],
    );
    const items = trainItems(
      roles.map((r) => r.candidate),
      { ...settings, trainSeeds: [101, 102], gradeSeeds: [2001, 2002, 2003] },
    );
    assert.deepEqual(
      items.map((i) => i.seed),
      [101, 102, 101, 102, 101, 102],
    );
    const final = recordFinal(doc1, roles, items, [graded(101, 0.8), graded(102, 0.6), graded(101, 0), graded(102, 0.1), graded(101, 0.9), graded(102, 0.95)]);
    assert.deepEqual(final.final!.gradeSeeds, [2001, 2002, 2003]);
    assert.deepEqual(
      final.final!.entries.map((e) => [e.role, e.seeds.map((s) => s.success)]),
      [
        ['winner', [0.8, 0.6]],
        ['env-reward', [0, 0.1]],
        ['shaped-reward', [0.9, 0.95]],
      ],
    );
  });
});
