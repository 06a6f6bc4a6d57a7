/**
 * Reading a corpus file's bytes into documents `{id, text, url?}`, without losing count of any
 * line or row.
 *
 * Guarantees:
 * 1. Formats: JSONL of `{id, text, url?}` (gzip-compressed too: bytes that start with the gzip
 *    magic 1f 8b are inflated first, whatever the name says) and Parquet (hyparquet, with the
 *    codecs of hyparquet-compressors: snappy, gzip, zstd, brotli, lz4). A name that is neither
 *    `.jsonl`, `.jsonl.gz` nor `.parquet` is a ConfigError naming the field and the name.
 * 2. Every line (JSONL) or row (Parquet) ends up in exactly one place: a document, or one skip
 *    reason. `documents + sum of skipped counts = lines`, and each reason keeps the first
 *    SKIP_EXAMPLES line numbers (1-based, JSONL) or row indexes (0-based, Parquet, as in the
 *    `<file>#<row>` ids) as examples. The reasons, checked in this order:
 *    - `blank_line`: a JSONL line of whitespace only (a trailing newline ends the last line and
 *      makes no line of its own);
 *    - `invalid_utf8`: the line's bytes (or a Parquet string's) are not valid UTF-8; decoding is
 *      fatal per line, so one bad byte costs one line, not the file;
 *    - `not_json`: the line does not parse as JSON;
 *    - `bad_shape`: not an object, `id` missing, empty or neither a string nor an integer, `text`
 *      not a string, `url` present but neither a string nor null;
 *    - `empty`: `text` is empty or whitespace only;
 *    - `duplicate_id`: the id of a document already kept (the first one stays; an id whose first
 *      line was skipped is still free).
 * 3. A text longer than `maxDocumentBytes` UTF-8 bytes (default 1,000,000) is kept, cut at the
 *    last character boundary at or under the limit, and counted in `truncated` (it is also a
 *    document). Truncating rather than skipping: the start of an over-long page is still text,
 *    and dropping it would make the corpus depend on a limit that exists only to bound memory.
 * 4. Integer ids (common in Parquet exports) become their decimal string.
 * 5. A gzip stream that is corrupt or cut short, or a Parquet file hyparquet cannot read, is a
 *    ConfigError naming the file: a silently shortened corpus would be a count lost.
 */
import { gunzipSync } from 'node:zlib';
import { type AsyncBuffer, type FileMetaData, parquetMetadataAsync, parquetReadObjects, parquetSchema } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { ConfigError } from '../errors.ts';

/** A document as read: a unique id, its text, and where it came from when the source says. */
export interface CorpusDocument {
  readonly id: string;
  readonly text: string;
  readonly url?: string;
}

export const CORPUS_FORMATS = ['jsonl', 'parquet'] as const;
export type CorpusFormat = (typeof CORPUS_FORMATS)[number];

export const SKIP_REASONS = ['blank_line', 'invalid_utf8', 'not_json', 'bad_shape', 'empty', 'duplicate_id'] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];

/** Line numbers (or row indexes) kept per skip reason as examples. */
export const SKIP_EXAMPLES = 5;
/** The default cap on one document's text: 1,000,000 UTF-8 bytes. */
export const DEFAULT_MAX_DOCUMENT_BYTES = 1_000_000;

export interface SkipCount {
  count: number;
  /** The first SKIP_EXAMPLES line numbers (1-based) or row indexes (0-based). */
  examples: number[];
}

export interface CorpusReadReport {
  readonly format: CorpusFormat;
  /** The input was gzip-compressed. */
  readonly gzip: boolean;
  /** JSONL lines or Parquet rows. */
  lines: number;
  documents: number;
  /** Every reason, zero counts included, so a report always has the same keys. */
  skipped: Record<SkipReason, SkipCount>;
  /** Documents whose text was cut to maxDocumentBytes (counted in `documents` too). */
  truncated: number;
  /** Bytes read (as stored: compressed when the input was). */
  bytes: number;
  /** UTF-8 bytes of the documents' texts, after truncation. */
  textBytes: number;
}

export interface CorpusRead {
  readonly documents: CorpusDocument[];
  readonly report: CorpusReadReport;
}

export interface ReadCorpusOptions {
  /** Cap on one text, in UTF-8 bytes (default 1,000,000). */
  readonly maxDocumentBytes?: number;
}

/** The total of every skip reason. */
export function skippedTotal(report: Pick<CorpusReadReport, 'skipped'>): number {
  let total = 0;
  for (const reason of SKIP_REASONS) total += report.skipped[reason].count;
  return total;
}

/** The format a corpus file's name says (`field` names it in the error). */
export function corpusFormatOf(name: string, field = 'corpus'): CorpusFormat {
  const path = name.replace(/[?#].*$/, '').toLowerCase();
  if (path.endsWith('.jsonl') || path.endsWith('.jsonl.gz')) return 'jsonl';
  if (path.endsWith('.parquet')) return 'parquet';
  throw new ConfigError(field, name, 'unknown corpus format: the name must end in .jsonl, .jsonl.gz or .parquet');
}

/** Reads a corpus file's bytes in the format its name says (see the module comment). */
export async function readCorpusBytes(bytes: Uint8Array, name: string, options: ReadCorpusOptions & { readonly field?: string } = {}): Promise<CorpusRead> {
  const format = corpusFormatOf(name, options.field);
  return format === 'jsonl' ? readJsonlDocuments(bytes, { ...options, name }) : readParquetDocuments(bytesAsAsyncBuffer(bytes), { ...options, name });
}

/** True when the bytes start with the gzip magic (1f 8b). */
export function isGzip(bytes: Uint8Array): boolean {
  return bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b;
}

/** JSONL `{id, text, url?}` lines (gzip-compressed or not) as documents, and the count of each. */
export function readJsonlDocuments(input: Uint8Array, options: ReadCorpusOptions & { readonly name?: string } = {}): CorpusRead {
  const maxBytes = checkMaxDocumentBytes(options.maxDocumentBytes);
  const gzip = isGzip(input);
  let bytes = input;
  if (gzip) {
    try {
      bytes = gunzipSync(input);
    } catch (error) {
      throw new ConfigError(options.name ?? 'corpus', options.name ?? `${input.length} bytes`, `is not a complete gzip stream (${(error as Error).message})`);
    }
  }
  const report = emptyReport('jsonl', gzip, input.length);
  const collector = new DocumentCollector(report, maxBytes);
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let start = 0;
  let lineNumber = 0;
  while (start < bytes.length) {
    let end = bytes.indexOf(0x0a, start);
    if (end === -1) end = bytes.length;
    lineNumber++;
    const lineBytes = bytes.subarray(start, end);
    start = end + 1;
    report.lines++;
    if (isBlank(lineBytes)) {
      collector.skip('blank_line', lineNumber);
      continue;
    }
    let line: string;
    try {
      line = decoder.decode(lineBytes);
    } catch {
      collector.skip('invalid_utf8', lineNumber);
      continue;
    }
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      collector.skip('not_json', lineNumber);
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      collector.skip('bad_shape', lineNumber);
      continue;
    }
    const record = value as Record<string, unknown>;
    collector.offer(record['id'], record['text'], record['url'], lineNumber);
  }
  return { documents: collector.documents, report };
}

/** A Uint8Array as hyparquet's AsyncBuffer. */
export function bytesAsAsyncBuffer(bytes: Uint8Array): AsyncBuffer {
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  return { byteLength: buffer.byteLength, slice: (start: number, end?: number) => buffer.slice(start, end) };
}

/** Marks a Parquet string whose bytes are not UTF-8 (hyparquet's own decoder would replace them). */
const INVALID_UTF8 = Symbol('invalid UTF-8');

/**
 * A Parquet file's `text`, `id` and `url` columns as documents, one row group at a time (so a
 * large remote file is never held whole). Without an `id` column a row's id is
 * `<name>#<rowIndex>`; `url` is optional. A file with no `text` column is a ConfigError naming
 * the file and its columns.
 */
export async function readParquetDocuments(file: AsyncBuffer, options: ReadCorpusOptions & { readonly name: string }): Promise<CorpusRead> {
  const maxBytes = checkMaxDocumentBytes(options.maxDocumentBytes);
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const stringFromBytes = (bytes: Uint8Array): unknown => {
    try {
      return decoder.decode(bytes);
    } catch {
      return INVALID_UTF8;
    }
  };
  let metadata: FileMetaData;
  try {
    metadata = await parquetMetadataAsync(file);
  } catch (error) {
    throw new ConfigError('corpus', options.name, `is not a readable Parquet file (${(error as Error).message})`);
  }
  const columns = parquetSchema(metadata).children.map((child) => child.element.name);
  if (!columns.includes('text')) throw new ConfigError('corpus', options.name, `has no "text" column (columns: ${columns.join(', ') || 'none'})`);
  const hasId = columns.includes('id');
  const read = ['text', ...(hasId ? ['id'] : []), ...(columns.includes('url') ? ['url'] : [])];
  const report = emptyReport('parquet', false, file.byteLength);
  const collector = new DocumentCollector(report, maxBytes);
  let groupStart = 0;
  for (const group of metadata.row_groups) {
    const rowEnd = groupStart + Number(group.num_rows);
    let rows: Record<string, unknown>[];
    try {
      rows = await parquetReadObjects({ file, metadata, columns: read, rowStart: groupStart, rowEnd, compressors, parsers: { stringFromBytes } });
    } catch (error) {
      throw new ConfigError('corpus', options.name, `rows ${groupStart}-${rowEnd - 1} could not be read (${(error as Error).message})`);
    }
    rows.forEach((row, i) => {
      const rowIndex = groupStart + i;
      report.lines++;
      const id = hasId ? row['id'] : `${options.name}#${rowIndex}`;
      if (id === INVALID_UTF8 || row['text'] === INVALID_UTF8 || row['url'] === INVALID_UTF8) collector.skip('invalid_utf8', rowIndex);
      else collector.offer(id, row['text'], row['url'], rowIndex);
    });
    groupStart = rowEnd;
  }
  return { documents: collector.documents, report };
}

/**
 * `text` cut to at most `maxBytes` UTF-8 bytes at a character boundary (itself when it fits).
 * A JavaScript string's UTF-8 never splits a surrogate pair at a code point boundary, so the cut
 * only has to step back over continuation bytes (10xxxxxx).
 */
export function truncateUtf8(text: string, maxBytes: number): { text: string; truncated: boolean; bytes: number } {
  // Each UTF-16 unit is at most 3 UTF-8 bytes: a short text needs no encoding to know it fits.
  if (text.length * 3 <= maxBytes) return { text, truncated: false, bytes: Buffer.byteLength(text, 'utf8') };
  const encoded = Buffer.from(text, 'utf8');
  if (encoded.length <= maxBytes) return { text, truncated: false, bytes: encoded.length };
  let cut = maxBytes;
  while (cut > 0 && (encoded[cut]! & 0xc0) === 0x80) cut--;
  return { text: encoded.subarray(0, cut).toString('utf8'), truncated: true, bytes: cut };
}

function checkMaxDocumentBytes(value: number | undefined): number {
  const max = value ?? DEFAULT_MAX_DOCUMENT_BYTES;
  if (!Number.isSafeInteger(max) || max < 1) throw new ConfigError('maxDocumentBytes', value, 'must be an integer >= 1');
  return max;
}

function emptyReport(format: CorpusFormat, gzip: boolean, bytes: number): CorpusReadReport {
  const skipped = Object.fromEntries(SKIP_REASONS.map((reason) => [reason, { count: 0, examples: [] }])) as unknown as Record<SkipReason, SkipCount>;
  return { format, gzip, lines: 0, documents: 0, skipped, truncated: 0, bytes, textBytes: 0 };
}

function isBlank(bytes: Uint8Array): boolean {
  for (const byte of bytes) if (byte !== 0x20 && byte !== 0x09 && byte !== 0x0d && byte !== 0x0b && byte !== 0x0c) return false;
  return true;
}

/** Applies the shape, empty, duplicate and size rules to one record and counts the outcome. */
class DocumentCollector {
  readonly documents: CorpusDocument[] = [];
  private readonly ids = new Set<string>();

  constructor(
    private readonly report: CorpusReadReport,
    private readonly maxBytes: number,
  ) {}

  skip(reason: SkipReason, where: number): void {
    const entry = this.report.skipped[reason];
    entry.count++;
    if (entry.examples.length < SKIP_EXAMPLES) entry.examples.push(where);
  }

  offer(rawId: unknown, text: unknown, url: unknown, where: number): void {
    const id = typeof rawId === 'string' ? rawId : typeof rawId === 'bigint' || Number.isSafeInteger(rawId) ? String(rawId) : undefined;
    if (id === undefined || id === '' || typeof text !== 'string' || (url !== undefined && url !== null && typeof url !== 'string')) {
      this.skip('bad_shape', where);
      return;
    }
    if (text.trim() === '') {
      this.skip('empty', where);
      return;
    }
    if (this.ids.has(id)) {
      this.skip('duplicate_id', where);
      return;
    }
    this.ids.add(id);
    const cut = truncateUtf8(text, this.maxBytes);
    if (cut.truncated) this.report.truncated++;
    this.report.documents++;
    this.report.textBytes += cut.bytes;
    this.documents.push(typeof url === 'string' ? { id, text: cut.text, url } : { id, text: cut.text });
  }
}
