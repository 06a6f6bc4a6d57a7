/**
 * Evaluation, last step: the run's leaderboard and the guard's decision, over every result of the
 * run published so far (this checkpoint's and the others'), current benchmark versions only.
 * Writes leaderboard.html and leaderboard.json for the publish step.
 */
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { z } from 'zod';
import { listArtifactVersions } from '#shared/artifacts.ts';
import { listBenchmarks } from '#shared/evals/benchmarks.ts';
import { s3Client } from '#shared/clients/aws.ts';
import { ENV, requireEnv } from '#shared/env.ts';
import { currentResults, decideRelease, EvalMetrics, type GuardDecision } from '#shared/evals/guard.ts';
import { canonicalJson, sha256Hex } from '#shared/json.ts';
import { leaderboardHtml, type EvalFailure } from '#shared/evals/leaderboard.ts';
import { parseOrThrow } from '#shared/schema.ts';

const table = requireEnv(ENV.table);
const bucket = requireEnv(ENV.bucket);
const pipeline = requireEnv(ENV.pipeline);

const Event = z
  .object({
    run: z.string(),
    step: z.int().min(0),
    baseStep: z.int().min(0).nullable(),
    evalArtifact: z.string(),
    guard: z.object({ target: z.string().nullable(), guard: z.string().nullable(), marginPoints: z.number() }),
    items: z.array(z.object({ ok: z.boolean(), item: z.unknown().optional(), error: z.string().optional(), cause: z.string().optional() }).loose()),
  })
  .strict();

/** A failed fan-out item carries the iteration's input: the benchmark it was scoring. */
const FailedItem = z.object({ benchmark: z.object({ name: z.string() }) });

export async function handler(event: unknown) {
  const request = parseOrThrow(Event, event);
  const where = { table, bucket };
  const versions = new Map((await listBenchmarks(where)).map((b) => [b.name, b.version]));
  const published = await listArtifactVersions(where, request.evalArtifact);
  const all = published
    .reverse() // oldest first: the latest of a pair wins
    .map((a) => parseOrThrow(EvalMetrics, a.metrics, `${request.evalArtifact}@${a.version}.metrics`))
    .filter((m) => m.run === request.run);
  const results = currentResults(all, versions);
  const failures: EvalFailure[] = request.items
    .filter((i) => !i.ok)
    .map((i) => ({ step: request.step, benchmark: parseOrThrow(FailedItem, i.item, 'items.item').benchmark.name, error: i.error ?? 'Error', cause: i.cause ?? '' }));
  const baseStep = request.baseStep ?? Math.min(...results.map((r) => r.step), request.step);
  const { target, guard, marginPoints } = request.guard;
  const decision: GuardDecision =
    target && guard
      ? decideRelease(results, { target, guard, marginPoints, baseStep })
      : { settings: { target: target ?? '-', guard: guard ?? '-', marginPoints, baseStep }, baseGuardPoints: null, floorPoints: null, candidate: null, verdicts: [], summary: 'no guard configured (frontier benchmarks guard --target NAME --guard NAME)' };
  const board = { run: request.run, results, decision, failures, versions: Object.fromEntries(versions) };
  const json = JSON.stringify(board, null, 2);
  const prefix = `data/${pipeline}/leaderboard/${sha256Hex(canonicalJson(board)).slice(0, 32)}/`;
  const files = [];
  for (const [name, body, type] of [
    ['leaderboard.json', json, 'application/json'],
    ['leaderboard.html', await leaderboardHtml(board), 'text/html; charset=utf-8'],
  ] as const) {
    await s3Client().send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${name}`, Body: body, ContentType: type }));
    files.push({ name, uri: `s3://${bucket}/${prefix}${name}`, Bucket: bucket, Key: `${prefix}${name}` });
  }
  return {
    files: files.map(({ name, uri }) => ({ name, uri })),
    reportUri: files[1]!.uri,
    decision: { candidate: decision.candidate, summary: decision.summary },
    metrics: { run: request.run, candidate: decision.candidate ?? -1, checkpoints: new Set(results.map((r) => r.step)).size, results: results.length, failures: failures.length },
    s3Outputs: files.map(({ Bucket, Key }) => ({ Bucket, Key })),
  };
}
