/**
 * League match (step 2b): one pair plays `games` games in lock-step and returns the small tally.
 * A snapshot's ONNX comes from S3; a corrupt or wrong-shaped one raises InvalidPolicyModel, which
 * retrying cannot fix (the state machine records it for this pair and the league goes on).
 */
import type { Context } from 'aws-lambda';
import { createRandomBot, createTacticalBot } from '#shared/selfplay/bots.ts';
import { readObjectBytes } from '#shared/clients/aws.ts';
import { startInvocationLog } from '#shared/log.ts';
import { loadOnnxPolicy, type OnnxPolicy } from '#shared/selfplay/onnx.ts';
import { botSeed, MatchRequest, toMatchResult, type LeaguePlayer } from '#shared/selfplay/league.ts';
import { botPolicy, playMatch, type Policy } from '#shared/selfplay/match.ts';
import { parseOrThrow } from '#shared/schema.ts';

// Loaded sessions by URI, kept for the container's life: a warm Lambda playing the same snapshot
// again skips the download and the session build. A failed load is forgotten, so a retry re-reads.
const sessions = new Map<string, Promise<OnnxPolicy>>();

function snapshotPolicy(player: LeaguePlayer): Promise<OnnxPolicy> {
  const uri = player.onnxUri!; // the schema requires it of a snapshot
  let session = sessions.get(uri);
  if (!session) {
    session = readObjectBytes(uri, 'onnxUri').then((bytes) => loadOnnxPolicy(bytes, { name: player.id }));
    session.catch(() => sessions.delete(uri));
    sessions.set(uri, session);
  }
  return session;
}

async function policyOf(player: LeaguePlayer, seed: number): Promise<Policy> {
  if (player.kind === 'random') return botPolicy(createRandomBot(seed));
  if (player.kind === 'tactical') return botPolicy(createTacticalBot(seed));
  return snapshotPolicy(player);
}

export async function handler(event: unknown, context?: Context) {
  startInvocationLog(context, { step: 'match' });
  const { a, b, games, seed, mode } = parseOrThrow(MatchRequest, event);
  const [policyA, policyB] = await Promise.all([policyOf(a, botSeed(seed, 'a')), policyOf(b, botSeed(seed, 'b'))]);
  return toMatchResult(await playMatch({ a: policyA, b: policyB, games, seed, mode }), a.id, b.id);
}
