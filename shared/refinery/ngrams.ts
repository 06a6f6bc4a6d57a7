/**
 * Word n-gram statistics for the repetition rule, exact and in time linear in the number of words.
 *
 * Each distinct word gets a small integer id. For one n, every position's n-gram is found in a
 * hash table of positions (open addressing over typed arrays) keyed by a rolling polynomial hash
 * of its ids; two positions are the same n-gram only when their n ids are equal, so a hash
 * collision costs a comparison and never miscounts. Per position that is O(1) expected work plus
 * an n-id comparison on a hit; a 100,000-word document takes milliseconds per n. A naive version
 * keyed by the joined words is in the tests, and agrees.
 */
import { charLength } from './text.ts';

/** 2^31 - 1, prime; with a base below 2^21 every product stays below 2^53, exact in a double. */
const PRIME = 2_147_483_647;
const BASE = 1_000_003;
/** 2^32 / golden ratio: spreads the hash over the table's slots (Fibonacci hashing). */
const SPREAD = 0x9e3779b1;

/** A document's words as ids, with each word's length in characters. */
export interface WordSequence {
  readonly ids: Int32Array;
  readonly chars: Int32Array;
  /** Sum of `chars`. */
  readonly totalChars: number;
}

export function toWordSequence(words: readonly string[]): WordSequence {
  const idOf = new Map<string, number>();
  const ids = new Int32Array(words.length);
  const chars = new Int32Array(words.length);
  let totalChars = 0;
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!;
    let id = idOf.get(word);
    if (id === undefined) {
      // Ids start at 1 so that no word hashes like an absent one.
      id = idOf.size + 1;
      idOf.set(word, id);
    }
    ids[i] = id;
    chars[i] = charLength(word);
    totalChars += chars[i]!;
  }
  return { ids, chars, totalChars };
}

/**
 * For each start position of an n-gram, the first position where the same n-gram starts (itself
 * when it is the first). Length: words - n + 1, or 0 when the document is shorter than n.
 */
export function firstOccurrences(ids: Int32Array, n: number): Int32Array {
  const count = ids.length - n + 1;
  if (n < 1 || count <= 0) return new Int32Array(0);
  let bits = 1;
  while (1 << bits < count * 2) bits++;
  const shift = 32 - bits;
  const mask = (1 << bits) - 1;
  // slots[i] = 1 + the first position of an n-gram, 0 for an empty slot.
  const slots = new Int32Array(1 << bits);
  const first = new Int32Array(count);

  // base^(n-1), to take the leaving word out of the rolling hash.
  let lead = 1;
  for (let i = 1; i < n; i++) lead = (lead * BASE) % PRIME;
  let hash = 0;
  for (let i = 0; i < n; i++) hash = (hash * BASE + ids[i]!) % PRIME;

  for (let start = 0; start < count; start++) {
    if (start > 0) {
      const leaving = (ids[start - 1]! * lead) % PRIME;
      hash = (((hash - leaving + PRIME) % PRIME) * BASE + ids[start + n - 1]!) % PRIME;
    }
    let slot = Math.imul(hash, SPREAD) >>> shift;
    for (;;) {
      const held = slots[slot]!;
      if (held === 0) {
        slots[slot] = start + 1;
        first[start] = start;
        break;
      }
      if (sameNgram(ids, held - 1, start, n)) {
        first[start] = held - 1;
        break;
      }
      slot = (slot + 1) & mask;
    }
  }
  return first;
}

function sameNgram(ids: Int32Array, a: number, b: number, n: number): boolean {
  for (let k = 0; k < n; k++) if (ids[a + k] !== ids[b + k]) return false;
  return true;
}

/**
 * The share of the words' characters taken by the most frequent n-gram: its characters times
 * its count, over all the words' characters. 0 when no n-gram occurs twice: a single occurrence
 * is no repetition. Of n-grams tied on count, the one seen first is taken.
 */
export function topNgramCharFraction(words: WordSequence, n: number): number {
  if (words.totalChars === 0) return 0;
  const first = firstOccurrences(words.ids, n);
  const counts = new Int32Array(first.length);
  let topCount = 1;
  let topStart = -1;
  for (let start = 0; start < first.length; start++) {
    const count = ++counts[first[start]!]!;
    if (count > topCount || (count === topCount && topStart >= 0 && first[start]! < topStart)) {
      topCount = count;
      topStart = first[start]!;
    }
  }
  if (topStart < 0) return 0;
  let ngramChars = 0;
  for (let i = topStart; i < topStart + n; i++) ngramChars += words.chars[i]!;
  return (ngramChars * topCount) / words.totalChars;
}

/**
 * The share of the words' characters that lie in an n-gram seen earlier in the document. Each
 * word counts once however many repeated n-grams cover it, and the first occurrence of an n-gram
 * is not a duplicate. Positions only grow, so a "covered up to" mark makes this one pass.
 */
export function duplicateNgramCharFraction(words: WordSequence, n: number): number {
  if (words.totalChars === 0) return 0;
  const first = firstOccurrences(words.ids, n);
  let duplicateChars = 0;
  let coveredUntil = 0;
  for (let start = 0; start < first.length; start++) {
    if (first[start] === start) continue;
    for (let i = Math.max(start, coveredUntil); i < start + n; i++) duplicateChars += words.chars[i]!;
    coveredUntil = start + n;
  }
  return duplicateChars / words.totalChars;
}
