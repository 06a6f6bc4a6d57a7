/**
 * The refinery's ingest job (batch-jobs/refinery-ingest) under the job contract, against a real
 * s3rver: a JSONL corpus with bad lines, the `debian:` corpus sampled with injected material, a
 * missing corpus key, the spec's checks, the Hub URI's resolution (never fetched here), and the
 * bundle the image runs (`node main.mjs`, outside the repository).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { ConfigError } from '#shared/errors.ts';
import { runJob } from '#shared/job.ts';
import { sha256Hex } from '#shared/json.ts';
import { decodeShard } from '#shared/refinery/shards.ts';
import type { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { BatchJob } from '#pipelines/steps/batch-job.ts';
import { META } from '#pipelines/steps/function.ts';
import { BatchHost } from '#infra/local/batch-host.ts';
import { minimalScope } from '../support/stacks.ts';
import { bundleIngestJob } from '../../batch-jobs/refinery-ingest/build.ts';
import { huggingFaceUrl, ingestCorpus, parseCorpusUri, parseIngestSpec, sampleInOrder, type IngestResult } from '../../batch-jobs/refinery-ingest/ingest.ts';
import { startTestS3, type TestS3 } from '../support/s3.ts';

const BUCKET = 'ingest-test';

let store: TestS3;
let s3: S3Client;
let work: string;
let env: Readonly<Record<string, string>>;
let runs = 0;

before(async () => {
  store = await startTestS3(BUCKET, 'fp-ingest-');
  ({ s3, work, env } = store);
});

after(async () => {
  await store?.close();
});

const put = (key: string, body: string | Uint8Array) => s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: body }));
async function get(uriOrKey: string): Promise<Uint8Array> {
  const Key = uriOrKey.startsWith('s3://') ? uriOrKey.slice(`s3://${BUCKET}/`.length) : uriOrKey;
  const out = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key }));
  return out.Body!.transformToByteArray();
}
const getJson = async <T>(uri: string): Promise<T> => JSON.parse(new TextDecoder().decode(await get(uri))) as T;

/** Runs the job in-process under the contract; returns the status and result.json. */
async function runIngest(spec: unknown): Promise<{ status: number; result: Record<string, unknown>; prefix: string }> {
  runs += 1;
  const prefix = `runs/${runs}/`;
  await put(`${prefix}spec.json`, JSON.stringify(spec));
  const status = await runJob(async (raw, ctx) => ingestCorpus(parseIngestSpec(raw), ctx, storage), {
    JOB_SPEC_URI: `s3://${BUCKET}/${prefix}spec.json`,
    OUTPUT_URI: `s3://${BUCKET}/${prefix}output/`,
  });
  return { status, result: await getJson(`${prefix}output/result.json`), prefix };
}

/** What main.ts wires: the shared S3 reader and writer. */
const storage = {
  readObject: async (uri: string, field: string) => (await import('#shared/clients/aws.ts')).readObjectBytes(uri, field),
  writeObject: async (uri: string, bytes: Uint8Array, contentType: string) => {
    const { writeFile } = await import('#shared/documents.ts');
    const { parseS3Uri } = await import('#shared/s3uri.ts');
    const { Bucket, Key } = parseS3Uri(uri);
    await writeFile(Bucket, Key, bytes, contentType);
  },
};

/** 30 good documents and 6 bad lines (lines 5, 10, 15, 20, 25, 30 of 36). */
function corpusJsonl(): string {
  const lines: string[] = [];
  let n = 0;
  for (let line = 1; line <= 36; line++) {
    if (line % 5 === 0 && line <= 30) {
      lines.push(
        ['{"id": broken', '', '{"id":"x"}', JSON.stringify({ id: 'd000', text: 'duplicate id' }), JSON.stringify({ id: 'e', text: ' ' }), '[1]'][line / 5 - 1]!,
      );
      continue;
    }
    const i = n++;
    lines.push(
      JSON.stringify({
        id: `d${String(i).padStart(3, '0')}`,
        text: `Document ${i}: ${'some words of text '.repeat(1 + (i % 7))}`.trim(),
        url: `https://example.com/${i}`,
      }),
    );
  }
  return `${lines.join('\n')}\n`;
}

interface Item {
  uri: string;
  sha256: string;
  documents: number;
  bytes: number;
}

describe('ingest job, in-process under the job contract', () => {
  it('shards a gzip JSONL corpus from S3, counting its bad lines, content-addressed', async () => {
    await put('corpora/small.jsonl.gz', gzipSync(corpusJsonl()));
    const { status, result, prefix } = await runIngest({
      corpus: `s3://${BUCKET}/corpora/small.jsonl.gz`,
      sample: null,
      seed: 1,
      inject: false,
      benchmarksUri: null,
      shardDocuments: 8,
      shardPrefix: `s3://${BUCKET}/shards/`,
    });
    assert.equal(status, 0, JSON.stringify(result));
    const r = result as unknown as IngestResult;
    assert.deepEqual(
      { shards: r.shards, documents: r.documents, skipped: r.skipped, truncated: r.truncated, injected: r.injected },
      { shards: 4, documents: 30, skipped: 6, truncated: 0, injected: { spam: 0, nearDuplicate: 0, contamination: 0 } },
    );
    assert.equal(r.itemsUri, `s3://${BUCKET}/${prefix}output/items.json`);
    const items = await getJson<Item[]>(r.itemsUri);
    assert.deepEqual(
      items.map((i) => i.documents),
      [8, 8, 8, 6],
    );
    const ids: string[] = [];
    for (const item of items) {
      const bytes = await get(item.uri);
      assert.equal(item.uri, `s3://${BUCKET}/shards/${sha256Hex(bytes)}.jsonl`);
      assert.equal(item.sha256, sha256Hex(bytes));
      assert.equal(item.bytes, bytes.length);
      ids.push(...decodeShard(bytes).documents.map((d) => d.id));
    }
    assert.deepEqual(
      ids,
      Array.from({ length: 30 }, (_, i) => `d${String(i).padStart(3, '0')}`),
    );
    assert.equal(
      r.bytes,
      items.reduce((sum, i) => sum + i.bytes, 0),
    );
    const report = await getJson<{ read: { lines: number; documents: number; gzip: boolean; skipped: Record<string, { count: number; examples: number[] }> } }>(
      r.reportUri,
    );
    assert.equal(report.read.lines, 36);
    assert.equal(report.read.gzip, true);
    assert.deepEqual(report.read.skipped['not_json'], { count: 1, examples: [5] });
    assert.deepEqual(report.read.skipped['blank_line'], { count: 1, examples: [10] });
    assert.deepEqual(report.read.skipped['bad_shape'], { count: 2, examples: [15, 30] });
    assert.deepEqual(report.read.skipped['duplicate_id'], { count: 1, examples: [20] });
    assert.deepEqual(report.read.skipped['empty'], { count: 1, examples: [25] });
    assert.equal(new TextDecoder().decode(await get(r.truthUri)), '');

    // A rerun writes the same shards (same keys): the corpus is the content's address.
    const again = await runIngest({ corpus: `s3://${BUCKET}/corpora/small.jsonl.gz`, seed: 1, shardDocuments: 8, shardPrefix: `s3://${BUCKET}/shards/` });
    assert.deepEqual(await getJson<Item[]>((again.result as unknown as IngestResult).itemsUri), items);
  });

  it('samples the debian: corpus, mixes in labelled material, and writes the truth beside the items', async () => {
    const benchmarks = [
      {
        benchmark: 'gsm8k',
        version: 1,
        id: 'q1',
        prompt:
          'Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?',
        answer: '72',
      },
    ];
    await put('benchmarks/items.jsonl', `${benchmarks.map((b) => JSON.stringify(b)).join('\n')}\n`);
    const { status, result } = await runIngest({
      corpus: 'debian:',
      sample: 60,
      seed: 4,
      inject: true,
      benchmarksUri: `s3://${BUCKET}/benchmarks/items.jsonl`,
      shardDocuments: 25,
      shardPrefix: `s3://${BUCKET}/debian-shards/`,
    });
    assert.equal(status, 0, JSON.stringify(result));
    const r = result as unknown as IngestResult;
    const truth = new TextDecoder()
      .decode(await get(r.truthUri))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: string; kind: string; of?: string });
    const report = await getJson<{ realDocuments: number; bySource: Record<string, number>; injected: IngestResult['injected']; injectionNotes: string[] }>(
      r.reportUri,
    );
    assert.equal(report.realDocuments, 60);
    assert.equal(
      Object.values(report.bySource).reduce((a, b) => a + b, 0),
      60,
    );
    assert.deepEqual(r.injected, report.injected);
    assert.equal(r.injected.spam, 8);
    assert.equal(truth.length, r.injected.spam + r.injected.nearDuplicate + r.injected.contamination);
    // Sixty documents of a sample are mostly fortunes (short): few can be copied or host an item,
    // and the report says how many were made.
    if (r.injected.nearDuplicate < 5) assert.ok(report.injectionNotes.some((n) => n.startsWith('near-duplicates:')));
    assert.equal(r.documents, 60 + r.injected.spam + r.injected.nearDuplicate);
    const items = await getJson<Item[]>(r.itemsUri);
    const documents = (await Promise.all(items.map(async (i) => decodeShard(await get(i.uri)).documents))).flat();
    assert.equal(documents.length, r.documents);
    const ids = new Set(documents.map((d) => d.id));
    for (const entry of truth) assert.ok(ids.has(entry.id), entry.id);
    assert.ok(documents.some((d) => d.id.startsWith('fortune:')));
    // Injected documents are mixed in, not appended.
    const firstMix = documents.findIndex((d) => d.id.startsWith('mix:'));
    assert.ok(firstMix < documents.length - truth.length, String(firstMix));
  });

  it('fails naming the URI when the corpus key does not exist', async () => {
    const { status, result } = await runIngest({ corpus: `s3://${BUCKET}/corpora/missing.jsonl`, shardPrefix: `s3://${BUCKET}/shards/` });
    assert.equal(status, 1);
    const error = result['error'] as { type: string; message: string };
    assert.equal(error.type, 'NoSuchKey');
    assert.equal(error.message, `spec.corpus: s3://${BUCKET}/corpora/missing.jsonl does not exist`);
  });

  it('fails on a bad spec naming the field and the value', async () => {
    const { status, result } = await runIngest({ corpus: `s3://${BUCKET}/x.csv`, shardPrefix: `s3://${BUCKET}/shards/` });
    assert.equal(status, 1);
    const error = result['error'] as { type: string; message: string };
    assert.equal(error.type, 'ConfigError');
    assert.match(error.message, /^spec\.corpus: unknown corpus format.*\(got "s3:\/\/ingest-test\/x\.csv"\)$/);
  });
});

describe('ingest spec', () => {
  const base = { corpus: 'debian:', shardPrefix: 's3://bucket/shards/' };
  const rejects = (input: Record<string, unknown>, field: string, value?: string) =>
    assert.throws(
      () => parseIngestSpec({ ...base, ...input }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(error.field, field);
        if (value !== undefined) assert.ok(error.message.endsWith(`(got ${value})`), error.message);
        return true;
      },
    );

  it('fills the defaults', () => {
    assert.deepEqual(parseIngestSpec(base), {
      ...base,
      sample: null,
      seed: 0,
      inject: false,
      benchmarksUri: null,
      shardDocuments: 500,
      maxShardBytes: 32 * 1024 * 1024,
      maxDocumentBytes: 1_000_000,
    });
  });

  it('names the field and the value it refuses', () => {
    rejects({ corpus: 'ftp://x/y.jsonl' }, 'spec.corpus', '"ftp://x/y.jsonl"');
    rejects({ corpus: 'hf://datasets/owner/name/data/../x.parquet' }, 'spec.corpus');
    rejects({ corpus: 'hf://datasets/owner/name/data/x.jsonl' }, 'spec.corpus');
    rejects({ shardPrefix: 's3://bucket/shards' }, 'spec.shardPrefix', '"s3://bucket/shards"');
    rejects({ sample: 0 }, 'spec.sample', '0');
    rejects({ seed: 1.5 }, 'spec.seed', '1.5');
    rejects({ shardDocuments: 0 }, 'spec.shardDocuments', '0');
    rejects({ maxDocumentBytes: 0 }, 'spec.maxDocumentBytes', '0');
    rejects({ benchmarksUri: 's3://bucket/items.jsonl' }, 'spec.benchmarksUri', '"s3://bucket/items.jsonl"');
    rejects({ extra: 1 }, 'spec');
  });

  it('resolves a Hub dataset URI to its download URL without touching the network', () => {
    assert.equal(
      huggingFaceUrl('hf://datasets/HuggingFaceFW/fineweb/sample/10BT/000_00000.parquet'),
      'https://huggingface.co/datasets/HuggingFaceFW/fineweb/resolve/main/sample/10BT/000_00000.parquet',
    );
    assert.equal(huggingFaceUrl('hf://datasets/o/n@v1.0/a b.parquet'), 'https://huggingface.co/datasets/o/n/resolve/v1.0/a%20b.parquet');
    assert.deepEqual(parseCorpusUri('hf://datasets/o/n/x.parquet'), {
      kind: 'hf',
      uri: 'hf://datasets/o/n/x.parquet',
      url: 'https://huggingface.co/datasets/o/n/resolve/main/x.parquet',
      name: 'x.parquet',
    });
  });

  it('samples in corpus order, the same for the same seed', () => {
    const docs = Array.from({ length: 100 }, (_, i) => i);
    const sample = sampleInOrder(docs, 10, 3);
    assert.equal(sample.length, 10);
    assert.deepEqual(
      sample,
      [...sample].sort((a, b) => a - b),
    );
    assert.deepEqual(sampleInOrder(docs, 10, 3), sample);
    assert.notDeepEqual(sampleInOrder(docs, 10, 4), sample);
    assert.deepEqual(sampleInOrder(docs, 200, 3), docs);
  });
});

describe('ingest job, run by the local BatchHost from the synthesized metadata', () => {
  it('runs main.ts as the embedded runtime runs a Node BatchJob', async () => {
    const { stack, resources } = minimalScope();
    new BatchJob(stack, 'Ingest', { job: 'refinery-ingest', entry: 'main.ts', resources });
    const template = Template.fromStack(stack);
    rmSync((stack.node.root as App).outdir, { recursive: true, force: true });
    const [resource] = Object.values(template.findResources('AWS::Batch::JobDefinition')) as { Metadata: Record<string, unknown> }[];
    assert.equal(resource!.Metadata[META.jobDir], 'batch-jobs/refinery-ingest');
    const progress: unknown[] = [];
    const host = new BatchHost(join(work, 'jobs'), { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: work, ...env }, 1, (_job, p) => progress.push(p));
    try {
      await put('corpora/host.jsonl', corpusJsonl());
      await put(
        'runs/host/spec.json',
        JSON.stringify({ corpus: `s3://${BUCKET}/corpora/host.jsonl`, shardDocuments: 10, shardPrefix: `s3://${BUCKET}/host-shards/` }),
      );
      await host.run(
        {
          arn: 'arn:aws:batch:us-east-1:123456789012:job-definition/ingest',
          name: 'Ingest',
          jobDir: resource!.Metadata[META.jobDir] as string,
          command: resource!.Metadata[META.jobCommand] as string[],
          environment: {},
          timeoutSeconds: 120,
        },
        'ingest-1',
        { JOB_SPEC_URI: `s3://${BUCKET}/runs/host/spec.json`, OUTPUT_URI: `s3://${BUCKET}/runs/host/output/` },
      );
    } finally {
      host.stop();
    }
    const result = await getJson<IngestResult>('runs/host/output/result.json');
    assert.deepEqual([result.shards, result.documents, result.skipped], [3, 30, 6]);
    assert.deepEqual(progress.at(-1), { stage: 'written', shards: 3, documents: 30 });
  });
});

describe('ingest job bundle (what the image runs: node main.mjs)', () => {
  it('bundles to one ES module that runs the contract outside the repository', async () => {
    const dir = join(work, 'bundle');
    const main = await bundleIngestJob(dir);
    await put('corpora/bundle.jsonl', corpusJsonl());
    await put(
      'runs/bundle/spec.json',
      JSON.stringify({ corpus: `s3://${BUCKET}/corpora/bundle.jsonl`, shardDocuments: 100, shardPrefix: `s3://${BUCKET}/bundle-shards/` }),
    );
    const child = spawn(process.execPath, [main], {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: work,
        ...env,
        JOB_SPEC_URI: `s3://${BUCKET}/runs/bundle/spec.json`,
        OUTPUT_URI: `s3://${BUCKET}/runs/bundle/output`,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 0, stderr);
    const stages = stdout
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { progress: { stage: string } }).progress.stage);
    assert.deepEqual(stages, ['read', 'sample', 'shards', 'written']);
    const result = await getJson<IngestResult>('runs/bundle/output/result.json');
    assert.equal(result.documents, 30);
    assert.equal(result.skipped, 6);
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'bundle-shards/' }));
    assert.equal(listed.KeyCount, 1);
  });
});
