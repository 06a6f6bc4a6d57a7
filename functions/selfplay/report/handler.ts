/**
 * League report (step 3): the champion's files and the HTML report, written under a prefix named
 * by the league document and the config, and listed for the publish step. The champion's ONNX is
 * listed where training wrote it; publishing copies it into the artifact.
 */
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { z } from 'zod';
import { CHAMPION_FILE } from '#shared/selfplay/arena.ts';
import { s3Client } from '#shared/clients/aws.ts';
import { ENV, requireEnv } from '#shared/env.ts';
import { canonicalJson, sha256Hex } from '#shared/json.ts';
import { championMetrics, championSummary, eloTable, leagueHeadToHead, leagueReportHtml } from '#shared/selfplay/league-report.ts';
import { readLeague } from '#shared/selfplay/league-store.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import { parseOrThrow } from '#shared/schema.ts';

const bucket = requireEnv(ENV.bucket);
const pipeline = requireEnv(ENV.pipeline);

const Event = z.object({ leagueUri: z.string(), config: z.record(z.string(), z.unknown()) }).strict();

export async function handler(event: unknown) {
  const { leagueUri, config } = parseOrThrow(Event, event);
  const doc = await readLeague(leagueUri);
  const summary = championSummary(doc);
  const prefix = `data/${pipeline}/report/${sha256Hex(canonicalJson({ leagueUri, config })).slice(0, 32)}/`;
  const put = async (name: string, body: string, contentType: string) => {
    const key = `${prefix}${name}`;
    await s3Client().send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentType: contentType }));
    return { name, uri: `s3://${bucket}/${key}`, Bucket: bucket, Key: key };
  };
  const written = [
    await put('elo.json', JSON.stringify(eloTable(doc), null, 2), 'application/json'),
    await put('head-to-head.json', JSON.stringify(leagueHeadToHead(doc), null, 2), 'application/json'),
    await put('config.json', JSON.stringify({ config, champion: summary.champion, training: doc.generations.find((g) => g.player === summary.champion.id)?.train.groups }, null, 2), 'application/json'),
    await put('report.html', await leagueReportHtml(doc, config), 'text/html; charset=utf-8'),
  ];
  const files = [
    { name: CHAMPION_FILE, uri: summary.champion.onnxUri! },
    { name: 'league.json', uri: leagueUri },
    ...written.map(({ name, uri }) => ({ name, uri })),
  ];
  return {
    files,
    metrics: championMetrics(doc),
    reportUri: written.at(-1)!.uri,
    s3Outputs: [parseS3Uri(summary.champion.onnxUri!), parseS3Uri(leagueUri), ...written.map(({ Bucket, Key }) => ({ Bucket, Key }))],
  };
}
