/**
 * The checkpoint producer at its limits: the longest run name and the most checkpoints a run may
 * write (64: the base, then every fine-tune step), on a tiny model so it takes seconds. Every
 * checkpoint is listed in the job's result, which the state holds: the run completes and its
 * largest state stays far below 256 KiB. A config the job could not run (n_embd not a multiple of
 * n_head) is refused before anything starts, naming the field.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { LmSftConfig, MAX_CHECKPOINTS } from '#pipelines/lm-sft/config.ts';
import { LM_SFT_PIPELINE } from '#pipelines/lm-sft/stack.ts';
import { ConfigError } from '#shared/errors.ts';
import { parseOrThrow } from '#shared/schema.ts';
import { startTestRuntime, stopTestRuntime } from '../support/runtime.ts';
import { assertRunCost } from '../support/run-cost.ts';

describe('checkpoint producer at its limits', () => {
  let runtime: LocalRuntime;
  let record: ExecutionRecord;
  const run = `r${'x'.repeat(127)}`;
  const config = {
    run,
    seed: 1,
    model: { n_layer: 1, n_embd: 16, n_head: 2, block_size: 96 },
    base: { steps: 10, batch_size: 4, lr: 0.004 },
    finetune: { steps: MAX_CHECKPOINTS - 1, batch_size: 4, lr: 0.004, checkpoint_every: 1 },
  };

  before(
    async () => {
      runtime = await startTestRuntime({ pipelines: [pipelineNamed(LM_SFT_PIPELINE)] });
      record = await runtime.startExecution(LM_SFT_PIPELINE, { config: LmSftConfig.parse(config) }).done;
    },
    { timeout: 15 * 60_000 },
  );
  after(() => stopTestRuntime(runtime));

  it('writes the most checkpoints a run may, and its state stays small', async () => {
    assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
    await assertRunCost(record);
    const output = record.output as { run: string; train: { checkpoints: { step: number; uri: string }[] } };
    assert.equal(output.run, run);
    assert.equal(output.train.checkpoints.length, MAX_CHECKPOINTS);
    assert.ok(output.train.checkpoints.every((c) => c.uri.includes(`/checkpoints/${run}/`)));
    const { largestState } = record.stats;
    console.log(`lm-sft at its limits: largest state ${largestState.bytes} bytes (${largestState.name})`);
    assert.ok(largestState.bytes < 128 * 1024, `${largestState.name}: ${largestState.bytes} bytes`);
  });

  it('refuses a model the job could not build, and one checkpoint too many, before anything runs', () => {
    assert.throws(
      () => parseOrThrow(LmSftConfig, { ...config, model: { ...config.model, n_head: 3 } }, 'config'),
      (e: unknown) => e instanceof ConfigError && e.field === 'config.model.n_embd',
    );
    assert.throws(
      () => parseOrThrow(LmSftConfig, { ...config, finetune: { ...config.finetune, steps: MAX_CHECKPOINTS } }, 'config'),
      (e: unknown) => e instanceof ConfigError && e.field === 'config.finetune.checkpoint_every',
    );
  });
});
