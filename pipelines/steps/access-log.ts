/**
 * The JSON access-log line of every HTTP API the project serves (approval links, the arena):
 * the same fields everywhere, so one query reads them all. `$context.path` carries no query
 * string, so signed links never reach the log.
 */
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';

/** The common fields, with `extra` (e.g. the authorizer's) before the integration error. */
export function httpAccessLogFormat(extra: Record<string, string> = {}): AccessLogFormat {
  return AccessLogFormat.custom(
    JSON.stringify({
      requestId: '$context.requestId',
      ip: '$context.identity.sourceIp',
      requestTime: '$context.requestTime',
      routeKey: '$context.routeKey',
      path: '$context.path',
      status: '$context.status',
      responseLength: '$context.responseLength',
      ...extra,
      integrationError: '$context.integrationErrorMessage',
    }),
  );
}
