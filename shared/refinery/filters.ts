/**
 * The refinery's document filters: named, versioned rules that keep or remove one web document,
 * with the thresholds of the Gopher (MassiveText), C4 and FineWeb pipelines as defaults.
 *
 * Guarantees:
 * 1. Every rule is pure and synchronous: the same text and params give the same result, with no
 *    I/O (but for the language model's file, read once per process on first use). A rule's
 *    `version` changes whenever its behaviour on some document changes, so a removal recorded as
 *    `{ rule, version, reason }` can be traced to the code that made it.
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
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { ConfigError, NotFoundError } from '../errors.ts';
import { parseOrThrow } from '../schema.ts';
import { LANGUAGE_MODEL_FILE, LANGUAGE_MODEL_PACKAGE_PATH } from './language-model.ts';
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
// Language identification (FineWeb: keep English scored at 0.65 or more by fastText's lid.176).

/**
 * Language ID is fastText's lid.176 model, the one FineWeb ran (datatrove's LanguageFilter: the
 * text with every '\n' made a space, English kept at probability >= 0.65), so the threshold keeps
 * its exact meaning. The model file comes from the fasttext.wasm.js package (MIT; the model is
 * Facebook's, CC BY-SA 3.0); its WebAssembly build is not used: the reader below does the same
 * inference in TypeScript, synchronously (the filters stay synchronous functions, and the
 * callers need no model handed to them). On the refinery's Debian sample (1,600 documents of
 * 1,225 words on average) it gives the WebAssembly build's top language on every document, with
 * probabilities within 8e-6, and takes 0.24 ms a document where the WebAssembly build takes 2.2
 * ms (it copies each text into its heap and sums every n-gram row of every token) and the tinyld
 * rule this replaced 1.7 ms (same machine, same run).
 *
 * Why not the others: tinyld scored clear English prose low (six of the fifteen Debian reference
 * chapters under 0.65, at 0.37-0.64, where lid.176 gives 0.84-0.90); the two rules decided
 * differently on 454 of the 1,600 documents, 411 of them English that tinyld dropped. eld's
 * scores stay above 0.65 for two-word strings and for source code; franc's top language always
 * scores 1; cld is a native addon. lid.176 gives "Hello world" 0.17 and a line of C 0.08.
 * Like every n-gram model it takes some short code for English ("import numpy as np": 0.93);
 * the Gopher rules' 50-word minimum and symbol ratios are what remove such documents.
 */
export const LanguageParams = z
  .object({
    /** Language codes to keep (lid.176's labels: ISO 639-1 where one exists). English is set here explicitly: the reference pipeline's default is now "any language". */
    languages: z
      .array(z.string().regex(/^[a-z]{2,3}$/, 'must be a lid.176 language code such as "en" or "ceb"'))
      .min(1)
      .max(10)
      .default(['en']),
    /** The top language's probability must be at least this (FineWeb: 0.65). */
    minConfidence: ratio.default(0.65),
  })
  .strict();
export type LanguageParams = z.output<typeof LanguageParams>;

export const languageFilter: DocumentFilter<LanguageParams, 'language'> = defineFilter('language', 2, LanguageParams, ({ text }, params, drop) => {
  const top = languageIdentifier().identify(text);
  if (!params.languages.includes(top.language)) return drop('language', `detected ${top.language} (${top.probability.toFixed(2)})`);
  if (top.probability < params.minConfidence)
    // Three decimals: at two, 0.647 would read "0.65 < 0.65".
    return drop('language_confidence', `${top.language} confidence ${top.probability.toFixed(3)} < ${params.minConfidence}`);
  return KEPT;
});

export { LANGUAGE_MODEL_FILE, LANGUAGE_MODEL_PACKAGE_PATH };

/** The top language of a text and its probability. */
export interface LanguageGuess {
  /** The model's label without `__label__`: `en`, `fr`, `zh`, `ceb`. */
  readonly language: string;
  readonly probability: number;
}

export interface LanguageIdentifier {
  /** fastText's top prediction for `text` read as one line ('\n' counts as a space, as in FineWeb). */
  identify(text: string): LanguageGuess;
}

let sharedIdentifier: LanguageIdentifier | undefined;

/**
 * The process's lid.176 reader, loaded on first use (about 150 ms, 4 MB of tables) from the
 * first of: LANGUAGE_MODEL_FILE beside the running module (a Lambda bundle; see
 * pipelines/steps/function.ts), the fasttext.wasm.js package as this module resolves it (the
 * repository), and the same from the working directory (a bundle run from the repository).
 */
export function languageIdentifier(): LanguageIdentifier {
  if (sharedIdentifier) return sharedIdentifier;
  const tried: string[] = [];
  const candidates = [
    () => fileURLToPath(new URL(`./${LANGUAGE_MODEL_FILE}`, import.meta.url)),
    () => createRequire(import.meta.url).resolve(LANGUAGE_MODEL_PACKAGE_PATH),
    () => createRequire(join(process.cwd(), 'package.json')).resolve(LANGUAGE_MODEL_PACKAGE_PATH),
  ];
  for (const candidate of candidates) {
    let path: string;
    try {
      path = candidate();
    } catch {
      continue;
    }
    tried.push(path);
    if (!existsSync(path)) continue;
    sharedIdentifier = readFastTextModel(readFileSync(path));
    return sharedIdentifier;
  }
  throw new NotFoundError(`the language model ${LANGUAGE_MODEL_FILE} (tried ${tried.join(', ') || LANGUAGE_MODEL_PACKAGE_PATH})`);
}

/** fastText's file magic and the model version lid.176 was saved with. */
const FASTTEXT_MAGIC = 793712314;
const FASTTEXT_VERSION = 12;
/** fastText's Args.loss and Args.model values for lid.176: hierarchical softmax, supervised. */
const LOSS_HIERARCHICAL_SOFTMAX = 1;
const MODEL_SUPERVISED = 3;
/** A product quantizer's centroids per sub-vector (8 bits). */
const PQ_CENTROIDS = 256;
const END_OF_SENTENCE = '</s>';
const LABEL_PREFIX = '__label__';
/** Distinct out-of-vocabulary tokens whose rows are remembered before the cache starts over. */
const OOV_CACHE_LIMIT = 100_000;
/** FNV-1a's offset basis: tokens are hashed over their UTF-16 code units to find their slots. */
const TOKEN_HASH_SEED = 0x811c9dc5 | 0;

/**
 * Reads a quantised supervised fastText model (.ftz, version 12: lid.176.ftz) and predicts as
 * fastText 0.9's predict does with k = 1 and threshold 0:
 * - the line is cut into tokens at ' ', '\t', '\v', '\f', '\r', '\0' (and '\n', see identify),
 *   and the end-of-sentence token `</s>` follows them, as fastText's predict appends a '\n' (a
 *   `</s>` in the text ends it there, as in fastText);
 * - a token in the vocabulary contributes its own row and its character n-grams' rows, one not
 *   in it only its n-grams' (minn..maxn code points of `<token>`, FNV-1a hashed over the UTF-8
 *   bytes, each byte sign-extended, modulo the bucket count, kept only if the pruned model still
 *   has that bucket); a token starting `__label__` is skipped;
 * - the hidden vector is the mean of those rows (product-quantised: each row is its codes'
 *   centroids times its quantised norm, decoded once, in float32 as fastText decodes it);
 * - the labels are the leaves of a Huffman tree over their training counts, and the top one is
 *   found by fastText's depth-first search.
 * fastText sums the rows one by one in float32; here each token's rows are summed once, in
 * float64, and a document sums its tokens' sums (a token's rows are the same wherever it
 * occurs). That is what makes it fast (a 1,225-word document is ~1,225 additions of 16-wide
 * sums, not ~25,000 of rows), and the only difference from fastText: the probabilities differ
 * in the sixth decimal at most, from fastText's float32 rounding.
 */
export function readFastTextModel(file: Uint8Array): LanguageIdentifier {
  const data = new DataView(file.buffer, file.byteOffset, file.byteLength);
  let at = 0;
  const int32 = () => {
    at += 4;
    return data.getInt32(at - 4, true);
  };
  const int64 = () => {
    at += 8;
    return Number(data.getBigInt64(at - 8, true));
  };
  const byte = () => file[at++]!;
  const float32s = (count: number) => {
    const values = new Float32Array(count);
    for (let i = 0; i < count; i++) values[i] = data.getFloat32(at + 4 * i, true);
    at += 4 * count;
    return values;
  };
  const fail = (what: string): never => {
    throw new ConfigError('languageModel', what, 'must be a quantised supervised fastText model of version 12 (lid.176.ftz)');
  };
  if (int32() !== FASTTEXT_MAGIC || int32() !== FASTTEXT_VERSION) fail('magic or version');
  // Args: dim, ws, epoch, minCount, neg, wordNgrams, loss, model, bucket, minn, maxn, lrUpdateRate, t.
  const dim = int32();
  at += 16;
  const wordNgrams = int32();
  const loss = int32();
  const model = int32();
  const bucket = int32();
  const minn = int32();
  const maxn = int32();
  at += 12;
  if (wordNgrams !== 1 || loss !== LOSS_HIERARCHICAL_SOFTMAX || model !== MODEL_SUPERVISED || minn < 2) fail('args');

  // Dictionary: entries (word, count, type), words first, then labels; then the pruned buckets.
  const size = int32();
  const nwords = int32();
  const nlabels = int32();
  int64(); // tokens seen in training
  const pruned = int64();
  const decoder = new TextDecoder();
  const words: { text: string; bytes: Uint8Array }[] = [];
  const labelCounts: number[] = [];
  const labels: string[] = [];
  for (let i = 0; i < size; i++) {
    const start = at;
    while (file[at] !== 0) at++;
    const bytes = file.subarray(start, at++);
    const count = int64();
    byte(); // type: word or label, by position here
    if (i < nwords) words.push({ text: decoder.decode(bytes), bytes });
    else {
      labelCounts.push(count);
      labels.push(decoder.decode(bytes).slice(LABEL_PREFIX.length));
    }
  }
  if (pruned <= 0) fail('not pruned');
  // bucketRows[b]: 1 + the input row of n-gram bucket b, 0 for a bucket the pruning dropped.
  const bucketRows = new Int32Array(bucket);
  for (let i = 0; i < pruned; i++) {
    const hashed = int32();
    bucketRows[hashed] = nwords + int32() + 1;
  }

  // The input matrix, product-quantised with quantised norms; the output matrix, dense, one row
  // per label (the tree's internal nodes use the first nlabels - 1).
  if (byte() !== 1) fail('input not quantised');
  const qnorm = byte() === 1;
  const rows = int64();
  if (int64() !== dim) fail('input width');
  const codeSize = int32();
  const codes = file.subarray(at, at + codeSize);
  at += codeSize;
  const productQuantizer = () => {
    const pqDim = int32();
    return { nsubq: int32(), dsub: int32(), lastdsub: int32(), centroids: float32s(pqDim * PQ_CENTROIDS) };
  };
  const pq = productQuantizer();
  let norms: Float32Array | undefined;
  if (qnorm) {
    const normCodes = file.subarray(at, at + rows);
    at += rows;
    const normPq = productQuantizer();
    norms = Float32Array.from(normCodes, (code) => normPq.centroids[code]!);
  }
  if (byte() !== 0) fail('output quantised');
  const outputRows = int64();
  if (int64() !== dim || outputRows !== nlabels) fail('output shape');
  const output = float32s(outputRows * dim);
  if (at !== file.length) fail('trailing bytes');

  // Each input row decoded once: norm * centroid, rounded to float32 as fastText's addcode does.
  const table = new Float32Array(rows * dim);
  for (let row = 0; row < rows; row++) {
    const norm = norms ? norms[row]! : 1;
    for (let m = 0; m < pq.nsubq; m++) {
      const code = codes[pq.nsubq * row + m]!;
      const last = m === pq.nsubq - 1;
      const width = last ? pq.lastdsub : pq.dsub;
      const from = last ? m * PQ_CENTROIDS * pq.dsub + code * pq.lastdsub : (m * PQ_CENTROIDS + code) * pq.dsub;
      for (let n = 0; n < width; n++) table[row * dim + m * pq.dsub + n] = norm * pq.centroids[from + n]!;
    }
  }

  // The Huffman tree of fastText's HierarchicalSoftmaxLoss::buildTree; node i >= nlabels is output row i - nlabels.
  const nodes = 2 * nlabels - 1;
  const left = new Int32Array(nodes).fill(-1);
  const right = new Int32Array(nodes).fill(-1);
  const counts = new Float64Array(nodes).fill(1e15);
  counts.set(labelCounts);
  let leaf = nlabels - 1;
  let next = nlabels;
  for (let node = nlabels; node < nodes; node++) {
    const pick = () => (leaf >= 0 && counts[leaf]! < counts[next]! ? leaf-- : next++);
    const a = pick();
    const b = pick();
    left[node] = a;
    right[node] = b;
    counts[node] = counts[a]! + counts[b]!;
  }

  // Each token's rows summed once (slot s: sums[s * dim ..], rowCounts[s]): the vocabulary's in
  // slots 0..nwords-1, tokens outside it cached in the slots after, until they are all used.
  const slots = nwords + OOV_CACHE_LIMIT;
  const sums = new Float64Array(slots * dim);
  const rowCounts = new Int32Array(slots);
  const addRow = (slot: number, row: number) => {
    const to = slot * dim;
    const from = row * dim;
    for (let k = 0; k < dim; k++) sums[to + k]! += table[from + k]!;
  };
  // `<token>` in UTF-8, written into a buffer reused from token to token.
  const encoder = new TextEncoder();
  let bytes = new Uint8Array(256);
  const encodeBracketed = (token: string): number => {
    if (bytes.length < 3 * token.length + 2) bytes = new Uint8Array(2 * (3 * token.length + 2));
    bytes[0] = 0x3c;
    let length = 1;
    for (; length <= token.length; length++) {
      const c = token.charCodeAt(length - 1);
      if (c >= 0x80) {
        length = 1 + encoder.encodeInto(token, bytes.subarray(1)).written;
        break;
      }
      bytes[length] = c;
    }
    bytes[length] = 0x3e;
    return length + 1;
  };
  /** Adds the rows of the character n-grams of bytes[0, length) to the slot; returns how many. */
  const addNgramRows = (slot: number, length: number): number => {
    let added = 0;
    for (let i = 0; i < length; i++) {
      if ((bytes[i]! & 0xc0) === 0x80) continue;
      let hash = 2166136261;
      for (let j = i, n = 1; j < length && n <= maxn; n++) {
        do {
          // FNV-1a over the bytes, each sign-extended as fastText's hash does.
          hash = Math.imul(hash ^ ((bytes[j]! << 24) >> 24), 16777619);
          j++;
        } while (j < length && (bytes[j]! & 0xc0) === 0x80);
        if (n < minn) continue;
        const row = bucketRows[(hash >>> 0) % bucket]! - 1;
        if (row < 0) continue;
        addRow(slot, row);
        added++;
      }
    }
    return added;
  };
  const fill = (slot: number, token: string) => {
    sums.fill(0, slot * dim, (slot + 1) * dim);
    let rows = 0;
    if (slot < nwords) {
      addRow(slot, slot);
      rows++;
    }
    // `</s>` has no n-grams; a token starting `__label__` is no word at all (fastText skips it).
    if (token !== END_OF_SENTENCE && !(slot >= nwords && token.startsWith(LABEL_PREFIX))) rows += addNgramRows(slot, encodeBracketed(token));
    rowCounts[slot] = rows;
  };

  // Tokens to slots: an open-addressing table of slot + 1 (0: empty) by a hash of the token's
  // UTF-16 code units, computed while the text is scanned, so a token seen before costs no
  // substring and no Map lookup. A hash match is confirmed against the slot's token.
  const tokens: string[] = new Array(slots);
  const tokenHashes = new Int32Array(slots);
  const bits = 32 - Math.clz32(2 * slots - 1);
  const index = new Int32Array(1 << bits);
  const indexMask = (1 << bits) - 1;
  const insert = (slot: number, token: string, hash: number) => {
    tokens[slot] = token;
    tokenHashes[slot] = hash;
    let at = Math.imul(hash, 0x9e3779b1) >>> (32 - bits);
    while (index[at] !== 0) at = (at + 1) & indexMask;
    index[at] = slot + 1;
  };
  const hashOf = (token: string) => {
    let hash = TOKEN_HASH_SEED;
    for (let i = 0; i < token.length; i++) hash = Math.imul(hash ^ token.charCodeAt(i), 16777619);
    return hash;
  };
  const sameToken = (token: string, text: string, start: number, end: number) => {
    if (token.length !== end - start) return false;
    for (let i = 0; i < token.length; i++) if (token.charCodeAt(i) !== text.charCodeAt(start + i)) return false;
    return true;
  };
  words.forEach(({ text }, slot) => {
    insert(slot, text, hashOf(text));
    fill(slot, text);
  });
  let unknown = 0;
  /** The slot of text[start, end), whose hash is `hash`; a token not seen before is given one. */
  const slotOf = (text: string, start: number, end: number, hash: number): number => {
    for (let at = Math.imul(hash, 0x9e3779b1) >>> (32 - bits); ; at = (at + 1) & indexMask) {
      const slot = index[at]! - 1;
      if (slot < 0) break;
      if (tokenHashes[slot] === hash && sameToken(tokens[slot]!, text, start, end)) return slot;
    }
    if (unknown === OOV_CACHE_LIMIT) {
      // Full: forget every token outside the vocabulary.
      index.fill(0);
      for (let slot = 0; slot < nwords; slot++) insert(slot, tokens[slot]!, tokenHashes[slot]!);
      unknown = 0;
    }
    const slot = nwords + unknown++;
    const token = text.slice(start, end);
    insert(slot, token, hash);
    fill(slot, token);
    return slot;
  };
  const endOfSentence = words.findIndex(({ text }) => text === END_OF_SENTENCE);
  if (endOfSentence < 0) fail('no </s>');

  const hidden = new Float64Array(dim);
  const logThreshold = Math.log(1e-5);
  const stdLog = (x: number) => Math.log(x + 1e-5);
  const addSlot = (slot: number) => {
    const base = slot * dim;
    for (let k = 0; k < dim; k++) hidden[k]! += sums[base + k]!;
    return rowCounts[slot]!;
  };
  let best = Number.NEGATIVE_INFINITY;
  let bestLeaf = -1;
  const search = (node: number, score: number): void => {
    if (score < logThreshold || (bestLeaf >= 0 && score < best)) return;
    if (left[node] === -1) {
      if (bestLeaf < 0 || score > best) {
        best = score;
        bestLeaf = node;
      }
      return;
    }
    const base = (node - nlabels) * dim;
    let dot = 0;
    for (let k = 0; k < dim; k++) dot += output[base + k]! * hidden[k]!;
    const p = 1 / (1 + Math.exp(-dot));
    search(left[node]!, score + stdLog(1 - p));
    search(right[node]!, score + stdLog(p));
  };
  return {
    identify(text: string): LanguageGuess {
      hidden.fill(0);
      let inputs = 0;
      let start = -1;
      let hash = TOKEN_HASH_SEED;
      let slot = -1;
      for (let i = 0; i <= text.length; i++) {
        const c = i < text.length ? text.charCodeAt(i) : 0x20;
        if (c > 0x20 || (c !== 0x20 && c !== 0x0a && c !== 0x09 && c !== 0x0d && c !== 0x0b && c !== 0x0c && c !== 0)) {
          if (start < 0) start = i;
          hash = Math.imul(hash ^ c, 16777619);
        } else if (start >= 0) {
          slot = slotOf(text, start, i, hash);
          inputs += addSlot(slot);
          // fastText's getLine stops at `</s>`, the token its reader makes of a line end.
          if (slot === endOfSentence) break;
          start = -1;
          hash = TOKEN_HASH_SEED;
        }
      }
      if (slot !== endOfSentence) inputs += addSlot(endOfSentence);
      for (let k = 0; k < dim; k++) hidden[k]! /= inputs;
      best = Number.NEGATIVE_INFINITY;
      bestLeaf = -1;
      search(nodes - 1, 0);
      return { language: labels[bestLeaf]!, probability: Math.exp(best) };
    },
  };
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
    const paragraphs = duplicates(view.paragraphs, view.hasSurrogates);
    if (paragraphs.countRatio > params.maxDuplicateParagraphRatio)
      return drop('duplicate_paragraphs', `repeated paragraphs ${paragraphs.countRatio.toFixed(3)} > ${params.maxDuplicateParagraphRatio}`);
    if (paragraphs.charRatio > params.maxDuplicateParagraphCharRatio)
      return drop(
        'duplicate_paragraph_chars',
        `characters in repeated paragraphs ${paragraphs.charRatio.toFixed(3)} > ${params.maxDuplicateParagraphCharRatio}`,
      );
    const lines = duplicates(view.nonBlankLines, view.hasSurrogates);
    if (lines.countRatio > params.maxDuplicateLineRatio)
      return drop('duplicate_lines', `repeated lines ${lines.countRatio.toFixed(3)} > ${params.maxDuplicateLineRatio}`);
    if (lines.charRatio > params.maxDuplicateLineCharRatio)
      return drop('duplicate_line_chars', `characters in repeated lines ${lines.charRatio.toFixed(3)} > ${params.maxDuplicateLineCharRatio}`);

    // N-grams are over words as a tokenizer would see them: "insurance?" and "insurance" match.
    const bare: string[] = [];
    for (const word of view.words) if (isCountedWord(word)) bare.push(stripPunctuation(word));
    const words = toWordSequence(bare, view.hasSurrogates);
    for (const { n, maxCharRatio } of params.topNgrams) {
      const fraction = topNgramCharFraction(words, n);
      if (fraction > maxCharRatio) return drop(`top_${n}gram`, `top ${n}-gram characters ${fraction.toFixed(3)} > ${maxCharRatio}`);
    }
    // The repeated-n-gram fraction never grows with n: a repeated (n+1)-gram at s (seen before at
    // s') holds the repeated n-grams at s and s + 1 (seen at s' and s' + 1), which cover the same
    // words. So a limit at or above a fraction already measured for a smaller n passes without
    // being counted: with the defaults, a document with at most 10% of its characters in repeated
    // 5-grams (most prose) skips n = 6..10, about a third of the rule's time on the Debian sample.
    const measured: { n: number; fraction: number }[] = [];
    for (const { n, maxCharRatio } of params.duplicateNgrams) {
      if (measured.some((m) => m.n <= n && m.fraction <= maxCharRatio)) continue;
      const fraction = duplicateNgramCharFraction(words, n);
      if (fraction > maxCharRatio) return drop(`duplicate_${n}gram`, `characters in repeated ${n}-grams ${fraction.toFixed(3)} > ${maxCharRatio}`);
      measured.push({ n, fraction });
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
    const repeated = duplicates(lines, view.hasSurrogates).charRatio;
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

/**
 * Repeats of an earlier element, by count (over elements) and by characters (over all elements'
 * characters). `surrogates`: whether the text the elements come from has any surrogate code
 * unit; without one, an element's length in code points is its length, and is not counted.
 */
function duplicates(elements: readonly string[], surrogates = true): { countRatio: number; charRatio: number } {
  const seen = new Set<string>();
  let repeats = 0;
  let repeatChars = 0;
  let totalChars = 0;
  for (const element of elements) {
    const chars = surrogates ? charLength(element) : element.length;
    totalChars += chars;
    // One lookup: adding an element already present leaves the size as it was.
    const size = seen.size;
    seen.add(element);
    if (seen.size === size) {
      repeats++;
      repeatChars += chars;
    }
  }
  return {
    countRatio: elements.length === 0 ? 0 : repeats / elements.length,
    charRatio: totalChars === 0 ? 0 : repeatChars / totalChars,
  };
}
