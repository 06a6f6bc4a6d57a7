/**
 * The loopback emulators behind the real AWS SDK: dynalite (DynamoDB) and s3rver (S3),
 * persisted under the data directory, plus the small HTTP servers of the runtime itself.
 * One runtime per data directory (dynalite crashes when a second process opens it), so the
 * directory is locked by pid.
 */
import { createServer, type Server } from 'node:net';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { Server as HttpServer } from 'node:http';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { EmulatorStartError } from '#shared/errors.ts';

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

export async function startDynalite(dir: string, port: number): Promise<Listening> {
  mkdirSync(dir, { recursive: true });
  // Check the port before dynalite opens its database: an instance that never listens would
  // still hold the LevelDB lock, and the next start on this directory would hang on it.
  await assertPortFree(port, 'DynamoDB emulator (dynalite)');
  const dynalite = require('dynalite') as (options: Record<string, unknown>) => HttpServer;
  const server = dynalite({ path: dir, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  return listen(server, port, 'DynamoDB emulator (dynalite)');
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

export async function startS3rver(dir: string, port: number): Promise<S3Emulator> {
  mkdirSync(dir, { recursive: true });
  await assertPortFree(port, 'S3 emulator (s3rver)');
  const S3rver = require('s3rver') as new (
    options: Record<string, unknown>,
  ) => {
    run(): Promise<{ port: number }>;
    close(): Promise<void>;
    on(event: string, listener: (e: unknown) => void): void;
  };
  const server = new S3rver({ port, address: '127.0.0.1', directory: dir, silent: true, allowMismatchedSignatures: true });
  const address = await server.run();
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: () => server.close(),
    onEvent: (listener) => server.on('event', (e) => listener(e as S3NotificationEvent)),
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
