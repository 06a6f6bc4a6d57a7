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
/** A blank line and the whitespace after it (no u flag: the pattern has only BMP characters, and \s is the same set). */
const PARAGRAPH_BREAK = /\n[ \t\r\f\v]*\n\s*/;
/** Any surrogate code unit, paired or not (no u flag: it matches code units). */
const SURROGATE = /[\uD800-\uDFFF]/;
/**
 * Whitespace after . ! or ?, possibly repeated, possibly followed by closing quotes or brackets:
 * the definition countSentences follows (it scans by hand, and a test compares the two).
 */
export const SENTENCE_BREAK = /(?<=[.!?]+["'”’)\]]*)\s+/u;

/** The whitespace-separated words of `text`, punctuation attached, in order. */
export function splitWords(text: string): string[] {
  const words = text.split(WHITESPACE);
  if (words.length > 0 && words[0] === '') words.shift();
  if (words.length > 0 && words[words.length - 1] === '') words.pop();
  return words;
}

/**
 * ASCII_KIND[code] for the ASCII characters: PS_CHAR for punctuation or a symbol (\p{P} or \p{S}),
 * SPACE_CHAR for whitespace, WORD_CHAR for the rest. Built from the same regular expressions the
 * slow paths use, so the fast paths agree with them by construction.
 */
const WORD_CHAR = 0;
const PS_CHAR = 1;
const SPACE_CHAR = 2;
const ASCII_KIND = Uint8Array.from({ length: 128 }, (_, code) => {
  const char = String.fromCharCode(code);
  if (/\s/.test(char)) return SPACE_CHAR;
  return /[\p{P}\p{S}]/u.test(char) ? PS_CHAR : WORD_CHAR;
});

/** True when `word` has a character that is not punctuation, a symbol or whitespace. */
export function isCountedWord(word: string): boolean {
  // An ASCII character that is neither punctuation, a symbol nor whitespace answers yes; a word of
  // ASCII only without one answers no. Only the rest needs the regular expression.
  let ascii = true;
  for (let i = 0; i < word.length; i++) {
    const code = word.charCodeAt(i);
    if (code >= 0x80) ascii = false;
    else if (ASCII_KIND[code] === WORD_CHAR) return true;
  }
  return ascii ? false : NON_PUNCTUATION.test(word);
}

/** The words of `text` that count (see isCountedWord). */
export function countedWords(text: string): string[] {
  return splitWords(text).filter(isCountedWord);
}

/** True when `word` has a letter in any script. */
export function hasLetter(word: string): boolean {
  // An ASCII letter answers yes; a word of ASCII only without one answers no. Only a word with
  // some other character and no ASCII letter needs the regular expression.
  let ascii = true;
  for (let i = 0; i < word.length; i++) {
    const code = word.charCodeAt(i);
    if (code >= 0x80) ascii = false;
    else if ((code | 0x20) >= 0x61 && (code | 0x20) <= 0x7a) return true;
  }
  return ascii ? false : LETTER.test(word);
}

/** `word` without leading and trailing punctuation and symbols ("(insurance?)" -> "insurance"). */
export function stripPunctuation(word: string): string {
  // Trim ASCII punctuation and symbols from each end by the table; only a word with a character
  // outside ASCII at an end still to trim needs the regular expression.
  const length = word.length;
  let start = 0;
  while (start < length) {
    const code = word.charCodeAt(start);
    if (code >= 0x80) return word.replace(EDGE_PUNCTUATION, '');
    if (ASCII_KIND[code] !== PS_CHAR) break;
    start++;
  }
  let end = length;
  while (end > start) {
    const code = word.charCodeAt(end - 1);
    if (code >= 0x80) return word.replace(EDGE_PUNCTUATION, '');
    if (ASCII_KIND[code] !== PS_CHAR) break;
    end--;
  }
  return start === 0 && end === length ? word : word.slice(start, end);
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
    .split(PARAGRAPH_BREAK)
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
  // The pieces are those of text.split(SENTENCE_BREAK), found by one scan: a break is a whole run
  // of whitespace (no run can start a match in its middle: the character before would be
  // whitespace, which the lookbehind does not take) whose preceding characters are closing quotes
  // or brackets, if any, after one of . ! ?. Every piece but the last ends in a terminal mark; a
  // piece of punctuation alone ("- ." or "...") is no sentence.
  let sentences = 0;
  let pieceStart = 0;
  const length = text.length;
  let i = 0;
  while (i < length) {
    if (!isWhitespace(text.charCodeAt(i))) {
      i++;
      continue;
    }
    let end = i + 1;
    while (end < length && isWhitespace(text.charCodeAt(end))) end++;
    let before = i - 1;
    while (before >= 0 && isClosing(text.charCodeAt(before))) before--;
    const mark = before >= 0 ? text.charCodeAt(before) : 0;
    if (mark === 0x2e || mark === 0x21 || mark === 0x3f) {
      if (hasLetterOrDigit(text, pieceStart, i)) sentences++;
      pieceStart = end;
    }
    i = end;
  }
  if (hasLetterOrDigit(text, pieceStart, length)) sentences++;
  return sentences;
}

/** The characters that may follow a sentence's . ! or ?: " ' ” ’ ) ]. */
function isClosing(code: number): boolean {
  return code === 0x22 || code === 0x27 || code === 0x201d || code === 0x2019 || code === 0x29 || code === 0x5d;
}

/** True when the code unit is whitespace as \s matches it (ECMAScript's WhiteSpace and LineTerminator; a test checks every code unit). */
export function isWhitespace(code: number): boolean {
  if (code < 0x80) return ASCII_KIND[code] === SPACE_CHAR;
  if (code < 0x2000) return code === 0xa0 || code === 0x1680;
  return code <= 0x200a || code === 0x2028 || code === 0x2029 || code === 0x202f || code === 0x205f || code === 0x3000 || code === 0xfeff;
}

/** LETTER_OR_DIGIT.test(text.slice(start, end)), answering from the ASCII characters when it can. */
function hasLetterOrDigit(text: string, start: number, end: number): boolean {
  let ascii = true;
  for (let i = start; i < end; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0x80) ascii = false;
    else if (((code | 0x20) >= 0x61 && (code | 0x20) <= 0x7a) || (code >= 0x30 && code <= 0x39)) return true;
  }
  return ascii ? false : LETTER_OR_DIGIT.test(text.slice(start, end));
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
