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

const PUNCTUATION_OR_SYMBOL = /[\p{P}\p{S}]/gu;
const BETWEEN_DIGITS = /(?<=\p{Nd})[\p{P}\p{S}]+(?=\p{Nd})/gu;
const DECIMAL_DIGIT = /\p{Nd}/gu;
const SPACE_RUN = /[\s\p{Cc}]+/gu;

/** The normalised form of `text` (see the module comment); '' for a text with no words. */
export function normalizeText(text: string): string {
  return text
    .normalize('NFKC')
    .toLowerCase()
    .replace(BETWEEN_DIGITS, '')
    .replace(PUNCTUATION_OR_SYMBOL, ' ')
    .replace(DECIMAL_DIGIT, '0')
    .replace(SPACE_RUN, ' ')
    .trim();
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
