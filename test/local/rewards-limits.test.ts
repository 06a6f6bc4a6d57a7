/**
 * Reward search at the largest inputs its schema allows, every candidate failing: 16 reward files
 * of 6,000 characters each raising a 2,000-character message full of quotes and backslashes at
 * load, on 10 training seeds (160 sandboxed jobs, the largest fan-out the schema allows), graded
 * on 100 fresh seeds; the final (3 x finalTrainSeeds items, a smaller fan-out than the search's)
 * on one training seed and 100 grading seeds, to keep the run to a few minutes. Nothing a candidate decides may reach the
 * state: the run completes, records every failure and publishes, and its largest state stays far
 * below Step Functions' 256 KiB. A reward file that was never uploaded fails the run at once,
 * naming it, with nothing trained.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { sandboxAvailable } from '#infra/local/sandbox.ts';
import { planRun } from '#infra/cli/plan.ts';
import { RewardsConfig } from '#pipelines/rewards/config.ts';
import { REWARD_ARTIFACT, REWARDS_PIPELINE } from '#pipelines/rewards/stack.ts';
import { MAX_SOURCE_CHARS } from '#shared/rewards/propose.ts';
import { readSearch, writeRewardSource } from '#shared/rewards/steps.ts';
import { startTestRuntime, stopTestRuntime } from '../support/runtime.ts';

const probe = await sandboxAvailable();
const skip = probe.available ? false : `no sandbox here: ${probe.reason}`;

/** The longest message a candidate raises here: quotes and backslashes, which JSON escapes. */
const MESSAGE_CHARS = 2000;

/** A reward file of exactly MAX_SOURCE_CHARS characters that raises a long, escape-heavy message when loaded. */
function hostileSource(i: number): string {
  const message = `candidate ${i} \\"quoted\\" C:\\\\tmp\\\\x '`.repeat(MESSAGE_CHARS).slice(0, MESSAGE_CHARS);
  const head = [`raise RuntimeError(${JSON.stringify(message)})`, '', 'def reward(obs, action, next_obs, done, info):', '    return 0.0', ''].join('\n');
  return head + '#'.repeat(MAX_SOURCE_CHARS - head.length);
}

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

describe('reward search at the schema limits, every candidate failing', { skip }, () => {
  let rt: LocalRuntime;
  let record: ExecutionRecord;
  let config: RewardsConfig;
  const sources = range(0, 16).map(hostileSource);
  const settings = {
    trainSeeds: range(1, 10),
    gradeSeeds: range(1001, 100),
    finalTrainSeeds: [101],
    finalSeeds: range(2001, 100),
    episodesPerSeed: 1,
    train: { total_steps: 256, num_envs: 1, evaluation_episodes: 0 },
    trainTimeoutSeconds: 60,
  };

  before(
    async () => {
      rt = await startTestRuntime({ pipelines: [pipelineNamed(REWARDS_PIPELINE)] });
      const ctx = { bucket: rt.resources.buckets[0]!, pipeline: REWARDS_PIPELINE };
      const rewardFiles = await Promise.all(
        sources.map(async (s, i) => ({ name: `${'c'.repeat(37)}-${String(i).padStart(2, '0')}`, sha256: await writeRewardSource(ctx, s) })),
      );
      config = RewardsConfig.parse({ ...settings, rewardFiles });
      record = await rt.startExecution(REWARDS_PIPELINE, { config }).done;
      // 163 sandboxed jobs: about 7 minutes on 2 cores, longer beside other tests.
    },
    { timeout: 25 * 60_000 },
  );
  after(() => stopTestRuntime(rt));

  it('completes, records every failed seed with its reason, and publishes; the state stays small', async () => {
    assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
    assert.ok(sources.every((s) => s.length === MAX_SOURCE_CHARS));
    const out = record.output as { searchUri: string; artifact: { name: string } };
    assert.equal(out.artifact.name, REWARD_ARTIFACT);
    const doc = await readSearch(out.searchUri);
    const candidates = doc.generations[0]!.candidates;
    assert.equal(candidates.length, 16);
    for (const c of candidates) {
      assert.equal(c.seeds.length, 10);
      for (const s of c.seeds) {
        assert.equal(s.success, null);
        // The candidate's own message is the reason, cut to a bound.
        assert.match(s.failure ?? '', /RuntimeError: candidate \d+ /, JSON.stringify(s));
        assert.ok((s.failure ?? '').length <= 1600, `${s.failure?.length} characters`);
      }
    }
    // The final ran on its own seeds: the baselines trained, the failing winner failed again.
    assert.deepEqual(
      doc.final!.entries.map((e) => [e.role, e.seeds.length]),
      [
        ['winner', 1],
        ['env-reward', 1],
        ['shaped-reward', 1],
      ],
    );
    assert.ok(doc.final!.entries.find((e) => e.role === 'shaped-reward')!.seeds.every((s) => s.success !== null));
    // 160 failure records, each an error name and a URI: the largest state (the record step's, which
    // holds the records twice, in the state and in its scratch inputs) measured ~90 KiB, bounded by
    // the item count whatever the candidates raise.
    const { largestState } = record.stats;
    console.log(`largest state: ${largestState.bytes} bytes (${largestState.name})`);
    assert.ok(largestState.bytes < 128 * 1024, `${largestState.name}: ${largestState.bytes} bytes`);
    assert.equal(record.stats.batchJobs, 163);
    // The plan's bound of the largest state holds at the limits, every record a failure.
    const plan = planRun(pipelineNamed(REWARDS_PIPELINE), config);
    console.log(`the plan's bound: ${plan.payload.bytes} bytes`);
    assert.ok(largestState.bytes <= plan.payload.bytes, `${largestState.bytes} > ${plan.payload.bytes}`);
    assert.equal(plan.counts.batchJobs, 163);
  });

  it('fails at once, naming the file, when a reward file was never uploaded', async () => {
    const missing = '0'.repeat(64);
    const config = RewardsConfig.parse({ ...settings, rewardFiles: [{ name: 'missing', sha256: missing }] });
    const run = await rt.startExecution(REWARDS_PIPELINE, { config }).done;
    assert.equal(run.status, 'FAILED');
    assert.equal(run.error, 'ConfigError');
    assert.match(run.cause ?? '', new RegExp(`config\\.rewardFiles\\.0\\.sha256: no reward file has this hash.*${missing}`));
    assert.equal(run.stats.batchJobs, 0);
  });
});
