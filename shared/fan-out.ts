/**
 * A fan-out's item records, read back. The fan-out (pipelines/steps/fan-out.ts) keeps the Map's
 * results bounded whatever the items do: a value goes to S3 and its record is `{ok: true, uri}`
 * (or stays inline, `{ok: true, value}`, where the pipeline's own code bounds it); a failure's
 * cause goes to S3 and its record is `{ok: false, error, causeUri, item?}`. The steps that read a
 * fan-out's results turn the records back into outcomes, `{ok: true, value}` and
 * `{ok: false, error, cause, item?}`, with the cause cut to MAX_CAUSE_CHARS.
 */
import pMap from 'p-map';
import { z } from 'zod';
import { readObjectBytes } from './clients/aws.ts';
import { parseJsonBytes } from './documents.ts';
import { parseOrThrow } from './schema.ts';

/** The longest cause read back: what AWS keeps of a Cause (32,768 characters). */
export const MAX_CAUSE_CHARS = 32_768;
/** Objects read at once. */
const READ_CONCURRENCY = 16;

export const FanOutRecord = z.union([
  z.object({ ok: z.literal(true), uri: z.string().startsWith('s3://') }).strict(),
  z.object({ ok: z.literal(true), value: z.unknown() }).strict(),
  z.object({ ok: z.literal(false), error: z.string(), causeUri: z.string().startsWith('s3://'), item: z.unknown().optional() }).strict(),
]);
export type FanOutRecord = z.infer<typeof FanOutRecord>;

export type FanOutOutcome = { ok: true; value: unknown } | { ok: false; error: string; cause: string; item?: unknown };

/** One record's outcome: its value or its cause read from S3 (`field` names the record in errors). */
export async function readOutcome(raw: unknown, field: string): Promise<FanOutOutcome> {
  const record = parseOrThrow(FanOutRecord, raw, field);
  if (record.ok) {
    if ('value' in record) return { ok: true, value: record.value };
    return { ok: true, value: parseJsonBytes(await readObjectBytes(record.uri, `${field}.uri`), `${field}.uri`, record.uri) };
  }
  const cause = (await readObjectBytes(record.causeUri, `${field}.causeUri`)).toString('utf8').slice(0, MAX_CAUSE_CHARS);
  return { ok: false, error: record.error, cause, ...(record.item !== undefined ? { item: record.item } : {}) };
}

/** Every record's outcome, in order; errors name `${field}.<index>`. */
export async function readOutcomes(records: unknown, field = 'results'): Promise<FanOutOutcome[]> {
  const list = parseOrThrow(z.array(z.unknown()), records, field);
  return pMap(list, (record, i) => readOutcome(record, `${field}.${i}`), { concurrency: READ_CONCURRENCY });
}
