/**
 * The video pipeline end to end on the embedded runtime, at the `test` size: three videos
 * generated with ffmpeg (cuts known by construction, clips made to be dropped), cut and scored by
 * the real Python jobs, curated, published as `video-clips` with clips.jsonl and ATTRIBUTION.txt,
 * and the report published after the copy. Then: a stricter aesthetic threshold runs no Batch
 * job; Claude (a fake Messages API on loopback) captions the kept clips from their contact
 * sheets with no Batch job, and a second run captions nothing again; and a source list with bad
 * entries (no licence, not a video, truncated, audio only) records each with its reason while
 * the good source is published.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipelineNamed } from '#infra/cli/config.ts';
import { type ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { VIDEO_SIZES, VideoConfig } from '#pipelines/video/config.ts';
import { VIDEO_ARTIFACT, VIDEO_PIPELINE, VIDEO_REPORT_ARTIFACT, VIDEO_SOURCES_ARTIFACT } from '#pipelines/video/stack.ts';
import { getArtifactVersion } from '#shared/artifacts.ts';
import { readObjectBytes } from '#shared/clients/aws.ts';
import { writeFile } from '#shared/documents.ts';
import type { ManifestRow } from '#shared/video/steps.ts';
import { type FakeCaptioner, startFakeCaptioner } from '../support/fake-captioner.ts';
import { startTestRuntime, stopTestRuntime } from '../support/runtime.ts';
import { assertPlanMatchesRun } from '../support/plan.ts';
import { parentExecutionArn } from '#infra/cli/inspect.ts';
import { cacheSaving, costOf, usageOfStep } from '#shared/cost/usage.ts';
import { assertRunCost } from '../support/run-cost.ts';

interface RunOutput {
  metrics: Record<string, number>;
  reportUri: string;
  artifact: { name: string; version: number };
}

const text = async (uri: string) => (await readObjectBytes(uri)).toString('utf8');

describe('video curation end to end (test size)', () => {
  let rt: LocalRuntime;
  let fake: FakeCaptioner | undefined;
  let where: { table: string; bucket: string };
  const saved = { ...process.env };
  const config = VideoConfig.parse(VIDEO_SIZES.test);
  let cold: ExecutionRecord;
  let strict: ExecutionRecord;

  before(async () => {
    delete process.env.ANTHROPIC_API_KEY;
    delete process.env.ANTHROPIC_BASE_URL;
    rt = await startTestRuntime({ pipelines: [pipelineNamed(VIDEO_PIPELINE)] });
    where = { table: rt.resources.tables[0]!, bucket: rt.resources.buckets[0]! };
    cold = await rt.startExecution(VIDEO_PIPELINE, { config }).done;
    strict = await rt.startExecution(VIDEO_PIPELINE, { config: { ...config, curate: { ...config.curate, minAesthetic: 7.5 } } }).done;
  });

  after(async () => {
    await fake?.close();
    await stopTestRuntime(rt);
    process.env = saved;
  });

  it('generates, cuts, scores and curates, with the cuts and every drop rule measured against the truth', async () => {
    assert.equal(cold.status, 'SUCCEEDED', `${cold.error}: ${cold.cause}`);
    await assertRunCost(cold);
    // generate, then a cut and a score job per video (the generated videos need no fetch).
    assert.equal(cold.stats.batchJobs, 1 + 2 * 3);
    assertPlanMatchesRun(VIDEO_PIPELINE, config, cold, { claudeKey: false });
    assert.ok(cold.stats.largestState.bytes < 32 * 1024, JSON.stringify(cold.stats.largestState));
    const out = cold.output as RunOutput;
    assert.ok(out.metrics.cutPrecision! >= 0.95 && out.metrics.cutRecall! >= 0.95, JSON.stringify(out.metrics));
    const figures = JSON.parse(await text(out.reportUri.replace(/report\.html$/, 'figures.json')));
    for (const rule of figures.truth.rules as { rule: string; madeFor: number; droppedByRule: number }[]) {
      if (rule.madeFor > 0) assert.ok(rule.droppedByRule / rule.madeFor >= 0.9, JSON.stringify(rule));
    }
    assert.ok(figures.truth.goodDropped / figures.truth.goodClips <= 0.05, JSON.stringify(figures.truth));
    assert.ok(out.metrics.kept! > 0);
    const html = await text(out.reportUri);
    assert.match(html, /copy into the artifact/);
    assert.match(html, /quality-v1/);
  });

  it('publishes the kept clips with a manifest and CC BY attribution, lineage to the source list', async () => {
    const out = cold.output as RunOutput;
    const clips = await getArtifactVersion(where, VIDEO_ARTIFACT, out.artifact.version);
    const mp4s = clips.files.filter((f) => f.name.endsWith('.mp4'));
    assert.equal(mp4s.length, out.metrics.kept);
    const manifest = clips.files.find((f) => f.name === 'clips.jsonl')!;
    const rows = (await text(manifest.uri))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as ManifestRow);
    assert.equal(rows.length, mp4s.length);
    for (const row of rows) {
      assert.ok(
        mp4s.some((f) => f.name === row.file && f.sha256 === row.sha256),
        row.file,
      );
      assert.equal(row.licence.licence, 'CC-BY-4.0');
      assert.equal(row.caption, null, 'no captioner: no caption, never an invented one');
      assert.ok(row.end > row.start);
    }
    const attribution = await text(clips.files.find((f) => f.name === 'ATTRIBUTION.txt')!.uri);
    for (const part of ['Title: Generated video', 'Author: ', 'Source: s3://', 'https://creativecommons.org/licenses/by/4.0/', 'Changes: cut into clips']) {
      assert.ok(attribution.includes(part), part);
    }
    for (const row of rows) assert.ok(attribution.includes(`${row.id}.mp4`), row.id);
    assert.deepEqual(
      clips.lineage.map((l) => l.name),
      [VIDEO_SOURCES_ARTIFACT],
    );
    const report = await getArtifactVersion(where, VIDEO_REPORT_ARTIFACT, (cold.output as RunOutput & { report: { version: number } }).report.version);
    assert.deepEqual(report.lineage, [{ name: VIDEO_ARTIFACT, version: clips.version }]);
  });

  it('a stricter aesthetic threshold runs no Batch job and keeps a subset', async () => {
    assert.equal(strict.status, 'SUCCEEDED', `${strict.error}: ${strict.cause}`);
    assert.equal(strict.stats.batchJobs, 0);
    // Its hits inside the Distributed Map name the cold run's child executions; priced through
    // their parent, every hit is, and the cut and score jobs it did not rerun are in the saving.
    const hits = strict.stats.cacheHits ?? [];
    assert.equal(hits.filter((h) => h.step === 'cut').length, 3);
    assert.ok(
      hits.every((h) => parentExecutionArn(h.executionArn) === cold.executionArn),
      JSON.stringify(hits.slice(0, 3)),
    );
    const saving = cacheSaving(hits, (arn) => (parentExecutionArn(arn) === cold.executionArn ? cold.stats.steps : undefined));
    assert.equal(saving.priced, hits.length);
    const jobs = ['generate', 'cut', 'score'].reduce((sum, step) => sum + costOf(usageOfStep(cold.stats.steps![step]!)).highUsd, 0);
    assert.ok(saving.highUsd >= jobs - 1e-12, `saving ${saving.highUsd} against the cold run's jobs ${jobs}`);
    const coldKept = (cold.output as RunOutput).metrics.kept!;
    const strictKept = (strict.output as RunOutput).metrics.kept!;
    assert.ok(strictKept < coldKept, `${strictKept} of ${coldKept}`);
    const figures = JSON.parse(await text((strict.output as RunOutput).reportUri.replace(/report\.html$/, 'figures.json')));
    assert.ok(figures.funnel.dropped['low-aesthetic'] > 0, JSON.stringify(figures.funnel));
  });

  it('Claude captions the kept clips from their contact sheets with no Batch job, once', async () => {
    fake = await startFakeCaptioner({ latencyMs: 2 });
    Object.assign(process.env, { ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: fake.url });
    await rt.stop();
    rt = await LocalRuntime.start({ retryDelayMs: 1, pipelines: [pipelineNamed(VIDEO_PIPELINE)], dataDir: rt.dataDir });
    const first = await rt.startExecution(VIDEO_PIPELINE, { config }).done;
    assert.equal(first.status, 'SUCCEEDED', `${first.error}: ${first.cause}`);
    assert.equal(first.stats.batchJobs, 0);
    const kept = (first.output as RunOutput).metrics.kept!;
    assert.equal(fake.requests.length, kept);
    const clips = await getArtifactVersion(where, VIDEO_ARTIFACT);
    const rows = (await text(clips.files.find((f) => f.name === 'clips.jsonl')!.uri))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as ManifestRow);
    for (const row of rows) {
      assert.match(row.caption ?? '', /bytes/, 'the caption the fake wrote from this clip sheet');
      assert.match(row.captionedBy ?? '', /^claude:/);
    }
    const again = await rt.startExecution(VIDEO_PIPELINE, { config }).done;
    assert.equal(again.status, 'SUCCEEDED', `${again.error}: ${again.cause}`);
    assert.equal(fake.requests.length, kept, 'captions are cached per clip');
  });

  it('records each bad source with its reason, and publishes only the good one', async () => {
    delete process.env.ANTHROPIC_API_KEY;
    const clips = await getArtifactVersion(where, VIDEO_ARTIFACT);
    const good = clips.files.find((f) => f.name.endsWith('.mp4'))!;
    const bytes = await readObjectBytes(good.uri);
    const scratch = mkdtempSync(join(tmpdir(), 'fp-video-bad-'));
    try {
      const audio = join(scratch, 'tone.mp4');
      const made = spawnSync('ffmpeg', ['-v', 'error', '-y', '-f', 'lavfi', '-i', 'sine=duration=1', '-c:a', 'aac', audio]);
      assert.equal(made.status, 0, String(made.stderr));
      const put = async (name: string, body: Uint8Array | string) => (await writeFile(where.bucket, `uploads/${name}`, body, 'video/mp4')).uri;
      const licence = {
        title: 'A clip',
        author: 'Someone',
        licence: 'CC-BY-4.0',
        deedUrl: 'https://creativecommons.org/licenses/by/4.0/',
        sourceUrl: 'https://example.org/clip',
      };
      const list = [
        { id: 'good', uri: await put('good.mp4', bytes), ...licence },
        { id: 'text', uri: await put('text.mp4', 'not a video at all\n'.repeat(10)), ...licence },
        { id: 'truncated', uri: await put('truncated.mp4', bytes.subarray(0, Math.floor(bytes.length * 0.4))), ...licence },
        { id: 'audio', uri: await put('audio.mp4', readFileSync(audio)), ...licence },
        { id: 'unlicensed', uri: await put('unlicensed.mp4', bytes) },
        { id: 'anonymous', uri: await put('anonymous.mp4', bytes), ...licence, author: '' },
        { id: 'missing', uri: `s3://${where.bucket}/uploads/never-uploaded.mp4`, ...licence },
      ];
      const listUri = (await writeFile(where.bucket, 'uploads/sources.json', JSON.stringify(list), 'application/json')).uri;
      const record = await rt.startExecution(VIDEO_PIPELINE, { config: { ...config, sources: { kind: 'list', uri: listUri } } }).done;
      assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
      const out = record.output as RunOutput;
      assert.equal(out.metrics.sources, 7);
      assert.equal(out.metrics.refused, 6);
      const figures = JSON.parse(await text(out.reportUri.replace(/report\.html$/, 'figures.json')));
      const reason = (id: string) => (figures.sources as { id: string; reason: string | null }[]).find((s) => s.id === id)?.reason ?? '';
      assert.match(reason('text'), /not a video/);
      assert.match(reason('truncated'), /truncated|damaged|decod|moov|Invalid/i);
      assert.match(reason('audio'), /no video stream/);
      assert.match(reason('unlicensed'), /no licence|lacks/);
      assert.match(reason('anonymous'), /lacks author/);
      assert.match(reason('missing'), /never-uploaded\.mp4: no such object/);
      const published = await getArtifactVersion(where, VIDEO_ARTIFACT);
      const rows = (await text(published.files.find((f) => f.name === 'clips.jsonl')!.uri))
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as ManifestRow);
      assert.ok(rows.length > 0);
      assert.ok(rows.every((r) => r.source.id === 'good'));
      const attribution = await text(published.files.find((f) => f.name === 'ATTRIBUTION.txt')!.uri);
      assert.ok(!attribution.includes('Someone') || attribution.match(/== A clip ==/g)!.length === 1);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  it('a bad config fails before any job, naming the field', async () => {
    const before = rt.counters().batchJobs;
    const record = await rt.startExecution(VIDEO_PIPELINE, { config: { ...config, cut: { ...config.cut, minClipSeconds: 10, maxClipSeconds: 15 } } }).done;
    assert.equal(record.status, 'FAILED');
    assert.match(`${record.error}: ${record.cause}`, /cut\.maxClipSeconds/);
    assert.equal(rt.counters().batchJobs, before);
  });
});
