/**
 * The artifact index: immutable, numbered versions of named artifacts, with lineage (which
 * artifact versions and which execution made each one). Versions come from an atomic counter
 * and a conditional put, so a version is never overwritten (and no transaction is needed).
 */
import { CopyObjectCommand, GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { GetCommand, PutCommand, QueryCommand, UpdateCommand, type QueryCommandInput, type QueryCommandOutput } from '@aws-sdk/lib-dynamodb';
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { dynamoClient, s3Client } from './clients/aws.ts';
import { ArtifactVersionExists, ConfigError, NotFoundError } from './errors.ts';
import { parseOrThrow } from './schema.ts';
import { canonicalJson, sha256Hex } from './json.ts';
import { parseS3Uri, s3Uri, type S3Location } from './s3uri.ts';
import { artifactCounterKey, artifactDirectoryKey, artifactVersionKey, withoutKeys } from './table.ts';

export const ARTIFACT_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** The file each version writes beside the files it publishes: its index entry (files, lineage, metrics). */
export const ARTIFACT_MANIFEST = 'manifest.json';

/**
 * A text corpus artifact's file listing its JSONL shards ({shards: [{uri}]}): the refinery's
 * refined-corpus publishes one, and the SAE pipeline reads any corpus artifact by it.
 */
export const CORPUS_MANIFEST = 'corpus-manifest.json';

/** The most files one version may publish (a files document's limit; clips of a video dataset). */
export const MAX_ARTIFACT_FILES = 10_000;
/**
 * Above this many characters of file list, a version's index item keeps its files in its
 * manifest.json only (a DynamoDB item holds at most 400 KB); reads fill them in from there.
 */
export const INLINE_FILES_CHARS = 100_000;

const ArtifactFile = z.object({
  uri: z.string().startsWith('s3://'),
  // The version's own manifest.json lies beside its files: a file of that name would be overwritten by it.
  name: z
    .string()
    .regex(/^[A-Za-z0-9._-]+$/)
    .refine((name) => name !== ARTIFACT_MANIFEST, `is reserved for the version's own ${ARTIFACT_MANIFEST}: name the file otherwise`),
});
const ArtifactFiles = z
  .array(ArtifactFile)
  .min(1)
  .max(MAX_ARTIFACT_FILES)
  .superRefine((files, ctx) => {
    const seen = new Set<string>();
    files.forEach((f, i) => {
      if (seen.has(f.name))
        ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `${JSON.stringify(f.name)} appears twice: one would overwrite the other` });
      seen.add(f.name);
    });
  });

export const PublishRequestSchema = z
  .object({
    name: z.string().regex(ARTIFACT_NAME, 'lowercase letters, digits and "-", at most 63'),
    pipeline: z.string().min(1),
    executionId: z.string().min(1),
    /** The files, listed in the request. */
    files: ArtifactFiles.optional(),
    /** Or an s3:// URI of a JSON document listing them (`[{uri, name}]`), for lists too long for a state. */
    filesUri: z.string().startsWith('s3://').optional(),
    metrics: z.record(z.string(), z.union([z.number(), z.string(), z.boolean()])).default({}),
    lineage: z.array(z.object({ name: z.string().regex(ARTIFACT_NAME), version: z.number().int().positive() })).default([]),
    cardUri: z.string().startsWith('s3://').optional(),
  })
  .refine((r) => (r.files === undefined) !== (r.filesUri === undefined), { path: ['files'], message: 'give exactly one of files and filesUri' });
export type PublishRequest = z.input<typeof PublishRequestSchema>;

export interface ArtifactVersion {
  readonly name: string;
  readonly version: number;
  readonly uri: string;
  readonly sha256: string;
  readonly files: { name: string; uri: string; sha256: string; bytes: number }[];
  readonly pipeline: string;
  readonly executionId: string;
  readonly lineage: { name: string; version: number }[];
  readonly metrics: Record<string, number | string | boolean>;
  readonly cardUri?: string;
  readonly createdAt: string;
  /** Set when the index item holds no file list (over INLINE_FILES_CHARS): reads take it from manifest.json. */
  readonly filesInManifest?: boolean;
}

export interface IndexLocation {
  readonly table: string;
  readonly bucket: string;
}

/** Parse a publish request, naming the field and value on failure. */
export function parsePublishRequest(input: unknown): z.output<typeof PublishRequestSchema> {
  return parseOrThrow(PublishRequestSchema, input);
}

export async function publishArtifact(input: unknown, where: IndexLocation): Promise<ArtifactVersion> {
  const req = parsePublishRequest(input);
  const s3 = s3Client();
  const ddb = dynamoClient();
  // Lineage must point at versions that exist: a dangling reference would lose provenance.
  for (const parent of req.lineage) await getArtifactVersion(where, parent.name, parent.version);

  const listed = req.files ?? (await readFilesDocument(req.filesUri!));
  const hashed = await mapPooled(listed, COPY_CONCURRENCY, async (file) => {
    const source = parseS3Uri(file.uri, `files.${file.name}.uri`);
    const { sha256, bytes, versionId } = await hashObject(source);
    return { ...file, source, sha256, bytes, versionId };
  });
  const counter = await ddb.send(
    new UpdateCommand({
      TableName: where.table,
      Key: artifactCounterKey(req.name),
      UpdateExpression: 'ADD lastVersion :one',
      ExpressionAttributeValues: { ':one': 1 },
      ReturnValues: 'UPDATED_NEW',
    }),
  );
  const version = Number(counter.Attributes?.lastVersion);
  const prefix = `artifacts/${req.name}/${String(version).padStart(12, '0')}/`;
  const files = await mapPooled(hashed, COPY_CONCURRENCY, async (file) => {
    const key = `${prefix}${file.name}`;
    // CopyObject copies at most 5 GB per object; a larger checkpoint would need a multipart
    // upload whose parts are UploadPartCopy ranges of the source. Not implemented.
    await s3.send(new CopyObjectCommand({ Bucket: where.bucket, Key: key, CopySource: copySource(file.source, file.versionId) }));
    return { name: file.name, uri: s3Uri({ Bucket: where.bucket, Key: key }), sha256: file.sha256, bytes: file.bytes };
  });
  const sha256 = sha256Hex(canonicalJson(files.map(({ name, sha256: h }) => ({ name, sha256: h }))));
  const artifact: ArtifactVersion = {
    name: req.name,
    version,
    uri: s3Uri({ Bucket: where.bucket, Key: prefix }),
    sha256,
    files,
    pipeline: req.pipeline,
    executionId: req.executionId,
    lineage: req.lineage,
    metrics: req.metrics,
    cardUri: req.cardUri,
    createdAt: new Date().toISOString(),
  };
  await s3.send(
    new PutObjectCommand({
      Bucket: where.bucket,
      Key: `${prefix}${ARTIFACT_MANIFEST}`,
      Body: JSON.stringify(artifact, null, 2),
      ContentType: 'application/json',
    }),
  );
  try {
    await ddb.send(
      new PutCommand({
        TableName: where.table,
        Item: { ...artifactVersionKey(req.name, version), ...indexed(artifact) },
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );
  } catch (error) {
    if ((error as Error).name === 'ConditionalCheckFailedException') {
      throw new ArtifactVersionExists(`artifact ${req.name} version ${version} already exists; versions are never overwritten`);
    }
    throw error;
  }
  await ddb.send(
    new PutCommand({
      TableName: where.table,
      Item: { ...artifactDirectoryKey(req.name), name: req.name, latestVersion: version, updatedAt: artifact.createdAt },
    }),
  );
  return artifact;
}

export async function listArtifactNames(where: IndexLocation): Promise<{ name: string; latestVersion: number; updatedAt: string }[]> {
  const items = await queryAll({
    TableName: where.table,
    KeyConditionExpression: 'pk = :pk',
    ExpressionAttributeValues: { ':pk': 'ARTIFACTS' },
  });
  return items.map((i) => ({ name: i.name, latestVersion: i.latestVersion, updatedAt: i.updatedAt }));
}

/** Every version of an artifact, newest first. */
export async function listArtifactVersions(where: IndexLocation, name: string): Promise<ArtifactVersion[]> {
  return Promise.all((await queryAll(versionsQuery(where, name))).map(fromItem));
}

/** One version; `latest` when version is omitted. */
export async function getArtifactVersion(where: IndexLocation, name: string, version?: number): Promise<ArtifactVersion> {
  if (version === undefined) {
    // Newest first, one item: the latest costs one read however many versions exist.
    const out = await dynamoClient().send(new QueryCommand({ ...versionsQuery(where, name), Limit: 1 }));
    const latest = out.Items?.[0];
    if (!latest) throw new NotFoundError(`artifact "${name}" has no versions`);
    return fromItem(latest);
  }
  const out = await dynamoClient().send(new GetCommand({ TableName: where.table, Key: artifactVersionKey(name, version) }));
  if (!out.Item) throw new NotFoundError(`artifact "${name}" has no version ${version}`);
  return fromItem(out.Item);
}

/** The version items of one artifact (not its counter), newest first. */
function versionsQuery(where: IndexLocation, name: string): QueryCommandInput {
  return {
    TableName: where.table,
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :v)',
    ExpressionAttributeValues: { ':pk': `ARTIFACT#${name}`, ':v': 'V#' },
    ScanIndexForward: false,
  };
}

/** A query's every page: one Query returns at most 1 MB of items. */
async function queryAll(input: QueryCommandInput): Promise<NonNullable<QueryCommandOutput['Items']>> {
  const items: NonNullable<QueryCommandOutput['Items']> = [];
  let ExclusiveStartKey: Record<string, unknown> | undefined;
  do {
    const page = await dynamoClient().send(new QueryCommand({ ...input, ExclusiveStartKey }));
    items.push(...(page.Items ?? []));
    ExclusiveStartKey = page.LastEvaluatedKey;
  } while (ExclusiveStartKey);
  return items;
}

/** The lineage tree of a version: its parents, their parents, and so on. */
export interface LineageNode {
  readonly name: string;
  readonly version: number;
  readonly executionId: string;
  readonly parents: LineageNode[];
}

export async function lineageOf(where: IndexLocation, name: string, version: number, depth = 8): Promise<LineageNode> {
  const artifact = await getArtifactVersion(where, name, version);
  const parents = depth <= 0 ? [] : await Promise.all(artifact.lineage.map((p) => lineageOf(where, p.name, p.version, depth - 1)));
  return { name, version, executionId: artifact.executionId, parents };
}

/** The object's sha256 and size, and the version that was read, so the copy takes those bytes. */
async function hashObject(location: S3Location): Promise<{ sha256: string; bytes: number; versionId?: string }> {
  const out = await s3Client().send(new GetObjectCommand(location));
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of out.Body as AsyncIterable<Uint8Array>) {
    hash.update(chunk);
    bytes += chunk.length;
  }
  return { sha256: hash.digest('hex'), bytes, versionId: out.VersionId };
}

/**
 * CopyObject's `CopySource`: bucket/key, URL-encoded per key segment (encodeURI would leave
 * `?`, `#`, `+` and `&` as they are, and S3 would read them as a query, a fragment or a space),
 * pinned with `?versionId=` on a versioned bucket, so a PUT between hashing and copying cannot
 * change the bytes the manifest's sha256 describes.
 */
export function copySource(source: S3Location, versionId?: string): string {
  const path = `${source.Bucket}/${source.Key.split('/').map(encodeURIComponent).join('/')}`;
  return versionId ? `${path}?versionId=${encodeURIComponent(versionId)}` : path;
}

function stripKeys(item: Record<string, unknown>): ArtifactVersion {
  return withoutKeys(item) as unknown as ArtifactVersion;
}

/** Copies and hashes at once when publishing: S3 serves many requests in parallel. */
const COPY_CONCURRENCY = 16;

/** fn over items, at most `limit` at once, results in the items' order. */
async function mapPooled<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** A files document: a JSON array of {uri, name}, checked like a request's files (the error names filesUri). */
async function readFilesDocument(uri: string): Promise<z.output<typeof ArtifactFiles>> {
  const location = parseS3Uri(uri, 'filesUri');
  const out = await s3Client().send(new GetObjectCommand(location));
  let parsed: unknown;
  try {
    parsed = JSON.parse(await (out.Body as { transformToString(): Promise<string> }).transformToString());
  } catch (error) {
    throw new ConfigError('filesUri', uri, `is not a JSON document (${(error as Error).message})`);
  }
  const result = ArtifactFiles.safeParse(parsed);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new ConfigError(`filesUri[${issue.path.join('.')}]`, uri, issue.message);
  }
  return result.data;
}

/** The index item: a long file list stays in the version's manifest.json only. */
function indexed(artifact: ArtifactVersion): ArtifactVersion {
  if (JSON.stringify(artifact.files).length <= INLINE_FILES_CHARS) return artifact;
  return { ...artifact, files: [], filesInManifest: true };
}

/** An index item as a version, its file list read from manifest.json when the item holds none. */
async function fromItem(item: Record<string, unknown>): Promise<ArtifactVersion> {
  const version = stripKeys(item);
  if (!version.filesInManifest) return version;
  const location = parseS3Uri(`${version.uri}${ARTIFACT_MANIFEST}`, 'uri');
  const out = await s3Client().send(new GetObjectCommand(location));
  const manifest = JSON.parse(await (out.Body as { transformToString(): Promise<string> }).transformToString()) as ArtifactVersion;
  return { ...version, files: manifest.files };
}
