/**
 * The language rule (filters.ts): fastText's lid.176, English kept at probability >= 0.65.
 *
 * - readFastTextModel must predict what fastText itself predicts: the WebAssembly build of
 *   fastText that fasttext.wasm.js ships, on the same model file, is the reference. The top
 *   language must be the same and its probability within PROBABILITY_TOLERANCE (the reader sums
 *   in float64 where fastText sums in float32: 8e-6 at most on the refinery's Debian sample), on
 *   licence texts cut at random, hand-picked edge cases and random strings.
 * - The rule keeps English prose and drops other languages (naming the one detected), code and
 *   two-word strings (English, but below 0.65), and empty text.
 */
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { getLIDModel } from 'fasttext.wasm.js';
import { applyFilters, LANGUAGE_MODEL_FILE, type LanguageGuess, languageFilter, languageIdentifier } from '#shared/refinery/filters.ts';
import { randomInt, seededRandom } from '#shared/random.ts';

const PROBABILITY_TOLERANCE = 1e-4;

/** fastText's own prediction, as FineWeb asks for it: the text with every '\n' made a space. */
let reference: (text: string) => LanguageGuess;

before(async () => {
  const model = await (await getLIDModel()).load();
  reference = (text) => {
    const predictions = model.predict(text.replaceAll('\n', ' '), 1, 0);
    const [probability, label] = predictions.get(0);
    (predictions as unknown as { delete(): void }).delete();
    return { language: label.replace('__label__', ''), probability };
  };
});

function assertSame(text: string): void {
  const expected = reference(text);
  const actual = languageIdentifier().identify(text);
  const where = JSON.stringify(text.slice(0, 200));
  assert.equal(actual.language, expected.language, where);
  assert.ok(Math.abs(actual.probability - expected.probability) <= PROBABILITY_TOLERANCE, `${where}: ${actual.probability} vs ${expected.probability}`);
}

const LICENCES = '/usr/share/common-licenses';

/** Each distinct licence text on this machine (GPL is a link to GPL-3, and so on). */
function licenceTexts(): string[] {
  let names: string[];
  try {
    names = readdirSync(LICENCES);
  } catch {
    return [];
  }
  const paths = new Set(names.map((name) => realpathSync(join(LICENCES, name))));
  return [...paths].sort().map((path) => readFileSync(path, 'utf8'));
}

describe('readFastTextModel (lid.176)', () => {
  it('is the fasttext.wasm.js model file', () => {
    assert.equal(LANGUAGE_MODEL_FILE, 'lid.176.ftz');
    assert.equal(languageIdentifier(), languageIdentifier(), 'loaded once per process');
  });

  it('predicts what fastText predicts on licence texts cut at random, short and long', (t) => {
    const texts = licenceTexts();
    if (texts.length === 0) return t.skip(`no ${LICENCES} on this machine`);
    const random = seededRandom(11);
    for (const text of texts) {
      assertSame(text);
      for (let cut = 0; cut < 40; cut++) {
        // Lengths from a few characters to tens of thousands, on a log scale.
        const length = Math.min(text.length, Math.round(4 * 1.35 ** randomInt(random, 30)));
        const start = randomInt(random, text.length - length + 1);
        assertSame(text.slice(start, start + length));
      }
    }
  });

  it('predicts what fastText predicts on edge cases', () => {
    const cases = [
      '',
      ' ',
      '\n\n',
      '...',
      'Hello world',
      'Hello (world)',
      'line one\nline two\n\n  line three  \r\n  line four',
      'tabs\tand\tspaces   between\n\t\nwords\f\v',
      '１２３ fullwidth digits，and “quotes” and «guillemets»',
      'It’s the dog’s bone; isn’t it?',
      'İstanbul is a city. İzmir too, and Ankara.',
      'ΟΔΥΣΣΕΥΣ ΚΑΙ ΣΟΦΟΣ. Σοφός, ΣΟΦΟΣ.',
      '「日本語の文章です」《書名》⋯ and {braces} <tags> [brackets] \\back\\slash',
      'emoji 😀 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 outside the BMP, a lone surrogate \ud800 too',
      '__label__en __label__fr are labels, not words',
      '</s> is the end of a line',
      'La rivière qui traverse la vieille ville. Der Fluss, der durch die alte Stadt fließt. The river that runs through the town.',
      `${'word '.repeat(300)}. ${'short. '.repeat(50)}`,
      'x'.repeat(5000),
      'const x = foo(bar);',
      'int main(void) { printf("hello\\n"); return 0; }',
    ];
    for (const text of cases) assertSame(text);
  });

  it('predicts what fastText predicts on random strings of letters, punctuation, digits and whitespace', () => {
    const alphabet = [
      ...'abcdefghij klmnop qrstu vwxyz THE AND',
      ...',.;:!?()"[]\\{}<>*「」《》⋯„“«»”，、。！？¿',
      ...'0123456789１２',
      ..."’'#%&/+_–—~…",
      ...'   \n\n\t\r',
      ...'éüßçñøαβγσςΣжд日本',
      'the ',
      'and ',
      'river ',
      'İ',
      '😀',
    ];
    const random = seededRandom(5);
    for (let i = 0; i < 2000; i++) {
      const length = randomInt(random, 120);
      let text = '';
      for (let k = 0; k < length; k++) text += alphabet[randomInt(random, alphabet.length)];
      assertSame(text);
    }
  });

  it('gives each token the same rows however many other tokens it has seen', () => {
    // More distinct tokens than the cache holds, then the first ones again.
    const text = 'The river that runs through the old market town has shaped the lives of its people.';
    const before = languageIdentifier().identify(text);
    const many = Array.from({ length: 120_000 }, (_, i) => `tok${i.toString(36)}`).join(' ');
    languageIdentifier().identify(many);
    assert.deepEqual(languageIdentifier().identify(text), before);
  });
});

const ENGLISH =
  'The river that runs through the old market town has shaped the lives of the people who live along its banks for more than a thousand years. Farmers once depended on its spring floods to water their fields, and merchants used its slow brown current to carry grain, wool and timber down to the coast.';
const FRENCH =
  'La rivière qui traverse la vieille ville de marché a façonné la vie des habitants qui vivent sur ses rives depuis plus de mille ans. Les agriculteurs dépendaient autrefois de ses crues de printemps pour arroser leurs champs.';
const GERMAN =
  'Der Fluss, der durch die alte Marktstadt fließt, hat das Leben der Menschen, die an seinen Ufern wohnen, seit mehr als tausend Jahren geprägt. Früher waren die Bauern auf seine Frühjahrshochwasser angewiesen, um ihre Felder zu bewässern.';

describe('language rule', () => {
  it('keeps English prose', () => {
    assert.deepEqual(languageFilter.apply(ENGLISH), { keep: true });
    assert.deepEqual(languageFilter.apply(ENGLISH.replaceAll('. ', '.\n')), { keep: true });
  });

  it('drops French and German prose, naming the language detected', () => {
    for (const [text, code] of [
      [FRENCH, 'fr'],
      [GERMAN, 'de'],
    ] as const) {
      const result = languageFilter.apply(text);
      assert.ok(!result.keep && result.rule === 'language' && result.version === 2, JSON.stringify(result));
      assert.equal(result.reason, 'language');
      assert.match(result.detail ?? '', new RegExp(`^detected ${code} \\((0\\.9\\d|1\\.00)\\)$`));
    }
  });

  it('drops code and two-word strings for low confidence', () => {
    for (const text of ['Hello world', 'if (x > 0) { return y; }', 'for (let i = 0; i < n; i++) { sum += a[i]; }']) {
      const result = languageFilter.apply(text);
      assert.ok(!result.keep && result.reason === 'language_confidence', `${text}: ${JSON.stringify(result)}`);
      assert.match(result.detail ?? '', /^en confidence 0\.\d\d\d < 0\.65$/);
    }
    // Code that lid.176 takes for another language is dropped as that language.
    const code = languageFilter.apply('const x = foo(bar);');
    assert.ok(!code.keep && code.reason === 'language', JSON.stringify(code));
  });

  it('drops empty text before the model sees it', () => {
    assert.deepEqual(languageFilter.apply(''), {
      keep: false,
      rule: 'language',
      version: 2,
      reason: 'empty',
      detail: 'the document is empty or all whitespace',
    });
    assert.equal(applyFilters(' \n ').keep, false);
  });
});
