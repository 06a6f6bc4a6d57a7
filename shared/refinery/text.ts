/**
 * How the refinery's document filters see a text: words, lines, paragraphs and sentences, cut
 * the way the quality rules are defined over them.
 *
 * - A word is a run of non-whitespace. Punctuation stays attached ("end." is one word), so the
 *   counts need no language-specific tokenizer and cost one pass over the text.
 * - A word *counts* (for word totals and mean length) when it has a character that is neither
 *   punctuation nor a symbol: "--", "|", "#" and "..." standing alone are not words.
 * - A line is what lies between '\n's, with '\r' and surrounding whitespace trimmed; the filters
 *   ignore blank lines unless they say otherwise.
 * - A paragraph is what lies between runs of two or more line breaks (blank lines).
 * - Lengths are in Unicode code points, so an emoji or a CJK character outside the BMP is one
 *   character, as it is for a reader.
 */

// JavaScript's \s is Unicode whitespace with or without the u flag; without it the split is faster.
const WHITESPACE = /\s+/;
const NON_PUNCTUATION = /[^\p{P}\p{S}\s]/u;
const LETTER = /\p{L}/u;
const EDGE_PUNCTUATION = /^[\p{P}\p{S}]+|[\p{P}\p{S}]+$/gu;
const LETTER_OR_DIGIT = /[\p{L}\p{N}]/u;
/** Any surrogate code unit, paired or not (no u flag: it matches code units). */
const SURROGATE = /[\uD800-\uDFFF]/;
/** Whitespace after . ! or ?, possibly repeated, possibly followed by closing quotes or brackets. */
const SENTENCE_BREAK = /(?<=[.!?]+["'”’)\]]*)\s+/u;

/** The whitespace-separated words of `text`, punctuation attached, in order. */
export function splitWords(text: string): string[] {
  const words = text.split(WHITESPACE);
  if (words.length > 0 && words[0] === '') words.shift();
  if (words.length > 0 && words[words.length - 1] === '') words.pop();
  return words;
}

/** True when `word` has a character that is not punctuation, a symbol or whitespace. */
export function isCountedWord(word: string): boolean {
  // Most words start with an ASCII letter or digit: answer those without the regular expression.
  const first = word.charCodeAt(0);
  const lower = first | 0x20;
  if ((lower >= 0x61 && lower <= 0x7a) || (first >= 0x30 && first <= 0x39)) return true;
  return NON_PUNCTUATION.test(word);
}

/** The words of `text` that count (see isCountedWord). */
export function countedWords(text: string): string[] {
  return splitWords(text).filter(isCountedWord);
}

/** True when `word` has a letter in any script. */
export function hasLetter(word: string): boolean {
  return LETTER.test(word);
}

/** `word` without leading and trailing punctuation and symbols ("(insurance?)" -> "insurance"). */
export function stripPunctuation(word: string): string {
  // A word that starts and ends with an ASCII letter or digit has nothing to strip: answer those
  // without the regular expression.
  if (isAsciiAlphanumeric(word.charCodeAt(0)) && isAsciiAlphanumeric(word.charCodeAt(word.length - 1))) return word;
  return word.replace(EDGE_PUNCTUATION, '');
}

function isAsciiAlphanumeric(code: number): boolean {
  const lower = code | 0x20;
  return (lower >= 0x61 && lower <= 0x7a) || (code >= 0x30 && code <= 0x39);
}

/** `word` lower-cased, without leading and trailing punctuation and symbols ("The," -> "the"). */
export function bareWord(word: string): string {
  return stripPunctuation(word).toLowerCase();
}

/** Length in code points: a surrogate pair is one character. */
export function charLength(text: string): number {
  let length = text.length;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0xdc00 && code <= 0xdfff) length--;
  }
  return length;
}

/** Every line of `text`, trimmed, blank ones included (so indices match the input's lines). */
export function splitLines(text: string): string[] {
  return text.split('\n').map((line) => line.trim());
}

/** The non-blank lines of `text`, trimmed. */
export function nonBlankLines(text: string): string[] {
  return splitLines(text).filter((line) => line !== '');
}

/** The paragraphs of `text` (separated by one or more blank lines), trimmed, blank ones dropped. */
export function splitParagraphs(text: string): string[] {
  return text
    .split(/\n[ \t\r\f\v]*\n\s*/u)
    .map((paragraph) => paragraph.trim())
    .filter((paragraph) => paragraph !== '');
}

/** The characters that end a sentence-like line: . ? ! and a closing straight quote. */
const TERMINAL_PUNCTUATION = new Set(['.', '?', '!', '"', "'"]);

/** True when the trimmed `line` ends in . ? ! " or ' (an ellipsis ends in '.', so it counts). */
export function endsWithTerminalPunctuation(line: string): boolean {
  return line.length > 0 && TERMINAL_PUNCTUATION.has(line[line.length - 1]!);
}

/** True when the trimmed `line` ends in "..." or "…". */
export function endsWithEllipsis(line: string): boolean {
  return line.endsWith('...') || line.endsWith('…');
}

/** Occurrences of `needle` in `text`, not overlapping ("...." holds one "..."). */
export function countOccurrences(text: string, needle: string): number {
  let count = 0;
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) count++;
  return count;
}

/**
 * The number of sentences in `text`. A sentence ends at . ! or ? (possibly repeated, possibly
 * followed by closing quotes or brackets) that is followed by whitespace or the end of the text;
 * trailing words without a terminal mark are one more sentence. Abbreviations ("Dr. Smith")
 * count as a sentence end: a rule that needs "at least five sentences" errs toward keeping.
 */
export function countSentences(text: string): number {
  let sentences = 0;
  // Every piece but the last ends in a terminal mark, by the split; a piece of punctuation alone
  // ("- ." or "...") is no sentence.
  for (const piece of text.split(SENTENCE_BREAK)) if (LETTER_OR_DIGIT.test(piece)) sentences++;
  return sentences;
}

/**
 * One text's words and lines, each cut once on first use and shared by every rule that reads the
 * same text (the filter chain passes one view along until a rule changes the text). The arrays
 * are the functions' above; callers must not change them.
 */
export class TextView {
  #words?: string[];
  #lines?: string[];
  #nonBlankLines?: string[];
  #paragraphs?: string[];
  #hasSurrogates?: boolean;

  constructor(readonly text: string) {}

  /** Whether the text has a surrogate code unit: without one, every piece's charLength is its length. */
  get hasSurrogates(): boolean {
    this.#hasSurrogates ??= SURROGATE.test(this.text);
    return this.#hasSurrogates;
  }

  /** splitWords(text). */
  get words(): string[] {
    this.#words ??= splitWords(this.text);
    return this.#words;
  }

  /** splitLines(text). */
  get lines(): string[] {
    this.#lines ??= splitLines(this.text);
    return this.#lines;
  }

  /** nonBlankLines(text). */
  get nonBlankLines(): string[] {
    this.#nonBlankLines ??= this.lines.filter((line) => line !== '');
    return this.#nonBlankLines;
  }

  /** splitParagraphs(text). */
  get paragraphs(): string[] {
    this.#paragraphs ??= splitParagraphs(this.text);
    return this.#paragraphs;
  }
}
