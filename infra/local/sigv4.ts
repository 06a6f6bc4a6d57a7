/**
 * Signature Version 4 checked on the runtime's loopback services, as AWS checks it: every request
 * to the local S3, DynamoDB and AWS API (Step Functions, Secrets Manager, SES) must be signed
 * with the credentials this runtime made at its start and hands to its own Lambdas, jobs and
 * clients. Another process on the machine holds no key, so it can neither read the link-signing
 * secret nor touch the bucket or the table. A presigned URL (a sandboxed job's) is checked the
 * same way, and refused once it has expired.
 *
 * The signature is recomputed with @smithy/signature-v4 (the SDK's own signer) over the request
 * as received, limited to the headers it names as signed, and compared in constant time.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { SignatureV4 } from '@smithy/signature-v4';

export interface LocalCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

/** Fresh credentials for one runtime start (AWS's shapes: a 20-character key id, a 40-character secret). */
export function newLocalCredentials(): LocalCredentials {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  const id = [...randomBytes(16)].map((b) => alphabet[b % 32]).join('');
  return { accessKeyId: `AKLO${id}`, secretAccessKey: randomBytes(30).toString('base64') };
}

/** Why a request was refused: the error code and HTTP status AWS answers with. */
export class SignatureRefused extends Error {
  constructor(
    readonly code: 'MissingAuthenticationToken' | 'InvalidAccessKeyId' | 'SignatureDoesNotMatch' | 'AccessDenied' | 'IncompleteSignature',
    message: string,
    readonly status = 403,
  ) {
    super(message);
    this.name = code;
  }
}

type Bytes = string | ArrayBuffer | ArrayBufferView;
const toBuffer = (data: Bytes): string | Buffer =>
  typeof data === 'string' ? data : data instanceof ArrayBuffer ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);

/** The signer's hash: SHA-256, or HMAC-SHA-256 when given a secret. */
class NodeSha256 {
  private readonly hash;
  constructor(secret?: Bytes) {
    this.hash = secret === undefined ? createHash('sha256') : createHmac('sha256', toBuffer(secret));
  }
  update(data: Bytes): void {
    this.hash.update(toBuffer(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
}

export interface ReceivedRequest {
  readonly method: string;
  /** The request target as sent: path and query, still percent-encoded. */
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  /** The body, for services whose signature covers it (all but S3, which signs its hash header). */
  readonly body?: Buffer;
}

const AUTH_HEADER = /^AWS4-HMAC-SHA256 Credential=([^/,\s]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request,\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$/;

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(',') : value;
}

/** 20261201T120000Z -> Date. */
function amzDate(value: string | undefined): Date | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value ?? '');
  return m ? new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!)) : undefined;
}

function sameSignature(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Splits a request target into its raw path and its decoded query parameters. */
function target(url: string): { path: string; query: Record<string, string | string[]> } {
  const at = url.indexOf('?');
  const path = at < 0 ? url : url.slice(0, at);
  const query: Record<string, string | string[]> = {};
  if (at >= 0) {
    for (const [k, v] of new URLSearchParams(url.slice(at + 1))) {
      const had = query[k];
      query[k] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v];
    }
  }
  return { path, query };
}

function signer(credentials: LocalCredentials, region: string, service: string): SignatureV4 {
  // S3 signs the path as sent (the SDK escapes keys itself) and names its payload hash in a header.
  return new SignatureV4({ credentials, region, service, sha256: NodeSha256, uriEscapePath: service !== 's3', applyChecksum: false });
}

/** The headers a signature names, as received, values trimmed and inner spaces folded (SigV4's canonical form). */
function signedHeaders(received: IncomingHttpHeaders, signed: readonly string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of signed) {
    const value = headerValue(received, name);
    if (value !== undefined) headers[name] = value.trim().replace(/\s+/g, ' ');
  }
  return headers;
}

function hostParts(headers: IncomingHttpHeaders): { hostname: string; port?: number } {
  const host = headerValue(headers, 'host') ?? '';
  const [hostname = '', port] = host.split(':');
  return port ? { hostname, port: Number(port) } : { hostname };
}

/**
 * Checks the request's signature (header or presigned query) against `credentials`; throws
 * SignatureRefused naming what is wrong. Returns the service the signature was made for.
 */
export async function verifySignature(request: ReceivedRequest, credentials: LocalCredentials, now = new Date()): Promise<string> {
  const { path, query } = target(request.url);
  const authorization = headerValue(request.headers, 'authorization');
  if (authorization) {
    const m = AUTH_HEADER.exec(authorization.trim());
    if (!m) throw new SignatureRefused('IncompleteSignature', 'the Authorization header is not an AWS4-HMAC-SHA256 signature');
    const [, keyId, , region, service, signedList, signature] = m as unknown as string[];
    if (keyId !== credentials.accessKeyId) {
      throw new SignatureRefused('InvalidAccessKeyId', 'the access key id is not the one this local runtime issued');
    }
    const signingDate = amzDate(headerValue(request.headers, 'x-amz-date'));
    if (!signingDate) throw new SignatureRefused('IncompleteSignature', 'the signed request has no X-Amz-Date header');
    const signed = signedList!.split(';');
    const headers = signedHeaders(request.headers, signed);
    const remade = await signer(credentials, region!, service!).sign(
      { method: request.method, protocol: 'http:', ...hostParts(request.headers), path, query, headers, body: request.body },
      { signingDate, signableHeaders: new Set(signed) },
    );
    const expected = /Signature=([0-9a-f]{64})/.exec(String(remade.headers.authorization ?? remade.headers.Authorization))?.[1] ?? '';
    if (!sameSignature(expected, signature!)) {
      throw new SignatureRefused('SignatureDoesNotMatch', 'the request signature does not match the one calculated with this runtime’s key');
    }
    return service!;
  }
  const credential = query['X-Amz-Credential'];
  const provided = query['X-Amz-Signature'];
  if (typeof credential !== 'string' || typeof provided !== 'string') {
    throw new SignatureRefused('MissingAuthenticationToken', 'the request is not signed: the local services take only requests signed with this runtime’s key');
  }
  const [keyId, , region, service] = credential.split('/');
  if (keyId !== credentials.accessKeyId) throw new SignatureRefused('InvalidAccessKeyId', 'the access key id is not the one this local runtime issued');
  const signingDate = amzDate(String(query['X-Amz-Date']));
  const expiresIn = Number(query['X-Amz-Expires']);
  if (!signingDate || !Number.isInteger(expiresIn))
    throw new SignatureRefused('IncompleteSignature', 'the presigned URL has no valid X-Amz-Date or X-Amz-Expires');
  if (now.getTime() > signingDate.getTime() + expiresIn * 1000) throw new SignatureRefused('AccessDenied', 'Request has expired');
  const signed = String(query['X-Amz-SignedHeaders'] ?? 'host').split(';');
  const headers = signedHeaders(request.headers, signed);
  // The presigner signs S3's payload hash as a header it then moves into the query: put it back.
  const payload = query['X-Amz-Content-Sha256'];
  if (typeof payload === 'string') headers['X-Amz-Content-Sha256'] = payload;
  const rest = Object.fromEntries(Object.entries(query).filter(([k]) => k !== 'X-Amz-Signature' && k !== 'X-Amz-Content-Sha256'));
  const remade = await signer(credentials, region!, service!).presign(
    { method: request.method, protocol: 'http:', ...hostParts(request.headers), path, query: rest, headers },
    { signingDate, expiresIn, signableHeaders: new Set(signed) },
  );
  if (!sameSignature(String(remade.query?.['X-Amz-Signature'] ?? ''), provided)) {
    throw new SignatureRefused('SignatureDoesNotMatch', 'the presigned URL’s signature does not match the one calculated with this runtime’s key');
  }
  return service!;
}
