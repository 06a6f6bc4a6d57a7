/**
 * The benchmark registry: the evaluation suite as data, read at run time, so adding a benchmark
 * or bumping one needs no redeploy. An entry names its data (JSONL rows {id, prompt, answer} in
 * the platform bucket, content-addressed), its scorer, its sample size and its version. The
 * version goes up when the data, the scorer or the sample size change, or on request (`bump`:
 * the prompt format or the scorer's code changed); every version is kept.
 *
 * The scorers themselves live with the eval job (batch-jobs/evals-lm/scorers.py); SCORERS lists the
 * names it knows.
 */
import { GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { z } from 'zod';
import { dynamoClient, s3Client } from '../clients/aws.ts';
import { ConfigError, errorName } from '../errors.ts';
import { sha256Hex } from '../json.ts';
import { parseOrThrow } from '../schema.ts';
import { benchmarkKey, benchmarkVersionKey, withoutKeys } from '../table.ts';

export const SCORERS = ['exact-number', 'exact-string', 'multiple-choice'] as const;
export const BENCHMARK_NAME = /^[a-z0-9][a-z0-9-]{0,40}$/;

export const BenchmarkEntry = z
  .object({
    name: z.string().regex(BENCHMARK_NAME, 'must be 1-41 lowercase letters, digits or "-"'),
    version: z.int().min(1),
    scorer: z.enum(SCORERS),
    sampleSize: z.int().min(1).max(100_000),
    dataUri: z.string().regex(/^s3:\/\/[^/]+\/.+$/, 'must be s3://bucket/key'),
    dataSha256: z.string().regex(/^[0-9a-f]{64}$/),
    rows: z.int().min(1),
    description: z.string().max(500).default(''),
    updatedAt: z.string(),
  })
  .strict();
export type BenchmarkEntry = z.infer<typeof BenchmarkEntry>;

const Row = z.object({ id: z.union([z.string().min(1), z.int()]), prompt: z.string().min(1), answer: z.string() }).loose();

/** Checks benchmark data (JSONL rows {id, prompt, answer}); a bad line is named by its number. */
export function checkBenchmarkData(text: string, field = 'data'): number {
  const ids = new Set<string>();
  let rows = 0;
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new ConfigError(`${field} line ${i + 1}`, line.slice(0, 80), 'is not JSON');
    }
    const row = parseOrThrow(Row, value, `${field} line ${i + 1}`);
    if (ids.has(String(row.id))) throw new ConfigError(`${field} line ${i + 1}.id`, row.id, 'is used by an earlier row');
    ids.add(String(row.id));
    rows++;
  });
  if (rows === 0) throw new ConfigError(field, text.slice(0, 80), 'has no rows');
  return rows;
}

export interface RegistryLocation {
  readonly table: string;
  readonly bucket: string;
}

export async function listBenchmarks(where: Pick<RegistryLocation, 'table'>): Promise<BenchmarkEntry[]> {
  const out = await dynamoClient().send(
    new QueryCommand({ TableName: where.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': 'BENCHMARKS' }, ConsistentRead: true }),
  );
  return (out.Items ?? []).map((item) => parseOrThrow(BenchmarkEntry, withoutKeys(item), `benchmark ${String(item.sk)}`));
}

export async function getBenchmark(where: Pick<RegistryLocation, 'table'>, name: string): Promise<BenchmarkEntry | undefined> {
  const out = await dynamoClient().send(new GetCommand({ TableName: where.table, Key: benchmarkKey(name), ConsistentRead: true }));
  return out.Item ? parseOrThrow(BenchmarkEntry, withoutKeys(out.Item), `benchmark ${name}`) : undefined;
}

export interface RegisterRequest {
  readonly name: string;
  readonly data: string;
  readonly scorer: string;
  readonly sampleSize: number;
  readonly description?: string;
  /** Force a new version even if nothing registered changed (the prompt or scorer code did). */
  readonly bump?: boolean;
}

export interface RegisterResult {
  readonly entry: BenchmarkEntry;
  /** 'added' (new name), 'bumped' (new version), or 'unchanged' (same data, scorer and size). */
  readonly change: 'added' | 'bumped' | 'unchanged';
}

/**
 * Adds a benchmark or a new version of one. The data goes to benchmarks/<name>/<sha256>.jsonl;
 * the entry is written only if nobody changed it meanwhile (conditional on the old version), so
 * two concurrent registrations cannot both claim one version.
 */
export async function registerBenchmark(where: RegistryLocation, request: RegisterRequest, now = new Date()): Promise<RegisterResult> {
  if (!BENCHMARK_NAME.test(request.name)) throw new ConfigError('name', request.name, 'must be 1-41 lowercase letters, digits or "-"');
  if (!(SCORERS as readonly string[]).includes(request.scorer)) throw new ConfigError('scorer', request.scorer, `must be one of ${SCORERS.join(', ')}`);
  if (!Number.isInteger(request.sampleSize) || request.sampleSize < 1 || request.sampleSize > 100_000) {
    throw new ConfigError('sampleSize', request.sampleSize, 'must be an integer from 1 to 100000');
  }
  const rows = checkBenchmarkData(request.data);
  const dataSha256 = sha256Hex(request.data);
  const current = await getBenchmark(where, request.name);
  const same =
    current !== undefined &&
    current.dataSha256 === dataSha256 &&
    current.scorer === request.scorer &&
    current.sampleSize === request.sampleSize &&
    current.description === (request.description ?? current.description);
  if (same && !request.bump) return { entry: current, change: 'unchanged' };
  const key = `benchmarks/${request.name}/${dataSha256}.jsonl`;
  await s3Client().send(new PutObjectCommand({ Bucket: where.bucket, Key: key, Body: request.data, ContentType: 'application/x-ndjson' }));
  const entry = parseOrThrow(BenchmarkEntry, {
    name: request.name,
    version: (current?.version ?? 0) + 1,
    scorer: request.scorer,
    sampleSize: request.sampleSize,
    dataUri: `s3://${where.bucket}/${key}`,
    dataSha256,
    rows,
    description: request.description ?? current?.description ?? '',
    updatedAt: now.toISOString(),
  });
  try {
    await dynamoClient().send(
      new PutCommand({
        TableName: where.table,
        Item: { ...benchmarkKey(entry.name), ...entry },
        ...(current
          ? { ConditionExpression: '#v = :old', ExpressionAttributeNames: { '#v': 'version' }, ExpressionAttributeValues: { ':old': current.version } }
          : { ConditionExpression: 'attribute_not_exists(pk)' }),
      }),
    );
  } catch (error) {
    if (errorName(error) === 'ConditionalCheckFailedException') {
      throw new ConfigError('name', request.name, 'was registered by someone else meanwhile; run the command again');
    }
    throw error;
  }
  await dynamoClient().send(new PutCommand({ TableName: where.table, Item: { ...benchmarkVersionKey(entry.name, entry.version), ...entry } }));
  return { entry, change: current ? 'bumped' : 'added' };
}

/** The suite a run evaluates: every registered benchmark, or the named ones (each must exist). */
export function selectSuite(all: readonly BenchmarkEntry[], names: readonly string[] | undefined): BenchmarkEntry[] {
  const sorted = [...all].sort((a, b) => (a.name < b.name ? -1 : 1));
  if (!names) return sorted;
  return names.map((name, i) => {
    const found = sorted.find((b) => b.name === name);
    if (!found) throw new ConfigError(`benchmarks[${i}]`, name, `is not registered (registered: ${sorted.map((b) => b.name).join(', ') || 'none'})`);
    return found;
  });
}

/** Which benchmarks the release guard reads, kept with the registry so changing them needs no redeploy. */
export const GuardSettingsEntry = z
  .object({
    target: z.string().regex(BENCHMARK_NAME),
    guard: z.string().regex(BENCHMARK_NAME),
    marginPoints: z.number().min(0).max(100),
  })
  .strict()
  .refine((s) => s.target !== s.guard, { path: ['guard'], message: 'must differ from the target benchmark' });
export type GuardSettingsEntry = z.infer<typeof GuardSettingsEntry>;

const GUARD_KEY = { pk: 'SUITE', sk: 'GUARD' };

export async function getGuardSettings(where: Pick<RegistryLocation, 'table'>): Promise<GuardSettingsEntry | undefined> {
  const out = await dynamoClient().send(new GetCommand({ TableName: where.table, Key: GUARD_KEY, ConsistentRead: true }));
  if (!out.Item) return undefined;
  const { target, guard, marginPoints } = out.Item;
  return parseOrThrow(GuardSettingsEntry, { target, guard, marginPoints }, 'guard settings');
}

export async function setGuardSettings(where: Pick<RegistryLocation, 'table'>, settings: unknown): Promise<GuardSettingsEntry> {
  const parsed = parseOrThrow(GuardSettingsEntry, settings, 'guard');
  await dynamoClient().send(new PutCommand({ TableName: where.table, Item: { ...GUARD_KEY, ...parsed, updatedAt: new Date().toISOString() } }));
  return parsed;
}
