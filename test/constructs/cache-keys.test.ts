/**
 * Every cache key's input is bounded at synth: each pipeline's cached steps read only declared
 * paths (the config, bounded by its schema, and values the pipeline's own steps make, each
 * declared with its bound and why), and the sum stays under the 10,000 characters States.Hash
 * takes. A key that could pass the limit, or that reads an undeclared path, fails the synth
 * naming the step and the path.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { buildApp } from '#infra/build-app.ts';
import { PIPELINES } from '#infra/registry.ts';
import { invoke, MAX_HASH_INPUT_CHARS, PipelineFunction, type PipelineStack, StateBounds, step } from '#pipelines/steps/index.ts';
import { ConfigError } from '#shared/errors.ts';
import { join } from 'node:path';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { minimalScope } from '../support/stacks.ts';

/** The cached steps of each pipeline (a new one, or one gone, shows up here). */
const CACHED: Record<string, string[]> = {
  selfplay: ['match', 'publish', 'report', 'train'],
  evals: ['eval', 'index-checkpoint', 'index-leaderboard', 'index-result'],
  'lm-sft': ['train'],
  molecules: ['publish', 'report'],
  rewards: ['grade', 'publish', 'report', 'train'],
  refinery: ['curate', 'dedup', 'filter-shard', 'ingest', 'label', 'publish', 'report', 'score-shard', 'train'],
  sae: ['contexts', 'detect', 'harvest', 'label', 'lm', 'publish', 'publish-lm', 'report', 'train-sae'],
  video: ['cut', 'fetch', 'generate', 'publish', 'publish-report', 'publish-sources', 'score'],
  humanoid: ['live-replay', 'publish', 'publish-checkpoints', 'replay', 'train', 'train-gpu'],
  probe: ['prepare', 'publish', 'square-item', 'sum'],
};

describe('cache keys are bounded at synth', () => {
  const { app } = buildApp({ skipBundling: true, fastSynth: true, nag: false });
  for (const entry of PIPELINES) {
    it(`${entry.name}: every cached step's key input is under ${MAX_HASH_INPUT_CHARS} characters`, () => {
      const stack = app.node.findChild(entry.stackId) as PipelineStack;
      const keys = Object.fromEntries(stack.bounds.keyChars);
      console.log(`${entry.name}: ${JSON.stringify(keys)}`);
      assert.deepEqual(Object.keys(keys).sort(), CACHED[entry.name]);
      for (const [stepId, chars] of Object.entries(keys)) assert.ok(chars > 0 && chars <= MAX_HASH_INPUT_CHARS, `${stepId}: ${chars}`);
    });
  }

  const square = (stack: Parameters<typeof step>[0]) =>
    invoke(new PipelineFunction(stack, 'Square', { entry: join(REPO_ROOT, 'functions/probe/square/handler.ts') }));

  it('fails the synth when a cached step reads an undeclared path, naming the step and the path', () => {
    const { stack, steps } = minimalScope();
    const scope = { ...steps, bounds: new StateBounds().chars('$.known', 10, 'a number the test declares') };
    assert.throws(
      () => step(stack, 'square', { run: square(stack), inputs: { 'x.$': '$.known', 'y.$': '$.unknown.deep' }, resultPath: '$.r', cache: { scope } }),
      (e: unknown) => e instanceof ConfigError && e.field === 'square: cache key input $.unknown.deep',
    );
  });

  it('fails the synth when a key could pass the limit, and counts intrinsics, filters and schema fields', () => {
    const config = z.object({ note: z.string().max(2000), n: z.int().min(0).max(99) }).strict();
    const bounds = new StateBounds()
      .schema('$.config', config, 'a config the test declares')
      .chars('$.list[?(@.ok == true)].value', 100, 'the values a filter picks, declared whole');
    // A schema field is bounded by its own definition: 2 + 6 x 2000 for the note, 2 for n.
    assert.equal(bounds.pathChars('$.config.note'), 12_002);
    assert.equal(bounds.pathChars('$.config.n'), 2);
    assert.equal(bounds.pathChars('$.list[?(@.ok == true)].value'), 100);
    // A Format's text counts its literal and its arguments, every character possibly escaped.
    assert.equal(bounds.expressionChars("States.Format('ab{}', $.config.n)"), 2 + 2 * (4 + 2));
    const { stack, steps } = minimalScope();
    assert.throws(
      () => step(stack, 'square', { run: square(stack), inputs: { 'note.$': '$.config.note' }, resultPath: '$.r', cache: { scope: { ...steps, bounds } } }),
      (e: unknown) => e instanceof ConfigError && e.field === 'square: cache key' && Number(e.value) > MAX_HASH_INPUT_CHARS,
    );
    const ok = minimalScope();
    step(ok.stack, 'square', { run: square(ok.stack), inputs: { 'n.$': '$.config.n' }, resultPath: '$.r', cache: { scope: { ...ok.steps, bounds } } });
  });

  it('refuses a declaration without a reason or with an unbounded schema', () => {
    assert.throws(
      () => new StateBounds().chars('$.x', 10, 'short'),
      (e: unknown) => e instanceof ConfigError && e.field === 'why',
    );
    assert.throws(
      () => new StateBounds().schema('$.x', z.object({ s: z.string() }).strict(), 'a schema with no bound'),
      (e: unknown) => e instanceof ConfigError,
    );
  });
});
