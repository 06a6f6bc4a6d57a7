import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { buildContaminationIndex, decontaminate, DEFAULT_DECONTAMINATION_NGRAM, type BenchmarkItem } from '#shared/refinery/decontaminate.ts';
import { ConfigError } from '#shared/errors.ts';

const LONG_ANSWER =
  'The mitochondria convert nutrients into adenosine triphosphate through oxidative phosphorylation, a process that consumes 6 molecules of oxygen for each glucose.';

const items: BenchmarkItem[] = [
  {
    benchmark: 'bio-qa',
    version: 2,
    id: 'bio-17',
    prompt: 'Explain what the mitochondria do in a eukaryotic cell.',
    answer: LONG_ANSWER,
  },
  {
    benchmark: 'gsm-mini',
    version: 1,
    id: 42,
    prompt: 'Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did she sell altogether?',
    answer: '72',
  },
  { benchmark: 'tiny', version: 3, id: 't-1', prompt: 'Capital of Zanzibar Republic?', answer: 'Stone Town' },
];

const FILLER = 'Our garden club met on Tuesday to discuss the spring planting schedule and the new compost bins near the greenhouse.';

describe('decontaminate', () => {
  it('removes a document holding a verbatim answer and names the benchmark, version and item', () => {
    const result = decontaminate([{ id: 'doc-1', text: `${FILLER} ${LONG_ANSWER} ${FILLER}` }], items);
    assert.equal(result.checked, true);
    assert.deepEqual(result.kept, []);
    assert.equal(result.removed.length, 1);
    const [hit] = result.removed;
    assert.deepEqual(
      { documentId: hit!.documentId, benchmark: hit!.benchmark, version: hit!.version, itemId: hit!.itemId },
      {
        documentId: 'doc-1',
        benchmark: 'bio-qa',
        version: 2,
        itemId: 'bio-17',
      },
    );
    assert.equal(hit!.matched.split(' ').length, DEFAULT_DECONTAMINATION_NGRAM);
  });

  it('finds a copy reformatted in case, punctuation, spacing and digits', () => {
    const reformatted =
      'THE MITOCHONDRIA   convert nutrients -- into "adenosine triphosphate"\n\nthrough oxidative-phosphorylation; a process that consumes 9 molecules of oxygen';
    const result = decontaminate([{ id: 'doc-2', text: `${FILLER}\n${reformatted}` }], items);
    assert.equal(result.removed[0]?.itemId, 'bio-17');
  });

  it('catches a short answer through the n-grams that span the end of the prompt and the answer', () => {
    const text = `Worked example. she sold half as many clips in May. How many clips did she sell altogether? 72. ${FILLER}`;
    const result = decontaminate([{ id: 'doc-3', text }], items);
    assert.deepEqual(
      result.removed.map((hit) => [hit.benchmark, hit.itemId]),
      [['gsm-mini', 42]],
    );
  });

  it('keeps a clean document, and one that quotes only a prompt unless prompts are indexed', () => {
    const promptOnly = 'Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May, said the report.';
    const documents = [
      { id: 'clean', text: FILLER },
      { id: 'prompt', text: promptOnly },
    ];
    const result = decontaminate(documents, items);
    assert.deepEqual(result.kept, ['clean', 'prompt']);
    const withPrompts = decontaminate(documents, items, { indexPrompt: true });
    assert.deepEqual(withPrompts.kept, ['clean']);
    assert.equal(withPrompts.removed[0]?.itemId, 42);
  });

  it('matches an item shorter than n words as a whole phrase on word boundaries', () => {
    const index = buildContaminationIndex(items);
    assert.equal(index.shortItems, 1); // "capital of zanzibar republic stone town": 6 words < 13
    const result = decontaminate(
      [
        { id: 'hit', text: `Quiz night: capital of Zanzibar republic? Stone town! ${FILLER}` },
        { id: 'miss', text: 'The capital of Zanzibar republic is a stone townhouse district.' },
      ],
      items,
    );
    assert.deepEqual(result.kept, ['miss']);
    assert.deepEqual(result.removed[0]?.matched, 'capital of zanzibar republic stone town');
  });

  it('takes n as a parameter (12 as the reference implementation uses)', () => {
    // An answer copy 12 words long: found with n = 12, not with the default 13.
    const twelve = 'convert nutrients into adenosine triphosphate through oxidative phosphorylation a process that consumes';
    const documents = [{ id: 'd', text: `${FILLER} ${twelve}. ${FILLER}` }];
    assert.deepEqual(decontaminate(documents, items).kept, ['d']);
    const result = decontaminate(documents, items, { ngram: 12 });
    assert.equal(result.checked && result.ngram, 12);
    assert.deepEqual(result.kept, []);
  });

  it('says it had nothing to check against when the benchmark list is empty', () => {
    const result = decontaminate([{ id: 'a', text: LONG_ANSWER }], []);
    assert.equal(result.checked, false);
    assert.deepEqual(result.kept, ['a']);
    assert.deepEqual(result.removed, []);
    assert.ok(!result.checked && /nothing|no benchmark/.test(result.reason));
  });

  it('rejects a bad item or option, naming the field and value', () => {
    assert.throws(
      () => decontaminate([], [{ benchmark: 'b', version: 0, id: 'x', prompt: 'p', answer: 'a' }]),
      (error: unknown) => error instanceof ConfigError && error.field === 'items[0].version' && error.value === 0,
    );
    assert.throws(
      () => decontaminate([], [{ benchmark: 'b', version: 1, id: 'x', prompt: 'p' }]),
      (error: unknown) => error instanceof ConfigError && error.field === 'items[0].answer',
    );
    assert.throws(
      () => decontaminate([], items, { ngram: 0 }),
      (error: unknown) => error instanceof ConfigError && error.field === 'ngram' && error.value === 0,
    );
    assert.throws(
      () => decontaminate([{ id: '', text: 'x' }], items),
      (error: unknown) => error instanceof ConfigError && error.field === 'documents[0].id',
    );
  });
});
