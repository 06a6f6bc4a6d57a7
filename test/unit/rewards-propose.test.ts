/**
 * Reward proposals through the real Anthropic SDK against a fake Messages API on loopback: the
 * request (model, the cached fixed block, structured output, the graded history), the checked
 * candidates, and the errors for a bad reply or a missing key.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  anthropicClient,
  buildProposeParams,
  checkProposal,
  proposeRewards,
  resolveApiKey,
  type ProposeRequest,
  type RewardTask,
} from '#shared/rewards/propose.ts';
import { MissingApiKeyError } from '#shared/rewards/errors.ts';
import { startFakeClaude, type FakeClaude } from '../support/fake-claude.ts';

const task: RewardTask = {
  name: 'MountainCar',
  description: 'Drive an underpowered car up a hill: reach position 0.5 within 200 steps.',
  rewardInterface: 'def reward(obs, action, next_obs, done) -> float',
  functionName: 'reward',
};
const candidate = (name: string, body = 'return float(next_obs[0])') => ({
  name,
  rationale: `try ${name}`,
  source: `import numpy as np\n\ndef reward(obs, action, next_obs, done):\n    ${body}\n`,
});
const request = (overrides: Partial<ProposeRequest> = {}): ProposeRequest => ({
  task,
  generation: 1,
  candidates: 2,
  history: [],
  model: 'claude-test-model',
  ...overrides,
});

describe('reward proposals through the Messages API', () => {
  let fake: FakeClaude;
  before(async () => {
    fake = await startFakeClaude();
  });
  after(() => fake.close());

  it('asks for K reward functions with the task block cached and structured output, and checks the reply', async () => {
    fake.reply({ candidates: [candidate('height'), candidate('energy', 'return float(0.5 * next_obs[1] ** 2)')] });
    const client = anthropicClient('test-key', fake.url);
    const result = await proposeRewards(client, request());
    assert.deepEqual(
      result.candidates.map((c) => c.name),
      ['height', 'energy'],
    );
    const sent = fake.requests.at(-1)!;
    assert.equal(sent.body.model, 'claude-test-model');
    const system = sent.body.system as { text: string; cache_control?: { type: string } }[];
    assert.equal(system.length, 1);
    assert.deepEqual(system[0]!.cache_control, { type: 'ephemeral' });
    assert.match(system[0]!.text, /reach position 0\.5 within 200 steps/);
    assert.match(system[0]!.text, /def reward\(obs, action, next_obs, done\)/);
    const format = (sent.body.output_config as { format: { type: string; schema: { properties: Record<string, unknown> } } }).format;
    assert.equal(format.type, 'json_schema');
    assert.ok(format.schema.properties.candidates);
    assert.match(String(sent.headers.authorization ?? sent.headers['x-api-key']), /test-key/);
    assert.equal(result.usage.cacheWriteTokens > 0, true);
  });

  it('feeds back the graded history; the fixed block is read from the cache the second time', async () => {
    fake.reply({ candidates: [candidate('a'), candidate('b')] }, { candidates: [candidate('c'), candidate('d')] });
    const client = anthropicClient('test-key', fake.url);
    await proposeRewards(client, request({ task: { ...task, name: 'MountainCar (cache test)' } }));
    const second = await proposeRewards(
      client,
      request({
        task: { ...task, name: 'MountainCar (cache test)' },
        generation: 2,
        history: [
          {
            generation: 1,
            name: 'a',
            source: candidate('a').source,
            perSeedSuccess: [
              { seed: 1, success: 0.9 },
              { seed: 2, success: null, error: 'timeout' },
            ],
            meanSuccess: 0.45,
            curve: 'return -200 -> -140',
            verdict: 'killed at the wall-clock limit',
          },
        ],
      }),
    );
    assert.ok(second.usage.cacheReadTokens > 0 && second.usage.cacheWriteTokens === 0, JSON.stringify(second.usage));
    const text = (fake.requests.at(-1)!.body.messages as { content: { text: string }[] }[])[0]!.content[0]!.text;
    assert.match(text, /Generation 2\. Earlier candidates, graded on fresh seeds/);
    assert.match(text, /generation 1, a: mean success 0\.45; sandbox verdict: killed at the wall-clock limit/);
    assert.match(text, /seed 1: 0\.90, seed 2: failed \(timeout\)/);
  });

  it('refuses a reply with the wrong count, a duplicate name, or no reward function, naming the field', () => {
    assert.throws(() => checkProposal({ candidates: [candidate('a')] }, request()), /expected 2 candidates, got 1/);
    assert.throws(
      () => checkProposal({ candidates: [candidate('a'), candidate('a')] }, request()),
      /proposal\.candidates\[1\]\.name: is used by an earlier candidate/,
    );
    assert.throws(
      () => checkProposal({ candidates: [candidate('a'), { name: 'b', rationale: 'x', source: 'print(1)' }] }, request()),
      /proposal\.candidates\[1\]\.source: must define reward\(\.\.\.\) at the top level/,
    );
    assert.throws(() => checkProposal({ candidates: [candidate('Bad Name'), candidate('b')] }, request()), /proposal\.candidates\.0\.name/);
    assert.throws(() => buildProposeParams(request({ candidates: 0 })), /candidates: must be an integer from 1 to 16 \(got 0\)/);
  });

  it('says what to do without a key', async () => {
    await assert.rejects(
      resolveApiKey({}, undefined),
      (e: Error) => e instanceof MissingApiKeyError && /set ANTHROPIC_API_KEY, or evaluate reward functions from files/.test(e.message),
    );
    assert.equal(await resolveApiKey({ ANTHROPIC_API_KEY: 'k' }, undefined), 'k');
  });
});
