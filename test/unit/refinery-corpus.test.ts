/**
 * The refinery's input side: reading JSONL (plain and gzip) and Parquet corpora without losing
 * count of a line, content-addressed shards, and the Debian corpus (real pages of the packages
 * installed here: readability's main text, groff's man pages, fortunes), sampled before parsing.
 *
 * The Parquet files are written by a small writer below (Thrift compact metadata, PLAIN pages,
 * uncompressed or gzip), since no Parquet writer is installed; hyparquet reads them as any file.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { ConfigError, NotFoundError } from '#shared/errors.ts';
import { sha256Hex } from '#shared/json.ts';
import {
  bytesAsAsyncBuffer,
  corpusFormatOf,
  readCorpusBytes,
  readJsonlDocuments,
  readParquetDocuments,
  SKIP_REASONS,
  skippedTotal,
  truncateUtf8,
  type CorpusReadReport,
} from '#shared/refinery/corpus.ts';
import { DEBIAN_SOURCES, extractMainText, listDebianSources, parseFortunes, readDebianCorpus, renderManPage } from '#shared/refinery/debian-corpus.ts';
import { decodeShard, encodeShard, planShards, shardKey } from '#shared/refinery/shards.ts';

const encoder = new TextEncoder();

function assertCountsAddUp(report: CorpusReadReport): void {
  assert.equal(report.documents + skippedTotal(report), report.lines, JSON.stringify(report));
}

// ---------------------------------------------------------------------------------------------
// JSONL

/** Lines 1-13, each a case; line 7's bytes are not UTF-8. */
function messyJsonl(): Uint8Array {
  const lines: (string | Uint8Array)[] = [
    JSON.stringify({ id: 'a', text: 'First document.', url: 'https://example.com/a' }),
    JSON.stringify({ id: 'b', text: 'Second document.' }),
    '{"id": "c", "text": "unterminated',
    JSON.stringify({ text: 'no id' }),
    JSON.stringify({ id: '', text: 'empty id' }),
    JSON.stringify({ id: 'd', text: 42 }),
    new Uint8Array([...encoder.encode('{"id":"e","text":"bad '), 0xff, 0xfe, ...encoder.encode('"}')]),
    '   ',
    JSON.stringify({ id: 'f', text: '  \n\t ' }),
    JSON.stringify({ id: 'a', text: 'A second a.' }),
    JSON.stringify([1, 2]),
    JSON.stringify({ id: 7, text: 'An integer id.', url: null }),
    JSON.stringify({ id: 'g', text: 'Bad url.', url: 5 }),
  ];
  const parts = lines.map((line) => (typeof line === 'string' ? encoder.encode(line) : line));
  const out: number[] = [];
  for (const part of parts) out.push(...part, 0x0a);
  return new Uint8Array(out);
}

describe('readJsonlDocuments', () => {
  it('keeps the good lines and counts every other one by reason, with line numbers', () => {
    const { documents, report } = readJsonlDocuments(messyJsonl());
    assert.deepEqual(documents, [
      { id: 'a', text: 'First document.', url: 'https://example.com/a' },
      { id: 'b', text: 'Second document.' },
      { id: '7', text: 'An integer id.' },
    ]);
    assert.equal(report.lines, 13);
    assert.equal(report.documents, 3);
    assert.deepEqual(Object.fromEntries(SKIP_REASONS.map((reason) => [reason, report.skipped[reason]])), {
      blank_line: { count: 1, examples: [8] },
      invalid_utf8: { count: 1, examples: [7] },
      not_json: { count: 1, examples: [3] },
      bad_shape: { count: 5, examples: [4, 5, 6, 11, 13] },
      empty: { count: 1, examples: [9] },
      duplicate_id: { count: 1, examples: [10] },
    });
    assertCountsAddUp(report);
    assert.equal(report.format, 'jsonl');
    assert.equal(report.gzip, false);
    assert.equal(report.truncated, 0);
  });

  it('reads gzip by its magic bytes, whatever the name, and refuses a stream cut short', async () => {
    const plain = messyJsonl();
    const gz = gzipSync(plain);
    const fromGzip = await readCorpusBytes(gz, 's3://b/corpus.jsonl');
    const fromPlain = readJsonlDocuments(plain);
    assert.deepEqual(fromGzip.documents, fromPlain.documents);
    assert.equal(fromGzip.report.gzip, true);
    assert.equal(fromGzip.report.bytes, gz.length);
    assert.deepEqual(fromGzip.report.skipped, fromPlain.report.skipped);
    assert.throws(
      () => readJsonlDocuments(gz.subarray(0, gz.length - 10), { name: 'corpus.jsonl.gz' }),
      (error: unknown) => error instanceof ConfigError && error.field === 'corpus.jsonl.gz' && /not a complete gzip stream/.test(error.message),
    );
  });

  it('keeps only the first 5 examples per reason, and a trailing newline makes no line', () => {
    const text = `${Array.from({ length: 8 }, () => 'not json').join('\n')}\n`;
    const { report } = readJsonlDocuments(encoder.encode(text));
    assert.equal(report.lines, 8);
    assert.deepEqual(report.skipped.not_json, { count: 8, examples: [1, 2, 3, 4, 5] });
  });

  it('cuts a text over maxDocumentBytes at a character boundary and counts it', () => {
    // 1 + 2 + 2 + 4 + 1 bytes: a 7-byte limit falls inside the emoji, so the cut is after the second "é".
    const text = 'aéé😀b';
    const { documents, report } = readJsonlDocuments(encoder.encode(`${JSON.stringify({ id: 'x', text })}\n`), { maxDocumentBytes: 7 });
    assert.equal(documents[0]!.text, 'aéé');
    assert.equal(report.truncated, 1);
    assert.equal(report.documents, 1);
    assert.equal(report.textBytes, 5);
    assert.deepEqual(truncateUtf8(text, 7), { text: 'aéé', truncated: true, bytes: 5 });
    assert.deepEqual(truncateUtf8(text, 9), { text: 'aéé😀', truncated: true, bytes: 9 });
    assert.deepEqual(truncateUtf8(text, 100), { text, truncated: false, bytes: 10 });
  });

  it('names the field and the value for a bad limit or an unknown format', async () => {
    assert.throws(
      () => readJsonlDocuments(new Uint8Array(), { maxDocumentBytes: 0 }),
      (e: unknown) => e instanceof ConfigError && e.field === 'maxDocumentBytes',
    );
    await assert.rejects(
      readCorpusBytes(new Uint8Array(), 's3://b/corpus.csv', { field: 'spec.corpus' }),
      (e: unknown) => e instanceof ConfigError && e.field === 'spec.corpus' && e.message.endsWith('(got "s3://b/corpus.csv")'),
    );
    assert.equal(corpusFormatOf('s3://b/x.JSONL.GZ'), 'jsonl');
    assert.equal(corpusFormatOf('hf://datasets/o/n/data/train-0000.parquet'), 'parquet');
  });
});

// ---------------------------------------------------------------------------------------------
// Parquet

interface ParquetColumn {
  readonly name: string;
  readonly optional: boolean;
  /** null only in an optional column. */
  readonly values: readonly (string | Uint8Array | null)[];
}

/**
 * A Parquet file: one BYTE_ARRAY (UTF8) column per entry, rows split into row groups of
 * `rowsPerGroup`, each column chunk one PLAIN data page (v1), uncompressed or gzip.
 */
function writeParquet(columns: readonly ParquetColumn[], rowsPerGroup: number, codec: 'none' | 'gzip' = 'none'): Uint8Array {
  const rows = columns[0]!.values.length;
  const out: number[] = [...encoder.encode('PAR1')];
  const groups: number[][] = [];
  const rowGroups: { chunks: { offset: number; size: number; values: number; uncompressed: number; column: ParquetColumn }[]; rows: number }[] = [];
  for (let start = 0; start < rows; start += rowsPerGroup) {
    const end = Math.min(rows, start + rowsPerGroup);
    groups.push([start, end]);
    const chunks = columns.map((column) => {
      const values = column.values.slice(start, end);
      const body: number[] = [];
      if (column.optional) {
        const levels = rleBits(values.map((v) => (v === null ? 0 : 1)));
        body.push(...u32(levels.length), ...levels);
      }
      for (const value of values) {
        if (value === null) continue;
        const bytes = typeof value === 'string' ? encoder.encode(value) : value;
        body.push(...u32(bytes.length), ...bytes);
      }
      const data = codec === 'gzip' ? [...gzipSync(new Uint8Array(body))] : body;
      const header = struct([
        [1, i32(0)],
        [2, i32(body.length)],
        [3, i32(data.length)],
        [
          5,
          struct([
            [1, i32(values.length)],
            [2, i32(0)],
            [3, i32(3)],
            [4, i32(3)],
          ]),
        ],
      ]);
      const offset = out.length;
      out.push(...header.bytes, ...data);
      return { offset, size: header.bytes.length + data.length, values: values.length, uncompressed: header.bytes.length + body.length, column };
    });
    rowGroups.push({ chunks, rows: end - start });
  }
  const meta = struct([
    [1, i32(1)],
    [
      2,
      list(12, [
        struct([
          [4, binary('schema')],
          [5, i32(columns.length)],
        ]),
        ...columns.map((c) =>
          struct([
            [1, i32(6)],
            [3, i32(c.optional ? 1 : 0)],
            [4, binary(c.name)],
            [6, i32(0)],
          ]),
        ),
      ]),
    ],
    [3, i64(rows)],
    [
      4,
      list(
        12,
        rowGroups.map((group) =>
          struct([
            [
              1,
              list(
                12,
                group.chunks.map((chunk) =>
                  struct([
                    [2, i64(chunk.offset)],
                    [
                      3,
                      struct([
                        [1, i32(6)],
                        [2, list(5, [i32(0), i32(3)])],
                        [3, list(8, [binary(chunk.column.name)])],
                        [4, i32(codec === 'gzip' ? 2 : 0)],
                        [5, i64(chunk.values)],
                        [6, i64(chunk.uncompressed)],
                        [7, i64(chunk.size)],
                        [9, i64(chunk.offset)],
                      ]),
                    ],
                  ]),
                ),
              ),
            ],
            [2, i64(group.chunks.reduce((sum, c) => sum + c.uncompressed, 0))],
            [3, i64(group.rows)],
          ]),
        ),
      ),
    ],
  ]);
  out.push(...meta.bytes, ...u32(meta.bytes.length), ...encoder.encode('PAR1'));
  return new Uint8Array(out);
}

// Thrift compact protocol, as much of it as the file metadata needs.
type Thrift = { type: number; bytes: number[] };
const varint = (n: number): number[] => {
  const out: number[] = [];
  let v = n;
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
};
const zigzag = (n: number): number => (n >= 0 ? n * 2 : -n * 2 - 1);
const i32 = (n: number): Thrift => ({ type: 5, bytes: varint(zigzag(n)) });
const i64 = (n: number): Thrift => ({ type: 6, bytes: varint(zigzag(n)) });
const binary = (s: string): Thrift => {
  const bytes = encoder.encode(s);
  return { type: 8, bytes: [...varint(bytes.length), ...bytes] };
};
const list = (elementType: number, items: readonly Thrift[]): Thrift => ({
  type: 9,
  bytes: [...(items.length < 15 ? [(items.length << 4) | elementType] : [0xf0 | elementType, ...varint(items.length)]), ...items.flatMap((i) => i.bytes)],
});
const struct = (fields: readonly [number, Thrift][]): Thrift => {
  const bytes: number[] = [];
  let last = 0;
  for (const [id, value] of fields) {
    bytes.push(((id - last) << 4) | value.type, ...value.bytes);
    last = id;
  }
  bytes.push(0);
  return { type: 12, bytes };
};
const u32 = (n: number): number[] => [n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, (n >>> 24) & 0xff];
/** The RLE/bit-packing hybrid at bit width 1, as RLE runs only. */
function rleBits(bits: readonly number[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < bits.length; ) {
    let j = i;
    while (j < bits.length && bits[j] === bits[i]) j++;
    out.push(...varint((j - i) << 1), bits[i]!);
    i = j;
  }
  return out;
}

describe('readParquetDocuments', () => {
  const invalid = new Uint8Array([...encoder.encode('bad '), 0xc3, 0x28]);

  it('reads text, id and url by row group, counting bad rows as JSONL lines are counted', async () => {
    const bytes = writeParquet(
      [
        { name: 'id', optional: true, values: ['r0', 'r1', 'r2', null, 'r0', 'r5', 'r6'] },
        { name: 'text', optional: true, values: ['Row zero.', 'Row one.', '   ', 'No id.', 'Repeat.', invalid, null] },
        { name: 'url', optional: true, values: ['https://a.example/0', null, null, null, null, null, null] },
        { name: 'lang', optional: false, values: ['en', 'en', 'en', 'en', 'en', 'en', 'en'] },
      ],
      3,
      'gzip',
    );
    const { documents, report } = await readCorpusBytes(bytes, 's3://b/part-0.parquet');
    assert.deepEqual(documents, [
      { id: 'r0', text: 'Row zero.', url: 'https://a.example/0' },
      { id: 'r1', text: 'Row one.' },
    ]);
    assert.equal(report.format, 'parquet');
    assert.equal(report.lines, 7);
    assert.deepEqual(report.skipped.empty, { count: 1, examples: [2] });
    assert.deepEqual(report.skipped.bad_shape, { count: 2, examples: [3, 6] });
    assert.deepEqual(report.skipped.duplicate_id, { count: 1, examples: [4] });
    assert.deepEqual(report.skipped.invalid_utf8, { count: 1, examples: [5] });
    assertCountsAddUp(report);
  });

  it('names rows <file>#<row> without an id column, and truncates as JSONL does', async () => {
    const bytes = writeParquet([{ name: 'text', optional: false, values: ['alpha', 'beta', 'ééé'] }], 2);
    const { documents, report } = await readParquetDocuments(bytesAsAsyncBuffer(bytes), { name: 'train.parquet', maxDocumentBytes: 4 });
    assert.deepEqual(
      documents.map((d) => [d.id, d.text]),
      [
        ['train.parquet#0', 'alph'],
        ['train.parquet#1', 'beta'],
        ['train.parquet#2', 'éé'],
      ],
    );
    assert.equal(report.truncated, 2);
    assertCountsAddUp(report);
  });

  it('refuses a file without a text column, naming the file and its columns', async () => {
    const bytes = writeParquet([{ name: 'content', optional: false, values: ['x'] }], 1);
    await assert.rejects(
      readParquetDocuments(bytesAsAsyncBuffer(bytes), { name: 'x.parquet' }),
      (e: unknown) => e instanceof ConfigError && e.field === 'corpus' && /no "text" column \(columns: content\)/.test(e.message),
    );
    await assert.rejects(
      readCorpusBytes(encoder.encode('not parquet at all'), 'y.parquet'),
      (e: unknown) => e instanceof ConfigError && /not a readable Parquet/.test(e.message),
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Shards

describe('shards', () => {
  const documents = Array.from({ length: 23 }, (_, i) => ({
    id: `d${String(i).padStart(2, '0')}`,
    text: `Text number ${i}. ${'x'.repeat(i * 10)}`,
    ...(i % 5 === 0 ? { url: `u${i}` } : {}),
  }));

  it('cuts by document count and by bytes, whichever comes first, content-addressed and repeatable', () => {
    const byCount = planShards(documents, { shardDocuments: 10 });
    assert.deepEqual(
      byCount.map((s) => [s.documents, s.firstId, s.lastId]),
      [
        [10, 'd00', 'd09'],
        [10, 'd10', 'd19'],
        [3, 'd20', 'd22'],
      ],
    );
    for (const shard of byCount) assert.equal(shard.sha256, sha256Hex(shard.bytes));
    assert.deepEqual(planShards(documents, { shardDocuments: 10 }), byCount);
    const byBytes = planShards(documents, { shardDocuments: 100, maxShardBytes: 600 });
    assert.ok(byBytes.length > 3);
    for (const shard of byBytes) assert.ok(shard.bytes.length <= 600, String(shard.bytes.length));
    assert.deepEqual(
      byBytes.flatMap((s) => decodeShard(s.bytes).documents),
      documents,
    );
    assert.equal(shardKey('s3://b/shards/', byCount[0]!.sha256), `s3://b/shards/${byCount[0]!.sha256}.jsonl`);
  });

  it('decodes a damaged shard line by line, counting what it cannot read', () => {
    const bytes = encodeShard(documents.slice(0, 3));
    const damaged = bytes.slice();
    damaged[0] = 0x58; // 'X' for the first line's '{'
    const { documents: read, report } = decodeShard(damaged);
    assert.deepEqual(read, documents.slice(1, 3));
    assert.equal(report.skipped.not_json.count, 1);
    assertCountsAddUp(report);
  });

  it('refuses a document no shard can hold, repeated ids, and bad limits, naming the field', () => {
    assert.throws(
      () => planShards(documents, { maxShardBytes: 50 }),
      (e: unknown) => e instanceof ConfigError && e.field === 'maxShardBytes',
    );
    assert.throws(
      () => planShards([documents[0]!, documents[0]!]),
      (e: unknown) => e instanceof ConfigError && e.field === 'documents[1].id',
    );
    assert.throws(
      () => planShards(documents, { shardDocuments: 0 }),
      (e: unknown) => e instanceof ConfigError && e.field === 'shardDocuments',
    );
    assert.throws(
      () => shardKey('s3://b/', 'abc'),
      (e: unknown) => e instanceof ConfigError && e.field === 'sha256',
    );
    assert.deepEqual(planShards([]), []);
  });
});

// ---------------------------------------------------------------------------------------------
// The Debian corpus

describe('Debian corpus', () => {
  it('lists the source files of each package, sorted, without parsing them', () => {
    const files = listDebianSources();
    const count = (kind: string) => files.filter((f) => f.kind === kind).length;
    // python3-doc 3.11: 530 pages; debian-reference-en: 15 chapters; man2/3/7 of manpages and
    // manpages-dev: about 1,000; fortunes: about 40 files.
    assert.ok(count('python-doc') > 400, String(count('python-doc')));
    assert.ok(count('debian-reference') >= 10);
    assert.ok(count('man') > 800);
    assert.ok(count('fortune') > 20);
    assert.deepEqual(
      files.map((f) => f.path),
      [...files.map((f) => f.path)].sort(),
    );
    assert.ok(files.some((f) => f.path.endsWith('/man2/open.2.gz')));
    assert.ok(!files.some((f) => /\.(dat|u8)$/.test(f.path)));
  });

  it('samples before parsing, in equal shares per source, the same for the same seed', async () => {
    const first = await readDebianCorpus({ sample: 40, seed: 11 });
    assert.equal(first.documents.length, 40);
    for (const kind of DEBIAN_SOURCES) assert.equal(first.bySource[kind], 10, `${kind}: ${first.bySource[kind]}`);
    // A source with fewer candidates than its share gives the rest to the others.
    const wide = await readDebianCorpus({ sample: 60, seed: 11, kinds: ['debian-reference', 'fortune'] });
    assert.equal(wide.bySource['debian-reference'], first.candidates['debian-reference']);
    assert.equal(wide.bySource.fortune, 60 - first.candidates['debian-reference']!);
    for (const document of first.documents) {
      assert.match(document.id, /^(python-doc|debian-reference|man|fortune):/);
      assert.ok(document.id.startsWith(`${document.source}:`));
      assert.ok(document.text.trim() !== '' && !document.text.includes('\b'));
    }
    const again = await readDebianCorpus({ sample: 40, seed: 11, kinds: ['fortune', 'man', 'python-doc', 'debian-reference'] });
    assert.deepEqual(
      again.documents.map((d) => d.id),
      first.documents.map((d) => d.id),
    );
    const fortunes = await readDebianCorpus({ sample: 5, seed: 12, kinds: ['fortune'] });
    assert.deepEqual(Object.keys(fortunes.bySource), ['fortune']);
    assert.ok(fortunes.documents.every((d) => /^fortune:[a-z-]+#\d+$/.test(d.id) && d.url === d.id));
  });

  it('fails naming the missing path and the Debian package to install', async () => {
    const root = mkdtempSync(join(tmpdir(), 'fp-debian-'));
    try {
      const cases: [(typeof DEBIAN_SOURCES)[number], RegExp][] = [
        ['python-doc', /usr\/share\/doc\/python3\/html does not exist: .*apt-get install python3-doc/],
        ['debian-reference', /usr\/share\/debian-reference does not exist: .*apt-get install debian-reference-en/],
        ['man', /var\/lib\/dpkg\/info\/manpages\.list does not exist: .*apt-get install manpages\)/],
        ['fortune', /usr\/share\/games\/fortunes does not exist: .*apt-get install fortunes/],
      ];
      for (const [kind, message] of cases) {
        assert.throws(
          () => listDebianSources({ root, kinds: [kind] }),
          (e: unknown) => e instanceof NotFoundError && message.test(e.message) && e.message.startsWith(root),
        );
      }
      await assert.rejects(readDebianCorpus({ root, seed: 0, sample: 5 }), NotFoundError);
      await assert.rejects(readDebianCorpus({ seed: 0, sample: 0 }), (e: unknown) => e instanceof ConfigError && e.field === 'sample');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("keeps a page's main text as paragraphs and drops its navigation, sidebar and footer", () => {
    const paragraph = (n: number) =>
      `<p>Paragraph ${n} of the article explains, in several sentences, how the river shaped the town. The farmers depended on its floods, and the merchants used its current to carry their goods to the coast and back again.</p>`;
    const html = `<!doctype html><html><head><title>The river</title></head><body>
      <nav><a href="/">Home</a> | <a href="/about">About us</a> | <a href="/contact">Contact</a></nav>
      <div class="sidebar"><h3>Related</h3><ul><li><a href="/x">Other page one</a></li><li><a href="/y">Other page two</a></li></ul></div>
      <article><h1>The river<a class="headerlink" href="#r">¶</a></h1>${[1, 2, 3, 4, 5].map(paragraph).join('')}
      <ul><li>First point of a list.</li><li>Second point of a list.</li></ul></article>
      <footer>Copyright 2024 Example Ltd. Privacy policy. Terms of use.</footer></body></html>`;
    const text = extractMainText(html)!;
    assert.ok(text.includes('Paragraph 1 of the article explains'));
    assert.match(text, /coast and back again\.\n\nParagraph 2 of/);
    assert.match(text, /First point of a list\.\nSecond point of a list\./);
    for (const boilerplate of ['About us', 'Other page one', 'Copyright 2024', '¶']) assert.ok(!text.includes(boilerplate), boilerplate);
  });

  it('renders a man page to plain text without the running header or overstrikes', async () => {
    const text = await renderManPage('/usr/share/man/man2/open.2.gz');
    assert.match(text, /^NAME\nopen, openat, creat - open and possibly create a file\n/);
    assert.ok(!text.includes('\b') && !text.includes('System Calls Manual'));
    // One line per filled paragraph (see the module comment), not 80-column wrapping.
    assert.ok(text.split('\n').some((line) => line.length > 200));
  });

  it('splits a fortune file on lines holding a single %', () => {
    assert.deepEqual(parseFortunes('One.\n%\nTwo\n  indented.\n%\n\n%\nB\bBold _\bx.\n%\n'), ['One.', 'Two\n  indented.', 'Bold x.']);
  });
});
