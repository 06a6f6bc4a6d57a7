/**
 * Text normalisation shared by deduplication and decontamination, so that both compare the same
 * words: two texts that differ only in case, punctuation, digits or spacing normalise to the same
 * string.
 *
 * Steps, in order:
 * 1. Unicode NFKC, first, so that compatibility forms become their plain letters and digits before
 *    anything else looks at them (full-width "Ａ１" -> "A1", the ligature "ﬁ" -> "fi", "①" -> "1").
 * 2. Lower case (`toLowerCase`, locale-independent, so the result does not depend on the machine).
 * 3. Punctuation or symbols between two digits go ("1,234", "1.234" and "1234" all give "0000"),
 *    then every other punctuation or symbol character (Unicode categories P and S: ".", "-", "=", "$", "…")
 *    becomes a space. A space rather than nothing, so that spacing around punctuation does not
 *    change the words: "x=5" and "x = 5", "don't" and the tokenised "don 't" all normalise alike.
 *    The cost is that a hyphenated "e-mail" and "email" do not.
 * 4. Every decimal digit of any script (category Nd) becomes "0": "2023" and "1999" match, as do
 *    reformatted numbers in a copied benchmark answer.
 * 5. Runs of whitespace (and control characters) become one space; leading and trailing ones go.
 *
 * Words are then the space-separated pieces of the normalised text. Scripts written without spaces
 * (Chinese, Japanese, Thai) come out as one long word per run of text, so n-gram matching there is
 * coarse; this increment targets space-separated languages.
 */
import { ConfigError } from '../errors.ts';

const PUNCTUATION_OR_SYMBOL = /[\p{P}\p{S}]/u;
const DECIMAL_DIGIT = /\p{Nd}/u;
const SPACE_OR_CONTROL = /[\s\p{Cc}]/u;
/** Any character outside ASCII: NFKC leaves an all-ASCII text as it is, so it is skipped for those. */
const NON_ASCII = /[\u0080-\uffff]/;

/** What step 3-5 do with a code point. */
const OTHER = 0;
const DIGIT = 1;
const PUNCTUATION = 2;
const SPACE = 3;
type CharClass = typeof OTHER | typeof DIGIT | typeof PUNCTUATION | typeof SPACE;

/** The class of a code point, by the same Unicode properties as the module comment's steps. */
function classify(codePoint: number): CharClass {
  const char = String.fromCodePoint(codePoint);
  if (DECIMAL_DIGIT.test(char)) return DIGIT;
  if (PUNCTUATION_OR_SYMBOL.test(char)) return PUNCTUATION;
  if (SPACE_OR_CONTROL.test(char)) return SPACE;
  return OTHER;
}

const ASCII_CLASS = Uint8Array.from({ length: 128 }, (_, code) => classify(code));
/** Classes of the non-ASCII code points met so far (a text uses few distinct ones). */
const classCache = new Map<number, CharClass>();

function classOf(codePoint: number): CharClass {
  if (codePoint < 128) return ASCII_CLASS[codePoint] as CharClass;
  let found = classCache.get(codePoint);
  if (found === undefined) {
    found = classify(codePoint);
    classCache.set(codePoint, found);
  }
  return found;
}

const SPACE_CODE = 0x20;
const ZERO_CODE = 0x30;
/** Code units handed to String.fromCharCode at once (well under engines' argument limits). */
const CHUNK = 8192;
/** Decodes the output buffer in one native call; used only when no lone surrogate would be replaced by U+FFFD. */
const UTF16 = new TextDecoder('utf-16le');

/**
 * Where normalize() writes: UTF-16 code units (normalizeText) or UTF-8 bytes with the byte offset
 * of each word (normalizedUtf8). Module scratch, grown on demand and reused between calls, so a
 * document costs no allocation here; JavaScript runs one call at a time.
 */
let units = new Uint16Array(1 << 14);
let bytes = new Uint8Array(1 << 16);
let starts = new Int32Array(1 << 12);
/** What normalize() left: the output's length, the number of words (UTF-8 only), a lone surrogate written (UTF-16 only). */
let written = 0;
let wordCount = 0;
let loneSurrogate = false;

/**
 * The normalised form of `text` (see the module comment); '' for a text with no words.
 *
 * Steps 3-5 are one pass over the code points: a run of punctuation or symbols is dropped when a
 * digit is on both sides, otherwise it becomes (part of) a space; a digit becomes '0'; a run of
 * spaces, controls and replaced punctuation is one space, none at either end. The result is the
 * same as the steps' regular expressions applied one after the other (a test keeps the two
 * equal), at a fraction of the cost: this runs on every document that deduplication sees.
 */
export function normalizeText(text: string): string {
  normalize(text, false);
  const out = units;
  if (!loneSurrogate) return UTF16.decode(out.subarray(0, written));
  let result = '';
  for (let at = 0; at < written; at += CHUNK) result += String.fromCharCode.apply(null, out.subarray(at, Math.min(written, at + CHUNK)) as unknown as number[]);
  return result;
}

/** The normalised text as UTF-8 and where its words start; views of scratch space, valid until the next call. */
export interface NormalizedUtf8 {
  /** new TextEncoder().encode(normalizeText(text)), a lone surrogate written as U+FFFD as the encoder does. */
  readonly bytes: Uint8Array;
  /** The byte offset of each word: 0, then one past each space; empty when `bytes` is. */
  readonly starts: Int32Array;
}

/**
 * normalizeText(text) encoded as UTF-8, with its word starts, in the same single pass: MinHash
 * hashes the bytes of each word 5-gram, and this spares it building the string, encoding it and
 * looking for the spaces. The views are overwritten by the next call.
 */
export function normalizedUtf8(text: string): NormalizedUtf8 {
  normalize(text, true);
  return { bytes: bytes.subarray(0, written), starts: starts.subarray(0, wordCount) };
}

/** Steps 1-5 into `units` (UTF-16) or `bytes` and `starts` (UTF-8); see normalizeText. */
function normalize(text: string, utf8: boolean): void {
  const lowered = (NON_ASCII.test(text) ? text.normalize('NFKC') : text).toLowerCase();
  const length = lowered.length;
  // Every step keeps or shortens the text, so the output fits in the input's length: as many
  // UTF-16 units, or 3 bytes per unit in UTF-8 (a pair of units is 4 bytes).
  if (utf8) {
    if (bytes.length < 3 * length) bytes = new Uint8Array(3 * length);
  } else if (units.length < length) units = new Uint16Array(length);
  const out16 = units;
  const out8 = bytes;
  let at = 0;
  let words = 0;
  let pendingSpace = false;
  let previousWasDigit = false;
  loneSurrogate = false;
  let i = 0;
  while (i < length) {
    const unit = lowered.charCodeAt(i);
    const codePoint = unit >= 0xd800 && unit <= 0xdbff && i + 1 < length ? (lowered.codePointAt(i) as number) : unit;
    const width = codePoint > 0xffff ? 2 : 1;
    const kind = codePoint < 128 ? (ASCII_CLASS[codePoint] as CharClass) : classOf(codePoint);
    if (kind === PUNCTUATION) {
      // The whole run of punctuation and symbols, then what follows it.
      let end = i + width;
      let next: CharClass = OTHER;
      while (end < length) {
        const nextUnit = lowered.charCodeAt(end);
        const nextPoint = nextUnit < 128 ? nextUnit : (lowered.codePointAt(end) as number);
        next = nextPoint < 128 ? (ASCII_CLASS[nextPoint] as CharClass) : classOf(nextPoint);
        if (next !== PUNCTUATION) break;
        end += nextPoint > 0xffff ? 2 : 1;
      }
      if (!(previousWasDigit && end < length && next === DIGIT)) pendingSpace = true;
      previousWasDigit = false;
      i = end;
      continue;
    }
    if (kind === SPACE) {
      pendingSpace = true;
    } else {
      if (utf8) {
        if (at === 0) {
          if (words === 0) starts[words++] = 0;
        } else if (pendingSpace) {
          out8[at++] = SPACE_CODE;
          if (words === starts.length) {
            const grown = new Int32Array(2 * words);
            grown.set(starts);
            starts = grown;
          }
          starts[words++] = at;
        }
        if (kind === DIGIT) out8[at++] = ZERO_CODE;
        else if (codePoint < 0x80) out8[at++] = codePoint;
        else if (codePoint < 0x800) {
          out8[at++] = 0xc0 | (codePoint >> 6);
          out8[at++] = 0x80 | (codePoint & 0x3f);
        } else if (codePoint > 0xffff) {
          out8[at++] = 0xf0 | (codePoint >> 18);
          out8[at++] = 0x80 | ((codePoint >> 12) & 0x3f);
          out8[at++] = 0x80 | ((codePoint >> 6) & 0x3f);
          out8[at++] = 0x80 | (codePoint & 0x3f);
        } else if (codePoint >= 0xd800 && codePoint <= 0xdfff) {
          // A lone surrogate: the encoder writes U+FFFD. Two lone halves never meet in the
          // output: only punctuation between digits is dropped, and a surrogate is no digit.
          out8[at++] = 0xef;
          out8[at++] = 0xbf;
          out8[at++] = 0xbd;
        } else {
          out8[at++] = 0xe0 | (codePoint >> 12);
          out8[at++] = 0x80 | ((codePoint >> 6) & 0x3f);
          out8[at++] = 0x80 | (codePoint & 0x3f);
        }
      } else {
        if (pendingSpace && at > 0) out16[at++] = SPACE_CODE;
        if (kind === DIGIT) {
          out16[at++] = ZERO_CODE;
        } else {
          out16[at++] = unit;
          if (width === 2) out16[at++] = lowered.charCodeAt(i + 1);
          else if (unit >= 0xd800 && unit <= 0xdfff) loneSurrogate = true;
        }
      }
      pendingSpace = false;
    }
    previousWasDigit = kind === DIGIT;
    i += width;
  }
  written = at;
  wordCount = words;
}

/** The words of an already normalised text ([] for ''). */
export function wordsOfNormalized(normalized: string): string[] {
  return normalized === '' ? [] : normalized.split(' ');
}

/** The normalised words of `text`. */
export function normalizedWords(text: string): string[] {
  return wordsOfNormalized(normalizeText(text));
}

/**
 * The word n-grams of `words`, each as its words joined by one space, in order (repeats kept).
 * Fewer than n words give no n-gram; callers that need the short case handle it themselves.
 */
export function wordNgrams(words: readonly string[], n: number): string[] {
  if (!Number.isSafeInteger(n) || n < 1) throw new ConfigError('n', n, 'must be an integer >= 1');
  const grams: string[] = [];
  for (let start = 0; start + n <= words.length; start++) grams.push(words.slice(start, start + n).join(' '));
  return grams;
}
