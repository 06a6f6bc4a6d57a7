import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import xxhash from 'xxhash-wasm';
import {
  xxHash32Pair,
  bandKeys,
  bucketPairs,
  clusterDuplicates,
  createMinHasher,
  decodeSignatureShard,
  encodeSignatureShard,
  estimatedJaccard,
  exactDuplicates,
  MINHASH_BANDS,
  MINHASH_ROWS,
  MINHASH_VALUES,
  nearDuplicates,
  SHINGLE_WORDS,
  type RefineryDocument,
} from '#shared/refinery/dedup.ts';
import { normalizedWords, normalizeText, wordNgrams } from '#shared/refinery/normalize.ts';
import { ConfigError } from '#shared/errors.ts';
import { randomInt, seededRandom, type Random } from '#shared/random.ts';

// Word lengths of running English text (share of words with 1..12 letters, mean ~4.7 letters), so
// that a generated 500-word document has about as many bytes as a real one (~2,900).
const WORD_LENGTH_SHARES = [0.03, 0.17, 0.21, 0.16, 0.11, 0.09, 0.08, 0.06, 0.04, 0.03, 0.015, 0.005];

function randomWord(random: Random): string {
  let u = random();
  let length = 1;
  for (const share of WORD_LENGTH_SHARES) {
    u -= share;
    if (u < 0) break;
    length++;
  }
  let word = '';
  for (let i = 0; i < Math.min(length, 12); i++) word += String.fromCharCode(97 + randomInt(random, 26));
  return word;
}

/** A 500-word document with sentences: capitals, commas and full stops, like web text. */
function randomDocument(random: Random, words = 500): string {
  const parts: string[] = [];
  let sentenceStart = true;
  for (let i = 0; i < words; i++) {
    let word = randomWord(random);
    if (sentenceStart) word = word[0]!.toUpperCase() + word.slice(1);
    sentenceStart = false;
    const u = random();
    if (u < 0.06) {
      word += '.';
      sentenceStart = true;
    } else if (u < 0.12) word += ',';
    parts.push(word);
  }
  return parts.join(' ');
}

let freshCounter = 0;
/** A word that appears nowhere else: "qz" and the counter in letters. */
function freshWord(): string {
  let n = freshCounter++;
  let word = 'qz';
  do {
    word += String.fromCharCode(97 + (n % 26));
    n = Math.floor(n / 26);
  } while (n > 0);
  return `${word}qq`;
}

/** Exact Jaccard similarity of the normalised word 5-gram shingle sets. */
function shingleJaccard(a: readonly string[], b: readonly string[]): number {
  const setA = new Set(wordNgrams(a, SHINGLE_WORDS));
  const setB = new Set(wordNgrams(b, SHINGLE_WORDS));
  let shared = 0;
  for (const gram of setA) if (setB.has(gram)) shared++;
  return shared / (setA.size + setB.size - shared);
}

/**
 * An edit of `text` at a measured Jaccard: words are replaced one at a time (random positions,
 * fresh words) while the next replacement keeps the Jaccard >= target ('atLeast'), or until it is
 * <= target ('atMost'). One replacement moves the Jaccard by at most ~0.02 for 500 words.
 */
function nearDuplicate(random: Random, text: string, target: number, side: 'atLeast' | 'atMost'): { text: string; jaccard: number } {
  const original = normalizedWords(text);
  let current = [...original];
  let jaccard = 1;
  for (;;) {
    const next = [...current];
    next[randomInt(random, next.length)] = freshWord();
    const nextJaccard = shingleJaccard(original, next);
    if (side === 'atLeast' && nextJaccard < target) break;
    current = next;
    jaccard = nextJaccard;
    if (side === 'atMost' && jaccard <= target) break;
  }
  return { text: current.join(' '), jaccard };
}

/** The 14 x 8 match probability 1 - (1 - s^8)^14. */
const matchProbability = (s: number): number => 1 - (1 - s ** MINHASH_ROWS) ** MINHASH_BANDS;

interface PairRun {
  found: number;
  pairs: number;
  crossPairMerges: number;
  meanJaccard: number;
  meanTheory: number;
  meanEstimateError: number;
}

/** `count` pairs at the targets `targetOf(i)`; runs the in-memory dedup over all 2*count documents. */
async function runPairs(seed: number, count: number, targetOf: (random: Random) => number, side: 'atLeast' | 'atMost'): Promise<PairRun> {
  const random = seededRandom(seed);
  const hasher = await createMinHasher();
  const documents: RefineryDocument[] = [];
  let jaccardSum = 0;
  let theorySum = 0;
  let errorSum = 0;
  for (let i = 0; i < count; i++) {
    const text = randomDocument(random);
    const edit = nearDuplicate(random, text, targetOf(random), side);
    jaccardSum += edit.jaccard;
    theorySum += matchProbability(edit.jaccard);
    errorSum += estimatedJaccard(hasher.signature(text), hasher.signature(edit.text)) - edit.jaccard;
    documents.push({ id: `pair-${String(i).padStart(4, '0')}-a`, text }, { id: `pair-${String(i).padStart(4, '0')}-b`, text: edit.text });
  }
  const result = nearDuplicates(documents, hasher);
  let found = 0;
  let crossPairMerges = 0;
  for (const cluster of result.clusters) {
    const pairsInCluster = new Set(cluster.ids.map((id) => id.slice(0, 9)));
    if (pairsInCluster.size > 1) crossPairMerges++;
    for (const pair of pairsInCluster) if (cluster.ids.includes(`${pair}-a`) && cluster.ids.includes(`${pair}-b`)) found++;
  }
  return { found, pairs: count, crossPairMerges, meanJaccard: jaccardSum / count, meanTheory: theorySum / count, meanEstimateError: errorSum / count };
}

const describeRun = (name: string, run: PairRun): string =>
  `${name}: found ${run.found}/${run.pairs} (${((100 * run.found) / run.pairs).toFixed(1)} %), theory ${(100 * run.meanTheory).toFixed(1)} %, ` +
  `mean Jaccard ${run.meanJaccard.toFixed(3)}, mean estimate error ${run.meanEstimateError.toFixed(4)}, cross-pair merges ${run.crossPairMerges}`;

describe('normalizeText', () => {
  it('folds case, punctuation, digits, spacing and compatibility forms alike', () => {
    assert.equal(normalizeText('  Hello,\tWORLD!  In 2023 —\nx=5 '), 'hello world in 0000 x 0');
    assert.equal(normalizeText('ＨＥＬＬＯ ｗｏｒｌｄ ① ﬁne'), 'hello world 0 fine');
    assert.equal(normalizeText('1,234 apples'), normalizeText('1234 APPLES'));
    assert.equal(normalizeText("don't"), normalizeText("don 't"));
    assert.equal(normalizeText('...!'), '');
  });

  it('gives what the steps as regular expressions give, one after the other', () => {
    // The module comment's steps, written the plain way: the one-pass version must agree.
    const byRegularExpressions = (text: string) =>
      text
        .normalize('NFKC')
        .toLowerCase()
        .replace(/(?<=\p{Nd})[\p{P}\p{S}]+(?=\p{Nd})/gu, '')
        .replace(/[\p{P}\p{S}]/gu, ' ')
        .replace(/\p{Nd}/gu, '0')
        .replace(/[\s\p{Cc}]+/gu, ' ')
        .trim();
    // Letters, digits of three scripts (one outside the BMP), punctuation and symbols (one an
    // emoji), whitespace and controls of several kinds, compatibility forms, lone surrogates.
    const alphabet = ['a', 'B', '1', '٣', '𝟙', '.', ',', '-', '$', '|', '…', '—', '😀', ' ', '\t', '\n', '\u0000', '\u0085', '\u00a0', '\ufeff'];
    alphabet.push('İ', 'ﬁ', '①', '＄', '１', 'é', 'e\u0301', '𐐀', '\ud800', '\udc00');
    const random = seededRandom(7);
    for (let trial = 0; trial < 20_000; trial++) {
      let text = '';
      for (let i = randomInt(random, 13); i > 0; i--) text += alphabet[randomInt(random, alphabet.length)];
      assert.equal(normalizeText(text), byRegularExpressions(text), JSON.stringify(text));
    }
    const page = `${'Price: $1,234.56 (était 1.299,00 €) — see §4.2…\r\n'.repeat(50)}ＡＢＣ １２３ 😀😀 done.`;
    assert.equal(normalizeText(page), byRegularExpressions(page));
  });

  it('wordNgrams rejects a bad n by name', () => {
    assert.throws(
      () => wordNgrams(['a'], 0),
      (error: unknown) => error instanceof ConfigError && error.field === 'n',
    );
    assert.deepEqual(wordNgrams(['a', 'b', 'c'], 2), ['a b', 'b c']);
  });
});

describe('exactDuplicates', () => {
  it('keeps the smallest id of texts equal after normalisation', () => {
    const result = exactDuplicates([
      { id: 'doc-c', text: 'Hello, World! Born in 1999.' },
      { id: 'doc-a', text: 'hello world born in 2023' },
      { id: 'doc-b', text: 'something else entirely' },
    ]);
    assert.deepEqual(result.kept, ['doc-a', 'doc-b']);
    assert.deepEqual(result.removed, [{ id: 'doc-c', keptId: 'doc-a' }]);
  });

  it('throws naming the document when an id repeats', () => {
    assert.throws(
      () =>
        exactDuplicates([
          { id: 'x', text: 'a' },
          { id: 'x', text: 'b' },
        ]),
      (error: unknown) => error instanceof ConfigError && error.field === 'documents[1].id' && /earlier document/.test(error.message),
    );
  });
});

describe('MinHash near-duplicate detection (14 bands x 8 rows)', () => {
  it('finds at least 95 % of pairs spread over Jaccard 0.80-0.95', async () => {
    const run = await runPairs(1, 200, (random) => 0.8 + 0.15 * random(), 'atLeast');
    console.log(describeRun('Jaccard 0.80-0.95', run));
    assert.ok(run.found / run.pairs >= 0.95, describeRun('0.80-0.95', run));
    assert.equal(run.crossPairMerges, 0);
    // The estimator is unbiased: mean error over 200 pairs has sd ~0.003.
    assert.ok(Math.abs(run.meanEstimateError) < 0.012, `mean estimate error ${run.meanEstimateError}`);
  });

  it('finds pairs just above Jaccard 0.80 at the rate the curve predicts (92.4 % at 0.80)', async () => {
    // 14 x 8 targets ~0.72-0.75, so at exactly 0.80 about 1 pair in 13 is missed: 95 % needs s >= 0.82.
    // Bound: theory minus 3 binomial sd for 200 pairs (sd ~1.9 points).
    const run = await runPairs(2, 200, () => 0.8, 'atLeast');
    console.log(describeRun('Jaccard just >= 0.80', run));
    assert.ok(run.meanJaccard >= 0.8 && run.meanJaccard < 0.82);
    assert.ok(run.found / run.pairs >= run.meanTheory - 3 * Math.sqrt((run.meanTheory * (1 - run.meanTheory)) / run.pairs), describeRun('0.80', run));
  });

  it('finds few pairs at Jaccard <= 0.50 (at most 10 %; the curve gives 5.3 % at 0.50)', async () => {
    const run = await runPairs(3, 200, () => 0.5, 'atMost');
    console.log(describeRun('Jaccard just <= 0.50', run));
    assert.ok(run.meanJaccard <= 0.5 && run.meanJaccard > 0.48);
    assert.ok(run.found / run.pairs <= 0.1, describeRun('0.50', run));
    assert.equal(run.crossPairMerges, 0);
  });

  it('keeps the smallest id of a cluster whatever the input order', async () => {
    const random = seededRandom(4);
    const hasher = await createMinHasher();
    const base = randomDocument(random);
    const documents = [
      { id: 'doc-b', text: nearDuplicate(random, base, 0.95, 'atLeast').text },
      { id: 'doc-a', text: nearDuplicate(random, base, 0.95, 'atLeast').text },
      { id: 'doc-c', text: base },
      { id: 'doc-z', text: randomDocument(random) },
    ];
    const expected = nearDuplicates(documents, hasher);
    assert.deepEqual(expected.kept, ['doc-a', 'doc-z']);
    assert.deepEqual(expected.removed, [
      { id: 'doc-b', keptId: 'doc-a' },
      { id: 'doc-c', keptId: 'doc-a' },
    ]);
    for (const order of [
      [3, 2, 1, 0],
      [2, 0, 3, 1],
      [1, 3, 0, 2],
    ]) {
      assert.deepEqual(
        nearDuplicates(
          order.map((i) => documents[i]!),
          hasher,
        ),
        expected,
      );
    }
  });

  it('gives the same signature for the same normalised text and 112 values', async () => {
    const hasher = await createMinHasher();
    const a = hasher.signature('The Cat sat on the mat, in 1999!');
    assert.equal(a.length, MINHASH_BANDS * MINHASH_ROWS);
    assert.deepEqual(a, hasher.signature('the cat sat on the mat in 2024'));
    assert.ok(hasher.signature('').every((value) => value === 0xffffffff));
  });

  it('measures signatures per second on 500-word documents', async () => {
    const random = seededRandom(5);
    const hasher = await createMinHasher();
    const texts = Array.from({ length: 300 }, () => randomDocument(random));
    const started = performance.now();
    for (const text of texts) hasher.signature(text);
    const seconds = (performance.now() - started) / 1000;
    console.log(`MinHash: ${(texts.length / seconds).toFixed(0)} signatures/s on 500-word documents (${texts.length} in ${seconds.toFixed(3)} s)`);
  });
});

describe('clusterDuplicates', () => {
  it('merges pairs transitively and keeps the smallest id', () => {
    // a~b and b~c, but a and c never paired: still one cluster.
    const result = clusterDuplicates(
      ['c', 'd', 'b', 'a', 'e'],
      [
        { a: 'b', b: 'c', band: 3 },
        { a: 'a', b: 'b', band: 7 },
        { a: 'd', b: 'e', band: 0 },
      ],
    );
    assert.deepEqual(result.clusters, [
      { keptId: 'a', ids: ['a', 'b', 'c'] },
      { keptId: 'd', ids: ['d', 'e'] },
    ]);
    assert.deepEqual(result.kept, ['a', 'd']);
    assert.deepEqual(result.removed, [
      { id: 'b', keptId: 'a' },
      { id: 'c', keptId: 'a' },
      { id: 'e', keptId: 'd' },
    ]);
  });

  it('throws naming the pair whose id is unknown', () => {
    assert.throws(
      () => clusterDuplicates(['a'], [{ a: 'a', b: 'zz', band: 0 }]),
      (error: unknown) => error instanceof ConfigError && error.field === 'pairs[0].b' && error.value === 'zz',
    );
  });
});

describe('bucketPairs', () => {
  it('links a bucket only where the full band rows agree, when the signatures are given', () => {
    const same = new Uint32Array(MINHASH_BANDS * MINHASH_ROWS).fill(7);
    const other = new Uint32Array(MINHASH_BANDS * MINHASH_ROWS).fill(7);
    other[2 * MINHASH_ROWS + 5] = 8; // band 2 differs: a 24-bit key match there is by chance
    const signatures = new Map([
      ['x', same],
      ['y', same],
      ['z', other],
    ]);
    const buckets = [{ band: 2, ids: ['x', 'y', 'z'] }];
    assert.deepEqual(
      bucketPairs(buckets, (id) => signatures.get(id)!),
      [{ a: 'x', b: 'y', band: 2 }],
    );
    assert.deepEqual(bucketPairs(buckets), [
      { a: 'x', b: 'y', band: 2 },
      { a: 'x', b: 'z', band: 2 },
    ]);
  });
});

describe('signature shard serialisation', () => {
  it('round-trips and takes under 2 % of the corpus bytes for 500-word documents', async () => {
    const random = seededRandom(6);
    const hasher = await createMinHasher();
    const encoder = new TextEncoder();
    let corpusBytes = 0;
    const records = Array.from({ length: 200 }, (_, i) => {
      const text = randomDocument(random);
      corpusBytes += encoder.encode(text).length;
      return { id: `cc-2024-10/shard-00042/doc-${String(199 - i).padStart(7, '0')}`, bandKeys: bandKeys(hasher.signature(text)) };
    });
    const bytes = encodeSignatureShard(records);
    const ratio = bytes.length / corpusBytes;
    console.log(
      `signature shard: ${bytes.length} bytes for ${records.length} documents (${(bytes.length / records.length).toFixed(1)} bytes each), ` +
        `corpus ${corpusBytes} bytes (${(corpusBytes / records.length).toFixed(0)} each): ${(100 * ratio).toFixed(2)} %`,
    );
    assert.ok(ratio < 0.02, `ratio ${ratio}`);
    const decoded = decodeSignatureShard(bytes);
    assert.deepEqual(
      decoded,
      [...records].sort((a, b) => (a.id < b.id ? -1 : 1)),
    );
    assert.deepEqual(encodeSignatureShard([...records].reverse()), bytes);
  });

  it('round-trips ids with shared prefixes and non-ASCII characters', () => {
    const keys = new Uint32Array(MINHASH_BANDS).fill(0xabcdef);
    const records = ['doc-é', 'doc-éa', 'doc-日本', 'a'].map((id) => ({ id, bandKeys: keys }));
    assert.deepEqual(
      decodeSignatureShard(encodeSignatureShard(records)).map((record) => record.id),
      ['a', 'doc-é', 'doc-éa', 'doc-日本'],
    );
  });

  it('rejects a buffer that is not a shard, or truncated, naming the field', () => {
    assert.throws(
      () => decodeSignatureShard(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]), 'shards[3]'),
      (error: unknown) => error instanceof ConfigError && error.field === 'shards[3]' && /RMH1/.test(error.message),
    );
    const bytes = encodeSignatureShard([{ id: 'a', bandKeys: new Uint32Array(MINHASH_BANDS) }]);
    assert.throws(
      () => decodeSignatureShard(bytes.subarray(0, bytes.length - 1)),
      (error: unknown) => error instanceof ConfigError && error.field === 'signatures',
    );
  });

  it('rejects duplicate ids and keys over 24 bits', () => {
    const keys = new Uint32Array(MINHASH_BANDS);
    assert.throws(
      () =>
        encodeSignatureShard([
          { id: 'a', bandKeys: keys },
          { id: 'a', bandKeys: keys },
        ]),
      (error: unknown) => error instanceof ConfigError && error.field === 'records[1].id',
    );
    assert.throws(
      () => encodeSignatureShard([{ id: 'a', bandKeys: new Uint32Array(MINHASH_BANDS).fill(2 ** 24) }]),
      (error: unknown) => error instanceof ConfigError && error.field === 'records[0].bandKeys',
    );
  });
});

describe('xxHash32Pair', () => {
  it('equals xxhash-wasm h32Raw bit for bit under both seeds, on random bytes of every length to 300 and some longer', async () => {
    const { h32Raw } = await xxhash();
    const random = seededRandom(2024);
    const out = new Uint32Array(2);
    const lengths = [...Array.from({ length: 301 }, (_, i) => i), 1000, 4095, 4096, 65_537];
    for (const length of lengths) {
      for (let trial = 0; trial < 4; trial++) {
        // The bytes sit inside a larger buffer, at a random offset, as shingles do.
        const offset = randomInt(random, 8);
        const buffer = new Uint8Array(offset + length + randomInt(random, 8));
        for (let i = 0; i < buffer.length; i++) buffer[i] = randomInt(random, 256);
        const seeds = trial === 0 ? [0x5bd1e995, 0x27d4eb2f] : [randomInt(random, 2 ** 32), trial === 1 ? 0 : randomInt(random, 2 ** 32)];
        xxHash32Pair(buffer, offset, offset + length, seeds[0]!, seeds[1]!, out);
        const bytes = buffer.subarray(offset, offset + length);
        assert.equal(out[0], h32Raw(bytes, seeds[0]!), `length ${length}, seed ${seeds[0]}`);
        assert.equal(out[1], h32Raw(bytes, seeds[1]!), `length ${length}, seed ${seeds[1]}`);
      }
    }
  });

  it('gives the signatures the two h32Raw calls per shingle gave', async () => {
    const { h32Raw } = await xxhash();
    const hasher = await createMinHasher();
    const encoder = new TextEncoder();
    const random = seededRandom(31);
    const texts = [
      '',
      'one',
      'two words',
      'Ünïcödé, ΣΟΦΟΣ and 日本語 text with ﬁ ligatures',
      ...Array.from({ length: 30 }, () => randomDocument(random, 1 + randomInt(random, 400))),
    ];
    for (const text of texts) {
      // The signature as createMinHasher computed it with xxhash-wasm.
      const expected = new Uint32Array(MINHASH_VALUES).fill(0xffffffff);
      const bytes = encoder.encode(normalizeText(text));
      if (bytes.length > 0) {
        const starts = [0];
        for (let i = 0; i < bytes.length; i++) if (bytes[i] === 0x20) starts.push(i + 1);
        for (let first = 0; first < Math.max(1, starts.length - 4); first++) {
          const end = first + 5 < starts.length ? starts[first + 5]! - 1 : bytes.length;
          const shingle = bytes.subarray(starts[first]!, end);
          let value = h32Raw(shingle, 0x5bd1e995) | 0;
          const step = h32Raw(shingle, 0x27d4eb2f) | 1;
          for (let i = 0; i < MINHASH_VALUES; i++) {
            const hashed = murmurFinaliser(value);
            if (hashed < expected[i]!) expected[i] = hashed;
            value = (value + step) | 0;
          }
        }
      }
      assert.deepEqual(hasher.signature(text), expected, text.slice(0, 60));
    }
  });
});

/** MurmurHash3's fmix32, as dedup.ts applies it to each of the 112 hash functions. */
function murmurFinaliser(input: number): number {
  let h = input ^ (input >>> 16);
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}
