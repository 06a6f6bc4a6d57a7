/**
 * One shard through the refinery's per-shard stage: the filters (filters.ts), then
 * decontamination (decontaminate.ts), then the survivors' MinHash signatures (dedup.ts) for the
 * global dedup step. Every input document ends in exactly one place: kept, or removed with the
 * rule that removed it (`input` for an empty document, a filter's name, or `decontamination`
 * naming the benchmark item), so kept + removed = documents, and the shard's skipped lines (not
 * UTF-8, not JSON, wrong shape) are counted beside them.
 *
 * What the global step reads is split in two files per shard, both in id order:
 * - the compact buffer (encodeSignatureShard): ids and 14 band keys of 3 bytes, ~46 bytes a
 *   document, read whole for every shard;
 * - the full-signature file (FULL_SIGNATURE_RECORD_BYTES a document: an 8-byte exact key, the
 *   first 8 bytes of the sha256 of the normalised text, then the 112 MinHash values), read only
 *   at the records of candidate documents, by byte range.
 */
import { ConfigError } from '../errors.ts';
import { sha256Hex } from '../json.ts';
import { type ContaminationIndex, findContamination } from './decontaminate.ts';
import { type MinHasher, MINHASH_VALUES, bandKeys, compareIds, encodeSignatureShard, exactKey } from './dedup.ts';
import { applyFilters, type FilterConfig } from './filters.ts';

export interface ShardDocument {
  readonly id: string;
  readonly text: string;
  readonly url?: string;
}

/** A removed document: the rule (and its version) and a short reason. */
export interface ShardRemoval {
  readonly id: string;
  readonly rule: string;
  readonly version: number;
  readonly reason: string;
  readonly detail?: string;
  /** For decontamination: the benchmark item the document contained. */
  readonly benchmark?: { readonly name: string; readonly version: number; readonly itemId: string | number };
}

export interface RefinedShard {
  readonly kept: ShardDocument[];
  readonly removed: ShardRemoval[];
  /** Compact buffer of the kept documents (ids and band keys). */
  readonly signatures: Uint8Array;
  /** Full-signature records of the kept documents, in the compact buffer's order. */
  readonly fullSignatures: Uint8Array;
  /** Lines whose text a rule changed (C4 drops lines). */
  readonly changed: number;
  readonly linesRemoved: Record<string, number>;
}

export const FULL_SIGNATURE_MAGIC = [0x52, 0x4d, 0x46, 0x31]; // "RMF1"
export const FULL_SIGNATURE_HEADER_BYTES = 8;
export const EXACT_KEY_BYTES = 8;
export const FULL_SIGNATURE_RECORD_BYTES = EXACT_KEY_BYTES + 4 * MINHASH_VALUES;

/** The per-shard stage on documents in memory. */
export function refineShardDocuments(
  documents: readonly ShardDocument[],
  options: { readonly filters: FilterConfig; readonly contamination: ContaminationIndex | null; readonly hasher: MinHasher },
): RefinedShard {
  const kept: ShardDocument[] = [];
  const removed: ShardRemoval[] = [];
  const linesRemoved: Record<string, number> = {};
  let changed = 0;
  documents.forEach((document, i) => {
    const result = applyFilters(document.text, options.filters, `documents[${i}].text`);
    if (!result.keep) {
      removed.push({
        id: document.id,
        rule: result.rule,
        version: result.version,
        reason: result.reason,
        ...(result.detail ? { detail: result.detail.slice(0, 300) } : {}),
      });
      return;
    }
    if (result.changed) changed++;
    for (const [reason, count] of Object.entries(result.linesRemoved)) linesRemoved[reason] = (linesRemoved[reason] ?? 0) + (count ?? 0);
    const match = options.contamination ? findContamination(options.contamination, result.text) : undefined;
    if (match) {
      removed.push({
        id: document.id,
        rule: 'decontamination',
        version: 1,
        reason: `contains a ${options.contamination!.ngram}-gram of ${match.benchmark} v${match.version} item ${match.itemId}`,
        detail: match.matched.slice(0, 300),
        benchmark: { name: match.benchmark, version: match.version, itemId: match.itemId },
      });
      return;
    }
    kept.push({ ...document, text: result.text });
  });
  const sorted = [...kept].sort((a, b) => compareIds(a.id, b.id));
  const records = sorted.map((document) => ({ document, signature: options.hasher.signature(document.text) }));
  const signatures = encodeSignatureShard(records.map(({ document, signature }) => ({ id: document.id, bandKeys: bandKeys(signature) })));
  const fullSignatures = new Uint8Array(FULL_SIGNATURE_HEADER_BYTES + records.length * FULL_SIGNATURE_RECORD_BYTES);
  fullSignatures.set(FULL_SIGNATURE_MAGIC, 0);
  const view = new DataView(fullSignatures.buffer);
  view.setUint32(4, records.length, true);
  records.forEach(({ document, signature }, i) => {
    const at = FULL_SIGNATURE_HEADER_BYTES + i * FULL_SIGNATURE_RECORD_BYTES;
    fullSignatures.set(Buffer.from(exactKey(document.text).slice(0, 2 * EXACT_KEY_BYTES), 'hex'), at);
    for (let v = 0; v < MINHASH_VALUES; v++) view.setUint32(at + EXACT_KEY_BYTES + 4 * v, signature[v]!, true);
  });
  return { kept: sorted, removed, signatures, fullSignatures, changed, linesRemoved };
}

/** One full-signature record: the exact key (16 hex digits) and the 112 MinHash values. */
export function decodeFullSignatureRecord(bytes: Uint8Array, field = 'record'): { exact: string; signature: Uint32Array } {
  if (bytes.length !== FULL_SIGNATURE_RECORD_BYTES) throw new ConfigError(field, bytes.length, `must be ${FULL_SIGNATURE_RECORD_BYTES} bytes`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const signature = new Uint32Array(MINHASH_VALUES);
  for (let v = 0; v < MINHASH_VALUES; v++) signature[v] = view.getUint32(EXACT_KEY_BYTES + 4 * v, true);
  return { exact: Buffer.from(bytes.subarray(0, EXACT_KEY_BYTES)).toString('hex'), signature };
}

/** The byte range [start, end) of record `index` in a full-signature file. */
export function fullSignatureRange(index: number): { start: number; end: number } {
  const start = FULL_SIGNATURE_HEADER_BYTES + index * FULL_SIGNATURE_RECORD_BYTES;
  return { start, end: start + FULL_SIGNATURE_RECORD_BYTES };
}

/** Documents as JSONL, one `{id, text, url?}` per line, and the sha256 of the bytes. */
export function encodeJsonl(documents: readonly ShardDocument[]): { bytes: Buffer; sha256: string } {
  const bytes = Buffer.from(
    documents.map((d) => `${JSON.stringify(d.url === undefined ? { id: d.id, text: d.text } : { id: d.id, text: d.text, url: d.url })}\n`).join(''),
    'utf8',
  );
  return { bytes, sha256: sha256Hex(bytes) };
}
