/**
 * Objects the pipelines write to S3, and JSON documents content-addressed there:
 * `<prefix><sha256 of the canonical JSON>.json`. Writing the same document twice writes the same
 * key with the same bytes, so a retried Lambda or a rerun changes nothing; reading checks the
 * bytes against the hash in the name before parsing them.
 */
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { readObjectBytes, s3Client } from './clients/aws.ts';
import { ConfigError } from './errors.ts';
import { canonicalJson, sha256Hex } from './json.ts';

export interface S3Written {
  readonly uri: string;
  readonly Bucket: string;
  readonly Key: string;
}

export async function writeFile(bucket: string, key: string, body: string | Uint8Array, contentType: string): Promise<S3Written> {
  await s3Client().send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentType: contentType }));
  return { uri: `s3://${bucket}/${key}`, Bucket: bucket, Key: key };
}

/** A JSON document (canonical JSON) at `<prefix><sha256>.json`. */
export async function writeContentAddressed(bucket: string, prefix: string, value: unknown): Promise<S3Written> {
  const body = canonicalJson(value);
  return writeFile(bucket, `${prefix}${sha256Hex(body)}.json`, body, 'application/json');
}

/**
 * The parsed JSON at `uri`; when its name is a sha256 (`.../<sha256>.json`), the bytes must hash
 * to it. Errors name `field`, the URI and `what` the document is ("league document").
 */
export async function readContentAddressed(uri: string, field: string, what: string): Promise<unknown> {
  const bytes = await readObjectBytes(uri, field);
  const name = /([0-9a-f]{64})\.json$/.exec(uri)?.[1];
  if (name && sha256Hex(bytes) !== name) throw new ConfigError(field, uri, `the ${what} does not match the hash in its name`);
  return parseJsonBytes(bytes, field, uri);
}

/** JSON from bytes, or a ConfigError naming the field and the URI. */
export function parseJsonBytes(bytes: Buffer, field: string, uri: string): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new ConfigError(field, uri, `is not JSON (${(error as Error).message})`);
  }
}
