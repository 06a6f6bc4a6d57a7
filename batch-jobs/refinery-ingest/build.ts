/**
 * Bundles the ingest job into one ES module, main.mjs. The image's builder stage runs this
 * (`node --import tsx batch-jobs/refinery-ingest/build.ts <outDir>`) and the tests run the same
 * bundle, so what ships is what was tested.
 */
import { build } from 'esbuild';
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const JOB_DIR = dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = join(JOB_DIR, '..', '..');

// Some dependencies (linkedom's, the AWS SDK's) are CommonJS and call require(); an ES module
// bundle has no require of its own, so the banner defines one.
const BANNER = ["import { createRequire as __createRequire } from 'node:module';", 'const require = __createRequire(import.meta.url);'].join('\n');

/** Writes outDir/main.mjs; returns its path. */
export async function bundleIngestJob(outDir: string): Promise<string> {
  mkdirSync(outDir, { recursive: true });
  const outfile = join(outDir, 'main.mjs');
  await build({
    entryPoints: [join(JOB_DIR, 'main.ts')],
    absWorkingDir: REPO_ROOT,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    outfile,
    banner: { js: BANNER },
    // Named errors keep their class names (the job's result.json reports error.name).
    keepNames: true,
    logLevel: 'warning',
  });
  return outfile;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  // No default inside the job folder: its files make up the job's code version.
  const outDir = process.argv[2];
  if (!outDir) {
    console.error('usage: tsx batch-jobs/refinery-ingest/build.ts <outDir>');
    process.exit(2);
  }
  console.log(await bundleIngestJob(resolve(outDir)));
}
