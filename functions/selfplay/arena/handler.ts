/**
 * The arena (API Gateway HTTP API, payload 2.0): `GET /arena` serves the page (public, so it can
 * offer sign-in), `GET /` sends there, and `POST /arena/move` plays the champion's reply to the
 * game in the body (behind the JWT authorizer unless the arena is public). The protocol and its
 * errors are in shared/selfplay/arena.ts, the champion in shared/selfplay/champion.ts and the
 * page in shared/selfplay/arena-page.ts.
 */
import type { APIGatewayProxyEventV2WithJWTAuthorizer, APIGatewayProxyStructuredResultV2 as Result, Context } from 'aws-lambda';
import { ENV, requireEnv } from '#shared/env.ts';
import { startInvocationLog } from '#shared/log.ts';
import { arenaErrorResponse, arenaSignInFromEnv, parseArenaRequest } from '#shared/selfplay/arena.ts';
import { MOVE_PATH, renderArenaPage } from '#shared/selfplay/arena-page.ts';
import { ChampionSource, playArenaMove } from '#shared/selfplay/champion.ts';

const champions = new ChampionSource({ where: { table: requireEnv(ENV.table), bucket: requireEnv(ENV.bucket) } });
const PAGE = renderArenaPage({ signIn: arenaSignInFromEnv(process.env), movePath: MOVE_PATH });

const json = (statusCode: number, body: unknown): Result => ({
  statusCode,
  headers: { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' },
  body: JSON.stringify(body),
});

export async function handler(event: APIGatewayProxyEventV2WithJWTAuthorizer, context?: Context): Promise<Result> {
  startInvocationLog(context, { step: 'arena' });
  if (event.routeKey === 'GET /arena') return PAGE;
  if (event.routeKey === 'GET /') return { statusCode: 302, headers: { Location: '/arena' }, body: '' };
  if (event.routeKey !== `POST ${MOVE_PATH}`) return json(404, { message: 'Not Found' });
  const claims = event.requestContext.authorizer?.jwt?.claims ?? {};
  const player = claims['username'] ?? claims['cognito:username'] ?? claims['sub'] ?? 'anonymous';
  try {
    return json(200, await playArenaMove(champions, parseArenaRequest(event.body, event.isBase64Encoded), player));
  } catch (error) {
    const response = arenaErrorResponse(error);
    if (!response) throw error;
    return json(response.statusCode, response.body);
  }
}
