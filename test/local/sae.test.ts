/**
 * The SAE pipeline end to end on the embedded runtime, at the `test` size: a corpus artifact of
 * Debian's licence texts (real prose, on every Debian system) published the way any corpus is,
 * a tiny model trained on it and published as `sae-lm`, one harvest, a 2 x 2 grid of TopK SAEs
 * by the real Python job, features labelled by the top-tokens explainer (no key set) and scored
 * for detection against mismatched labels, the report and the `sae` artifact with lineage.
 * Then: a new k grid reruns no model and no harvest; Claude (a fake Messages API on loopback)
 * labels the same features with no Batch job; a new Claude model reruns only the labels, their
 * scores and the report; and bad configs fail before any job, naming the field.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { SAE_SIZES, SaeConfig } from '#pipelines/sae/config.ts';
import { SAE_ARTIFACT, SAE_LM_ARTIFACT, SAE_PIPELINE } from '#pipelines/sae/stack.ts';
import { CORPUS_MANIFEST, getArtifactVersion, publishArtifact } from '#shared/artifacts.ts';
import { readObjectBytes } from '#shared/clients/aws.ts';
import { writeFile } from '#shared/documents.ts';
import { startFakeExplainer, type FakeExplainer } from '../support/fake-explainer.ts';
import { startTestRuntime, stopTestRuntime } from '../support/runtime.ts';
import { assertPlanMatchesRun } from '../support/plan.ts';
import { assertRunCost } from '../support/run-cost.ts';

const LICENCES = '/usr/share/common-licenses';
const CORPUS = 'licence-corpus';

function licenceParagraphs(): string[] {
  return readdirSync(LICENCES)
    .sort()
    .map((name) => join(LICENCES, name))
    .filter((path) => statSync(path).isFile())
    .flatMap((path) => readFileSync(path, 'utf8').split('\n\n'))
    .map((p) => p.trim())
    .filter((p) => p.length > 40);
}

interface RunOutput {
  explainer: string;
  chosen: { width: number; k: number; l0: number; lossRecovered: number };
  metrics: Record<string, number | string>;
  reportUri: string;
  artifact: { name: string; version: number };
}

describe('sparse autoencoders end to end (test size)', () => {
  let rt: LocalRuntime;
  let fake: FakeExplainer;
  let where: { table: string; bucket: string };
  const saved = { ...process.env };
  const base = { ...SAE_SIZES.test, corpus: { artifact: CORPUS } };
  const config = SaeConfig.parse(base);
  let cold: ExecutionRecord;
  let grid: ExecutionRecord;
  const gridStates: string[] = [];

  before(async () => {
    delete process.env.ANTHROPIC_API_KEY;
    delete process.env.ANTHROPIC_BASE_URL;
    rt = await startTestRuntime({ pipelines: [pipelineNamed(SAE_PIPELINE)] });
    where = { table: rt.resources.tables[0]!, bucket: rt.resources.buckets[0]! };
    const rows = licenceParagraphs().map((text, i) => JSON.stringify({ id: `p${i}`, text }));
    const shard = await writeFile(where.bucket, 'corpora/licences/shard-0.jsonl', `${rows.join('\n')}\n`, 'application/x-ndjson');
    const manifest = await writeFile(
      where.bucket,
      'corpora/licences/manifest.json',
      JSON.stringify({ documents: rows.length, shards: [{ uri: shard.uri }] }),
      'application/json',
    );
    await publishArtifact({ name: CORPUS, pipeline: 'test', executionId: 'test', files: [{ name: CORPUS_MANIFEST, uri: manifest.uri }] }, where);
    cold = await rt.startExecution(SAE_PIPELINE, { config }).done;
    const listener = (e: { state: string }) => gridStates.push(e.state);
    rt.on('stateEntered', listener);
    grid = await rt.startExecution(SAE_PIPELINE, { config: { ...config, sae: { ...config.sae, ks: [4, 8] } } }).done;
    rt.off('stateEntered', listener);
  });

  after(async () => {
    await fake?.close();
    await stopTestRuntime(rt);
    process.env = saved;
  });

  it('trains the model, harvests once, trains the grid and labels the chosen SAE with the top-tokens explainer', async () => {
    assert.equal(cold.status, 'SUCCEEDED', `${cold.error}: ${cold.cause}`);
    await assertRunCost(cold);
    const out = cold.output as RunOutput;
    assert.equal(out.explainer, 'top-tokens', 'no key: auto resolves to the non-LLM explainer');
    // The model, the harvest, 4 SAEs and the contexts.
    assert.equal(cold.stats.batchJobs, 7);
    assertPlanMatchesRun(SAE_PIPELINE, config, cold);
    assert.ok(cold.stats.largestState.bytes < 32 * 1024, JSON.stringify(cold.stats.largestState));
    assert.ok(out.chosen.l0 <= config.labels.targetL0);
    assert.ok(out.chosen.lossRecovered > 0.5, `loss recovered ${out.chosen.lossRecovered}`);
    const figures = JSON.parse((await readObjectBytes(out.reportUri.replace(/report\.html$/, 'figures.json'))).toString('utf8'));
    assert.equal(figures.saes.length, 4);
    const sae = await getArtifactVersion(where, SAE_ARTIFACT);
    assert.equal(sae.files.filter((f) => f.name.endsWith('.safetensors')).length, 4, sae.files.map((f) => f.name).join(', '));
    const lm = await getArtifactVersion(where, SAE_LM_ARTIFACT);
    assert.deepEqual(sae.lineage.map((l) => l.name).sort(), [CORPUS, SAE_LM_ARTIFACT].sort());
    assert.deepEqual(lm.lineage, [{ name: CORPUS, version: 1 }]);
    const html = (await readObjectBytes(out.reportUri)).toString('utf8');
    assert.match(html, /top-tokens/);
  });

  it('scores labels above the mismatched control', async () => {
    const out = cold.output as RunOutput;
    const own = Number(out.metrics.detectionOwn);
    const control = Number(out.metrics.detectionControl);
    assert.ok(Number.isFinite(own) && Number.isFinite(control), JSON.stringify(out.metrics));
    assert.ok(own > control, `own ${own} vs control ${control}`);
  });

  it('a new k grid reruns no model and no harvest', () => {
    assert.equal(grid.status, 'SUCCEEDED', `${grid.error}: ${grid.cause}`);
    for (const cached of ['lm', 'harvest']) assert.ok(gridStates.includes(`${cached}: Cache hit`), `${cached} was a cache hit`);
    // The two new SAEs (k 8 at both widths), and the contexts if the chosen SAE changed.
    assert.ok(grid.stats.batchJobs >= 2 && grid.stats.batchJobs <= 3, `${grid.stats.batchJobs} jobs`);
  });

  it('Claude labels the same features with no Batch job; a new Claude model reruns only labels, detection and the report', async () => {
    // A user who sets a key and runs again: the same data directory (its cache and artifacts),
    // a runtime started with the key in its environment.
    fake = await startFakeExplainer({ latencyMs: 5 });
    Object.assign(process.env, { ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: fake.url });
    await rt.stop();
    rt = await LocalRuntime.start({ retryDelayMs: 1, pipelines: [pipelineNamed(SAE_PIPELINE)], dataDir: rt.dataDir });
    const claude = { ...config, labels: { ...config.labels, explainer: 'claude' as const, model: 'claude-model-a' } };
    const first = await rt.startExecution(SAE_PIPELINE, { config: claude }).done;
    assert.equal(first.status, 'SUCCEEDED', `${first.error}: ${first.cause}`);
    assert.equal((first.output as RunOutput).explainer, 'claude');
    assert.equal(first.stats.batchJobs, 0);
    const requests = fake.requests.length;
    assert.ok(requests >= config.labels.features, `${requests} requests`);
    const states: string[] = [];
    const listener = (e: { state: string }) => states.push(e.state);
    rt.on('stateEntered', listener);
    const second = await rt.startExecution(SAE_PIPELINE, { config: { ...claude, labels: { ...claude.labels, model: 'claude-model-b' } } }).done;
    rt.off('stateEntered', listener);
    assert.equal(second.status, 'SUCCEEDED', `${second.error}: ${second.cause}`);
    assert.equal(second.stats.batchJobs, 0);
    assert.ok(fake.requests.length > requests, 'the new model labelled again');
    const invoked = [...new Set(states.filter((s) => s.endsWith(': Invoke')).map((s) => s.replace(/: Invoke$/, '')))].sort();
    for (const s of invoked) assert.ok(['config', 'prepare', 'select', 'label', 'detect', 'report', 'publish'].includes(s), invoked.join(', '));
    assert.ok(invoked.includes('label') && invoked.includes('detect'), invoked.join(', '));
  });

  it('bad configs fail before any job, naming the field', async () => {
    const cases: [unknown, RegExp][] = [
      [{ ...base, layer: 2 }, /layer: 2 does not exist/],
      [{ ...base, sae: { ...base.sae, ks: [4, 512] } }, /sae\.ks\.1: k 512 exceeds width 128/],
    ];
    for (const [bad, message] of cases) {
      const before = rt.counters().batchJobs;
      const record = await rt.startExecution(SAE_PIPELINE, { config: bad }).done;
      assert.equal(record.status, 'FAILED');
      assert.match(`${record.error}: ${record.cause}`, message);
      assert.equal(rt.counters().batchJobs, before);
    }
    const short = await rt.startExecution(SAE_PIPELINE, { config: { ...config, harvest: { ...config.harvest, tokens: 50_000_000 } } }).done;
    assert.equal(short.status, 'FAILED');
    assert.match(`${short.error}: ${short.cause}`, /harvest\.tokens: 50000000 tokens asked for, but the corpus has \d+/);
  });
});
