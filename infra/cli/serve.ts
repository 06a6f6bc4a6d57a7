/**
 * `frontier serve`: the embedded runtime's HTTP APIs (the arena, approval links) on loopback until
 * interrupted, on the same data directory as `frontier run`, so the champion published by a local
 * league run can be played in a browser.
 */
import { LocalRuntime } from '../local/runtime.ts';
import type { Io } from './output.ts';

export interface ServeOptions {
  readonly dataDir?: string;
  readonly portBase?: number;
}

/** Serves until `until` settles; prints where the arena and the local sign-in are. */
export async function serveLocal(options: ServeOptions, until: Promise<unknown>, io: Io): Promise<{ url: string }> {
  const runtime = await LocalRuntime.start({ dataDir: options.dataDir, portBase: options.portBase });
  const url = runtime.approvalApiUrl;
  try {
    io.out(`serving on ${url} (data in ${runtime.dataDir}); Ctrl-C stops`);
    io.out(`  arena: ${url}/arena  (plays the latest selfplay-champion artifact; sign in with any user name)`);
    io.out(`  script sign-in: curl -X POST ${url}/_local/sign-in -d '{"username":"alice"}'`);
    io.out('  approval links: sign in on the page with any user name and tick "member of approvers" to decide');
    await until;
  } finally {
    await runtime.stop();
  }
  return { url };
}

/** Settles on the first SIGINT or SIGTERM. */
export function interrupted(): Promise<string> {
  return new Promise((resolve) => {
    const stop = (signal: string) => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve(signal);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
