/**
 * The part of the AWS API the runtime serves itself on loopback, for handlers that call
 * AWS through the real SDK: Step Functions (start/describe executions, task callbacks),
 * Secrets Manager (GetSecretValue) and SES v2 (SendEmail, written to the outbox as .eml).
 * Handlers reach it through AWS_ENDPOINT_URL_SFN / _SECRETS_MANAGER / _SESV2.
 */
import { createServer, type ServerResponse } from 'node:http';
import { listen, readAll, refuseJson, type Listening } from './emulators.ts';
import { writeEml } from './outbox.ts';
import { type LocalCredentials, SignatureRefused, verifySignature } from './sigv4.ts';

/** An error as the JSON protocols return it; the SDK turns `__type` into the error's name. */
export class ApiError extends Error {
  constructor(
    readonly type: string,
    message: string,
    readonly status = 400,
  ) {
    super(message);
    this.name = type;
  }
}

export interface AwsApiHandlers {
  sfn(action: string, body: Record<string, unknown>): Promise<unknown>;
  secrets(action: string, body: Record<string, unknown>): Promise<unknown>;
  sendEmail(body: Record<string, unknown>): Promise<{ MessageId: string }>;
}

function reply(res: ServerResponse, status: number, body: unknown, contentType = 'application/x-amz-json-1.0') {
  res.writeHead(status, { 'content-type': contentType });
  res.end(JSON.stringify(body));
}

/** Serves the handlers to requests signed with `credentials` (any other is refused, as AWS does). */
export async function startAwsApi(port: number, credentials: LocalCredentials, handlers: AwsApiHandlers): Promise<Listening> {
  const server = createServer(async (req, res) => {
    try {
      const bytes = await readAll(req);
      try {
        await verifySignature({ method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers, body: bytes }, credentials);
      } catch (error) {
        if (error instanceof SignatureRefused) return refuseJson(res, error);
        throw error;
      }
      const text = bytes.toString('utf8');
      const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
      const target = String(req.headers['x-amz-target'] ?? '');
      if (target.startsWith('AWSStepFunctions.')) {
        return reply(res, 200, await handlers.sfn(target.slice('AWSStepFunctions.'.length), body));
      }
      if (target.startsWith('secretsmanager.')) {
        return reply(res, 200, await handlers.secrets(target.slice('secretsmanager.'.length), body), 'application/x-amz-json-1.1');
      }
      if (req.method === 'POST' && req.url?.startsWith('/v2/email/outbound-emails')) {
        return reply(res, 200, await handlers.sendEmail(body), 'application/json');
      }
      throw new ApiError('UnknownOperationException', `the local AWS API does not serve ${req.method} ${req.url} ${target}`);
    } catch (error) {
      const e = error instanceof ApiError ? error : new ApiError('InternalFailure', String((error as Error)?.message ?? error), 500);
      res.writeHead(e.status, { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-errortype': e.type });
      res.end(JSON.stringify({ __type: e.type, message: e.message }));
    }
  });
  return listen(server, port, 'local AWS API (Step Functions, Secrets Manager, SES)');
}

/** Secrets Manager's GetSecretValue, over the secrets provisioned from the templates (by ARN or name). */
export function secretsManagerApi(secrets: ReadonlyMap<string, string>): AwsApiHandlers['secrets'] {
  return async (action, body) => {
    if (action !== 'GetSecretValue') throw new ApiError('UnknownOperationException', `the local Secrets Manager has no ${action}`);
    const id = String(body.SecretId);
    const value = secrets.get(id) ?? [...secrets.entries()].find(([arn]) => arn.endsWith(`:secret:${id}`))?.[1];
    if (value === undefined) throw new ApiError('ResourceNotFoundException', `Secrets Manager can't find the specified secret: ${id}`);
    return { ARN: id, Name: id.split(':').pop(), SecretString: value, VersionId: 'local', VersionStages: ['AWSCURRENT'] };
  };
}

/** SES v2's SendEmail: each message written to the outbox as an .eml file. */
export function sesSendEmail(outboxDir: string, onEmail: (file: string) => void): AwsApiHandlers['sendEmail'] {
  return async (body) => {
    const file = writeEml(outboxDir, body);
    onEmail(file);
    return {
      MessageId: file
        .split('/')
        .pop()!
        .replace(/\.eml$/, ''),
    };
  };
}
