/**
 * Code versions, computed at synth from the files that really make up a step, never typed
 * by hand. A cached step's key includes its code version, so editing a helper two imports
 * away from a handler invalidates that step, and editing an unrelated file does not.
 *
 * - TypeScript handler: every first-party source file in its esbuild bundle (esbuild's
 *   metafile lists them) plus name@version of every third-party package it bundles.
 * - Batch job: every file in its folder (Dockerfile and requirements included) plus every
 *   file of batch-jobs/common, which each job image copies in.
 * - Node Batch job (a TypeScript entry): its entry's handler-style version (the bundle's
 *   first-party files, shared/ included, and package versions) plus every file in its folder.
 */
import { buildSync } from 'esbuild';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sha256Hex } from '#shared/json.ts';

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface CodeVersion {
  /** sha256 over the components, hex. */
  readonly hash: string;
  /** repo-relative file -> sha256 of its content; `npm:<name>` -> its version. */
  readonly components: Readonly<Record<string, string>>;
}

const memo = new Map<string, CodeVersion>();

function fromComponents(components: Record<string, string>, salt: string | undefined): CodeVersion {
  const sorted = Object.fromEntries(Object.entries(components).sort(([a], [b]) => (a < b ? -1 : 1)));
  if (salt) sorted['salt'] = salt;
  const hash = sha256Hex(
    Object.entries(sorted)
      .map(([k, v]) => `${k}=${v}`)
      .join('\n'),
  );
  return { hash, components: sorted };
}

/** Code version of a TypeScript handler: its bundle's first-party files and package versions. */
export function handlerCodeVersion(entry: string, salt?: string, externals: readonly string[] = []): CodeVersion {
  return memoized(`ts:${entry}:${salt ?? ''}:${externals.join(',')}`, () => {
    const result = buildSync({
      entryPoints: [entry],
      absWorkingDir: REPO_ROOT,
      bundle: true,
      write: false,
      metafile: true,
      platform: 'node',
      format: 'esm',
      target: 'node22',
      logLevel: 'silent',
      // Native packages shipped beside the bundle: counted by version below, not bundled.
      external: [...externals],
    });
    const components: Record<string, string> = {};
    for (const name of externals) {
      const version = (JSON.parse(readFileSync(join(REPO_ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
      components[`npm:${name}`] = version;
    }
    for (const input of Object.keys(result.metafile!.inputs)) {
      const pkg = packageOf(input);
      if (pkg) {
        components[`npm:${pkg.name}`] = pkg.version;
      } else {
        components[input.split(sep).join('/')] = sha256Hex(readFileSync(join(REPO_ROOT, input)));
      }
    }
    return fromComponents(components, salt);
  });
}

/** Code version of a Batch job folder plus the common files every job image copies in. */
export function jobCodeVersion(jobDir: string, salt?: string): CodeVersion {
  return memoized(`job:${jobDir}:${salt ?? ''}`, () => fromComponents(folderComponents([jobDir, join(REPO_ROOT, 'batch-jobs', 'common')]), salt));
}

/**
 * Code version of a Node Batch job: what its entry bundles (as for a handler) plus every file in
 * its folder (the Dockerfile, the build script). batch-jobs/common is Python and not part of it.
 */
export function nodeJobCodeVersion(jobDir: string, entry: string, salt?: string, externals: readonly string[] = []): CodeVersion {
  return memoized(`node-job:${jobDir}:${entry}:${salt ?? ''}:${externals.join(',')}`, () =>
    fromComponents({ ...handlerCodeVersion(entry, undefined, externals).components, ...folderComponents([jobDir]) }, salt),
  );
}

/** The sha256 of every file in these folders, by repository-relative path. */
function folderComponents(dirs: readonly string[]): Record<string, string> {
  const components: Record<string, string> = {};
  for (const dir of dirs) {
    for (const file of listFiles(dir)) components[relative(REPO_ROOT, file).split(sep).join('/')] = sha256Hex(readFileSync(file));
  }
  return components;
}

function memoized(key: string, compute: () => CodeVersion): CodeVersion {
  const cached = memo.get(key);
  if (cached) return cached;
  const version = compute();
  memo.set(key, version);
  return version;
}

/** Forget computed versions (tests edit files between synths). */
export function clearCodeVersionMemo(): void {
  memo.clear();
}

/** Names of the components that differ between two code versions. */
export function diffCodeVersions(
  before: Readonly<Record<string, string>>,
  after: Readonly<Record<string, string>>,
): { added: string[]; removed: string[]; changed: string[] } {
  const added = Object.keys(after).filter((k) => !(k in before));
  const removed = Object.keys(before).filter((k) => !(k in after));
  const changed = Object.keys(after).filter((k) => k in before && before[k] !== after[k]);
  return { added, removed, changed };
}

const IGNORED = new Set(['__pycache__', 'node_modules', '.pytest_cache']);

function listFiles(dir: string): string[] {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return [];
  }
  const files: string[] = [];
  for (const name of entries.sort()) {
    if (IGNORED.has(name) || name.endsWith('.pyc')) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) files.push(...listFiles(path));
    else files.push(path);
  }
  return files;
}

function packageOf(input: string): { name: string; version: string } | undefined {
  const parts = input.split(/[\\/]/);
  const at = parts.lastIndexOf('node_modules');
  if (at < 0) return undefined;
  const nameParts = parts[at + 1]?.startsWith('@') ? parts.slice(at + 1, at + 3) : parts.slice(at + 1, at + 2);
  const root = join(REPO_ROOT, ...parts.slice(0, at + 1), ...nameParts);
  const name = nameParts.join('/');
  try {
    const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version?: string }).version;
    return { name, version: version ?? 'unknown' };
  } catch {
    return { name, version: 'unknown' };
  }
}
