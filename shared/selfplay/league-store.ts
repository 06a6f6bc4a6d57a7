/**
 * The league document in S3, content-addressed: `data/<pipeline>/league/<sha256>.json`. Writing
 * the same league twice writes the same key with the same bytes, so a retried Lambda or a rerun
 * changes nothing; reading checks the document against its schema and its name.
 */
import { readContentAddressed, writeContentAddressed, type S3Written } from '../documents.ts';
import { LeagueDoc } from './league-doc.ts';
import { parseOrThrow } from '../schema.ts';

export async function readLeague(uri: string, field = 'leagueUri'): Promise<LeagueDoc> {
  return parseOrThrow(LeagueDoc, await readContentAddressed(uri, field, 'league document'), 'league');
}

export async function writeLeague(bucket: string, pipeline: string, doc: LeagueDoc): Promise<S3Written> {
  return writeContentAddressed(bucket, `data/${pipeline}/league/`, parseOrThrow(LeagueDoc, doc, 'league'));
}
