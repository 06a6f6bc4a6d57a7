/**
 * The loopback emulators behind the real AWS SDK: dynalite (DynamoDB) and s3rver (S3),
 * persisted under the data directory, plus the small HTTP servers of the runtime itself.
 * One runtime per data directory (dynalite crashes when a second process opens it), so the
 * directory is locked by pid.
 */
import { createServer, type Server } from 'node:net';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, request as httpRequest, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { EmulatorStartError } from '#shared/errors.ts';
import { type LocalCredentials, SignatureRefused, verifySignature } from './sigv4.ts';

const require = createRequire(import.meta.url);

export interface Listening {
  readonly url: string;
  close(): Promise<void>;
}

/** Fails with a clear error when a fixed port is taken; port 0 always works. */
export async function assertPortFree(port: number, what: string): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe: Server = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      reject(
        new EmulatorStartError(
          error.code === 'EADDRINUSE'
            ? `${what} cannot listen on 127.0.0.1:${port}: the port is in use by another process; stop it or choose other ports (--port-base)`
            : `${what} cannot listen on 127.0.0.1:${port}: ${error.message}`,
        ),
      );
    });
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve()));
  });
}

export async function listen(server: HttpServer, port: number, what: string): Promise<Listening> {
  await assertPortFree(port, what);
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) => {
      // Release whatever the server holds (dynalite's database) before reporting.
      server.close();
      reject(new EmulatorStartError(`${what}: ${error.message}`));
    });
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const actual = typeof address === 'object' && address ? address.port : port;
  return {
    url: `http://127.0.0.1:${actual}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

/** A request's whole body. */
export async function readAll(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A refused request as the JSON protocols (DynamoDB, the AWS API) answer it. */
export function refuseJson(res: ServerResponse, error: SignatureRefused): void {
  res.writeHead(error.status, { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-errortype': error.code });
  res.end(JSON.stringify({ __type: error.code, message: error.message }));
}

/** A refused or failed request as S3 answers it (REST-XML). */
function s3Error(res: ServerResponse, status: number, code: string, message: string, extra = ''): void {
  res.writeHead(status, { 'content-type': 'application/xml' });
  res.end(`<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message>${extra}</Error>`);
}

/**
 * DynamoDB: dynalite listens on a Unix socket in a directory only this user can enter, and the
 * runtime's loopback port forwards to it the requests signed with the runtime's credentials.
 */
export async function startDynalite(dir: string, port: number, credentials?: LocalCredentials): Promise<Listening> {
  mkdirSync(dir, { recursive: true });
  // Check the port before dynalite opens its database: an instance that never listens would
  // still hold the LevelDB lock, and the next start on this directory would hang on it.
  await assertPortFree(port, 'DynamoDB emulator (dynalite)');
  const dynalite = require('dynalite') as (options: Record<string, unknown>) => HttpServer;
  const server = dynalite({ path: dir, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  if (!credentials) return listen(server, port, 'DynamoDB emulator (dynalite)');
  const socketDir = mkdtempSync(join(tmpdir(), 'fp-dynamodb-'));
  const socketPath = join(socketDir, 'dynalite.sock');
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) => {
      server.close();
      reject(new EmulatorStartError(`DynamoDB emulator (dynalite): ${error.message}`));
    });
    server.listen(socketPath, () => resolve());
  });
  const front = createHttpServer(async (req, res) => {
    try {
      const body = await readAll(req);
      await verifySignature({ method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers, body }, credentials);
      const forward = httpRequest({ socketPath, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 500, answer.headers);
        answer.pipe(res);
      });
      forward.on('error', (error) => {
        res.writeHead(500, { 'content-type': 'application/x-amz-json-1.0' });
        res.end(JSON.stringify({ __type: 'InternalFailure', message: error.message }));
      });
      forward.end(body);
    } catch (error) {
      if (error instanceof SignatureRefused) return refuseJson(res, error);
      res.writeHead(500);
      res.end(String(error));
    }
  });
  const door = await listen(front, port, 'DynamoDB emulator (dynalite)');
  return {
    url: door.url,
    close: async () => {
      await door.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(socketDir, { recursive: true, force: true });
    },
  };
}

export interface S3Emulator extends Listening {
  /** s3rver's object events, S3-notification shaped. */
  onEvent(listener: (event: S3NotificationEvent) => void): void;
}

export interface S3NotificationEvent {
  Records: {
    eventName: string;
    eventTime: string;
    s3: { bucket: { name: string }; object: { key: string; size?: number; eTag?: string; versionId?: string; sequencer?: string } };
  }[];
}

/** ETags as S3 compares them: without quotes; `*` matches any object. */
function etagMatches(condition: string, etag: string): boolean {
  const bare = (v: string) => v.trim().replace(/^W\//, '').replace(/^"|"$/g, '');
  return condition.split(',').some((c) => c.trim() === '*' || bare(c) === bare(etag));
}

/**
 * S3: s3rver's handler behind the runtime's loopback port, which takes only requests signed
 * (or presigned) with the runtime's credentials and enforces GetObject's and HeadObject's
 * If-Match, which s3rver ignores: a changed object answers 412 PreconditionFailed, as S3 does.
 */
export async function startS3rver(dir: string, port: number, credentials?: LocalCredentials): Promise<S3Emulator> {
  mkdirSync(dir, { recursive: true });
  await assertPortFree(port, 'S3 emulator (s3rver)');
  const S3rver = require('s3rver') as new (
    options: Record<string, unknown>,
  ) => {
    run(): Promise<{ port: number }>;
    close(): Promise<void>;
    configureBuckets(): Promise<void>;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    on(event: string, listener: (e: unknown) => void): void;
    store: { getMetadata(bucket: string, key: string): Promise<{ etag: string }> };
  };
  const app = new S3rver({ port, address: '127.0.0.1', directory: dir, silent: true, allowMismatchedSignatures: true });
  if (credentials) {
    // s3rver refuses key ids it has no account for; this runtime checks the signature itself.
    const account = require('s3rver/lib/models/account') as { DUMMY_ACCOUNT: { createKeyPair(id: string, secret: string): void } };
    account.DUMMY_ACCOUNT.createKeyPair(credentials.accessKeyId, credentials.secretAccessKey);
  }
  await app.configureBuckets();
  const handle = app.callback();
  const server = createHttpServer(async (req, res) => {
    try {
      if (credentials) await verifySignature({ method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers }, credentials);
      const condition = req.headers['if-match'];
      if (typeof condition === 'string' && (req.method === 'GET' || req.method === 'HEAD')) {
        const path = (req.url ?? '/').split('?')[0]!;
        const [, bucket = '', ...key] = path.split('/');
        const meta = await app.store.getMetadata(decodeURIComponent(bucket), decodeURIComponent(key.join('/'))).catch(() => undefined);
        // A missing object is s3rver's 404 to give; a present one must still carry that ETag.
        if (meta && !etagMatches(condition, meta.etag)) {
          return s3Error(res, 412, 'PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', '<Condition>If-Match</Condition>');
        }
      }
      handle(req, res);
    } catch (error) {
      if (error instanceof SignatureRefused) return s3Error(res, error.status, error.code, error.message);
      s3Error(res, 500, 'InternalError', String((error as Error)?.message ?? error));
    }
  });
  const door = await listen(server, port, 'S3 emulator (s3rver)');
  return {
    url: door.url,
    close: () => door.close(),
    onEvent: (listener) => app.on('event', (e) => listener(e as S3NotificationEvent)),
  };
}

/** Holds the data directory for this process; a live holder makes a second runtime fail clearly. */
export function lockDataDir(dir: string): () => void {
  mkdirSync(dir, { recursive: true });
  const lockFile = join(dir, 'runtime.lock');
  try {
    const holder = Number(readFileSync(lockFile, 'utf8'));
    if (holder && holder !== process.pid && isAlive(holder)) {
      throw new EmulatorStartError(`${dir} is in use by another local runtime (pid ${holder}); one runtime per data directory, since dynalite cannot share it`);
    }
  } catch (error) {
    if (error instanceof EmulatorStartError) throw error;
  }
  writeFileSync(lockFile, String(process.pid));
  return () => rmSync(lockFile, { force: true });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** What the CLI's read commands need to reach a running runtime: its endpoints and credentials. */
export interface LiveRuntime {
  readonly endpoints: Record<string, string>;
  readonly credentials: LocalCredentials;
}

const LIVE_FILE = 'runtime.json';

/**
 * Writes the running runtime's endpoints and credentials beside its lock, readable by this user
 * only (the credentials are the keys to the bucket, the table and the link-signing secret).
 * Returns the closer that removes the file.
 */
export function publishLiveRuntime(dir: string, live: LiveRuntime): () => void {
  const file = join(dir, LIVE_FILE);
  writeFileSync(file, JSON.stringify(live), { mode: 0o600 });
  return () => rmSync(file, { force: true });
}

/** The runtime that holds `dir` now, when one does and has published how to reach it. */
export function liveRuntime(dir: string): LiveRuntime | undefined {
  try {
    const holder = Number(readFileSync(join(dir, 'runtime.lock'), 'utf8'));
    if (!holder || holder === process.pid || !isAlive(holder)) return undefined;
    return JSON.parse(readFileSync(join(dir, LIVE_FILE), 'utf8')) as LiveRuntime;
  } catch {
    return undefined;
  }
}
