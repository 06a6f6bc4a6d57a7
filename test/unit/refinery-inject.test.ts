/**
 * Labelled test material mixed into real Debian text (man pages and Python documentation read
 * here): spam the default filters should remove (the rate is measured and printed), near-
 * duplicates at a recorded, exactly measured shingle Jaccard, and benchmark items embedded in
 * real pages that decontamination should find.
 */
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '#shared/errors.ts';
import { seededRandom } from '#shared/random.ts';
import type { CorpusDocument } from '#shared/refinery/corpus.ts';
import { readDebianCorpus } from '#shared/refinery/debian-corpus.ts';
import { decontaminate, findContamination, buildContaminationIndex, type BenchmarkItem } from '#shared/refinery/decontaminate.ts';
import { applyFilters } from '#shared/refinery/filters.ts';
import { injectTestMaterial, nearDuplicateText, SPAM_VARIANTS, shingleJaccard, shingleSet, spamDocument } from '#shared/refinery/inject.ts';
import { countedWords } from '#shared/refinery/text.ts';

// GSM8K-style rows (prompts of more than 13 words, short numeric answers).
const ITEMS: BenchmarkItem[] = [
  {
    benchmark: 'gsm8k',
    version: 1,
    id: 'q1',
    prompt:
      'Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?',
    answer: '72',
  },
  {
    benchmark: 'gsm8k',
    version: 1,
    id: 'q2',
    prompt: 'Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she earn?',
    answer: '10',
  },
  {
    benchmark: 'arith',
    version: 2,
    id: 7,
    prompt: 'A baker puts 3 trays of 12 rolls in the oven every morning and sells all but 5 of them by noon. How many rolls are sold by noon each day?',
    answer: 'The baker sells 31 rolls.',
  },
];

let real: CorpusDocument[];

before(async () => {
  // About a third of man pages and Python pages pass the default filters; 50 give enough hosts.
  real = (await readDebianCorpus({ sample: 50, seed: 5, kinds: ['man', 'python-doc'] })).documents.map(({ id, text }) => ({ id, text }));
});

describe('injectTestMaterial', () => {
  it('mixes labelled documents in at seeded positions under neutral ids, the same for the same seed', () => {
    const options = { seed: 3, spam: 8, nearDuplicate: 8, contamination: 4 };
    const result = injectTestMaterial(real, ITEMS, options);
    assert.deepEqual(injectTestMaterial(real, ITEMS, options), result);
    assert.deepEqual(result.counts, { spam: 8, nearDuplicate: 8, contamination: 4 });
    assert.deepEqual(result.notes, []);
    // Contaminated copies replace their hosts; spam and near-duplicates are added.
    assert.equal(result.documents.length, real.length + 8 + 8);
    const injected = result.documents.filter((d) => d.id.startsWith('mix:'));
    assert.deepEqual(
      injected.map((d) => d.id),
      result.truth.map((t) => t.id),
    );
    assert.deepEqual(
      injected.map((d) => d.id),
      Array.from({ length: 20 }, (_, i) => `mix:${String(i).padStart(4, '0')}`),
    );
    // The kinds are interleaved, not grouped by id.
    const kinds = result.truth.map((t) => t.kind);
    assert.ok(kinds.slice(0, 8).some((k) => k !== kinds[0]));
    // Every real document stays, in order, except the hosts.
    const hosts = new Set(result.truth.filter((t) => t.kind === 'contamination').map((t) => t.of));
    assert.deepEqual(
      result.documents.filter((d) => !d.id.startsWith('mix:')).map((d) => d.id),
      real.filter((d) => !hosts.has(d.id)).map((d) => d.id),
    );
    assert.notDeepEqual(injectTestMaterial(real, ITEMS, { ...options, seed: 4 }).truth, result.truth);
  });

  it('makes near-duplicates of long documents that pass the filters, at the Jaccard it records', () => {
    const result = injectTestMaterial(real, [], { seed: 9, spam: 0, nearDuplicate: 10, contamination: 0 });
    const byId = new Map([...real, ...result.documents].map((d) => [d.id, d]));
    const errors: number[] = [];
    for (const truth of result.truth) {
      assert.equal(truth.kind, 'near-duplicate');
      const copy = byId.get(truth.id)!;
      const source = byId.get(truth.of!)!;
      assert.ok(countedWords(source.text).length >= 100);
      assert.ok(applyFilters(source.text).keep && applyFilters(copy.text).keep);
      // Recorded exactly, measured on the shingle sets dedup uses.
      assert.equal(truth.jaccard, shingleJaccard(copy.text, source.text));
      const filteredSource = applyFilters(source.text);
      const filteredCopy = applyFilters(copy.text);
      assert.ok(filteredSource.keep && filteredCopy.keep);
      assert.equal(truth.filteredJaccard, shingleJaccard(filteredSource.text, filteredCopy.text));
      assert.ok(truth.targetJaccard! >= 0.5 && truth.targetJaccard! <= 0.95);
      errors.push(Math.abs(truth.jaccard! - truth.targetJaccard!));
    }
    // Whole edits move a 100-word document's Jaccard by about 0.02 each.
    assert.ok(Math.max(...errors) < 0.03, JSON.stringify(errors));
    const targets = result.truth.map((t) => t.targetJaccard!);
    assert.ok(targets.some((t) => t < 0.7) && targets.some((t) => t >= 0.8), JSON.stringify(targets));
    console.log(
      `near-duplicates: |measured - target| Jaccard mean ${(errors.reduce((a, b) => a + b, 0) / errors.length).toFixed(4)}, max ${Math.max(...errors).toFixed(4)}; after the filters vs as injected, max difference ${Math.max(...result.truth.map((t) => Math.abs(t.filteredJaccard! - t.jaccard!))).toFixed(4)}`,
    );
  });

  it('embeds benchmark items in real pages; decontamination finds the reformatted copies', () => {
    const result = injectTestMaterial(real, ITEMS, { seed: 21, spam: 0, nearDuplicate: 0, contamination: 8 });
    assert.equal(result.counts.contamination, 8);
    const contaminated = result.truth.map((truth) => ({ truth, document: result.documents.find((d) => d.id === truth.id)! }));
    const variants = new Set(contaminated.map((c) => c.truth.variant));
    assert.deepEqual([...variants].sort(), ['case', 'qa', 'spacing', 'verbatim']);
    const index = buildContaminationIndex(ITEMS);
    const found: Record<string, number> = {};
    for (const { truth, document } of contaminated) {
      const item = ITEMS.find((i) => i.benchmark === truth.benchmark!.name && i.id === truth.benchmark!.itemId)!;
      assert.equal(truth.benchmark!.version, item.version);
      assert.ok(!real.some((d) => d.text === document.text));
      const match = findContamination(index, document.text);
      if (match) {
        assert.equal(match.itemId, item.id);
        found[truth.variant] = (found[truth.variant] ?? 0) + 1;
      }
      // Case, spacing and punctuation are what normalisation removes: those are always found.
      if (truth.variant !== 'qa') assert.ok(match, `${truth.variant}: ${truth.id}`);
    }
    const decontaminated = decontaminate(result.documents, ITEMS);
    assert.ok(decontaminated.checked && decontaminated.removed.length >= 6);
    // "Q: ... A: 72" puts a word between the question and a short answer: the 13-gram index
    // cannot see that one (printed, as the pipeline's report will show it).
    console.log(`contamination found by 13-gram decontamination, by variant: ${JSON.stringify(found)} of 2 each`);
  });

  it('injects no contamination without benchmark items, and says so; says when too few documents qualify', () => {
    const none = injectTestMaterial(real, [], { seed: 1, spam: 2, nearDuplicate: 0 });
    assert.equal(none.counts.contamination, 0);
    assert.deepEqual(none.notes, ['contamination: none injected, no benchmark items were given']);
    const short = injectTestMaterial(real.slice(0, 3), ITEMS, { seed: 1, spam: 0, nearDuplicate: 5, contamination: 0, minWords: 100_000 });
    assert.equal(short.counts.nearDuplicate, 0);
    assert.match(short.notes[0]!, /^near-duplicates: made 0 of 5; too few documents of >= 100000 words/);
  });

  it('defaults to 5 % spam, 5 % near-duplicates and 1 % contamination, with a floor', () => {
    const result = injectTestMaterial(real, ITEMS, { seed: 2 });
    assert.deepEqual(result.requested, { spam: 8, nearDuplicate: 5, contamination: 3 });
  });

  it('names the field and the value it refuses', () => {
    const rejects = (options: Record<string, unknown>, field: string) =>
      assert.throws(
        () => injectTestMaterial(real, [], { seed: 1, ...options }),
        (e: unknown) => e instanceof ConfigError && e.field === field,
      );
    rejects({ spam: -1 }, 'spam');
    rejects({ nearDuplicate: { fraction: 2 } }, 'nearDuplicate.fraction');
    rejects({ jaccardRange: [0.9, 0.5] }, 'jaccardRange');
    rejects({ minWords: 2 }, 'minWords');
    rejects({ seed: 0.5 }, 'seed');
    assert.throws(
      () => injectTestMaterial([{ id: 'mix:1', text: 'x' }], [], { seed: 1 }),
      (e: unknown) => e instanceof ConfigError && e.field === 'documents[0].id',
    );
  });
});

describe('spam', () => {
  it('is removed by the default filters at a high rate (measured per variant and rule)', () => {
    const random = seededRandom(2024);
    const removed: Record<string, number> = {};
    const rules: Record<string, number> = {};
    const perVariant = 40;
    for (const variant of SPAM_VARIANTS) {
      for (let i = 0; i < perVariant; i++) {
        const text = spamDocument(variant, random);
        const result = applyFilters(text);
        if (!result.keep) {
          removed[variant] = (removed[variant] ?? 0) + 1;
          const key = `${result.rule}:${result.reason}`;
          rules[key] = (rules[key] ?? 0) + 1;
        }
      }
    }
    const total = Object.values(removed).reduce((a, b) => a + b, 0);
    const rate = total / (perVariant * SPAM_VARIANTS.length);
    console.log(
      `spam removed by the default filters: ${(100 * rate).toFixed(1)} % (${JSON.stringify(removed)} of ${perVariant} each); rules: ${JSON.stringify(rules)}`,
    );
    assert.ok(rate >= 0.85, String(rate));
    // Every variant is mostly removed; language ID takes the Latin and URL pages first, the
    // repetition rules the stuffed and repeated ones.
    for (const variant of SPAM_VARIANTS) assert.ok((removed[variant] ?? 0) >= perVariant * 0.6, variant);
    assert.ok(Object.keys(rules).some((k) => k.startsWith('gopher-repetition:')));
  });
});

describe('shingles', () => {
  it('are the normalised word 5-grams dedup hashes, and Jaccard is exact', () => {
    assert.deepEqual([...shingleSet('One, two THREE four five six!')], ['one two three four five', 'two three four five six']);
    assert.deepEqual([...shingleSet('Too short.')], ['too short']);
    assert.equal(shingleJaccard('a b c d e f', 'a b c d e g'), 1 / 3);
    assert.equal(shingleJaccard('', ''), 1);
  });

  it('edits a copy to within a whole edit of the target', () => {
    const text = real.find((d) => countedWords(d.text).length > 400)!.text;
    for (const target of [0.5, 0.8, 0.95]) {
      const copy = nearDuplicateText(text, target, seededRandom(target * 100));
      assert.equal(copy.jaccard, shingleJaccard(text, copy.text));
      assert.ok(Math.abs(copy.jaccard - target) < 0.01, `${target}: ${copy.jaccard}`);
      assert.ok(copy.edits > 0);
    }
  });
});
