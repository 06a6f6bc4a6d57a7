/**
 * The refinery's document filters: named, versioned rules that keep or remove one web document,
 * with the thresholds of the Gopher (MassiveText), C4 and FineWeb pipelines as defaults.
 *
 * Guarantees:
 * 1. Every rule is pure and synchronous: the same text and params give the same result, with no
 *    I/O. A rule's `version` changes whenever its behaviour on some document changes, so a
 *    removal recorded as `{ rule, version, reason }` can be traced to the code that made it.
 * 2. A removal names the rule, a short machine-readable `reason` (`mean_word_length`) and a
 *    `detail` for people (`mean word length 2.41 < 3`).
 * 3. A rule may change the text: `c4-quality` removes lines. Such a rule returns
 *    `{ keep: true, text, linesRemoved }`; a rule that only judges returns `{ keep: true }`. The
 *    next rule sees the changed text, as in the FineWeb pipeline.
 * 4. `applyFilters` runs the enabled rules in one fixed order (FILTER_ORDER, FineWeb's: language,
 *    repetition, quality, C4, FineWeb) whatever order `enabled` lists them in, and stops at the
 *    first removal.
 * 5. A document that is not a string, or is longer than `maxDocumentChars`, is a ConfigError
 *    naming the field; an empty or all-whitespace document is removed with reason `empty`.
 *
 * Words, lines and sentences are cut as `text.ts` describes; each ratio below says what it is
 * over. Thresholds are "drop when beyond": a ratio exactly at its limit is kept.
 */
import { cleanString, detectAll } from 'tinyld';
import { z } from 'zod';
import { ConfigError } from '../errors.ts';
import { parseOrThrow } from '../schema.ts';
import { duplicateNgramCharFraction, topNgramCharFraction, toWordSequence } from './ngrams.ts';
import {
  bareWord,
  charLength,
  countOccurrences,
  countSentences,
  endsWithEllipsis,
  endsWithTerminalPunctuation,
  hasLetter,
  isCountedWord,
  splitWords,
  stripPunctuation,
  TextView,
} from './text.ts';

export const FILTER_NAMES = ['language', 'gopher-repetition', 'gopher-quality', 'c4-quality', 'fineweb-quality'] as const;
export type FilterName = (typeof FILTER_NAMES)[number];

/** The order applyFilters runs rules in: FineWeb's (language ID first, C4 line removal before FineWeb's line rules). */
export const FILTER_ORDER: readonly FilterName[] = FILTER_NAMES;

/** Reasons a C4 line is removed, counted per document. */
export type LineRemovalReason = 'no_terminal_punctuation' | 'too_few_words' | 'long_word' | 'javascript' | 'policy';
export type LineRemovals = Partial<Record<LineRemovalReason, number>>;

export interface Kept {
  readonly keep: true;
  /** Present only when the rule changed the text: the text the next rule sees. */
  readonly text?: string;
  /** Present only for rules that remove lines: how many, by reason. */
  readonly linesRemoved?: LineRemovals;
}

export interface Removed {
  readonly keep: false;
  /** The rule that removed the document; 'input' for an empty document, before any rule. */
  readonly rule: FilterName | 'input';
  readonly version: number;
  readonly reason: string;
  readonly detail?: string;
}

export type FilterResult = Kept | Removed;

/** A named, versioned rule with its params schema; `apply` without params uses the defaults. */
export interface DocumentFilter<Params, Name extends FilterName = FilterName> {
  readonly name: Name;
  readonly version: number;
  readonly params: z.ZodType<Params>;
  readonly defaults: Params;
  apply(text: string, params?: Params): FilterResult;
}

/** The largest document applyFilters takes by default: 2,000,000 characters, about 330,000 words, over three times Gopher's 100,000-word ceiling. */
export const DEFAULT_MAX_DOCUMENT_CHARS = 2_000_000;
/** The largest maxDocumentChars a config may set. */
export const MAX_DOCUMENT_CHARS = 4_000_000;

const ratio = z.number().min(0).max(1);

/** Each rule's body by name, filled in by defineFilter, for applyFilters' shared view. */
const RULES = {} as {
  language(view: TextView, params: LanguageParams): FilterResult;
  'gopher-repetition'(view: TextView, params: GopherRepetitionParams): FilterResult;
  'gopher-quality'(view: TextView, params: GopherQualityParams): FilterResult;
  'c4-quality'(view: TextView, params: C4QualityParams): FilterResult;
  'fineweb-quality'(view: TextView, params: FinewebQualityParams): FilterResult;
};

// ---------------------------------------------------------------------------------------------
// Language identification (FineWeb: keep English scored at 0.65 or more).

/**
 * Language ID uses tinyld (pure JavaScript, no dependencies, an ESM entry, MIT). Of the libraries
 * considered: franc's scores are relative to its best guess (the top language always scores 1),
 * so FineWeb's "keep English at >= 0.65" has nothing to compare with; eld's scores are per-language
 * n-gram averages that stay above 0.65 for two-word strings and for source code; cld is a native
 * addon. tinyld's `accuracy` is a share of the evidence across languages (the candidates sum to
 * about 1), low on short or non-prose text (0.1 for "Hello world", 0.07 for a line of code) and
 * 0.85-1.0 on a paragraph of prose, which is how fastText's probability behaves under the 0.65
 * threshold. It is not fastText's calibration: the threshold keeps its meaning, not its exact
 * acceptance rate.
 */
export const LanguageParams = z
  .object({
    /** ISO 639-1 codes to keep. English is set here explicitly: the reference pipeline's default is now "any language". */
    languages: z
      .array(z.string().regex(/^[a-z]{2}$/, 'must be an ISO 639-1 code such as "en"'))
      .min(1)
      .max(10)
      .default(['en']),
    /** The top language's confidence must be at least this (FineWeb: 0.65). */
    minConfidence: ratio.default(0.65),
  })
  .strict();
export type LanguageParams = z.output<typeof LanguageParams>;

export const languageFilter: DocumentFilter<LanguageParams, 'language'> = defineFilter('language', 1, LanguageParams, ({ text }, params, drop) => {
  const [top] = detectProseLanguages(text);
  if (!top) return drop('language', 'no language detected');
  if (!params.languages.includes(top.lang)) return drop('language', `detected ${top.lang} (${top.accuracy.toFixed(2)})`);
  if (top.accuracy < params.minConfidence) return drop('language_confidence', `${top.lang} confidence ${top.accuracy.toFixed(2)} < ${params.minConfidence}`);
  return KEPT;
});

/** What tinyld's detectAll returns: candidate languages, best first. */
export type LanguageCandidates = ReturnType<typeof detectAll>;

/**
 * tinyld 1.3.4's piece separator, copied from its source: detectAll splits the text with it (the
 * captured separator becomes a piece of its own), cleans every piece with cleanString, and scores
 * only the 7 longest cleaned pieces, longest first, ties in text order. Changing tinyld's version
 * needs this checked again: test/unit/refinery-language.test.ts compares against detectAll.
 */
export const TINYLD_SEPARATOR = /([,，、。!¿?！？":;()「」{}„“«»”"“<>⋯《》*]|[.[\]\\])+/;
/** The characters TINYLD_SEPARATOR matches, all in the BMP; a table by code unit scans for them without a match object per piece. */
export const TINYLD_SEPARATOR_CHARS = ',，、。!¿?！？":;()「」{}„“«»”"“<>⋯《》*.[]\\';
const IS_SEPARATOR = new Uint8Array(0x10000);
for (const char of TINYLD_SEPARATOR_CHARS) IS_SEPARATOR[char.charCodeAt(0)] = 1;
const TINYLD_SCORED_PIECES = 7;
/** A run of whitespace holding a line break: the language rule reads lines joined by one space. */
const LINE_BREAK = /\s*\n\s*/g;
/** The one character whose lower case is longer (U+0130 becomes "i" and a combining dot). */
const LENGTHENS_WHEN_LOWERED = '\u0130';

/**
 * Exactly what detectAll gives on `text` with each line break, and the whitespace around it, made
 * one space (so that it reads the document as prose), cleaning only the pieces that can be
 * scored rather than the whole text. detectAll cleans every piece of the text and then scores only the 7
 * longest; cleaning never lengthens a piece (it lower-cases, turns punctuation into spaces, drops
 * digits, collapses and trims whitespace), so a piece whose raw length is below the 7th longest
 * cleaned length cannot be scored, and is never cleaned here. Only U+0130 lengthens when
 * lower-cased; a text holding it takes detectAll's own path. The pieces chosen are handed to
 * detectAll again, in order, separated so that its split gives back exactly them: it cleans them
 * once more (cleaning is idempotent) and scores them as it would have.
 */
export function detectProseLanguages(text: string): LanguageCandidates {
  if (text.includes(LENGTHENS_WHEN_LOWERED)) return detectAll(text.replace(LINE_BREAK, ' '));
  // The pieces String.prototype.split(TINYLD_SEPARATOR) would give, as [start, end) offsets in
  // the text: the text between separator runs, and each run's captured (last) character.
  const bounds: number[] = [];
  let from = 0;
  for (let at = 0; at < text.length; at++) {
    if (IS_SEPARATOR[text.charCodeAt(at)] === 0) continue;
    let end = at + 1;
    while (end < text.length && IS_SEPARATOR[text.charCodeAt(end)] === 1) end++;
    bounds.push(from, at, end - 1, end);
    from = end;
    at = end - 1;
  }
  bounds.push(from, text.length);
  const pieces = bounds.length / 2;
  const rawLengths: number[] = new Array(pieces);
  for (let piece = 0; piece < pieces; piece++) rawLengths[piece] = bounds[2 * piece + 1]! - bounds[2 * piece]!;
  const cleaned: (string | undefined)[] = new Array(pieces);

  // Clean every piece at least `threshold` long, lowering the threshold until no uncleaned piece
  // (whose cleaned length is at most its raw length, below the threshold) can reach the 7 longest.
  let threshold = kthLargest(rawLengths, TINYLD_SCORED_PIECES);
  for (;;) {
    for (let piece = 0; piece < pieces; piece++)
      if (cleaned[piece] === undefined && rawLengths[piece]! >= threshold)
        cleaned[piece] = cleanString(text.slice(bounds[2 * piece], bounds[2 * piece + 1]).replace(LINE_BREAK, ' '));
    if (threshold <= 1) break;
    const lengths: number[] = [];
    for (const piece of cleaned) if (piece) lengths.push(piece.length);
    const kth = kthLargest(lengths, TINYLD_SCORED_PIECES);
    if (lengths.length >= TINYLD_SCORED_PIECES && kth >= threshold) break;
    threshold = lengths.length >= TINYLD_SCORED_PIECES ? kth : threshold >> 1;
  }

  const chosen: number[] = [];
  for (let piece = 0; piece < pieces; piece++) if (cleaned[piece]) chosen.push(piece);
  chosen.sort((a, b) => cleaned[b]!.length - cleaned[a]!.length || a - b);
  // " . " splits into pieces that clean to nothing; a piece that is itself a separator character
  // (a bracket) stands alone between spaces, so detectAll's split captures it as before.
  return detectAll(
    chosen
      .slice(0, TINYLD_SCORED_PIECES)
      .map((piece) => cleaned[piece])
      .join(' . '),
  );
}

/** The k-th largest of `values` (1-based); 0 when there are fewer than k. */
function kthLargest(values: readonly number[], k: number): number {
  if (values.length < k) return 0;
  const top: number[] = [];
  for (const value of values) {
    if (top.length === k && value <= top[k - 1]!) continue;
    let at = top.length === k ? k - 1 : top.length;
    while (at > 0 && top[at - 1]! < value) {
      top[at] = top[at - 1]!;
      at--;
    }
    top[at] = value;
  }
  return top[k - 1]!;
}

// ---------------------------------------------------------------------------------------------
// Gopher quality (the MassiveText rules of Rae et al. 2021, as FineWeb ran them).

export const GopherQualityParams = z
  .object({
    /** Counted words (with a non-punctuation character) at least... */
    minWords: z.int().min(0).default(50),
    /** ...and at most. */
    maxWords: z.int().min(1).default(100_000),
    /** Mean length of counted words, in characters, within [min, max]. */
    minMeanWordLength: z.number().min(0).default(3),
    maxMeanWordLength: z.number().min(0).default(10),
    /** '#' per counted word at most. */
    maxHashWordRatio: z.number().min(0).default(0.1),
    /** '...' and '…' per counted word at most. */
    maxEllipsisWordRatio: z.number().min(0).default(0.1),
    /** Share of non-blank lines starting with '•' or '-' at most. */
    maxBulletLineRatio: ratio.default(0.9),
    /** Share of non-blank lines ending in '...' or '…' at most. */
    maxEllipsisLineRatio: ratio.default(0.3),
    /**
     * Share of all words (punctuation-only ones included: a page of '|' and '»' is what this
     * catches) that contain a letter, at least. The reference names this max_non_alpha_words_ratio
     * 0.8, but it drops when fewer than 80% of words have a letter.
     */
    minAlphaWordRatio: ratio.default(0.8),
    /** Distinct stop words present at least (not occurrences: "the the the" is one). */
    minStopWords: z.int().min(0).default(2),
    stopWords: z.array(z.string().min(1).max(20)).max(20).default(['the', 'be', 'to', 'of', 'and', 'that', 'have', 'with']),
  })
  .strict()
  .refine((p) => p.minWords <= p.maxWords, { message: 'minWords must not exceed maxWords', path: ['minWords'] })
  .refine((p) => p.minMeanWordLength <= p.maxMeanWordLength, {
    message: 'minMeanWordLength must not exceed maxMeanWordLength',
    path: ['minMeanWordLength'],
  });
export type GopherQualityParams = z.output<typeof GopherQualityParams>;

export const gopherQualityFilter: DocumentFilter<GopherQualityParams, 'gopher-quality'> = defineFilter(
  'gopher-quality',
  1,
  GopherQualityParams,
  (view, params, drop) => {
    const { text } = view;
    const allWords = view.words;
    const words = allWords.filter(isCountedWord);
    if (words.length < params.minWords) return drop('too_few_words', `${words.length} words < ${params.minWords}`);
    if (words.length > params.maxWords) return drop('too_many_words', `${words.length} words > ${params.maxWords}`);

    let wordChars = 0;
    for (const word of words) wordChars += charLength(word);
    const meanLength = words.length === 0 ? 0 : wordChars / words.length;
    if (meanLength < params.minMeanWordLength || meanLength > params.maxMeanWordLength)
      return drop('mean_word_length', `mean word length ${meanLength.toFixed(2)} outside [${params.minMeanWordLength}, ${params.maxMeanWordLength}]`);

    const perWord = (count: number) => (words.length === 0 ? 0 : count / words.length);
    const hashRatio = perWord(countOccurrences(text, '#'));
    if (hashRatio > params.maxHashWordRatio) return drop('hash_ratio', `'#' per word ${hashRatio.toFixed(3)} > ${params.maxHashWordRatio}`);
    const ellipsisRatio = perWord(countOccurrences(text, '...') + countOccurrences(text, '…'));
    if (ellipsisRatio > params.maxEllipsisWordRatio)
      return drop('ellipsis_ratio', `ellipses per word ${ellipsisRatio.toFixed(3)} > ${params.maxEllipsisWordRatio}`);

    const lines = view.nonBlankLines;
    const bulletRatio = share(lines, (line) => line.startsWith('•') || line.startsWith('-'));
    if (bulletRatio > params.maxBulletLineRatio) return drop('bullet_lines', `bullet lines ${bulletRatio.toFixed(3)} > ${params.maxBulletLineRatio}`);
    const ellipsisLineRatio = share(lines, endsWithEllipsis);
    if (ellipsisLineRatio > params.maxEllipsisLineRatio)
      return drop('ellipsis_lines', `lines ending in an ellipsis ${ellipsisLineRatio.toFixed(3)} > ${params.maxEllipsisLineRatio}`);

    const alphaRatio = share(allWords, hasLetter);
    if (alphaRatio < params.minAlphaWordRatio) return drop('non_alpha_words', `words with a letter ${alphaRatio.toFixed(3)} < ${params.minAlphaWordRatio}`);

    const stopWords = new Set(params.stopWords.map((word) => word.toLowerCase()));
    const present = new Set<string>();
    for (const word of words) {
      const bare = bareWord(word);
      if (stopWords.has(bare)) present.add(bare);
      if (present.size >= params.minStopWords) break;
    }
    if (present.size < params.minStopWords) return drop('stop_words', `${present.size} distinct stop words < ${params.minStopWords}`);
    return KEPT;
  },
);

// ---------------------------------------------------------------------------------------------
// Gopher repetition (the same paper's repetition removal).

const NgramLimit = z.object({ n: z.int().min(1).max(20), maxCharRatio: ratio }).strict();

export const GopherRepetitionParams = z
  .object({
    /** Share of paragraphs that repeat an earlier paragraph, at most; the same for non-blank lines. */
    maxDuplicateParagraphRatio: ratio.default(0.3),
    maxDuplicateLineRatio: ratio.default(0.3),
    /** Characters in repeated paragraphs over all paragraphs' characters, at most; the same for lines. */
    maxDuplicateParagraphCharRatio: ratio.default(0.2),
    maxDuplicateLineCharRatio: ratio.default(0.2),
    /**
     * Characters of the most frequent word n-gram times its count, over all words' characters, at
     * most. Words here are counted words without their leading and trailing punctuation.
     */
    topNgrams: z
      .array(NgramLimit)
      .max(10)
      .default([
        { n: 2, maxCharRatio: 0.2 },
        { n: 3, maxCharRatio: 0.18 },
        { n: 4, maxCharRatio: 0.16 },
      ]),
    /** Characters of words inside an n-gram seen earlier in the document, over all words' characters, at most. */
    duplicateNgrams: z
      .array(NgramLimit)
      .max(10)
      .default([
        { n: 5, maxCharRatio: 0.15 },
        { n: 6, maxCharRatio: 0.14 },
        { n: 7, maxCharRatio: 0.13 },
        { n: 8, maxCharRatio: 0.12 },
        { n: 9, maxCharRatio: 0.11 },
        { n: 10, maxCharRatio: 0.1 },
      ]),
  })
  .strict();
export type GopherRepetitionParams = z.output<typeof GopherRepetitionParams>;

export const gopherRepetitionFilter: DocumentFilter<GopherRepetitionParams, 'gopher-repetition'> = defineFilter(
  'gopher-repetition',
  1,
  GopherRepetitionParams,
  (view, params, drop) => {
    const paragraphs = duplicates(view.paragraphs);
    if (paragraphs.countRatio > params.maxDuplicateParagraphRatio)
      return drop('duplicate_paragraphs', `repeated paragraphs ${paragraphs.countRatio.toFixed(3)} > ${params.maxDuplicateParagraphRatio}`);
    if (paragraphs.charRatio > params.maxDuplicateParagraphCharRatio)
      return drop(
        'duplicate_paragraph_chars',
        `characters in repeated paragraphs ${paragraphs.charRatio.toFixed(3)} > ${params.maxDuplicateParagraphCharRatio}`,
      );
    const lines = duplicates(view.nonBlankLines);
    if (lines.countRatio > params.maxDuplicateLineRatio)
      return drop('duplicate_lines', `repeated lines ${lines.countRatio.toFixed(3)} > ${params.maxDuplicateLineRatio}`);
    if (lines.charRatio > params.maxDuplicateLineCharRatio)
      return drop('duplicate_line_chars', `characters in repeated lines ${lines.charRatio.toFixed(3)} > ${params.maxDuplicateLineCharRatio}`);

    // N-grams are over words as a tokenizer would see them: "insurance?" and "insurance" match.
    const words = toWordSequence(view.words.filter(isCountedWord).map(stripPunctuation));
    for (const { n, maxCharRatio } of params.topNgrams) {
      const fraction = topNgramCharFraction(words, n);
      if (fraction > maxCharRatio) return drop(`top_${n}gram`, `top ${n}-gram characters ${fraction.toFixed(3)} > ${maxCharRatio}`);
    }
    for (const { n, maxCharRatio } of params.duplicateNgrams) {
      const fraction = duplicateNgramCharFraction(words, n);
      if (fraction > maxCharRatio) return drop(`duplicate_${n}gram`, `characters in repeated ${n}-grams ${fraction.toFixed(3)} > ${maxCharRatio}`);
    }
    return KEPT;
  },
);

// ---------------------------------------------------------------------------------------------
// C4 quality (Raffel et al. 2020's heuristics). The one rule that changes the text.

export const C4QualityParams = z
  .object({
    /**
     * Remove lines that do not end in . ? ! " ' (or that end in an ellipsis). Off by default, as
     * FineWeb ran it: on its own this rule removed about 30% of tokens.
     */
    removeLinesWithoutTerminalPunctuation: z.boolean().default(false),
    /**
     * Remove lines with fewer words than this. Only words with a non-punctuation character count,
     * so "Home | About" is two words, not three.
     */
    minWordsPerLine: z.int().min(0).default(3),
    /** Remove lines with a word longer than this many characters. */
    maxWordLength: z.int().min(1).default(1000),
    /** Remove lines that mention javascript (in any case): "please enable JavaScript". */
    removeJavascriptLines: z.boolean().default(true),
    /** Remove lines containing any of these phrases (compared lower-cased). */
    policyPhrases: z
      .array(z.string().min(1).max(40))
      .max(10)
      .default(['terms of use', 'privacy policy', 'cookie policy', 'uses cookies', 'use of cookies', 'use cookies']),
    /** Remove the document when it contains "lorem ipsum" (in any case). */
    removeLoremIpsum: z.boolean().default(true),
    /** Remove the document when it contains '{': code and templates, not prose. */
    removeCurlyBracket: z.boolean().default(true),
    /** Remove the document when fewer sentences than this remain after the line removals. */
    minSentences: z.int().min(0).default(5),
  })
  .strict();
export type C4QualityParams = z.output<typeof C4QualityParams>;

/**
 * Lines are judged one by one, trimmed, and kept lines are joined by '\n'. Blank lines are not
 * judged and not counted as removals: one blank line is kept between two kept lines that had one
 * or more between them, so paragraphs stay paragraphs and a clean document comes back unchanged.
 * The document-level checks ("lorem ipsum", '{') read the text as received, before any line is
 * removed: a placeholder page stays a placeholder page whichever of its lines survive.
 */
export const c4QualityFilter: DocumentFilter<C4QualityParams, 'c4-quality'> = defineFilter('c4-quality', 1, C4QualityParams, (view, params, drop) => {
  const { text } = view;
  if (params.removeLoremIpsum && text.toLowerCase().includes('lorem ipsum')) return drop('lorem_ipsum', 'contains "lorem ipsum"');
  if (params.removeCurlyBracket && text.includes('{')) return drop('curly_bracket', "contains '{'");

  const policyPhrases = params.policyPhrases.map((phrase) => phrase.toLowerCase());
  const kept: string[] = [];
  const linesRemoved: LineRemovals = {};
  let paragraphBreak = false;
  for (const line of view.lines) {
    if (line === '') {
      paragraphBreak = kept.length > 0;
      continue;
    }
    const reason = c4LineRemoval(line, params, policyPhrases);
    if (reason) {
      linesRemoved[reason] = (linesRemoved[reason] ?? 0) + 1;
      continue;
    }
    if (paragraphBreak) kept.push('');
    kept.push(line);
    paragraphBreak = false;
  }
  const keptText = kept.join('\n');
  const sentences = countSentences(keptText);
  if (sentences < params.minSentences) return drop('too_few_sentences', `${sentences} sentences left < ${params.minSentences}`);
  return keptText === text ? { keep: true, linesRemoved } : { keep: true, text: keptText, linesRemoved };
});

function c4LineRemoval(line: string, params: C4QualityParams, policyPhrases: readonly string[]): LineRemovalReason | undefined {
  if (params.removeLinesWithoutTerminalPunctuation && (!endsWithTerminalPunctuation(line) || endsWithEllipsis(line))) return 'no_terminal_punctuation';
  const words = splitWords(line);
  if (words.filter(isCountedWord).length < params.minWordsPerLine) return 'too_few_words';
  if (words.some((word) => charLength(word) > params.maxWordLength)) return 'long_word';
  const lower = line.toLowerCase();
  if (params.removeJavascriptLines && lower.includes('javascript')) return 'javascript';
  if (policyPhrases.some((phrase) => lower.includes(phrase))) return 'policy';
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// FineWeb quality (Penedo et al. 2024, section 3.6). Lines are the non-blank lines, trimmed.

export const FinewebQualityParams = z
  .object({
    /** Share of lines ending in . ? ! " ' at least. */
    minLinePunctuationRatio: ratio.default(0.12),
    /** A line of at most this many characters is short... */
    shortLineLength: z.int().min(0).default(30),
    /** ...and the share of short lines is at most this. */
    maxShortLineRatio: ratio.default(0.67),
    /**
     * Characters in lines that repeat an earlier line, over all lines' characters, at most. The
     * FineWeb paper and blog give 0.1 for this rule; the reference code has said 0.01 since it was
     * written into the filter, and the code is what produced the dataset, so 0.01 is the default.
     */
    maxDuplicateLineCharRatio: ratio.default(0.01),
    /** '\n' per whitespace-separated word at most (a rule in the code, not in the paper). */
    maxNewlineWordRatio: z.number().min(0).default(0.3),
  })
  .strict();
export type FinewebQualityParams = z.output<typeof FinewebQualityParams>;

export const finewebQualityFilter: DocumentFilter<FinewebQualityParams, 'fineweb-quality'> = defineFilter(
  'fineweb-quality',
  1,
  FinewebQualityParams,
  (view, params, drop) => {
    const { text } = view;
    const lines = view.nonBlankLines;
    const punctuated = share(lines, endsWithTerminalPunctuation);
    if (punctuated < params.minLinePunctuationRatio)
      return drop('line_punctuation', `lines ending in punctuation ${punctuated.toFixed(3)} < ${params.minLinePunctuationRatio}`);
    const short = share(lines, (line) => charLength(line) <= params.shortLineLength);
    if (short > params.maxShortLineRatio)
      return drop('short_lines', `lines of <= ${params.shortLineLength} characters ${short.toFixed(3)} > ${params.maxShortLineRatio}`);
    const repeated = duplicates(lines).charRatio;
    if (repeated > params.maxDuplicateLineCharRatio)
      return drop('duplicate_line_chars', `characters in repeated lines ${repeated.toFixed(3)} > ${params.maxDuplicateLineCharRatio}`);
    const words = view.words.length;
    const newlineRatio = words === 0 ? 0 : countOccurrences(text, '\n') / words;
    if (newlineRatio > params.maxNewlineWordRatio) return drop('newline_ratio', `newlines per word ${newlineRatio.toFixed(3)} > ${params.maxNewlineWordRatio}`);
    return KEPT;
  },
);

// ---------------------------------------------------------------------------------------------
// Running them.

/** Every rule by name. */
export const FILTERS = {
  language: languageFilter,
  'gopher-repetition': gopherRepetitionFilter,
  'gopher-quality': gopherQualityFilter,
  'c4-quality': c4QualityFilter,
  'fineweb-quality': finewebQualityFilter,
} as const satisfies { readonly [N in FilterName]: { readonly name: N } };

/** Every threshold of every rule, and which rules run. `FilterConfig.parse({})` is the FineWeb setup. */
export const FilterConfig = z
  .object({
    /** The rules to run; they run in FILTER_ORDER whatever the order here. */
    enabled: z
      .array(z.enum(FILTER_NAMES))
      .max(FILTER_NAMES.length)
      .default([...FILTER_NAMES]),
    /**
     * A longer document is a ConfigError, not a removal: it is bigger than any page the rules were
     * tuned on. At most MAX_DOCUMENT_CHARS, what one shard Lambda holds many of (the pipeline cuts
     * documents to 1 MB at ingest, so its runs never reach the error).
     */
    maxDocumentChars: z.int().min(1).max(MAX_DOCUMENT_CHARS).default(DEFAULT_MAX_DOCUMENT_CHARS),
    language: LanguageParams.prefault({}),
    gopherRepetition: GopherRepetitionParams.prefault({}),
    gopherQuality: GopherQualityParams.prefault({}),
    c4Quality: C4QualityParams.prefault({}),
    finewebQuality: FinewebQualityParams.prefault({}),
  })
  .strict();
export type FilterConfig = z.output<typeof FilterConfig>;
export type FilterConfigInput = z.input<typeof FilterConfig>;

export type RefineryResult =
  | {
      readonly keep: true;
      /** The text to keep (changed only by rules that remove lines). */
      readonly text: string;
      /** The text differs from the document received. */
      readonly changed: boolean;
      /** Lines removed, by reason, summed over the rules. */
      readonly linesRemoved: LineRemovals;
      /** The rules that ran, with their versions: the provenance of the kept text. */
      readonly rules: readonly { readonly name: FilterName; readonly version: number }[];
    }
  | Removed;

/**
 * Configs already validated, by the object received: a caller that passes the same config object
 * for every document (the shard step does) pays for validation once, not per document. Objects
 * only, so a config must not be changed after its first use: make a new object instead.
 */
const parsedConfigs = new WeakMap<object, FilterConfig>();

function parseConfig(config: FilterConfigInput | FilterConfig): FilterConfig {
  const known = typeof config === 'object' && config !== null ? parsedConfigs.get(config) : undefined;
  if (known) return known;
  const parsed = parseOrThrow(FilterConfig, config, 'config');
  if (typeof config === 'object' && config !== null) {
    parsedConfigs.set(config, parsed);
    parsedConfigs.set(parsed, parsed);
  }
  return parsed;
}

/**
 * Run the enabled rules on `document` in FILTER_ORDER. `config` is parsed with FilterConfig (a
 * bad field is a ConfigError naming it) on its first use, then remembered for that object (see
 * parsedConfigs); `field` names the document in errors (`records[3].text`).
 */
export function applyFilters(document: unknown, config: FilterConfigInput | FilterConfig = {}, field = 'document'): RefineryResult {
  const parsed = parseConfig(config);
  let text = checkDocument(document, field, parsed.maxDocumentChars);
  if (text.trim() === '') return { keep: false, rule: 'input', version: 1, reason: 'empty', detail: 'the document is empty or all whitespace' };
  // One view of the text, its words and lines cut once for all the rules, until a rule changes it.
  let view = new TextView(text);
  const linesRemoved: LineRemovals = {};
  const rules: { name: FilterName; version: number }[] = [];
  for (const name of FILTER_ORDER) {
    if (!parsed.enabled.includes(name)) continue;
    const result = runFilter(name, view, parsed);
    if (!result.keep) return result;
    rules.push({ name, version: FILTERS[name].version });
    if (result.text !== undefined && result.text !== text) {
      text = result.text;
      view = new TextView(text);
    }
    if (result.linesRemoved)
      for (const [reason, count] of Object.entries(result.linesRemoved) as [LineRemovalReason, number][])
        linesRemoved[reason] = (linesRemoved[reason] ?? 0) + count;
  }
  // Changed by a rule, or by '\r\n' line ends becoming '\n'.
  return { keep: true, text, changed: text !== document, linesRemoved, rules };
}

function runFilter(name: FilterName, view: TextView, config: FilterConfig): FilterResult {
  switch (name) {
    case 'language':
      return RULES.language(view, config.language);
    case 'gopher-repetition':
      return RULES['gopher-repetition'](view, config.gopherRepetition);
    case 'gopher-quality':
      return RULES['gopher-quality'](view, config.gopherQuality);
    case 'c4-quality':
      return RULES['c4-quality'](view, config.c4Quality);
    case 'fineweb-quality':
      return RULES['fineweb-quality'](view, config.finewebQuality);
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers.

const KEPT: Kept = Object.freeze({ keep: true });

type Drop = (reason: string, detail?: string) => Removed;

/**
 * A filter from its rule body. `apply` checks that the document is a string (the size limit is
 * applyFilters' config), removes an empty one with reason `empty`, fills the params' defaults, and
 * gives the body a `drop` that stamps the rule's name and version on a removal.
 */
function defineFilter<Name extends FilterName, Params>(
  name: Name,
  version: number,
  schema: z.ZodType<Params>,
  rule: (view: TextView, params: Params, drop: Drop) => FilterResult,
): DocumentFilter<Params, Name> {
  const defaults = schema.parse({});
  const drop: Drop = (reason, detail) =>
    detail === undefined ? { keep: false, rule: name, version, reason } : { keep: false, rule: name, version, reason, detail };
  // applyFilters has checked the document already and calls the body on its shared view.
  (RULES as Record<string, unknown>)[name] = (view: TextView, params: Params) => rule(view, params, drop);
  return {
    name,
    version,
    params: schema,
    defaults,
    apply(text: string, params: Params = defaults): FilterResult {
      const checked = checkDocument(text, 'document', Number.POSITIVE_INFINITY);
      if (checked.trim() === '') return drop('empty', 'the document is empty or all whitespace');
      return rule(new TextView(checked), params, drop);
    },
  };
}

/** `document` as a string of at most `maxChars` characters, or a ConfigError naming `field`. */
function checkDocument(document: unknown, field: string, maxChars: number): string {
  if (typeof document !== 'string') throw new ConfigError(field, document, `must be a string, not ${document === null ? 'null' : typeof document}`);
  // UTF-16 length bounds the code-point length from above, so only a near-limit text is counted exactly.
  if (document.length > maxChars && charLength(document) > maxChars)
    throw new ConfigError(field, `${charLength(document)} characters`, `must be at most ${maxChars} characters`);
  return document.replace(/\r\n?/g, '\n');
}

/** Share of `items` for which `test` holds; 0 for none. */
function share<T>(items: readonly T[], test: (item: T) => boolean): number {
  if (items.length === 0) return 0;
  let count = 0;
  for (const item of items) if (test(item)) count++;
  return count / items.length;
}

/** Repeats of an earlier element, by count (over elements) and by characters (over all elements' characters). */
function duplicates(elements: readonly string[]): { countRatio: number; charRatio: number } {
  const seen = new Set<string>();
  let repeats = 0;
  let repeatChars = 0;
  let totalChars = 0;
  for (const element of elements) {
    const chars = charLength(element);
    totalChars += chars;
    if (seen.has(element)) {
      repeats++;
      repeatChars += chars;
    } else {
      seen.add(element);
    }
  }
  return {
    countRatio: elements.length === 0 ? 0 : repeats / elements.length,
    charRatio: totalChars === 0 ? 0 : repeatChars / totalChars,
  };
}
