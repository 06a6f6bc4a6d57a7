/**
 * Bundles the ingest job into one ES module, main.mjs. The image's builder stage runs this
 * (`node --import tsx batch-jobs/refinery-ingest/build.ts <outDir>`) and the tests run the same
 * bundle, so what ships is what was tested.
 */
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleFromCommandLine, bundleNodeJob } from '#shared/job-bundle.ts';

const JOB_DIR = dirname(fileURLToPath(import.meta.url));

// Some dependencies (linkedom's, the AWS SDK's) are CommonJS and call require(); an ES module
// bundle has no require of its own, so the banner defines one.
const BANNER = ["import { createRequire as __createRequire } from 'node:module';", 'const require = __createRequire(import.meta.url);'].join('\n');

/** Writes outDir/main.mjs; returns its path. */
export function bundleIngestJob(outDir: string): Promise<string> {
  return bundleNodeJob({ jobDir: JOB_DIR, outDir, banner: BANNER });
}

await bundleFromCommandLine(import.meta.url, 'refinery-ingest', bundleIngestJob);
