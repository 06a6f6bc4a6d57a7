/**
 * The default Claude model is one the pinned SDK does not call deprecated, in every pipeline and
 * every size: Anthropic retires models on announced dates, and a retired default fails every
 * request a user makes with a real key. This test fails as soon as an SDK upgrade lists the
 * default, so CI meets the next retirement before a user does.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { DEFAULT_CLAUDE_MODEL } from '#shared/clients/anthropic.ts';
import { anthropicClient } from '#shared/rewards/propose.ts';
import { PIPELINES } from '#infra/registry.ts';
import { startFakeClaude, type FakeClaude } from '../support/fake-claude.ts';

/** The SDK's own list of deprecated models (id -> end-of-life date); not an exported path, so read by file. */
async function sdkDeprecatedModels(): Promise<Record<string, string>> {
  const sdkRoot = dirname(createRequire(import.meta.url).resolve('@anthropic-ai/sdk'));
  const module = await import(pathToFileURL(join(sdkRoot, 'internal/data/deprecated-models.mjs')).href);
  assert.ok(module.DEPRECATED_MODELS && typeof module.DEPRECATED_MODELS === 'object', 'the SDK moved its deprecated-model list');
  return module.DEPRECATED_MODELS;
}

/** What the SDK prints (console.warn) while one request is sent with `model`. */
async function warningsFor(fake: FakeClaude, model: string): Promise<string[]> {
  const warnings: string[] = [];
  const warn = console.warn;
  console.warn = (...args: unknown[]) => void warnings.push(args.map(String).join(' '));
  try {
    fake.reply('ok');
    await anthropicClient('test-key', fake.url).messages.create({ model, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
  } finally {
    console.warn = warn;
  }
  return warnings;
}

describe('the default Claude model', () => {
  let fake: FakeClaude;
  before(async () => {
    fake = await startFakeClaude();
  });
  after(() => fake.close());

  it("is not in the pinned SDK's deprecated list", async () => {
    const deprecated = await sdkDeprecatedModels();
    assert.ok(Object.keys(deprecated).length > 0, 'an empty list would prove nothing');
    assert.equal(deprecated[DEFAULT_CLAUDE_MODEL], undefined, `${DEFAULT_CLAUDE_MODEL} reaches end-of-life on ${deprecated[DEFAULT_CLAUDE_MODEL]}`);
  });

  it('is the model of every pipeline size that calls Claude, and none of them is deprecated', async () => {
    const deprecated = await sdkDeprecatedModels();
    const checked: string[] = [];
    for (const pipeline of PIPELINES) {
      const sizes = { smoke: pipeline.smoke, full: pipeline.full ?? pipeline.smoke, ...pipeline.sizes };
      for (const [size, config] of Object.entries(sizes)) {
        const parsed = pipeline.config.safeParse(config);
        if (!parsed.success) continue; // sizes that need a run-time input (a checkpoint) say nothing of a model
        const model = (parsed.data as { model?: unknown }).model;
        if (typeof model !== 'string') continue;
        assert.equal(deprecated[model], undefined, `${pipeline.name} ${size}: ${model} is deprecated (end-of-life ${deprecated[model]})`);
        checked.push(`${pipeline.name}/${size}`);
      }
    }
    assert.ok(
      checked.some((c) => c.startsWith('rewards/')),
      `no Claude-calling size checked: ${checked}`,
    );
  });

  it('draws no deprecation warning from the SDK, where a retired model does', async () => {
    assert.deepEqual(await warningsFor(fake, DEFAULT_CLAUDE_MODEL), []);
    const [retired] = Object.keys(await sdkDeprecatedModels());
    const warnings = await warningsFor(fake, retired!);
    assert.match(warnings.join('\n'), new RegExp(`The model '${retired}' is deprecated`));
  });
});
