/**
 * Bundles the oracle job into one ES module, main.mjs, with RDKit_minimal.wasm beside it. The
 * image's builder stage runs this (`node --import tsx batch-jobs/molecules-oracle/build.ts <outDir>`)
 * and the tests run the same bundle, so what ships is what was tested.
 */
import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const JOB_DIR = dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = join(JOB_DIR, '..', '..');

// RDKit's emscripten loader is CommonJS: it calls require('node:fs') and finds its .wasm through
// __dirname, neither of which an ES module has. The banner defines both for the bundle, so the
// loader looks beside main.mjs.
const BANNER = [
  "import { createRequire as __createRequire } from 'node:module';",
  "import { fileURLToPath as __fileURLToPath } from 'node:url';",
  "import { dirname as __pathDirname } from 'node:path';",
  'const require = __createRequire(import.meta.url);',
  'const __filename = __fileURLToPath(import.meta.url);',
  'const __dirname = __pathDirname(__filename);',
].join('\n');

/** Writes outDir/main.mjs and outDir/RDKit_minimal.wasm; returns main.mjs's path. */
export async function bundleOracleJob(outDir: string): Promise<string> {
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
  copyFileSync(join(REPO_ROOT, 'node_modules', '@rdkit', 'rdkit', 'dist', 'RDKit_minimal.wasm'), join(outDir, 'RDKit_minimal.wasm'));
  return outfile;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  // No default inside the job folder: its files make up the job's code version.
  const outDir = process.argv[2];
  if (!outDir) {
    console.error('usage: tsx batch-jobs/molecules-oracle/build.ts <outDir>');
    process.exit(2);
  }
  console.log(await bundleOracleJob(resolve(outDir)));
}
