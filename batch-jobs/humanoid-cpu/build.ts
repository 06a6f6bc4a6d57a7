/**
 * Bundles the humanoid's CPU job into one ES module, main.mjs, with the G1 model folder beside it
 * (the twin reads g1/ from beside the running module) and onnxruntime-node as a package of its own
 * (a native module esbuild cannot bundle). The image's builder stage runs this
 * (`node --import tsx batch-jobs/humanoid-cpu/build.ts <outDir>`) and the tests run the same
 * bundle, so what ships is what was tested.
 */
import { cpSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleFromCommandLine, bundleNodeJob, COMMONJS_BANNER } from '#shared/job-bundle.ts';

const JOB_DIR = dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = join(JOB_DIR, '..', '..');

/** Writes outDir/main.mjs, outDir/g1/ and outDir/node_modules/onnxruntime-{node,common}; returns main.mjs's path. */
export async function bundleHumanoidJob(outDir: string): Promise<string> {
  const outfile = await bundleNodeJob({ jobDir: JOB_DIR, outDir, banner: COMMONJS_BANNER, external: ['onnxruntime-node'] });
  cpSync(join(REPO_ROOT, 'shared', 'humanoid', 'g1'), join(outDir, 'g1'), { recursive: true });
  for (const p of ['onnxruntime-node', 'onnxruntime-common']) {
    cpSync(join(REPO_ROOT, 'node_modules', p), join(outDir, 'node_modules', p), { recursive: true });
  }
  return outfile;
}

await bundleFromCommandLine(import.meta.url, 'humanoid-cpu', bundleHumanoidJob);
