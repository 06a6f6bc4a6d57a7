/**
 * The refinery's per-shard stage and its global dedup step against s3rver: every document of a
 * shard is kept or removed for one rule; the global step finds exact and near duplicates across
 * shards from band keys and byte-range reads of the candidates' full signatures, reads no text,
 * and keeps the smallest id of each cluster; a 24-bit band key that matches by chance merges
 * nothing.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { buildContaminationIndex } from '#shared/refinery/decontaminate.ts';
import { bandKeys, createMinHasher, decodeSignatureShard, MINHASH_VALUES, type MinHasher, nearDuplicates } from '#shared/refinery/dedup.ts';
import { globalDedup } from '#shared/refinery/dedup-step.ts';
import { applyFilters, FilterConfig } from '#shared/refinery/filters.ts';
import {
  decodeFullSignatureRecord,
  FULL_SIGNATURE_RECORD_BYTES,
  fullSignatureRange,
  refineShardDocuments,
  type ShardDocument,
} from '#shared/refinery/shard-refine.ts';
import { startTestS3, type TestS3 } from '../support/s3.ts';

const BUCKET = 'refinery-steps';
let store: TestS3;
let s3: S3Client;
let hasher: MinHasher;

before(async () => {
  store = await startTestS3(BUCKET, 'fp-refinery-steps-');
  s3 = store.s3;
  hasher = await createMinHasher();
});

after(async () => {
  await store?.close();
});

/** Real prose: Debian's licence texts (base-files), distinct files cut into documents of about 300 words. */
function licenceDocuments(): string[] {
  const dir = '/usr/share/common-licenses';
  const seen = new Set<string>();
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const path = realpathSync(join(dir, name));
    if (seen.has(path) || !statSync(path).isFile()) continue;
    seen.add(path);
    let current: string[] = [];
    let words = 0;
    for (const paragraph of readFileSync(path, 'utf8').split(/\n\s*\n/)) {
      current.push(paragraph.trim());
      words += paragraph.split(/\s+/).filter(Boolean).length;
      if (words >= 300) {
        out.push(current.join('\n\n'));
        current = [];
        words = 0;
      }
    }
  }
  return out;
}

const put = async (key: string, body: Uint8Array) => {
  await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: body }));
  return `s3://${BUCKET}/${key}`;
};

describe('refinery per-shard stage', () => {
  it('keeps or removes every document for exactly one rule, and writes signatures in id order', () => {
    const filters = FilterConfig.parse({});
    const items = [
      {
        benchmark: 'shelf',
        version: 2,
        id: 'q7',
        prompt: 'How many books remain on the shelf after the librarian removes the old atlases today?',
        answer: '42 books',
      },
    ];
    const passing = licenceDocuments().filter((text) => applyFilters(text, filters).keep);
    assert.ok(passing.length >= 3, `${passing.length} licence documents pass the filters`);
    const documents: ShardDocument[] = [
      { id: 'd3', text: passing[1]! },
      { id: 'd1', text: passing[0]! },
      { id: 'd2', text: '' },
      { id: 'd4', text: 'lorem ipsum dolor sit amet '.repeat(40) },
      { id: 'd5', text: `${passing[2]} How many books remain on the shelf after the librarian removes the old atlases today? 42 books.` },
    ];
    const refined = refineShardDocuments(documents, { filters, contamination: buildContaminationIndex(items, { ngram: 13 }), hasher });
    assert.equal(refined.kept.length + refined.removed.length, documents.length);
    assert.deepEqual(
      refined.kept.map((d) => d.id),
      ['d1', 'd3'],
    );
    const rules = Object.fromEntries(refined.removed.map((r) => [r.id, r.rule]));
    assert.equal(rules.d2, 'input');
    assert.ok(rules.d4 && rules.d4 !== 'decontamination', JSON.stringify(rules));
    assert.equal(rules.d5, 'decontamination');
    assert.deepEqual(refined.removed.find((r) => r.id === 'd5')!.benchmark, { name: 'shelf', version: 2, itemId: 'q7' });
    // The compact buffer and the full records line up, record by record.
    const compact = decodeSignatureShard(refined.signatures);
    assert.deepEqual(
      compact.map((r) => r.id),
      ['d1', 'd3'],
    );
    assert.equal(refined.fullSignatures.length, 8 + 2 * FULL_SIGNATURE_RECORD_BYTES);
    compact.forEach((record, i) => {
      const { start, end } = fullSignatureRange(i);
      const full = decodeFullSignatureRecord(refined.fullSignatures.subarray(start, end));
      assert.equal(full.signature.length, MINHASH_VALUES);
      assert.deepEqual(bandKeys(full.signature), record.bandKeys);
      assert.deepEqual(full.signature, hasher.signature(refined.kept[i]!.text));
    });
  });
});

describe('refinery global dedup', () => {
  it('finds exact and near duplicates across shards from band keys and ranges of candidates only', async () => {
    const filters = FilterConfig.parse({ enabled: [] });
    const texts = licenceDocuments();
    assert.ok(texts.length >= 61, `${texts.length} licence documents`);
    const base = texts[0]!;
    const words = base.split(' ');
    // One word in 80 changed: a 5-word shingle Jaccard of about 0.88 (found with 99.7 % chance).
    const edited = words.map((w, i) => (i % 80 === 7 ? 'altered' : w)).join(' ');
    const shardA: ShardDocument[] = [{ id: 'a-0', text: base }, ...texts.slice(1, 31).map((text, i) => ({ id: `a-${i + 1}`, text }))];
    const shardB: ShardDocument[] = [
      { id: 'b-0', text: base },
      { id: 'b-1', text: edited },
      ...texts.slice(31, 61).map((text, i) => ({ id: `b-${i + 2}`, text })),
    ];
    const shards = [];
    let corpusBytes = 0;
    for (const [name, docs] of [
      ['a', shardA],
      ['b', shardB],
    ] as const) {
      corpusBytes += docs.reduce((n, d) => n + Buffer.byteLength(JSON.stringify(d)) + 1, 0);
      const refined = refineShardDocuments(docs, { filters, contamination: null, hasher });
      assert.equal(refined.kept.length, docs.length);
      shards.push({ signaturesUri: await put(`sig/${name}.rmh`, refined.signatures), fullUri: await put(`sig/${name}.rmf`, refined.fullSignatures) });
    }
    const result = await globalDedup(shards);
    const byId = Object.fromEntries(result.removed.map((r) => [r.id, r]));
    assert.deepEqual(byId['b-0'], { id: 'b-0', keptId: 'a-0', kind: 'exact' });
    assert.equal(byId['b-1']?.keptId, 'a-0');
    assert.equal(byId['b-1']?.kind, 'near');
    assert.equal(result.documents, 63);
    assert.equal(result.kept, 63 - result.removed.length);
    // The same clusters as the in-memory reference over all the documents at once.
    const reference = nearDuplicates([...shardA, ...shardB], hasher);
    assert.deepEqual(
      result.removed.map(({ id, keptId }) => ({ id, keptId })),
      reference.removed,
    );
    // Full signatures read for the candidates only, by range: far less than every record.
    assert.ok(result.bytesRead.full < 63 * FULL_SIGNATURE_RECORD_BYTES, `${result.bytesRead.full} bytes of full signatures`);
    assert.ok(result.bytesRead.full >= 3 * FULL_SIGNATURE_RECORD_BYTES);
    assert.ok(result.bytesRead.compact < 0.2 * corpusBytes, `${result.bytesRead.compact} of ${corpusBytes}`);
  });

  it('merges nothing on a band key that matches by chance: the full rows must match', async () => {
    const filters = FilterConfig.parse({ enabled: [] });
    const refined = refineShardDocuments(
      [
        { id: 'x', text: licenceDocuments()[0]! },
        { id: 'y', text: licenceDocuments()[1]! },
      ],
      { filters, contamination: null, hasher },
    );
    // Forge y's band 0 key to equal x's: a 24-bit collision, as chance makes one among millions.
    const records = decodeSignatureShard(refined.signatures);
    const forged = new Uint8Array(refined.signatures);
    const keyAt = forged.length - 14 * 3;
    const x0 = records[0]!.bandKeys[0]!;
    forged.set([x0 & 0xff, (x0 >>> 8) & 0xff, (x0 >>> 16) & 0xff], keyAt);
    assert.equal(decodeSignatureShard(forged)[1]!.bandKeys[0], x0);
    const result = await globalDedup([{ signaturesUri: await put('sig/forged.rmh', forged), fullUri: await put('sig/forged.rmf', refined.fullSignatures) }]);
    assert.equal(result.candidates, 2);
    assert.deepEqual(result.removed, []);
  });
});
