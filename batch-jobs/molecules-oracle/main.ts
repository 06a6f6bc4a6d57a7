/**
 * The xTB oracle job (Batch, CPU queue): reads a chunk of molecules from its spec, measures each
 * one's GFN2-xTB HOMO-LUMO gap and writes the measurements as result.json (oracle.ts has the
 * spec, the result and the loop; shared/job.ts the contract).
 *
 * In the image: `node main.mjs`, the bundle build.ts makes, beside RDKit_minimal.wasm, with
 * Debian's xtb on PATH. Locally: `node --import tsx main.ts` in this folder.
 */
import { runJobMain } from '#shared/job.ts';
import { measureMolecules, parseOracleSpec } from './oracle.ts';

await runJobMain(async (spec, ctx) => measureMolecules(parseOracleSpec(spec), (p) => ctx.progress({ ...p })));
