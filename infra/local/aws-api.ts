/**
 * The part of the AWS API the runtime serves itself on loopback, for handlers and the CLI that
 * call AWS through the real SDK: Step Functions (start/describe executions, task callbacks),
 * Secrets Manager (GetSecretValue), SES v2 (SendEmail, written to the outbox as .eml), SQS (the
 * app's queues, queues.ts) and Lambda's Invoke (RequestResponse: the function runs in the
 * runtime, as any other invocation). Clients reach it through AWS_ENDPOINT_URL_SFN /
 * _SECRETS_MANAGER / _SESV2 / _SQS / _LAMBDA.
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
  sqs(action: string, body: Record<string, unknown>): Promise<unknown>;
  /** Runs a function by name or ARN; rejects with its error (name = errorType, message = Lambda's error JSON). */
  invoke(functionName: string, event: unknown): Promise<unknown>;
}

/** Lambda's Invoke: `POST /2015-03-31/functions/<name>/invocations`. */
const INVOKE_PATH = /^\/2015-03-31\/functions\/([^/?]+)\/invocations(?:\?|$)/;

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
      const invoke = req.method === 'POST' ? INVOKE_PATH.exec(req.url ?? '') : null;
      if (invoke) return await invokeFunction(res, handlers, decodeURIComponent(invoke[1]!), body, req.headers['x-amz-invocation-type']);
      if (target.startsWith('AmazonSQS.')) {
        return reply(res, 200, await handlers.sqs(target.slice('AmazonSQS.'.length), body));
      }
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
  return listen(server, port, 'local AWS API (Step Functions, Secrets Manager, SES, SQS, Lambda)');
}

/**
 * A synchronous invocation, answered as Lambda answers one: the function's result; or, when the
 * function fails, status 200 with `X-Amz-Function-Error: Unhandled` and its error as the
 * payload; a missing function is ResourceNotFoundException (404).
 */
async function invokeFunction(res: ServerResponse, handlers: AwsApiHandlers, name: string, event: unknown, type: unknown): Promise<void> {
  if (type !== undefined && type !== 'RequestResponse') {
    throw new ApiError('InvalidParameterValueException', `the local Lambda API runs RequestResponse invocations only (got ${String(type)})`);
  }
  let result: unknown;
  try {
    result = await handlers.invoke(name, event);
  } catch (error) {
    const e = error as Error;
    if (e.name === 'Lambda.ResourceNotFoundException') throw new ApiError('ResourceNotFoundException', e.message, 404);
    let payload: unknown;
    try {
      payload = JSON.parse(e.message);
    } catch {
      payload = { errorType: e.name, errorMessage: e.message };
    }
    res.writeHead(200, { 'content-type': 'application/json', 'x-amz-function-error': 'Unhandled' });
    res.end(JSON.stringify(payload));
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(result ?? null));
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
