/**
 * Word n-gram statistics for the repetition rule, exact and in time linear in the number of words.
 *
 * Each distinct word gets a small integer id. The n-grams are found for n = 1, 2, 3, ... in turn:
 * two positions start the same n-gram exactly when they start the same (n-1)-gram and the word
 * n-1 places on is the same. So with each (n-1)-gram named by the position where it first occurs,
 * an n-gram is the pair (that position, the next word's id), looked up in a hash table of
 * positions (open addressing over typed arrays). Two positions are the same n-gram only when both
 * numbers of the pair are equal, so a hash collision costs a comparison and never miscounts. Each
 * n costs O(1) expected work per position whatever n is, and the rule's nine n (2 to 10) share
 * the chain (ngramFirsts caches it per word sequence). A naive version keyed by the joined words
 * is in the tests, and agrees.
 */
import { charLength } from './text.ts';

/** 2^32 / golden ratio and a second odd constant: spread the pair over the table's slots. */
const SPREAD = 0x9e3779b1;
const SPREAD_NEXT = 0x85ebca77;
/** FNV-1a's 32-bit offset basis and prime, for word hashes. */
const FNV_OFFSET = 0x811c9dc5 | 0;
const FNV_PRIME = 0x01000193;

/** A document's words as ids, with each word's length in characters. */
export interface WordSequence {
  readonly ids: Int32Array;
  readonly chars: Int32Array;
  /** Sum of `chars`. */
  readonly totalChars: number;
}

/**
 * The ids and lengths of `words`. `surrogates`: whether any word may hold a surrogate code unit;
 * without one a word's length in code points is its length, and is not counted.
 */
export function toWordSequence(words: readonly string[], surrogates = true): WordSequence {
  const count = words.length;
  const ids = new Int32Array(count);
  const chars = new Int32Array(count);
  // charsOfId[id]: a word's length, counted once per distinct word.
  const charsOfId = new Int32Array(count + 1);
  // Distinct words by an FNV-1a hash of their code units in an open-addressing table: slots hold
  // ids, distinct[id - 1] the word, compared whole on a hash match. Cheaper than a Map for the
  // freshly split words (whose hashes no engine has cached yet); the ids are the same, 1, 2, ...
  // in order of first occurrence.
  let bits = 4;
  while (1 << bits < count * 2) bits++;
  const mask = (1 << bits) - 1;
  const slots = new Int32Array(1 << bits);
  const distinct: string[] = [];
  let totalChars = 0;
  for (let i = 0; i < count; i++) {
    const word = words[i]!;
    let hash = FNV_OFFSET;
    for (let j = 0; j < word.length; j++) hash = Math.imul(hash ^ word.charCodeAt(j), FNV_PRIME);
    let slot = (hash ^ (hash >>> 15)) & mask;
    let id: number;
    for (;;) {
      const held = slots[slot]!;
      if (held === 0) {
        distinct.push(word);
        id = distinct.length;
        slots[slot] = id;
        charsOfId[id] = surrogates ? charLength(word) : word.length;
        break;
      }
      if (distinct[held - 1] === word) {
        id = held;
        break;
      }
      slot = (slot + 1) & mask;
    }
    ids[i] = id;
    chars[i] = charsOfId[id]!;
    totalChars += chars[i]!;
  }
  return { ids, chars, totalChars };
}

/**
 * For each start position of an n-gram, the first position where the same n-gram starts (itself
 * when it is the first). Length: words - n + 1, or 0 when the document is shorter than n.
 */
export function firstOccurrences(ids: Int32Array, n: number): Int32Array {
  if (n < 1 || ids.length - n + 1 <= 0) return new Int32Array(0);
  let first = extendFirsts(undefined, ids, 1);
  for (let k = 2; k <= n; k++) first = extendFirsts(first, ids, k);
  return first;
}

/** The n-gram firsts of a sequence, computed once per n along the chain and kept with it. */
const firstsOf = new WeakMap<WordSequence, Int32Array[]>();

/** firstOccurrences(words.ids, n), sharing the chain 1..n between calls on the same sequence. */
export function ngramFirsts(words: WordSequence, n: number): Int32Array {
  if (n < 1 || words.ids.length - n + 1 <= 0) return new Int32Array(0);
  let chain = firstsOf.get(words);
  if (!chain) {
    chain = [];
    firstsOf.set(words, chain);
  }
  // chain[k - 1] holds the k-gram firsts.
  while (chain.length < n) chain.push(extendFirsts(chain[chain.length - 1], words.ids, chain.length + 1));
  return chain[n - 1]!;
}

/**
 * The n-gram firsts from the (n-1)-gram firsts `previous` (absent for n = 1, where every position
 * is the same empty prefix): the n-gram at `start` is the pair (previous[start], ids[start + n - 1]).
 */
function extendFirsts(previous: Int32Array | undefined, ids: Int32Array, n: number): Int32Array {
  const count = ids.length - n + 1;
  if (count <= 0) return new Int32Array(0);
  if (previous === undefined) return unigramFirsts(ids);
  const first = new Int32Array(count);
  // An n-gram whose (n-1)-gram prefix starts no other n-gram occurs once: it is its own first,
  // and no other n-gram can equal it, so it stays out of the table. Past the first few n most
  // n-grams of prose are such, and the table holds only the prefixes that repeat.
  const prefixes = scratchPrefixes(previous.length);
  for (let start = 0; start < count; start++) prefixes[previous[start]!]!++;
  let repeated = 0;
  for (let start = 0; start < count; start++) if (prefixes[previous[start]!]! > 1) repeated++;
  if (repeated === 0) {
    for (let start = 0; start < count; start++) first[start] = start;
    return first;
  }
  let bits = 1;
  while (1 << bits < repeated * 2) bits++;
  const shift = 32 - bits;
  const mask = (1 << bits) - 1;
  // slots[i] = 1 + the first position of an n-gram, 0 for an empty slot.
  const slots = scratchSlots(1 << bits);
  const last = n - 1;
  for (let start = 0; start < count; start++) {
    const prefix: number = previous[start]!;
    if (prefixes[prefix] === 1) {
      first[start] = start;
      continue;
    }
    const next = ids[start + last]!;
    let slot: number = (Math.imul(prefix, SPREAD) ^ Math.imul(next, SPREAD_NEXT)) >>> 0;
    slot = Math.imul(slot ^ (slot >>> 15), SPREAD) >>> shift;
    for (;;) {
      const held: number = slots[slot]!;
      if (held === 0) {
        slots[slot] = start + 1;
        first[start] = start;
        break;
      }
      const at = held - 1;
      if (ids[at + last] === next && previous[at] === prefix) {
        first[start] = at;
        break;
      }
      slot = (slot + 1) & mask;
    }
  }
  return first;
}

/**
 * Zeroed scratch arrays for extendFirsts, reused between calls (one runs at a time): the tables
 * are garbage the moment a call returns, and allocating them each time kept the collector busy.
 */
let prefixScratch = new Int32Array(1 << 12);
let slotScratch = new Int32Array(1 << 12);

function scratchPrefixes(length: number): Int32Array {
  if (prefixScratch.length < length) prefixScratch = new Int32Array(Math.max(length, 2 * prefixScratch.length));
  prefixScratch.fill(0, 0, length);
  return prefixScratch;
}

function scratchSlots(length: number): Int32Array {
  if (slotScratch.length < length) slotScratch = new Int32Array(Math.max(length, 2 * slotScratch.length));
  slotScratch.fill(0, 0, length);
  return slotScratch;
}

/**
 * The 1-gram firsts: each position's first position of the same id. Ids from toWordSequence are
 * 1..distinct words, so an array indexed by id does it; other ids go through a hash table.
 */
function unigramFirsts(ids: Int32Array): Int32Array {
  const count = ids.length;
  const first = new Int32Array(count);
  let min = 0;
  let max = 0;
  for (let i = 0; i < count; i++) {
    const id = ids[i]!;
    if (id < min) min = id;
    if (id > max) max = id;
  }
  if (min >= 0 && max <= 4 * count + 16) {
    // firstOfId[id] = 1 + the first position of id, 0 before it is seen.
    const firstOfId = new Int32Array(max + 1);
    for (let i = 0; i < count; i++) {
      const id = ids[i]!;
      const seen = firstOfId[id]!;
      if (seen === 0) {
        firstOfId[id] = i + 1;
        first[i] = i;
      } else first[i] = seen - 1;
    }
    return first;
  }
  let bits = 1;
  while (1 << bits < count * 2) bits++;
  const shift = 32 - bits;
  const mask = (1 << bits) - 1;
  const slots = new Int32Array(1 << bits);
  for (let start = 0; start < count; start++) {
    const next = ids[start]!;
    let slot = Math.imul(next, SPREAD_NEXT) >>> 0;
    slot = Math.imul(slot ^ (slot >>> 15), SPREAD) >>> shift;
    for (;;) {
      const held = slots[slot]!;
      if (held === 0) {
        slots[slot] = start + 1;
        first[start] = start;
        break;
      }
      if (ids[held - 1] === next) {
        first[start] = held - 1;
        break;
      }
      slot = (slot + 1) & mask;
    }
  }
  return first;
}

/**
 * The share of the words' characters taken by the most frequent n-gram: its characters times
 * its count, over all the words' characters. 0 when no n-gram occurs twice: a single occurrence
 * is no repetition. Of n-grams tied on count, the one seen first is taken.
 */
export function topNgramCharFraction(words: WordSequence, n: number): number {
  if (words.totalChars === 0) return 0;
  const first = ngramFirsts(words, n);
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
  const first = ngramFirsts(words, n);
  let duplicateChars = 0;
  let coveredUntil = 0;
  for (let start = 0; start < first.length; start++) {
    if (first[start] === start) continue;
    for (let i = Math.max(start, coveredUntil); i < start + n; i++) duplicateChars += words.chars[i]!;
    coveredUntil = start + n;
  }
  return duplicateChars / words.totalChars;
}
