/**
 * The refinery's fast paths against straightforward versions of the same definitions: the ASCII
 * shortcuts of the word tests (text.ts), the UTF-8 normaliser MinHash reads (normalize.ts) and the
 * signature itself (dedup.ts). Every case must agree exactly, on random texts mixing ASCII,
 * punctuation, digits of other scripts, compatibility forms, emoji and lone surrogates.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createMinHasher, MINHASH_VALUES, SHINGLE_WORDS, xxHash32Pair } from '#shared/refinery/dedup.ts';
import { normalizedUtf8, normalizeText } from '#shared/refinery/normalize.ts';
import { countSentences, hasLetter, isCountedWord, isWhitespace, SENTENCE_BREAK, stripPunctuation } from '#shared/refinery/text.ts';
import { randomInt, seededRandom, type Random } from '#shared/random.ts';

const PIECES = [
  ...'abcdefghijklmnopqrstuvwxyzABCZ0123456789',
  ...'.,;:!?()[]{}"\'-_#*&^%$@~`|\\/<>+=',
  ...'     \t\n\r',
  'é',
  'Ü',
  'ß',
  '—',
  '«',
  '»',
  '“',
  '”',
  '…',
  '¿',
  '€',
  '²',
  '½',
  '\u00a0',
  '\u2028',
  '\u3000',
  'ﬁ',
  '①',
  'Ａ',
  '٣',
  '४',
  'Ω',
  'ж',
  '中',
  '😀',
  '𝟘',
  '\ud800',
  '\udc00',
  '\u0301',
  '\u200b',
  '\u0007',
];

function randomText(random: Random, length: number): string {
  let text = '';
  for (let i = 0; i < length; i++) text += PIECES[randomInt(random, PIECES.length)];
  return text;
}

/** A prose-like text: words of letters with some punctuation, digits and other pieces between. */
function randomProse(random: Random, words: number): string {
  const parts: string[] = [];
  for (let i = 0; i < words; i++) {
    let word = '';
    for (let j = 1 + randomInt(random, 8); j > 0; j--) word += String.fromCharCode(97 + randomInt(random, 6));
    if (random() < 0.2) word += PIECES[randomInt(random, PIECES.length)];
    parts.push(word);
  }
  return parts.join(random() < 0.5 ? ' ' : '\n');
}

/** The signature as the module comment of dedup.ts defines it, step by step. */
function referenceSignature(text: string): Uint32Array {
  const signature = new Uint32Array(MINHASH_VALUES).fill(0xffffffff);
  const normalized = normalizeText(text);
  if (normalized === '') return signature;
  const words = normalized.split(' ');
  const encoder = new TextEncoder();
  const pair = new Uint32Array(2);
  const fmix32 = (input: number) => {
    let h = input ^ (input >>> 16);
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    return (h ^ (h >>> 16)) >>> 0;
  };
  const shingles = Math.max(1, words.length - SHINGLE_WORDS + 1);
  for (let first = 0; first < shingles; first++) {
    const bytes = encoder.encode(words.slice(first, first + SHINGLE_WORDS).join(' '));
    xxHash32Pair(bytes, 0, bytes.length, 0x5bd1e995, 0x27d4eb2f, pair);
    for (let i = 0; i < MINHASH_VALUES; i++) {
      const hashed = fmix32((pair[0]! + Math.imul(i, pair[1]! | 1)) | 0);
      if (hashed < signature[i]!) signature[i] = hashed;
    }
  }
  return signature;
}

describe('refinery fast paths agree with their definitions', () => {
  it('word tests: isCountedWord, hasLetter and stripPunctuation', () => {
    const random = seededRandom(21);
    for (let trial = 0; trial < 20_000; trial++) {
      const word = randomText(random, 1 + randomInt(random, 6));
      assert.equal(isCountedWord(word), /[^\p{P}\p{S}\s]/u.test(word), JSON.stringify(word));
      assert.equal(hasLetter(word), /\p{L}/u.test(word), JSON.stringify(word));
      assert.equal(stripPunctuation(word), word.replace(/^[\p{P}\p{S}]+|[\p{P}\p{S}]+$/gu, ''), JSON.stringify(word));
    }
  });

  it('normalizedUtf8 is the UTF-8 of normalizeText, with its word starts', () => {
    const random = seededRandom(22);
    const encoder = new TextEncoder();
    for (let trial = 0; trial < 2_000; trial++) {
      const text = trial % 2 ? randomText(random, randomInt(random, 80)) : randomProse(random, randomInt(random, 40));
      const normalized = normalizeText(text);
      const { bytes, starts } = normalizedUtf8(text);
      assert.deepEqual([...bytes], [...encoder.encode(normalized)], JSON.stringify(text));
      const expectedStarts: number[] = normalized === '' ? [] : [0];
      for (let i = 0; i < bytes.length; i++) if (bytes[i] === 0x20) expectedStarts.push(i + 1);
      assert.deepEqual([...starts], expectedStarts, JSON.stringify(text));
    }
  });

  it('signatures equal the step-by-step definition, bit for bit', async () => {
    const random = seededRandom(23);
    const hasher = await createMinHasher();
    for (let trial = 0; trial < 300; trial++) {
      const text = trial % 3 === 0 ? randomText(random, randomInt(random, 200)) : randomProse(random, randomInt(random, 120));
      assert.deepEqual(hasher.signature(text), referenceSignature(text), JSON.stringify(text.slice(0, 80)));
    }
    // A long text grows the scratch space; a short one after it must not see the long one's bytes.
    const long = randomProse(random, 30_000);
    assert.deepEqual(hasher.signature(long), referenceSignature(long));
    assert.deepEqual(hasher.signature('a b'), referenceSignature('a b'));
    assert.deepEqual(hasher.signature(''), referenceSignature(''));
  });
});

describe('refinery sentence count', () => {
  it('isWhitespace is \\s on every code unit', () => {
    for (let code = 0; code <= 0xffff; code++) assert.equal(isWhitespace(code), /\s/.test(String.fromCharCode(code)), code.toString(16));
  });

  it('countSentences counts the pieces of the SENTENCE_BREAK split that hold a letter or digit', () => {
    const random = seededRandom(24);
    const pieces = [...PIECES, '.', '!', '?', '. ', '." ', '.) ', '?” ', '!’ ', '.] ', '...\n', '.\u00a0', '\ufeff', '\u2009'];
    for (let trial = 0; trial < 3_000; trial++) {
      let text = '';
      for (let i = randomInt(random, 60); i > 0; i--) text += pieces[randomInt(random, pieces.length)];
      const expected = text.split(SENTENCE_BREAK).filter((piece) => /[\p{L}\p{N}]/u.test(piece)).length;
      assert.equal(countSentences(text), expected, JSON.stringify(text));
    }
  });
});
