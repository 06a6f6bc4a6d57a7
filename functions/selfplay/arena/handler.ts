/**
 * The arena (API Gateway HTTP API, payload 2.0): `GET /arena` serves the page (public, so it can
 * offer sign-in), `GET /` sends there, and `POST /arena/move` plays the champion's reply to the
 * game in the body (behind the JWT authorizer unless the arena is public). The protocol and its
 * errors are in shared/selfplay/arena.ts; the champion comes from the artifact index (./champion.ts).
 */
import type { APIGatewayProxyEventV2WithJWTAuthorizer, APIGatewayProxyStructuredResultV2 as Result } from 'aws-lambda';
import {
  arenaErrorResponse, arenaSignInFromEnv, CHAMPION_ARTIFACT, parseArenaRequest, playArenaTurn, replayArenaGame,
} from '#shared/selfplay/arena.ts';
import { ENV, requireEnv } from '#shared/env.ts';
import { ChampionSource } from './champion.ts';
import { MOVE_PATH, renderArenaPage } from './page.ts';

const champions = new ChampionSource({ where: { table: requireEnv(ENV.table), bucket: requireEnv(ENV.bucket) } });
const PAGE = renderArenaPage({ signIn: arenaSignInFromEnv(process.env), movePath: MOVE_PATH });

const json = (statusCode: number, body: unknown): Result => ({
  statusCode,
  headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' },
  body: JSON.stringify(body),
});

export async function handler(event: APIGatewayProxyEventV2WithJWTAuthorizer): Promise<Result> {
  if (event.routeKey === 'GET /arena') return PAGE;
  if (event.routeKey === 'GET /') return { statusCode: 302, headers: { Location: '/arena' }, body: '' };
  if (event.routeKey !== `POST ${MOVE_PATH}`) return json(404, { message: 'Not Found' });
  try {
    const arena = replayArenaGame(parseArenaRequest(event.body, event.isBase64Encoded));
    const champion = await champions.get();
    const state = await playArenaTurn(arena, champion.policy);
    if (state.status !== 'playing') {
      const claims = event.requestContext.authorizer?.jwt?.claims ?? {};
      const player = claims['username'] ?? claims['cognito:username'] ?? claims['sub'] ?? 'anonymous';
      console.log(JSON.stringify({ message: 'arena game over', player, result: state.status, human: state.human, plies: state.moves.length, championVersion: champion.version }));
    }
    return json(200, { ...state, champion: { artifact: CHAMPION_ARTIFACT, version: champion.version } });
  } catch (error) {
    const response = arenaErrorResponse(error);
    if (!response) throw error;
    return json(response.statusCode, response.body);
  }
}
