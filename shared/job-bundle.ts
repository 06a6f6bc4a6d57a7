/**
 * The bundling every Node Batch job's build.ts does: its main.ts and what it imports (shared/
 * included) into one ES module, main.mjs, that the image runs with `node main.mjs`. The image's
 * builder stage runs the job's build.ts and the tests run the same bundle, so what ships is what
 * was tested.
 */
import { build } from 'esbuild';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * A banner for a bundle with CommonJS-minded dependencies (emscripten loaders, native modules):
 * `require`, `__filename` and `__dirname`, which an ES module has not, defined for main.mjs.
 */
export const COMMONJS_BANNER = [
  "import { createRequire as __createRequire } from 'node:module';",
  "import { fileURLToPath as __fileURLToPath } from 'node:url';",
  "import { dirname as __pathDirname } from 'node:path';",
  'const require = __createRequire(import.meta.url);',
  'const __filename = __fileURLToPath(import.meta.url);',
  'const __dirname = __pathDirname(__filename);',
].join('\n');

/**
 * Writes outDir/main.mjs from jobDir/main.ts; returns its path. `banner` is prepended (e.g. a
 * `require` for CommonJS dependencies, which an ES module bundle has not).
 */
export async function bundleNodeJob(options: {
  readonly jobDir: string;
  readonly outDir: string;
  readonly banner: string;
  /** Packages left out of the bundle (native modules), shipped beside it in node_modules/. */
  readonly external?: string[];
}): Promise<string> {
  mkdirSync(options.outDir, { recursive: true });
  const outfile = join(options.outDir, 'main.mjs');
  await build({
    entryPoints: [join(options.jobDir, 'main.ts')],
    absWorkingDir: join(options.jobDir, '..', '..'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    outfile,
    banner: { js: options.banner },
    // Named errors keep their class names (the job's result.json reports error.name).
    keepNames: true,
    external: options.external ?? [],
    logLevel: 'warning',
  });
  return outfile;
}

/** A build.ts run as a script: `tsx batch-jobs/<job>/build.ts <outDir>` bundles into outDir. */
export async function bundleFromCommandLine(moduleUrl: string, job: string, bundle: (outDir: string) => Promise<string>): Promise<void> {
  if (!process.argv[1] || moduleUrl !== pathToFileURL(resolve(process.argv[1])).href) return;
  // No default inside the job folder: its files make up the job's code version.
  const outDir = process.argv[2];
  if (!outDir) {
    console.error(`usage: tsx batch-jobs/${job}/build.ts <outDir>`);
    process.exit(2);
  }
  console.log(await bundle(resolve(outDir)));
}
