/**
 * `cache explain` with two pipelines that have a step of the same name, end to end on the embedded
 * runtime: selfplay and lm-sft both have a cached `train` (each a real Batch job, on the smallest
 * sizes their configs allow). Each pipeline's entries live in its own partition
 * (`CACHE#<pipeline>#<step>`), so after lm-sft trains, a selfplay rerun is still a cache hit and
 * `cache explain selfplay train` compares against selfplay's own entry, never lm-sft's; an entry
 * keyed the old way (`CACHE#<step>`) is read by neither.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { explainCache } from '#infra/cli/cache-explain.ts';
import { LmSftConfig } from '#pipelines/lm-sft/config.ts';
import { LM_SFT_PIPELINE } from '#pipelines/lm-sft/stack.ts';
import { SelfPlayConfig } from '#pipelines/selfplay/config.ts';
import { SELFPLAY_PIPELINE } from '#pipelines/selfplay/stack.ts';
import { dynamoClient } from '#shared/clients/aws.ts';
import { cachePartition } from '#shared/table.ts';
import { startTestRuntime, stopTestRuntime } from '../support/runtime.ts';

/** One generation of one iteration on eight games: a train job, two matches, the report. */
const selfplay = SelfPlayConfig.parse({
  generations: 1,
  gamesPerIteration: 8,
  iterations: 1,
  hiddenSizes: [8],
  matchGames: 2,
  matchMode: 'greedy',
  evaluationGames: 2,
  bootstrapSamples: 1,
});
/** A one-layer GPT, ten base steps and one fine-tune step: one train job. */
const lmSft = LmSftConfig.parse({
  run: 'explain',
  model: { n_layer: 1, n_embd: 16, n_head: 2, block_size: 96 },
  base: { steps: 10, batch_size: 4, lr: 0.004 },
  finetune: { steps: 1, batch_size: 4, lr: 0.004, checkpoint_every: 1 },
});

describe('cache explain with two pipelines that both have a `train` step', () => {
  let runtime: LocalRuntime;
  let selfplayCold: ExecutionRecord;
  let lmSftCold: ExecutionRecord;
  let selfplayWarm: ExecutionRecord;
  let warmJobs: number;

  const explain = async (pipeline: string, step: string): Promise<string> => {
    const lines: string[] = [];
    await explainCache(runtime, pipeline, step, { out: (line: string) => lines.push(line), err: (line: string) => lines.push(line) });
    return lines.join('\n');
  };
  const entries = async (partition: string) =>
    (
      await dynamoClient().send(
        new QueryCommand({ TableName: runtime.resources.tables[0]!, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': partition } }),
      )
    ).Items ?? [];

  before(
    async () => {
      runtime = await startTestRuntime({ pipelines: [pipelineNamed(SELFPLAY_PIPELINE), pipelineNamed(LM_SFT_PIPELINE)] });
      selfplayCold = await runtime.startExecution(SELFPLAY_PIPELINE, { config: selfplay }).done;
      // lm-sft's train runs after selfplay's: with one partition per step name, its entry would be
      // the latest of `train` and selfplay's explain would compare against it.
      lmSftCold = await runtime.startExecution(LM_SFT_PIPELINE, { config: lmSft }).done;
      const jobs = runtime.counters().batchJobs;
      selfplayWarm = await runtime.startExecution(SELFPLAY_PIPELINE, { config: selfplay }).done;
      warmJobs = runtime.counters().batchJobs - jobs;
    },
    { timeout: 10 * 60_000 },
  );
  after(() => stopTestRuntime(runtime));

  it("keeps each pipeline's `train` entries in its own partition, and a rerun is a hit", async () => {
    for (const record of [selfplayCold, lmSftCold, selfplayWarm]) assert.equal(record.status, 'SUCCEEDED', `${record.name}: ${record.error}: ${record.cause}`);
    assert.equal(warmJobs, 0, "selfplay's rerun trains nothing: its train is a cache hit after lm-sft's");
    const ours = await entries(cachePartition(SELFPLAY_PIPELINE, 'train'));
    const theirs = await entries(cachePartition(LM_SFT_PIPELINE, 'train'));
    assert.deepEqual(
      ours.map((i) => [i.pk, i.pipeline, i.step]),
      [['CACHE#selfplay#train', 'selfplay', 'train']],
    );
    assert.deepEqual(
      theirs.map((i) => [i.pk, i.pipeline, i.step]),
      [['CACHE#lm-sft#train', 'lm-sft', 'train']],
    );
    assert.notEqual(ours[0]!.codeVersion, theirs[0]!.codeVersion, 'two jobs, two code versions');
    assert.deepEqual(await entries('CACHE#train'), [], 'nothing is keyed by the step alone');
  });

  it("explains each pipeline's `train` against its own entries only", async () => {
    const ours = await explain(SELFPLAY_PIPELINE, 'train');
    assert.match(ours, /^train\n {2}1 entry; latest from .*\n {2}code version: unchanged \([0-9a-f]{12}\)$/, ours);
    assert.doesNotMatch(ours, /batch-jobs\/evals-lm|CHANGED/);
    const theirs = await explain(LM_SFT_PIPELINE, 'train');
    assert.match(theirs, /^train\n {2}1 entry; latest from .*\n {2}code version: unchanged \([0-9a-f]{12}\)$/, theirs);
  });

  it('ignores an entry keyed the old way (by the step alone): it simply misses', async () => {
    const [lmEntry] = await entries(cachePartition(LM_SFT_PIPELINE, 'train'));
    // What an older version of the cache wrote for lm-sft's train, the latest of all.
    await dynamoClient().send(
      new PutCommand({ TableName: runtime.resources.tables[0]!, Item: { ...lmEntry, pk: 'CACHE#train', createdAt: '2999-01-01T00:00:00.000Z' } }),
    );
    const ours = await explain(SELFPLAY_PIPELINE, 'train');
    assert.match(ours, /1 entry; latest from (?!2999).*\n {2}code version: unchanged/, ours);
    const jobs = runtime.counters().batchJobs;
    const again = await runtime.startExecution(SELFPLAY_PIPELINE, { config: selfplay }).done;
    assert.equal(again.status, 'SUCCEEDED', again.cause);
    assert.equal(runtime.counters().batchJobs - jobs, 0);
  });
});
