/**
 * The league document in S3, content-addressed: `data/<pipeline>/league/<sha256>.json`. Writing
 * the same league twice writes the same key with the same bytes, so a retried Lambda or a rerun
 * changes nothing; reading checks the document against its schema and its name.
 */
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { readObjectBytes, s3Client } from './clients/aws.ts';
import { ConfigError } from './errors.ts';
import { canonicalJson, sha256Hex } from './json.ts';
import { LeagueDoc } from './league-doc.ts';
import { parseOrThrow } from './schema.ts';

export async function readLeague(uri: string, field = 'leagueUri'): Promise<LeagueDoc> {
  const bytes = await readObjectBytes(uri, field);
  const name = /([0-9a-f]{64})\.json$/.exec(uri)?.[1];
  if (name && sha256Hex(bytes) !== name) throw new ConfigError(field, uri, 'the league document does not match the hash in its name');
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new ConfigError(field, uri, `is not JSON (${(error as Error).message})`);
  }
  return parseOrThrow(LeagueDoc, parsed, 'league');
}

export async function writeLeague(bucket: string, pipeline: string, doc: LeagueDoc): Promise<{ uri: string; Bucket: string; Key: string }> {
  const body = canonicalJson(parseOrThrow(LeagueDoc, doc, 'league'));
  const key = `data/${pipeline}/league/${sha256Hex(body)}.json`;
  await s3Client().send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentType: 'application/json' }));
  return { uri: `s3://${bucket}/${key}`, Bucket: bucket, Key: key };
}
