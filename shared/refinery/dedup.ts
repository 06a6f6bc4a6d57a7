/**
 * Deduplication for the refinery: exact duplicates by a hash of the normalised text, and near
 * duplicates by MinHash with locality-sensitive hashing (LSH) over bands.
 *
 * What it guarantees:
 * 1. Exact: two documents whose normalised texts (normalize.ts) are equal are duplicates; the
 *    sha256 of the normalised text is the key, and of each group the smallest id is kept.
 * 2. Near: word 5-gram shingles of the normalised text, 112 MinHash values as 14 bands x 8 rows.
 *    Two documents are a candidate pair when all 8 values of at least one band are equal. Pairs
 *    are merged transitively (union-find): A~B and B~C put A, B and C in one cluster even when A
 *    and C share no band.
 * 3. Survivor: of each cluster the smallest id (JavaScript string order) is kept, whatever the
 *    input order; every other member is returned with the id kept in its place.
 * 4. The step that compares all shards reads no text: each shard writes one compact binary buffer
 *    (encodeSignatureShard) of ids and band keys, about 1.5 % of the text's bytes for 500-word
 *    documents.
 *
 * The 14 x 8 choice and what it catches. A band matches with probability s^8 for a pair of
 * Jaccard similarity s, so the pair is found with probability 1 - (1 - s^8)^14. The curve's
 * midpoint (1/14)^(1/8) is about 0.72: the scheme targets Jaccard of roughly 0.72-0.75, not 0.8.
 *   s = 0.50: 5.3 %   s = 0.70: 56.5 %   s = 0.75: 77.2 %   s = 0.80: 92.4 %   s = 0.85: 98.8 %
 * So about one pair in 13 at exactly s = 0.8 is missed (95 % is reached from s = 0.82), and about
 * one pair in 19 at s = 0.5 is still merged (0.9 % at s = 0.4).
 *
 * Hashing, and how it collides.
 * - Each shingle is hashed by xxHash32 under two seeds over its UTF-8 bytes, both in one pass
 *   over the bytes (xxHash32Pair below, plain JavaScript; the tests check it bit for bit against
 *   xxhash-wasm's h32Raw, which it replaced to save two WebAssembly calls and a subarray per
 *   shingle). The pair (lo, hi)
 *   is the shingle's 64-bit identity: two distinct shingles agree on all 112 values only if both
 *   32-bit hashes collide, about 2^-63 per pair of shingles (one bit of hi is forced odd below).
 *   A single 64-bit xxHash64 would be as good, but it returns a BigInt, which made signatures four
 *   times slower; modular permutations ((a h + b) mod (2^61 - 1)) in BigInt slower still.
 * - The 112 hash functions are g_i = fmix32(lo + i * (hi | 1)) mod 2^32 (double hashing, then
 *   MurmurHash3's 32-bit finaliser, a bijection with full avalanche). For one function, two
 *   distinct shingles collide with probability about 2^-32, so a MinHash value is shared by chance
 *   about once in 2^32 / (shingles per document) comparisons: for 500-word documents a bias of
 *   ~1e-7 in the estimated Jaccard, far below the sampling error of 112 values (sd ~0.04).
 * - Signatures are Uint32Array(112): 448 bytes, kept per shard (signatureOf below), which is 15 %
 *   of a 500-word document. The global buffer instead holds one 24-bit key per band (42 bytes).
 *   24 bits collide by chance: among N documents about 14 * N(N-1)/2 / 2^24 spurious key matches
 *   (42 at N = 10^4, 4,200 at 10^5). bucketPairs therefore confirms each bucket against the full
 *   signatures when they are given, splitting it by the exact 8 rows, so the result is exactly the
 *   14 x 8 rule; without them (signatureOf omitted) a spurious key match merges two documents.
 *
 * Text with fewer than 5 words is one shingle (all its words); an empty text has no shingle and
 * its signature is all 0xffffffff, so empty documents match each other (they are exact duplicates
 * anyway, and exact dedup runs first).
 */
import { ConfigError } from '../errors.ts';
import { sha256Hex } from '../json.ts';
import { normalizedUtf8, normalizeText } from './normalize.ts';

export const SHINGLE_WORDS = 5;
export const MINHASH_BANDS = 14;
export const MINHASH_ROWS = 8;
export const MINHASH_VALUES = MINHASH_BANDS * MINHASH_ROWS;
/** Bytes of each band key in the global buffer (24 bits; see the module comment for collisions). */
export const BAND_KEY_BYTES = 3;

const SEED_LO = 0x5bd1e995;
const SEED_HI = 0x27d4eb2f;

/** A document as the refinery sees it: its id (unique in a run) and its text. */
export interface RefineryDocument {
  readonly id: string;
  readonly text: string;
}

/** A removed document and the id kept in its place. */
export interface RemovedDuplicate {
  readonly id: string;
  readonly keptId: string;
}

/** What a dedup pass keeps and removes; `kept` in id order, `removed` in id order. */
export interface DedupResult {
  readonly kept: string[];
  readonly removed: RemovedDuplicate[];
}

// ---------------------------------------------------------------------------------------------
// Exact duplicates

/** The exact-dedup key of a text: sha256 (hex) of its normalised form. */
export function exactKey(text: string): string {
  return sha256Hex(normalizeText(text));
}

/** Exact duplicates by normalised text: one document per key, the smallest id. */
export function exactDuplicates(documents: readonly RefineryDocument[]): DedupResult {
  checkDocuments(documents);
  const groups = new Map<string, string[]>();
  for (const document of documents) {
    const key = exactKey(document.text);
    const group = groups.get(key);
    if (group) group.push(document.id);
    else groups.set(key, [document.id]);
  }
  const kept: string[] = [];
  const removed: RemovedDuplicate[] = [];
  for (const ids of groups.values()) {
    const keptId = smallest(ids);
    kept.push(keptId);
    for (const id of ids) if (id !== keptId) removed.push({ id, keptId });
  }
  return { kept: kept.sort(compareIds), removed: removed.sort((a, b) => compareIds(a.id, b.id)) };
}

// ---------------------------------------------------------------------------------------------
// MinHash signatures

/** Computes MinHash signatures; one per process is enough (it holds only scratch space). */
export interface MinHasher {
  /** The 112 MinHash values of the text's normalised word 5-grams. */
  signature(text: string): Uint32Array;
}

/** A MinHasher. Asynchronous because it once loaded a WebAssembly module; callers still await it. */
export async function createMinHasher(): Promise<MinHasher> {
  const pair = new Uint32Array(2);
  return {
    signature(text: string): Uint32Array {
      const signature = new Uint32Array(MINHASH_VALUES).fill(0xffffffff);
      // The normalised text's UTF-8 bytes and word starts (byte offsets; exactly one space between words).
      const { bytes, starts } = normalizedUtf8(text);
      if (bytes.length === 0) return signature;
      const words = starts.length;
      const shingles = Math.max(1, words - SHINGLE_WORDS + 1);
      for (let first = 0; first < shingles; first++) {
        const last = first + SHINGLE_WORDS;
        const end = last < words ? starts[last]! - 1 : bytes.length;
        xxHash32Pair(bytes, starts[first]!, end, SEED_LO, SEED_HI, pair);
        let value = pair[0]! | 0;
        const step = pair[1]! | 1;
        for (let i = 0; i < MINHASH_VALUES; i++) {
          const hashed = fmix32(value);
          if (hashed < signature[i]!) signature[i] = hashed;
          value = (value + step) | 0;
        }
      }
      return signature;
    },
  };
}

const PRIME32_1 = 0x9e3779b1;
const PRIME32_2 = 0x85ebca77;
const PRIME32_3 = 0xc2b2ae3d;
const PRIME32_4 = 0x27d4eb2f;
const PRIME32_5 = 0x165667b1;

/**
 * xxHash32 (Yann Collet's reference algorithm) of bytes[start, end) under two seeds, computed in
 * one pass: out[0] under seedA, out[1] under seedB, each equal to xxhash-wasm's h32Raw of that
 * subarray and seed. All arithmetic is modulo 2^32 (Math.imul, | 0).
 */
export function xxHash32Pair(bytes: Uint8Array, start: number, end: number, seedA: number, seedB: number, out: Uint32Array): void {
  const length = end - start;
  let at = start;
  let a: number;
  let b: number;
  if (length >= 16) {
    let a1 = (seedA + PRIME32_1 + PRIME32_2) | 0;
    let a2 = (seedA + PRIME32_2) | 0;
    let a3 = seedA | 0;
    let a4 = (seedA - PRIME32_1) | 0;
    let b1 = (seedB + PRIME32_1 + PRIME32_2) | 0;
    let b2 = (seedB + PRIME32_2) | 0;
    let b3 = seedB | 0;
    let b4 = (seedB - PRIME32_1) | 0;
    const limit = end - 16;
    while (at <= limit) {
      const w1 = readUint32(bytes, at);
      const w2 = readUint32(bytes, at + 4);
      const w3 = readUint32(bytes, at + 8);
      const w4 = readUint32(bytes, at + 12);
      a1 = round(a1, w1);
      a2 = round(a2, w2);
      a3 = round(a3, w3);
      a4 = round(a4, w4);
      b1 = round(b1, w1);
      b2 = round(b2, w2);
      b3 = round(b3, w3);
      b4 = round(b4, w4);
      at += 16;
    }
    a = (rotl(a1, 1) + rotl(a2, 7) + rotl(a3, 12) + rotl(a4, 18)) | 0;
    b = (rotl(b1, 1) + rotl(b2, 7) + rotl(b3, 12) + rotl(b4, 18)) | 0;
  } else {
    a = (seedA + PRIME32_5) | 0;
    b = (seedB + PRIME32_5) | 0;
  }
  a = (a + length) | 0;
  b = (b + length) | 0;
  for (; at + 4 <= end; at += 4) {
    const word = Math.imul(readUint32(bytes, at), PRIME32_3);
    a = Math.imul(rotl((a + word) | 0, 17), PRIME32_4);
    b = Math.imul(rotl((b + word) | 0, 17), PRIME32_4);
  }
  for (; at < end; at++) {
    const byte = Math.imul(bytes[at]!, PRIME32_5);
    a = Math.imul(rotl((a + byte) | 0, 11), PRIME32_1);
    b = Math.imul(rotl((b + byte) | 0, 11), PRIME32_1);
  }
  out[0] = avalanche(a);
  out[1] = avalanche(b);
}

function readUint32(bytes: Uint8Array, at: number): number {
  return bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24);
}

function rotl(value: number, bits: number): number {
  return (value << bits) | (value >>> (32 - bits));
}

function round(accumulator: number, word: number): number {
  return Math.imul(rotl((accumulator + Math.imul(word, PRIME32_2)) | 0, 13), PRIME32_1);
}

function avalanche(input: number): number {
  let h = input ^ (input >>> 15);
  h = Math.imul(h, PRIME32_2);
  h ^= h >>> 13;
  h = Math.imul(h, PRIME32_3);
  return (h ^ (h >>> 16)) >>> 0;
}

/** MurmurHash3's 32-bit finaliser: a bijection on 32 bits with full avalanche. */
function fmix32(input: number): number {
  let h = input ^ (input >>> 16);
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** The estimated Jaccard similarity of two signatures: the share of equal values. */
export function estimatedJaccard(a: Uint32Array, b: Uint32Array): number {
  checkSignature(a, 'a');
  checkSignature(b, 'b');
  let equal = 0;
  for (let i = 0; i < MINHASH_VALUES; i++) if (a[i] === b[i]) equal++;
  return equal / MINHASH_VALUES;
}

/** One 24-bit key per band: a hash of the band's 8 values (equal bands give equal keys). */
export function bandKeys(signature: Uint32Array): Uint32Array {
  checkSignature(signature, 'signature');
  const keys = new Uint32Array(MINHASH_BANDS);
  for (let band = 0; band < MINHASH_BANDS; band++) {
    let h = Math.imul(band + 1, 0x9e3779b1);
    for (let row = 0; row < MINHASH_ROWS; row++) h = (fmix32(h ^ signature[band * MINHASH_ROWS + row]!) + 0x7f4a7c15) | 0;
    keys[band] = fmix32(h) >>> 8;
  }
  return keys;
}

// ---------------------------------------------------------------------------------------------
// The compact record the global step reads, and its serialisation

/** What the global step knows of a document: its id and its 14 band keys (no text). */
export interface SignatureRecord {
  readonly id: string;
  readonly bandKeys: Uint32Array;
}

const MAGIC = [0x52, 0x4d, 0x48, 0x31]; // "RMH1": refinery MinHash, format 1
const HEADER_BYTES = 12;

/**
 * One shard's records as one buffer, records sorted by id (so equal inputs give equal bytes):
 *
 *   "RMH1" | u8 bands (14) | u8 key bytes (3) | u16 zero | u32 count (little-endian)
 *   ids, front-coded in UTF-8: per record varint(bytes shared with the previous id) varint(rest) rest
 *   keys: count x 14 x 3 bytes, little-endian
 *
 * Front coding makes a shard's ids cheap: "cc-2024-10/00042/doc-0001234" after "...doc-0001233"
 * costs 3 bytes. The whole is about 46 bytes per document, against ~3,000 for 500 words of text.
 */
export function encodeSignatureShard(records: readonly SignatureRecord[]): Uint8Array {
  const sorted = [...records].sort((a, b) => compareIds(a.id, b.id));
  const encoder = new TextEncoder();
  const idBytes: number[] = [];
  let previous = new Uint8Array(0);
  sorted.forEach((record, i) => {
    if (typeof record.id !== 'string' || record.id === '') throw new ConfigError(`records[${i}].id`, record.id, 'must be a non-empty string');
    if (i > 0 && sorted[i - 1]!.id === record.id) throw new ConfigError(`records[${i}].id`, record.id, 'appears twice in the shard');
    checkBandKeys(record.bandKeys, `records[${i}].bandKeys`);
    const current = encoder.encode(record.id);
    let shared = 0;
    while (shared < previous.length && shared < current.length && previous[shared] === current[shared]) shared++;
    writeVarint(idBytes, shared);
    writeVarint(idBytes, current.length - shared);
    for (let j = shared; j < current.length; j++) idBytes.push(current[j]!);
    previous = current;
  });
  const keyBytes = sorted.length * MINHASH_BANDS * BAND_KEY_BYTES;
  const out = new Uint8Array(HEADER_BYTES + idBytes.length + keyBytes);
  const view = new DataView(out.buffer);
  out.set(MAGIC, 0);
  out[4] = MINHASH_BANDS;
  out[5] = BAND_KEY_BYTES;
  view.setUint32(8, sorted.length, true);
  out.set(idBytes, HEADER_BYTES);
  let at = HEADER_BYTES + idBytes.length;
  for (const record of sorted) {
    for (const key of record.bandKeys) {
      out[at++] = key & 0xff;
      out[at++] = (key >>> 8) & 0xff;
      out[at++] = (key >>> 16) & 0xff;
    }
  }
  return out;
}

/** The records of a buffer written by encodeSignatureShard; `field` names it in errors. */
export function decodeSignatureShard(bytes: Uint8Array, field = 'signatures'): SignatureRecord[] {
  if (bytes.length < HEADER_BYTES || MAGIC.some((b, i) => bytes[i] !== b)) {
    throw new ConfigError(field, bytesPreview(bytes), 'is not a refinery signature shard (it does not start with "RMH1")');
  }
  if (bytes[4] !== MINHASH_BANDS) throw new ConfigError(`${field}.bands`, bytes[4], `must be ${MINHASH_BANDS}`);
  if (bytes[5] !== BAND_KEY_BYTES) throw new ConfigError(`${field}.keyBytes`, bytes[5], `must be ${BAND_KEY_BYTES}`);
  const count = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(8, true);
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const ids: string[] = [];
  const cursor = { at: HEADER_BYTES };
  let previous = new Uint8Array(0);
  for (let i = 0; i < count; i++) {
    const shared = readVarint(bytes, cursor, field);
    const rest = readVarint(bytes, cursor, field);
    if (shared > previous.length || cursor.at + rest > bytes.length)
      throw new ConfigError(field, bytes.length, `is truncated or corrupt at id ${i} of ${count}`);
    const current = new Uint8Array(shared + rest);
    current.set(previous.subarray(0, shared), 0);
    current.set(bytes.subarray(cursor.at, cursor.at + rest), shared);
    cursor.at += rest;
    ids.push(decoder.decode(current));
    previous = current;
  }
  const expected = cursor.at + count * MINHASH_BANDS * BAND_KEY_BYTES;
  if (bytes.length !== expected) throw new ConfigError(field, bytes.length, `must be ${expected} bytes for ${count} records`);
  let at = cursor.at;
  return ids.map((id) => {
    const keys = new Uint32Array(MINHASH_BANDS);
    for (let band = 0; band < MINHASH_BANDS; band++, at += 3) keys[band] = bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16);
    return { id, bandKeys: keys };
  });
}

function writeVarint(out: number[], value: number): void {
  let rest = value;
  while (rest >= 0x80) {
    out.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
}

function readVarint(bytes: Uint8Array, cursor: { at: number }, field: string): number {
  let value = 0;
  for (let shift = 0; shift < 35; shift += 7) {
    if (cursor.at >= bytes.length) break;
    const byte = bytes[cursor.at++]!;
    value += (byte & 0x7f) * 2 ** shift;
    if (byte < 0x80) return value;
  }
  throw new ConfigError(field, bytes.length, `is truncated or corrupt at byte ${cursor.at}`);
}

function bytesPreview(bytes: Uint8Array): string {
  return `${bytes.length} bytes starting ${Array.from(bytes.subarray(0, 4), (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

// ---------------------------------------------------------------------------------------------
// LSH, candidate pairs, clusters

/** Documents whose keys agree in one band: ids in id order, at least two. */
export interface CandidateBucket {
  readonly band: number;
  readonly ids: string[];
}

/** Two documents found alike in `band` (a < b). */
export interface DuplicatePair {
  readonly a: string;
  readonly b: string;
  readonly band: number;
}

/** The LSH buckets of a set of records (from any number of shards) that hold two or more ids. */
export function lshBuckets(records: readonly SignatureRecord[]): CandidateBucket[] {
  const seen = new Set<string>();
  records.forEach((record, i) => {
    if (seen.has(record.id)) throw new ConfigError(`records[${i}].id`, record.id, 'appears twice');
    seen.add(record.id);
    checkBandKeys(record.bandKeys, `records[${i}].bandKeys`);
  });
  const buckets: CandidateBucket[] = [];
  for (let band = 0; band < MINHASH_BANDS; band++) {
    const byKey = new Map<number, string[]>();
    for (const record of records) {
      const key = record.bandKeys[band]!;
      const ids = byKey.get(key);
      if (ids) ids.push(record.id);
      else byKey.set(key, [record.id]);
    }
    for (const ids of byKey.values()) if (ids.length > 1) buckets.push({ band, ids: ids.sort(compareIds) });
  }
  return buckets;
}

/**
 * Pairs that connect each bucket: every member linked to the bucket's smallest id (a star, so a
 * bucket of k documents gives k - 1 pairs rather than k(k-1)/2; union-find needs no more). With
 * `signatureOf` each bucket is first split by the band's exact 8 values, so a 24-bit key that
 * matched by chance links nothing (the module comment gives the rate).
 */
export function bucketPairs(buckets: readonly CandidateBucket[], signatureOf?: (id: string) => Uint32Array): DuplicatePair[] {
  const pairs: DuplicatePair[] = [];
  for (const bucket of buckets) {
    const groups = new Map<string, string[]>();
    for (const id of bucket.ids) {
      let rows = '';
      if (signatureOf) {
        const signature = signatureOf(id);
        checkSignature(signature, `signatureOf(${JSON.stringify(id)})`);
        rows = signature.subarray(bucket.band * MINHASH_ROWS, (bucket.band + 1) * MINHASH_ROWS).join(',');
      }
      const group = groups.get(rows);
      if (group) group.push(id);
      else groups.set(rows, [id]);
    }
    for (const ids of groups.values()) {
      const root = smallest(ids);
      for (const id of ids) if (id !== root) pairs.push({ a: root, b: id, band: bucket.band });
    }
  }
  return pairs;
}

/** A cluster of near duplicates: the id kept and all members (kept included), in id order. */
export interface DuplicateCluster {
  readonly keptId: string;
  readonly ids: string[];
}

/**
 * Clusters of `ids` joined by `pairs`, transitively (union-find with path halving). Of each
 * cluster the smallest id is kept; the others are removed with it as their keptId.
 */
export function clusterDuplicates(ids: readonly string[], pairs: readonly DuplicatePair[]): DedupResult & { clusters: DuplicateCluster[] } {
  const index = new Map<string, number>();
  ids.forEach((id, i) => {
    if (index.has(id)) throw new ConfigError(`ids[${i}]`, id, 'appears twice');
    index.set(id, i);
  });
  const parent = ids.map((_, i) => i);
  const find = (i: number): number => {
    let at = i;
    while (parent[at] !== at) {
      parent[at] = parent[parent[at]!]!;
      at = parent[at]!;
    }
    return at;
  };
  pairs.forEach((pair, i) => {
    const a = index.get(pair.a);
    const b = index.get(pair.b);
    if (a === undefined) throw new ConfigError(`pairs[${i}].a`, pair.a, 'is not one of the ids');
    if (b === undefined) throw new ConfigError(`pairs[${i}].b`, pair.b, 'is not one of the ids');
    const rootA = find(a);
    const rootB = find(b);
    if (rootA !== rootB) parent[rootB] = rootA;
  });
  const members = new Map<number, string[]>();
  ids.forEach((id, i) => {
    const root = find(i);
    const group = members.get(root);
    if (group) group.push(id);
    else members.set(root, [id]);
  });
  const kept: string[] = [];
  const removed: RemovedDuplicate[] = [];
  const clusters: DuplicateCluster[] = [];
  for (const group of members.values()) {
    group.sort(compareIds);
    const keptId = group[0]!;
    kept.push(keptId);
    if (group.length > 1) clusters.push({ keptId, ids: group });
    for (const id of group.slice(1)) removed.push({ id, keptId });
  }
  return {
    kept: kept.sort(compareIds),
    removed: removed.sort((a, b) => compareIds(a.id, b.id)),
    clusters: clusters.sort((a, b) => compareIds(a.keptId, b.keptId)),
  };
}

/**
 * Near-duplicate dedup of documents held in memory: signatures, band keys, LSH buckets confirmed
 * against the full signatures, clusters. The sharded pipeline runs the same steps apart.
 */
export function nearDuplicates(documents: readonly RefineryDocument[], hasher: MinHasher): DedupResult & { clusters: DuplicateCluster[] } {
  checkDocuments(documents);
  const signatures = new Map<string, Uint32Array>();
  const records = documents.map((document) => {
    const signature = hasher.signature(document.text);
    signatures.set(document.id, signature);
    return { id: document.id, bandKeys: bandKeys(signature) };
  });
  const pairs = bucketPairs(lshBuckets(records), (id) => signatures.get(id)!);
  return clusterDuplicates(
    documents.map((document) => document.id),
    pairs,
  );
}

// ---------------------------------------------------------------------------------------------
// Checks and order

/** Ids compare as JavaScript strings (UTF-16 code units): the same order on every machine. */
export function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function smallest(ids: readonly string[]): string {
  let best = ids[0]!;
  for (const id of ids) if (id < best) best = id;
  return best;
}

function checkDocuments(documents: readonly RefineryDocument[]): void {
  if (!Array.isArray(documents)) throw new ConfigError('documents', documents, 'must be an array of {id, text}');
  const seen = new Set<string>();
  documents.forEach((document, i) => {
    if (typeof document?.id !== 'string' || document.id === '') throw new ConfigError(`documents[${i}].id`, document?.id, 'must be a non-empty string');
    if (typeof document.text !== 'string') throw new ConfigError(`documents[${i}].text`, document.text, 'must be a string');
    if (seen.has(document.id)) throw new ConfigError(`documents[${i}].id`, document.id, 'is used by an earlier document');
    seen.add(document.id);
  });
}

function checkSignature(signature: unknown, field: string): void {
  if (!(signature instanceof Uint32Array) || signature.length !== MINHASH_VALUES) {
    throw new ConfigError(field, describeArray(signature), `must be a Uint32Array of ${MINHASH_VALUES} MinHash values`);
  }
}

function checkBandKeys(keys: unknown, field: string): void {
  if (!(keys instanceof Uint32Array) || keys.length !== MINHASH_BANDS)
    throw new ConfigError(field, describeArray(keys), `must be a Uint32Array of ${MINHASH_BANDS} band keys`);
  for (const key of keys) if (key >= 2 ** (8 * BAND_KEY_BYTES)) throw new ConfigError(field, key, `holds a key over ${8 * BAND_KEY_BYTES} bits`);
}

function describeArray(value: unknown): unknown {
  return ArrayBuffer.isView(value) ? `${value.constructor.name}(${(value as Uint32Array).length})` : value;
}
