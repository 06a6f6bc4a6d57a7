/**
 * Every pipeline's config is bounded by its schema: the longest JSON text any valid config can
 * have, computed from the schema (every string at its worst escaping, every array full), stays
 * within MAX_CONFIG_JSON_CHARS, so a config can neither sink a state (256 KiB) nor, where a cache
 * key hashes it, States.Hash's 10,000 characters. A schema with an unbounded string, array or
 * object is refused by maxJsonChars, naming the field.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { PIPELINES } from '#infra/registry.ts';
import { ConfigError } from '#shared/errors.ts';
import { maxJsonChars, parseOrThrow } from '#shared/schema.ts';

/** The most a config may take of a state: a tenth of Step Functions' 256 KiB. */
const MAX_CONFIG_JSON_CHARS = 24 * 1024;
/** What the configs' schemas gave when these bounds were set (a change shows up here). */
const MEASURED: Record<string, number> = {
  selfplay: 681,
  evals: 9627,
  'lm-sft': 642,
  molecules: 6944,
  rewards: 5317,
  refinery: 17657,
  sae: 2516,
  video: 8511,
  humanoid: 7710,
  probe: 10703,
};

describe('config bounds', () => {
  for (const entry of PIPELINES) {
    it(`${entry.name}: the longest valid config is bounded`, () => {
      const bound = maxJsonChars(entry.config);
      assert.ok(bound <= MAX_CONFIG_JSON_CHARS, `${entry.name}: ${bound} characters`);
      assert.equal(bound, MEASURED[entry.name], `${entry.name}'s bound changed: update MEASURED if the schema change is meant`);
      // Its sizes are valid configs, and within the bound.
      for (const size of [entry.smoke, entry.full, ...Object.values(entry.sizes ?? {})].filter((s) => s !== undefined)) {
        const parsed = entry.config.safeParse(size);
        assert.ok(parsed.success, `${entry.name}: ${JSON.stringify(size)}`);
        assert.ok(JSON.stringify(parsed.data).length <= bound);
      }
    });
  }

  it('is an upper bound: a config built at every limit of a schema stays within it', () => {
    const schema = z
      .object({
        name: z.string().regex(/^[a-z][a-z0-9_-]{0,39}$/),
        note: z.string().max(10),
        seeds: z
          .array(
            z
              .int()
              .min(0)
              .max(2 ** 31 - 1),
          )
          .max(3),
        ratio: z.number(),
        mode: z.enum(['fast', 'thorough']),
        uri: z.string().max(5).nullable(),
      })
      .strict();
    const worst = {
      name: `a${'z'.repeat(39)}`,
      note: '\u0001'.repeat(10),
      seeds: [2 ** 31 - 1, 2 ** 31 - 1, 2 ** 31 - 1],
      ratio: -Number.MAX_VALUE,
      mode: 'thorough',
      uri: '\u0002'.repeat(5),
    };
    const bound = maxJsonChars(schema);
    assert.equal(JSON.stringify(schema.parse(worst)).length, bound);
  });

  it('refuses configs whose item counts pass their bounds, naming the field and what fits', () => {
    const molecules = PIPELINES.find((p) => p.name === 'molecules')!;
    // 10,000 molecules in chunks of 25: 400 oracle jobs in round 0.
    assert.throws(
      () => parseOrThrow(molecules.config, { sampleSize: 10_000, oracle: { chunkSize: 25 } }, 'config'),
      (e: unknown) =>
        e instanceof ConfigError && e.field === 'config.oracle.chunkSize' && /400 oracle jobs.*over 100: use a chunkSize of at least 100/.test(e.message),
    );
    parseOrThrow(molecules.config, { sampleSize: 10_000, oracle: { chunkSize: 100 } }, 'config');
    const lm = PIPELINES.find((p) => p.name === 'lm-sft')!;
    const phase = { steps: 1000, batch_size: 8, lr: 0.001 };
    assert.throws(
      () => parseOrThrow(lm.config, { run: 'r', base: phase, finetune: { ...phase, checkpoint_every: 10 } }, 'config'),
      (e: unknown) => e instanceof ConfigError && e.field === 'config.finetune.checkpoint_every' && /101 checkpoints.*over 64: use at least 16/.test(e.message),
    );
    parseOrThrow(lm.config, { run: 'r', base: phase, finetune: { ...phase, checkpoint_every: 16 } }, 'config');
  });

  it('refuses a schema whose JSON has no bound, naming the field', () => {
    assert.throws(
      () => maxJsonChars(z.object({ a: z.object({ b: z.string() }).strict() }).strict()),
      (e: unknown) => e instanceof ConfigError && e.field === 'config.a.b',
    );
    assert.throws(
      () => maxJsonChars(z.object({ list: z.array(z.int().min(0).max(9)) }).strict()),
      (e: unknown) => e instanceof ConfigError && e.field === 'config.list',
    );
    assert.throws(
      () => maxJsonChars(z.object({ open: z.object({}).loose() }).strict()),
      (e: unknown) => e instanceof ConfigError && e.field === 'config.open',
    );
  });
});
