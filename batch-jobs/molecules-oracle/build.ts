/**
 * Bundles the oracle job into one ES module, main.mjs, with RDKit_minimal.wasm beside it. The
 * image's builder stage runs this (`node --import tsx batch-jobs/molecules-oracle/build.ts <outDir>`)
 * and the tests run the same bundle, so what ships is what was tested.
 */
import { copyFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleFromCommandLine, bundleNodeJob } from '#shared/job-bundle.ts';

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
  const outfile = await bundleNodeJob({ jobDir: JOB_DIR, outDir, banner: BANNER });
  copyFileSync(join(REPO_ROOT, 'node_modules', '@rdkit', 'rdkit', 'dist', 'RDKit_minimal.wasm'), join(outDir, 'RDKit_minimal.wasm'));
  return outfile;
}

await bundleFromCommandLine(import.meta.url, 'molecules-oracle', bundleOracleJob);
