/**
 * The corpus refinery end to end on the embedded runtime, at the `test` size: the local Debian
 * corpus sampled and mixed with labelled spam, near-duplicates and contamination (items of a
 * benchmark registered in the evals registry), sharded, filtered, decontaminated and deduplicated
 * on a Distributed Map, a stratified sample labelled by a fake Messages API on loopback whose
 * labels follow a hidden rule, the classifier trained by the real Python job and scored by
 * onnxruntime-node, curated and published. Then a new threshold reruns only curate and the report,
 * and a corpus that does not exist fails the run naming it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { REFINERY_SIZES, RefineryConfig } from '#pipelines/refinery/config.ts';
import { REFINED_CORPUS_ARTIFACT, REFINERY_PIPELINE } from '#pipelines/refinery/stack.ts';
import { readObjectBytes } from '#shared/clients/aws.ts';
import { writeFile } from '#shared/documents.ts';
import { registerBenchmark } from '#shared/evals/benchmarks.ts';
import { sha256Hex } from '#shared/json.ts';
import { labelFileKey } from '#shared/refinery/label-step.ts';
import { decodeShard } from '#shared/refinery/shards.ts';
import type { RefineryFigures } from '#shared/refinery/report.ts';
import { hiddenScore, startFakeLabeler, type FakeLabeler } from '../support/fake-labeler.ts';
import { startTestRuntime, stopTestRuntime } from '../support/runtime.ts';
import { assertPlanMatchesRun } from '../support/plan.ts';
import { refineryMaxShards } from '#pipelines/refinery/plan.ts';
import { planRun } from '#infra/cli/plan.ts';
import { assertRunCost } from '../support/run-cost.ts';

/** Word problems long enough for 13-gram decontamination (prompt + answer of 13 words or more). */
const BENCHMARK_ROWS = Array.from({ length: 12 }, (_, i) => ({
  id: `wp-${i}`,
  prompt: `A library shelf holds ${20 + i} novels and ${7 + 2 * i} atlases; the librarian removes ${3 + i} novels for repair. How many books remain on the shelf?`,
  answer: `${20 + i + 7 + 2 * i - (3 + i)} books remain on the shelf after the repair.`,
}));

interface RunOutput {
  manifestUri: string;
  reportUri: string;
  metrics: Record<string, number>;
  artifact: { name: string; version: number };
}

describe('corpus refinery end to end (test size)', () => {
  let rt: LocalRuntime;
  let fake: FakeLabeler;
  let cold: ExecutionRecord;
  let rerun: ExecutionRecord;
  let missing: ExecutionRecord;
  let fromFile: ExecutionRecord;
  let callsBeforeFile = 0;
  const rerunStates: string[] = [];
  const saved = { ...process.env };
  const config = RefineryConfig.parse(REFINERY_SIZES.test);

  const figuresOf = async (record: ExecutionRecord) => {
    const out = record.output as RunOutput;
    const figuresUri = out.reportUri.replace(/report\.html$/, 'figures.json');
    return { out, figures: JSON.parse((await readObjectBytes(figuresUri)).toString('utf8')) as RefineryFigures };
  };

  before(async () => {
    // A little latency per answer, as a real API has: requests then overlap, up to the concurrency.
    fake = await startFakeLabeler({ latencyMs: 20 });
    Object.assign(process.env, { ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: fake.url });
    rt = await startTestRuntime({ pipelines: [pipelineNamed(REFINERY_PIPELINE)] });
    const where = { table: rt.resources.tables[0]!, bucket: rt.resources.buckets[0]! };
    await registerBenchmark(where, {
      name: 'shelf-sums',
      scorer: 'exact-string',
      sampleSize: 12,
      data: BENCHMARK_ROWS.map((r) => JSON.stringify(r)).join('\n'),
    });
    cold = await rt.startExecution(REFINERY_PIPELINE, { config }).done;
    const listener = (e: { state: string }) => rerunStates.push(e.state);
    rt.on('stateEntered', listener);
    rerun = await rt.startExecution(REFINERY_PIPELINE, { config: { ...config, threshold: 2 } }).done;
    rt.off('stateEntered', listener);
    missing = await rt.startExecution(REFINERY_PIPELINE, { config: { ...config, corpus: `s3://${where.bucket}/corpora/nowhere.jsonl` } }).done;
    // A corpus file in the bucket, with bad lines, its labels from a file (what --labels-file
    // uploads), and no benchmark named: the cold run's labelled documents, each score one lower.
    const labelled = (await readObjectBytes(((await figuresOf(cold)).figures.labels as { labelsUri: string }).labelsUri))
      .toString('utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { id: string; score: number; text: string });
    const lines = labelled.map((l) => JSON.stringify({ id: l.id, text: l.text }));
    lines.splice(
      3,
      0,
      'not json at all',
      JSON.stringify({ id: 'no-text' }),
      JSON.stringify({ id: 'blank', text: '   ' }),
      JSON.stringify({ id: labelled[0]!.id, text: 'a duplicate id' }),
    );
    const corpus = Buffer.concat([Buffer.from(`${lines.join('\n')}\n`), Buffer.from([0x7b, 0x22, 0x69, 0x64, 0x22, 0x3a, 0xff, 0xfe, 0x7d, 0x0a])]);
    await writeFile(where.bucket, 'corpora/labelled.jsonl', corpus, 'application/x-ndjson');
    const text = labelled.map((l) => JSON.stringify({ id: l.id, score: Math.max(0, l.score - 1), reason: 'from a file' })).join('\n');
    const sha256 = sha256Hex(text);
    await writeFile(where.bucket, labelFileKey(REFINERY_PIPELINE, sha256), text, 'application/x-ndjson');
    callsBeforeFile = fake.requests.length;
    fromFile = await rt.startExecution(REFINERY_PIPELINE, {
      config: {
        ...config,
        corpus: `s3://${where.bucket}/corpora/labelled.jsonl`,
        sample: null,
        inject: false,
        decontamination: { ...config.decontamination, benchmarks: [] },
        labels: { ...config.labels, fileSha256: sha256 },
      },
    }).done;
  });
  after(async () => {
    await stopTestRuntime(rt);
    await fake?.close();
    process.env = saved;
  });

  it('refines the corpus: every document accounted for, the injected material measured', async () => {
    assert.equal(cold.status, 'SUCCEEDED', `${cold.error}: ${cold.cause}`);
    await assertRunCost(cold);
    const { out, figures } = await figuresOf(cold);
    assert.equal(out.artifact.name, REFINED_CORPUS_ARTIFACT);
    // Only URIs, hashes and counts crossed the state: the largest stays far under 256 KiB.
    assert.ok(cold.stats.largestState.bytes < 32 * 1024, JSON.stringify(cold.stats.largestState));
    const a = figures.accounting;
    assert.ok(a.addsUp, JSON.stringify(a));
    // The corpus decided the shards: given their count, the plan is exact.
    const shards = Math.ceil(a.documents / config.shardDocuments);
    assert.ok(shards <= refineryMaxShards(config), `${shards} shards, over the plan's range`);
    assertPlanMatchesRun(REFINERY_PIPELINE, config, cold, { shards });
    assert.equal(a.kept + a.filtered + a.decontaminated + a.exact + a.near + a.belowThreshold, a.documents);
    assert.ok(a.documents >= config.sample!, `${a.documents} documents`);
    // Every contaminated document removed, naming its benchmark item; no clean one removed for it.
    const c = figures.injected.contamination;
    assert.ok(c.total > 0, 'contamination was injected');
    assert.equal(c.removed, c.total, JSON.stringify(c));
    assert.equal(c.decontaminationRecall, 1, JSON.stringify(c));
    assert.equal(c.cleanRemoved, 0, JSON.stringify(c.cleanRemovedExamples));
    assert.ok(
      figures.examples.decontamination?.every((e) => /shelf-sums v1 item wp-\d+/.test(e.reason)),
      JSON.stringify(figures.examples.decontamination),
    );
    // Spam and near-duplicates measured (the goals are figures of the bench at larger sizes).
    assert.ok(figures.injected.spam.total > 0 && figures.injected.spam.recall !== null);
    assert.ok(figures.injected.nearDuplicates.pairs > 0);
    // The global dedup step read signatures only: under 2 % of the corpus's bytes.
    assert.ok(figures.dedup.readPercent! < 2, `read ${figures.dedup.readPercent} % of the corpus`);
    // Labels: every labelled document got the fake's hidden score of what it was shown.
    assert.equal(figures.labels.source, 'claude');
    assert.equal(figures.labels.labelled, Math.min(config.labels.sample, figures.labels.survivors as number));
    assert.ok(figures.labels.labelled >= 60, `${figures.labels.labelled} labels`);
    assert.ok(figures.cost.ratio! > 1, JSON.stringify(figures.cost));
    // The refined shards hold exactly the kept documents.
    const manifest = JSON.parse((await readObjectBytes(out.manifestUri)).toString('utf8')) as {
      documents: number;
      shards: { uri: string }[];
      threshold: number;
    };
    let documents = 0;
    for (const shard of manifest.shards) documents += decodeShard(await readObjectBytes(shard.uri)).documents.length;
    assert.equal(documents, a.kept);
    assert.equal(manifest.threshold, config.threshold);
  });

  it('labels follow the labeler: the fake saw each sampled document once, concurrently', () => {
    const scored = fake.requests.filter((r) => r.status === 200);
    assert.ok(scored.length >= 60 && new Set(scored.map((r) => r.document)).size === scored.length, `${scored.length} documents labelled`);
    assert.ok(fake.peakInFlight > 1 && fake.peakInFlight <= config.labels.concurrency, `peak ${fake.peakInFlight}`);
    for (const r of scored.slice(0, 20)) assert.equal(r.score, hiddenScore(r.document));
    // The cold run's counters hold every answer's usage fields (the rerun asked nothing).
    const answered = fake.requests.slice(0, callsBeforeFile).filter((r) => r.usage);
    const sum = (f: (u: NonNullable<(typeof answered)[number]['usage']>) => number) => answered.reduce((n, r) => n + f(r.usage!), 0);
    assert.deepEqual(cold.stats.claude, [
      {
        model: config.labels.model,
        inputTokens: sum((u) => u.input_tokens),
        outputTokens: sum((u) => u.output_tokens),
        cacheReadTokens: sum((u) => u.cache_read_input_tokens),
        cacheWriteTokens: sum((u) => u.cache_creation_input_tokens),
      },
    ]);
    assert.equal(rerun.stats.claude, undefined);
    // Within the plan's range of calls: one per sampled survivor at most (retries aside).
    const [labelCalls] = planRun(pipelineNamed(REFINERY_PIPELINE), config, { shards: 1 }).claude;
    const documents = new Set(answered.map((r) => r.document)).size;
    assert.ok(documents > 0 && documents <= labelCalls!.calls.high, `${documents} documents, plan ${JSON.stringify(labelCalls)}`);
  });

  it('a new threshold reruns only curate and the report: no Batch job, no Claude call', async () => {
    assert.equal(rerun.status, 'SUCCEEDED', `${rerun.error}: ${rerun.cause}`);
    await assertRunCost(rerun);
    assert.equal(rerun.stats.batchJobs, 0);
    const invoked = [...new Set(rerunStates.filter((s) => s.endsWith(': Invoke')).map((s) => s.replace(/: Invoke$/, '')))].sort();
    const allowed = new Set(['config', 'prepare', 'curate', 'report', 'publish']);
    assert.ok(invoked.every((s) => allowed.has(s)) && invoked.includes('curate') && invoked.includes('report'), invoked.join(', '));
    for (const step of ['ingest', 'filter-shard', 'dedup', 'label', 'train', 'score-shard'])
      assert.ok(rerunStates.includes(`${step}: Cache hit`), `${step} was a cache hit`);
    const before = (await figuresOf(cold)).figures;
    const after = (await figuresOf(rerun)).figures;
    assert.ok(after.accounting.kept >= before.accounting.kept, 'a lower threshold keeps at least as many');
    assert.ok(after.accounting.addsUp);
  });

  it('a corpus file: bad lines skipped, counted and named; labels from a file, no Claude call; nothing to decontaminate against', async () => {
    assert.equal(fromFile.status, 'SUCCEEDED', `${fromFile.error}: ${fromFile.cause}`);
    assert.equal(fake.requests.length, callsBeforeFile);
    const { figures } = await figuresOf(fromFile);
    const labelledBefore = (await figuresOf(cold)).figures.labels.labelled as number;
    assert.deepEqual(Object.fromEntries(Object.entries(figures.read!.skipped).map(([k, v]) => [k, v.count])), {
      not_json: 1,
      bad_shape: 1,
      empty: 1,
      duplicate_id: 1,
      invalid_utf8: 1,
    });
    assert.deepEqual(figures.read!.skipped.not_json!.examples, [4]);
    assert.equal(figures.read!.lines, labelledBefore + 5);
    assert.equal(figures.accounting.documents, labelledBefore);
    assert.ok(figures.accounting.addsUp);
    assert.equal(figures.benchmarkCount, 0);
    assert.equal(figures.labels.source, 'file');
    // The corpus is the labeler's extracts, filtered again: every survivor has its label in the file.
    assert.equal(figures.labels.labelled, figures.labels.survivors);
    assert.ok((figures.labels.labelled as number) >= 20, `${figures.labels.labelled} labels used`);
    const html = (await readObjectBytes((fromFile.output as RunOutput).reportUri)).toString('utf8');
    assert.match(html, /Decontamination had nothing to check against/);
    assert.match(html, /1 skipped as not_json \(lines 4\)/);
  });

  it('a corpus that does not exist fails the run, naming it', () => {
    assert.equal(missing.status, 'FAILED');
    assert.match(`${missing.error} ${missing.cause}`, /config\.corpus.*nowhere\.jsonl.*does not exist/s);
  });
});
