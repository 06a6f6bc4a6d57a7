/**
 * The language rule's detector: detectProseLanguages must give exactly what tinyld's detectAll
 * gives on the whole text with its lines joined (the same languages, the same accuracies, the
 * same order), on real licence texts cut at random, on hand-picked edge cases and on random
 * strings built from the characters tinyld's split and cleaning treat specially.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { detectAll } from 'tinyld';
import { detectProseLanguages, TINYLD_SEPARATOR, TINYLD_SEPARATOR_CHARS } from '#shared/refinery/filters.ts';
import { randomInt, seededRandom } from '#shared/random.ts';

/** What the language rule asked of tinyld before the fast path: the whole text, lines joined. */
const reference = (text: string) => detectAll(text.replace(/\s*\n\s*/g, ' '));

function assertSame(text: string): void {
  assert.deepEqual(detectProseLanguages(text), reference(text), JSON.stringify(text.slice(0, 200)));
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

describe('detectProseLanguages', () => {
  it('copies the separator of the installed tinyld', () => {
    const require = createRequire(import.meta.url);
    const source = readFileSync(require.resolve('tinyld'), 'utf8');
    assert.ok(source.includes(`=/${TINYLD_SEPARATOR.source}/,`), 'tinyld changed its split: see TINYLD_SEPARATOR in filters.ts');
  });

  it('scans for exactly the characters the separator matches', () => {
    const single = new RegExp(`^(?:${TINYLD_SEPARATOR.source})$`);
    const matched: string[] = [];
    for (let code = 0; code < 0x10000; code++) if (single.test(String.fromCharCode(code))) matched.push(String.fromCharCode(code));
    assert.deepEqual(matched, [...new Set(TINYLD_SEPARATOR_CHARS)].sort());
  });

  it('equals detectAll on licence texts cut at random, short and long', (t) => {
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

  it('equals detectAll on edge cases', () => {
    const cases = [
      '',
      ' ',
      '\n\n',
      '...',
      '((',
      '( (',
      '(',
      'Hello (world)',
      'Hello world',
      'a, b, c, d, e, f, g, h, i, j',
      'one. two. six. ten. red. big. sun. car. dog.',
      '1234567890, 12345, the cat sat on the mat, 99 bottles',
      '１２３ fullwidth digits，and “quotes” and «guillemets»',
      'It’s the dog’s bone; isn’t it?',
      'İstanbul is a city. İzmir too, and Ankara.',
      'ΟΔΥΣΣΕΥΣ ΚΑΙ ΣΟΦΟΣ. Σοφός, ΣΟΦΟΣ.',
      '「日本語の文章です」《書名》⋯ and {braces} <tags> [brackets] \\back\\slash',
      'line one\nline two\n\n  line three  \r\n  line four',
      'tabs\tand\tspaces   between\n\t\nwords',
      '* bullet\n* bullet\n* bullet\n* another bullet here',
      'La rivière qui traverse la vieille ville. Der Fluss, der durch die alte Stadt fließt. The river that runs through the town.',
      `${'word '.repeat(300)}. ${'short. '.repeat(50)}`,
      'x'.repeat(5000),
      Array.from({ length: 40 }, (_, i) => `piece ${i} of equal size`).join(', '),
    ];
    for (const text of cases) assertSame(text);
  });

  it('equals detectAll on random strings of separators, letters, digits and whitespace', () => {
    const alphabet = [
      ...'abcdefghij klmnop qrstu vwxyz THE AND',
      ...',.;:!?()"[]\\{}<>*「」《》⋯„“«»”，、。！？¿',
      ...'0123456789１２',
      ..."’'#%&/+_–—~…",
      ...'   \n\n\t',
      ...'éüßçñøαβγσςΣжд日本',
      'the ',
      'and ',
      'river ',
      'İ',
    ];
    const random = seededRandom(5);
    for (let i = 0; i < 2000; i++) {
      const length = randomInt(random, 120);
      let text = '';
      for (let k = 0; k < length; k++) text += alphabet[randomInt(random, alphabet.length)];
      assertSame(text);
    }
  });
});
