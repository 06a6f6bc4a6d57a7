/**
 * The config step every pipeline starts with: a run started straight through the Step Functions
 * API (as StartExecution from the console or an SDK would), not through the CLI or the upload
 * trigger that parse the config first. A bad or oversized config fails the run at its first
 * step, naming the field, with nothing else run; a partial one gets the schema's defaults.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { PROBE_PIPELINE } from '#pipelines/probe/stack.ts';
import { startTestRuntime, stopTestRuntime } from '../support/runtime.ts';

describe('the config step of a run started without the CLI', () => {
  let runtime: LocalRuntime;
  before(async () => {
    runtime = await startTestRuntime({ pipelines: [pipelineNamed(PROBE_PIPELINE)] });
  });
  after(() => stopTestRuntime(runtime));

  it('fails a config the schema refuses at the first step, naming the field, running nothing else', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ items: [1, 2], label: 'x'.repeat(100_000) }, 'config.label'],
      [{ items: Array.from({ length: 5000 }, (_, i) => i % 1000) }, 'config.items'],
      [{ items: [1], surprise: true }, 'config'],
      [{}, 'config.items'],
    ];
    for (const [config, field] of cases) {
      const record = await runtime.startExecution(PROBE_PIPELINE, { config }).done;
      assert.equal(record.status, 'FAILED', field);
      assert.equal(record.error, 'ConfigError', record.cause);
      assert.match(record.cause ?? '', new RegExp(`"errorMessage":"${field.replace('.', '\\.')}[:.]`), record.cause);
      assert.equal(record.stats.lambdaInvocations, 1, 'only the config check ran');
      assert.equal(record.stats.batchJobs, 0);
    }
  });

  it("fills in the schema's defaults for a partial config", async () => {
    const record = await runtime.startExecution(PROBE_PIPELINE, { config: { items: [3, 4] } }).done;
    assert.equal(record.status, 'SUCCEEDED', record.cause);
    assert.equal((record.output as { total: number }).total, 9 + 16);
  });
});
