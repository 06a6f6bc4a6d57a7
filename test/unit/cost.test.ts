/**
 * The cost model: a usage priced with the dated table, by hand-computed examples, and the
 * table itself (every figure sourced, every GPU instance type the platform allows priced).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { GPU_INSTANCES } from '#pipelines/steps/gpu-instances.ts';
import { PRICES } from '#shared/cost/prices.ts';
import { addClaude, addUsage, cacheSaving, claudeUsageOf, costOf, EMPTY_USAGE, formatUsd, type RunUsage, usageOfStep } from '#shared/cost/usage.ts';
import { DEFAULT_CLAUDE_MODEL } from '#shared/clients/anthropic.ts';

const close = (a: number, b: number, what: string) => assert.ok(Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);

describe('cost model', () => {
  it('prices each kind of usage as the table says, by hand', () => {
    const usage: RunUsage = {
      transitions: 40_000,
      lambda: { invocations: 1_000_000, billedMs: 2_000_000, gbSeconds: 1000 },
      batch: [
        { job: 'Cut', platform: 'FARGATE', vcpus: 2, memoryMiB: 8192, gpus: 0, seconds: 1800 },
        { job: 'Score', platform: 'EC2', instanceType: 'g6.xlarge', vcpus: 4, memoryMiB: 15_360, gpus: 1, seconds: 3600 },
      ],
      claude: [{ model: 'claude-sonnet-4-5', inputTokens: 1_000_000, outputTokens: 100_000, cacheReadTokens: 2_000_000, cacheWriteTokens: 0 }],
    };
    const cost = costOf(usage);
    const item = (name: string) => cost.lines.find((l) => l.item.startsWith(name))!;
    close(item('Step Functions').lowUsd, 1.0, '40,000 transitions at $0.025 per 1,000');
    close(item('Lambda requests').lowUsd, 0.2, 'a million requests');
    close(item('Lambda compute').lowUsd, 0.0166667, '1,000 GB-s');
    close(item('Batch on Fargate').lowUsd, 0.5 * (2 * 0.04048 + 8 * 0.004445), 'half an hour of 2 vCPU and 8 GB');
    close(item('Batch on EC2 g6.xlarge').highUsd, 0.8048, 'an hour on demand');
    close(item('Batch on EC2 g6.xlarge').lowUsd, 0.8048 * (1 - PRICES.ec2['g6.xlarge']!.spotDiscountMax), 'an hour at the largest spot discount');
    close(item('Claude claude-sonnet-4-5').lowUsd, 3 + 1.5 + 0.6, 'input, output and cache reads');
    close(
      cost.highUsd,
      cost.lines.reduce((a, l) => a + l.highUsd, 0),
      'the sum',
    );
    assert.ok(cost.lowUsd < cost.highUsd);
    assert.deepEqual(cost.unpriced, []);
  });

  it('bills a Batch job at least a minute, as Fargate and EC2 do', () => {
    const cost = costOf({ ...EMPTY_USAGE, batch: [{ job: 'Sum', platform: 'FARGATE', vcpus: 1, memoryMiB: 2048, gpus: 0, seconds: 2 }] });
    close(cost.lowUsd, (60 / 3600) * (0.04048 + 2 * 0.004445), 'two seconds bill as sixty');
  });

  it("prices a cache hit at its step's cost in the computing run, per computation; a run not on record is not priced", () => {
    const step = { transitions: 40, lambdaInvocations: 4, lambdaBilledMs: 4000, lambdaGbSeconds: 2, batch: [], stores: 4 };
    const perHit = costOf(usageOfStep(step)).highUsd / 4;
    const saving = cacheSaving(
      [
        { step: 'item', executionArn: 'cold' },
        { step: 'item', executionArn: 'cold' },
        { step: 'item', executionArn: 'gone' },
      ],
      (arn) => (arn === 'cold' ? { item: step } : undefined),
    );
    assert.deepEqual({ hits: saving.hits, priced: saving.priced }, { hits: 3, priced: 2 });
    close(saving.highUsd, 2 * perHit, 'two hits of four computations');
    close(saving.highUsd, (2 * (40 * 0.025e-3 + 4 * 0.2e-6 + 2 * 0.0000166667)) / 4, 'by hand');
  });

  it('names what it cannot price and leaves it out of the sums', () => {
    const cost = costOf({
      ...EMPTY_USAGE,
      batch: [{ job: 'Train', platform: 'EC2', instanceType: 'p5.48xlarge', vcpus: 192, memoryMiB: 2_000_000, gpus: 8, seconds: 60 }],
      claude: [{ model: 'claude-unknown-1', inputTokens: 10, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0 }],
    });
    assert.equal(cost.lowUsd, 0);
    assert.equal(cost.unpriced.length, 2);
    assert.match(cost.unpriced[0]!, /p5\.48xlarge/);
    assert.match(cost.unpriced[1]!, /claude-unknown-1/);
  });

  it('adds usages, merging Claude tokens by model', () => {
    const one: RunUsage = {
      ...EMPTY_USAGE,
      transitions: 3,
      claude: [{ model: 'm', inputTokens: 1, outputTokens: 2, cacheReadTokens: 3, cacheWriteTokens: 4 }],
    };
    const sum = addUsage(one, one);
    assert.equal(sum.transitions, 6);
    assert.deepEqual(sum.claude, [{ model: 'm', inputTokens: 2, outputTokens: 4, cacheReadTokens: 6, cacheWriteTokens: 8 }]);
  });

  it('formats sums and ranges', () => {
    assert.equal(formatUsd(0), '$0');
    assert.equal(formatUsd(0.00123), '$0.0012');
    assert.equal(formatUsd(1.234, 5.678), '$1.23-$5.68');
  });

  it('the table: dated, every figure sourced, every allowed GPU instance and the default Claude model priced', () => {
    assert.match(PRICES.asOf, /^\d{4}-\d{2}-\d{2}$/);
    for (const [name, price] of Object.entries(PRICES.aws)) {
      assert.ok(price.usd > 0, name);
      assert.match(price.source, /^https:\/\//, name);
    }
    for (const type of Object.keys(GPU_INSTANCES)) {
      const price = PRICES.ec2[type];
      assert.ok(price, `${type} has no price`);
      assert.match(price.onDemandPerHour.source, /^https:\/\//);
      assert.ok(price.spotDiscountMax > 0 && price.spotDiscountMax < 1);
    }
    assert.ok(PRICES.claude[DEFAULT_CLAUDE_MODEL], `the default model ${DEFAULT_CLAUDE_MODEL} has no price`);
    for (const [model, price] of Object.entries(PRICES.claude)) {
      assert.match(price.source, /^https:\/\//, model);
      assert.ok(price.cacheReadPerMTok < price.inputPerMTok && price.inputPerMTok < price.outputPerMTok, model);
    }
  });

  it("reads a Lambda response's claudeUsage, keeping counts only, and sums it by model", () => {
    assert.deepEqual(claudeUsageOf({ proposalUri: 's3://b/k' }), []);
    assert.deepEqual(claudeUsageOf(null), []);
    assert.deepEqual(claudeUsageOf({ claudeUsage: 'lots' }), []);
    const read = claudeUsageOf({
      claudeUsage: [
        { model: DEFAULT_CLAUDE_MODEL, inputTokens: 1000, outputTokens: 200, cacheReadTokens: 5000, cacheWriteTokens: 0 },
        { model: DEFAULT_CLAUDE_MODEL, inputTokens: -4, outputTokens: 'x', cacheReadTokens: Number.NaN },
        { inputTokens: 9 },
      ],
    });
    assert.equal(read.length, 2, 'an entry without a model is dropped');
    assert.deepEqual(read[1], { model: DEFAULT_CLAUDE_MODEL, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 });
    const summed = addClaude([], read);
    assert.deepEqual(summed, [{ model: DEFAULT_CLAUDE_MODEL, inputTokens: 1000, outputTokens: 200, cacheReadTokens: 5000, cacheWriteTokens: 0 }]);
    // Priced at the table's rates: $2 / $10 / $0.10 per million for input, output and cache reads.
    const cost = costOf({ ...EMPTY_USAGE, claude: summed });
    assert.ok(Math.abs(cost.lowUsd - (1000 * 2 + 200 * 10 + 5000 * 0.1) / 1e6) < 1e-12, String(cost.lowUsd));
  });
});
