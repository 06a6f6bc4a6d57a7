/**
 * Splitting documents into content-addressed JSONL shards, the unit a Distributed Map item reads.
 *
 * Guarantees:
 * 1. A shard is JSONL: one `{"id","text","url"?}` object per line, keys in that order, each line
 *    ending in '\n'. The same documents in the same order give the same bytes, so the same sha256.
 * 2. Documents go into shards in the order given (the caller's order is already deterministic:
 *    a seeded sample, injected documents at seeded positions), `shardDocuments` per shard at most
 *    and `maxShardBytes` at most, whichever is reached first. A document whose line alone is over
 *    `maxShardBytes` is a ConfigError naming it: no shard could hold it.
 * 3. A shard's key is `<prefix><sha256 of its bytes>.jsonl`: rewriting it on a retry writes the
 *    same object, and a reader can check the bytes against the name.
 * 4. decodeShard reads with the corpus reader (corpus.ts), so a damaged line is counted by reason
 *    and the rest is read, not a failure of the whole shard.
 * 5. Ids must be unique across the documents given (dedup and the truth list match on them).
 */
import { ConfigError } from '../errors.ts';
import { sha256Hex } from '../json.ts';
import { type CorpusDocument, type CorpusRead, type ReadCorpusOptions, readJsonlDocuments } from './corpus.ts';

/** Documents per shard by default: a few MB of web text, a few seconds of filtering per item. */
export const DEFAULT_SHARD_DOCUMENTS = 500;
/** The byte cap per shard by default, 32 MiB: a Batch or Lambda worker holds a shard in memory. */
export const DEFAULT_MAX_SHARD_BYTES = 32 * 1024 * 1024;
export const MAX_SHARD_DOCUMENTS = 100_000;

export interface ShardOptions {
  /** Documents per shard at most (default 500). */
  readonly shardDocuments?: number;
  /** Bytes per shard at most (default 32 MiB). */
  readonly maxShardBytes?: number;
}

export interface PlannedShard {
  readonly bytes: Uint8Array;
  /** Hex sha256 of `bytes`. */
  readonly sha256: string;
  readonly documents: number;
  readonly firstId: string;
  readonly lastId: string;
}

const encoder = new TextEncoder();

/** One document's JSONL line, '\n' included. */
function encodeLine(document: CorpusDocument): Uint8Array {
  const record = document.url === undefined ? { id: document.id, text: document.text } : { id: document.id, text: document.text, url: document.url };
  return encoder.encode(`${JSON.stringify(record)}\n`);
}

/** The JSONL bytes of `documents`, in order. */
export function encodeShard(documents: readonly CorpusDocument[]): Uint8Array {
  return concat(documents.map(encodeLine));
}

/** A shard's documents and the read report (bad lines counted, not thrown). */
export function decodeShard(bytes: Uint8Array, options: ReadCorpusOptions = {}): CorpusRead {
  return readJsonlDocuments(bytes, { ...options, name: 'shard' });
}

/** The object key of a shard: `<prefix><sha256>.jsonl`. */
export function shardKey(prefix: string, sha256: string): string {
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new ConfigError('sha256', sha256, 'must be 64 lowercase hex digits');
  return `${prefix}${sha256}.jsonl`;
}

/** The documents cut into shards (see the module comment). */
export function planShards(documents: readonly CorpusDocument[], options: ShardOptions = {}): PlannedShard[] {
  const shardDocuments = options.shardDocuments ?? DEFAULT_SHARD_DOCUMENTS;
  if (!Number.isSafeInteger(shardDocuments) || shardDocuments < 1 || shardDocuments > MAX_SHARD_DOCUMENTS)
    throw new ConfigError('shardDocuments', options.shardDocuments, `must be an integer in [1, ${MAX_SHARD_DOCUMENTS}]`);
  const maxShardBytes = options.maxShardBytes ?? DEFAULT_MAX_SHARD_BYTES;
  if (!Number.isSafeInteger(maxShardBytes) || maxShardBytes < 1) throw new ConfigError('maxShardBytes', options.maxShardBytes, 'must be an integer >= 1');

  const shards: PlannedShard[] = [];
  const seen = new Set<string>();
  let lines: Uint8Array[] = [];
  let ids: string[] = [];
  let bytes = 0;
  const flush = (): void => {
    if (lines.length === 0) return;
    const shard = concat(lines);
    shards.push({ bytes: shard, sha256: sha256Hex(shard), documents: lines.length, firstId: ids[0]!, lastId: ids[ids.length - 1]! });
    lines = [];
    ids = [];
    bytes = 0;
  };
  documents.forEach((document, i) => {
    if (typeof document?.id !== 'string' || document.id === '') throw new ConfigError(`documents[${i}].id`, document?.id, 'must be a non-empty string');
    if (typeof document.text !== 'string') throw new ConfigError(`documents[${i}].text`, document.text, 'must be a string');
    if (seen.has(document.id)) throw new ConfigError(`documents[${i}].id`, document.id, 'is used by an earlier document; ids must be unique');
    seen.add(document.id);
    const line = encodeLine(document);
    if (line.length > maxShardBytes)
      throw new ConfigError('maxShardBytes', maxShardBytes, `is smaller than document ${JSON.stringify(document.id)}'s line of ${line.length} bytes`);
    if (lines.length >= shardDocuments || bytes + line.length > maxShardBytes) flush();
    lines.push(line);
    ids.push(document.id);
    bytes += line.length;
  });
  flush();
  return shards;
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  let length = 0;
  for (const part of parts) length += part.length;
  const out = new Uint8Array(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
