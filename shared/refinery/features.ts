/**
 * Hashed word features of a document, the input of the refinery's quality classifier.
 *
 * THE SHARED DEFINITION (v2). batch-jobs/refinery-classifier/features.py computes the same thing
 * for training; both files carry this text, and test/unit/refinery-classifier.test.ts checks that
 * both give identical indices and weights for the same texts.
 *
 * 1. Normalise: Unicode NFKC, then lower case by Unicode's default full case mapping with no locale
 *    (Python's str.lower, JavaScript's String.prototype.toLowerCase).
 * 2. Tokens: the maximal runs of code points whose General Category is a letter (L*), a mark (M*)
 *    or a number (N*); every other code point separates tokens. Only the first `maxTokens` tokens
 *    are used.
 * 3. Words: every token (unigram) of the first `maxTokens` tokens; no bigrams.
 * 4. Bucket: FNV-1a 32-bit (offset basis 0x811C9DC5, prime 0x01000193) over the word's UTF-8
 *    bytes, modulo `buckets`. Tokens never hold a surrogate, so the UTF-8 is always well defined.
 * 5. Weights: presence. Every bucket that at least one word falls in has weight 1.0 (exact in
 *    float32 in both languages), however often its words occur. A document is its (bucket, 1.0)
 *    pairs in ascending bucket order; a document without tokens has none.
 *
 * Why presence of unigrams (v1 was unigrams + bigrams weighted by their frequency): the model's
 * weighted sum is then a sum over the distinct words a document holds, so each piece of evidence
 * adds to the score instead of being diluted by the rest of the page, and repeating a word adds
 * nothing. features.py and model.py's header give the measured figures.
 *
 * Unicode versions: Python 3.11's database is Unicode 14.0, Node 22's is newer. For every code
 * point assigned in Unicode 14.0 the two agree on the category, the lower case and the NFKC form
 * (checked over the whole code space when this was written); a character assigned later can be a
 * token character here and a separator in Python. Such characters are a vanishing part of web
 * text, and a difference only moves a few words of the documents that hold them.
 *
 * Cost: one pass over the text for the normalisation and the tokens, then the bytes of each
 * word hashed once, UTF-8 bytes taken from the code points directly.
 */
import { ConfigError } from '../errors.ts';

export const FNV_OFFSET_BASIS = 0x811c9dc5;
export const FNV_PRIME = 0x01000193;
export const MAX_BUCKETS = 1 << 22;
export const MAX_TOKENS_LIMIT = 100_000;
export const DEFAULT_BUCKETS = 1 << 18;
export const DEFAULT_MAX_TOKENS = 2000;

/** What turns a text into features: a model is only valid with the settings it was trained with. */
export interface FeatureSettings {
  /** Hash buckets (rows of the model's embedding table), 2 to 2^22. */
  readonly buckets: number;
  /** Tokens read from the start of each document, 1 to 100,000. */
  readonly maxTokens: number;
}

/** A document's features: its buckets in ascending order and their weights. */
export interface DocumentFeatures {
  readonly indices: Int32Array;
  readonly weights: Float32Array;
}

/** Checks settings (as received from a job result, say); throws ConfigError naming the field. */
export function checkFeatureSettings(settings: FeatureSettings): FeatureSettings {
  const { buckets, maxTokens } = settings;
  if (!Number.isInteger(buckets) || buckets < 2 || buckets > MAX_BUCKETS) {
    throw new ConfigError('buckets', buckets, `must be an integer from 2 to ${MAX_BUCKETS}`);
  }
  if (!Number.isInteger(maxTokens) || maxTokens < 1 || maxTokens > MAX_TOKENS_LIMIT) {
    throw new ConfigError('maxTokens', maxTokens, `must be an integer from 1 to ${MAX_TOKENS_LIMIT}`);
  }
  return settings;
}

const TOKEN = /[\p{L}\p{M}\p{N}]+/gu;

/** Steps 1 and 2: the first `maxTokens` tokens of `text`. */
export function tokenize(text: string, maxTokens: number = DEFAULT_MAX_TOKENS): string[] {
  const tokens: string[] = [];
  if (maxTokens < 1) return tokens;
  const normalized = text.normalize('NFKC').toLowerCase();
  // A fresh RegExp per call: a shared /g one carries lastIndex between callers.
  const pattern = new RegExp(TOKEN);
  for (let match = pattern.exec(normalized); match !== null; match = pattern.exec(normalized)) {
    tokens.push(match[0]);
    if (tokens.length === maxTokens) break;
  }
  return tokens;
}

/** FNV-1a state after the UTF-8 bytes of `text`, starting from `hash` (unsigned 32-bit). */
export function fnv1a32Continue(hash: number, text: string): number {
  let h = hash;
  for (let i = 0; i < text.length; i++) {
    let cp = text.charCodeAt(i);
    if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < text.length) {
      const low = text.charCodeAt(i + 1);
      if (low >= 0xdc00 && low <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
        i++;
      }
    }
    // A lone surrogate (never inside a token) is encoded as U+FFFD, as TextEncoder does.
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
    if (cp < 0x80) {
      h = Math.imul(h ^ cp, FNV_PRIME);
    } else if (cp < 0x800) {
      h = Math.imul(h ^ (0xc0 | (cp >> 6)), FNV_PRIME);
      h = Math.imul(h ^ (0x80 | (cp & 0x3f)), FNV_PRIME);
    } else if (cp < 0x10000) {
      h = Math.imul(h ^ (0xe0 | (cp >> 12)), FNV_PRIME);
      h = Math.imul(h ^ (0x80 | ((cp >> 6) & 0x3f)), FNV_PRIME);
      h = Math.imul(h ^ (0x80 | (cp & 0x3f)), FNV_PRIME);
    } else {
      h = Math.imul(h ^ (0xf0 | (cp >> 18)), FNV_PRIME);
      h = Math.imul(h ^ (0x80 | ((cp >> 12) & 0x3f)), FNV_PRIME);
      h = Math.imul(h ^ (0x80 | ((cp >> 6) & 0x3f)), FNV_PRIME);
      h = Math.imul(h ^ (0x80 | (cp & 0x3f)), FNV_PRIME);
    }
  }
  return h >>> 0;
}

/** FNV-1a, 32 bits, of the UTF-8 bytes of `text`, as an unsigned integer. */
export function fnv1a32(text: string): number {
  return fnv1a32Continue(FNV_OFFSET_BASIS, text);
}

/** Steps 1-5: the features of `text` under `settings`. */
export function documentFeatures(text: string, settings: FeatureSettings): DocumentFeatures {
  const tokens = tokenize(text, settings.maxTokens);
  const n = tokens.length;
  if (n === 0) return { indices: new Int32Array(0), weights: new Float32Array(0) };
  const buckets = settings.buckets;
  const all = new Int32Array(n);
  for (let i = 0; i < n; i++) all[i] = fnv1a32(tokens[i]!) % buckets;
  all.sort();
  let distinct = 0;
  for (let i = 0; i < n; i++) if (i === 0 || all[i] !== all[i - 1]) all[distinct++] = all[i]!;
  return { indices: all.slice(0, distinct), weights: new Float32Array(distinct).fill(1) };
}
