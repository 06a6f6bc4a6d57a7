/**
 * The xTB oracle over a chunk of molecules: the spec's schema and the loop that measures each
 * molecule's GFN2-xTB HOMO-LUMO gap (shared/molecules/xtb.ts), with no AWS code in it; main.ts runs
 * it under the job contract.
 *
 * 1. The spec is checked (zod); a bad spec fails the job with the field and the value.
 * 2. The xtb command must start at all, else the job fails with XtbMissingError before
 *    measuring anything: every molecule would fail the same way.
 * 3. Molecules are measured `parallel` at a time, each in its own work dir with its own timeout.
 *    A SMILES that does not parse, a timeout, an xtb crash (with xtb's own reason from its
 *    output) or an optimisation that changed the bonds on both attempts is that molecule's failed
 *    measurement, with the reason and the attempts made; the loop goes on.
 * 4. A progress report after each molecule; measurements come back in the spec's order.
 */
import { spawn } from 'node:child_process';
import { z } from 'zod';
import { ConfigError } from '#shared/errors.ts';
import { loadRDKit, parseMolecule } from '#shared/molecules/rdkit.ts';
import { measureGap, type XtbOptions } from '#shared/molecules/xtb.ts';
import { XtbMissingError } from '#shared/molecules/errors.ts';
import { parseOrThrow } from '#shared/schema.ts';

/** The most molecules one job measures: a chunk of the pool, small enough that result.json stays well inside a state's 256 KiB. */
export const MAX_MOLECULES = 500;
/** The most molecules measured at once: xtb runs one thread each, so this is about the job's vCPUs. */
export const MAX_PARALLEL = 64;

export const OracleMolecule = z.object({
  /** The caller's id for the molecule; measurements carry it back. */
  id: z.string().min(1),
  /** As given; one that RDKit cannot parse is recorded as a failed measurement, not a bad spec. */
  smiles: z.string(),
});

export const XtbSettings = z.strictObject({
  /** Per attempt (a molecule gets at most two; the retry's GFN-FF pre-optimisation and its GFN2 run share it). */
  timeoutSeconds: z.number().positive().max(3600).default(120),
  /** Seed of the first attempt's starting geometry; the retry starts from seed + 1, relaxed by GFN-FF first (shared/molecules/xtb.ts). */
  seed: z.number().int().default(0),
  /** The xtb executable (a name on PATH or a path). */
  command: z.string().min(1).default('xtb'),
});

export const OracleSpec = z.object({
  molecules: z.array(OracleMolecule).min(1).max(MAX_MOLECULES),
  // prefault: an absent xtb is parsed as {}, so each setting takes its own default.
  xtb: XtbSettings.prefault({}),
  /** Molecules measured at once. */
  parallel: z.number().int().min(1).max(MAX_PARALLEL).default(1),
});
export type OracleSpec = z.output<typeof OracleSpec>;

/** The spec, checked; a molecule id used twice is refused (measurements are matched by id). */
export function parseOracleSpec(input: unknown): OracleSpec {
  const spec = parseOrThrow(OracleSpec, input, 'spec');
  const firstIndex = new Map<string, number>();
  spec.molecules.forEach(({ id }, i) => {
    const first = firstIndex.get(id);
    if (first !== undefined) throw new ConfigError(`spec.molecules.${i}.id`, id, `repeats spec.molecules.${first}.id; ids must be unique`);
    firstIndex.set(id, i);
  });
  return spec;
}

export type Measurement =
  | { readonly id: string; readonly smiles: string; readonly ok: true; readonly gap: number; readonly attempts: number; readonly seconds: number }
  | { readonly id: string; readonly smiles: string; readonly ok: false; readonly reason: string; readonly attempts: number; readonly seconds: number };

export interface OracleResult {
  /** One per spec molecule, in the spec's order. */
  readonly measurements: Measurement[];
  readonly summary: { readonly molecules: number; readonly ok: number; readonly failed: number; readonly wallSeconds: number };
  /** The contract's list of large outputs written to S3; the oracle's result is small enough to travel inline. */
  readonly s3Outputs: [];
}

export interface OracleProgress {
  readonly done: number;
  readonly total: number;
  readonly ok: number;
  readonly failed: number;
  /** The molecule just finished. */
  readonly id: string;
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

/**
 * Throws XtbMissingError when `command` cannot be started (not installed, not on PATH, not
 * executable). Only the start is checked: the process is killed once it runs.
 */
export function checkXtbStarts(command: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, ['--version'], { stdio: 'ignore' });
    child.once('spawn', () => {
      child.kill('SIGKILL');
      resolve();
    });
    child.once('error', (error: NodeJS.ErrnoException) => {
      reject(error.code === 'ENOENT' || error.code === 'EACCES' ? new XtbMissingError(command) : error);
    });
  });
}

/** A molecule RDKit cannot parse (or an empty one): why, in words; undefined when it parses. */
function unparseable(smiles: string): string | undefined {
  const parsed = parseMolecule(smiles);
  if (!parsed.mol) return `malformed SMILES: ${parsed.error}`;
  try {
    return parsed.mol.get_num_atoms() === 0 ? 'malformed SMILES: no atoms' : undefined;
  } finally {
    parsed.mol.delete();
  }
}

async function measureOne(molecule: { id: string; smiles: string }, options: XtbOptions): Promise<Measurement> {
  const { id, smiles } = molecule;
  const why = unparseable(smiles);
  if (why) return { id, smiles, ok: false, reason: why, attempts: 0, seconds: 0 };
  const m = await measureGap(smiles, options);
  return m.ok
    ? { id, smiles, ok: true, gap: m.gap, attempts: m.attempts, seconds: round3(m.seconds) }
    : { id, smiles, ok: false, reason: m.reason, attempts: m.attempts, seconds: round3(m.seconds) };
}

/** Measures every molecule of a checked spec (module docstring, steps 2-4). */
export async function measureMolecules(spec: OracleSpec, onProgress: (p: OracleProgress) => void = () => {}): Promise<OracleResult> {
  const t0 = performance.now();
  const { molecules, xtb, parallel } = spec;
  try {
    await checkXtbStarts(xtb.command);
  } catch (error) {
    if (error instanceof XtbMissingError) error.message += `; none of the ${molecules.length} molecules can be measured`;
    throw error;
  }
  await loadRDKit();
  const options: XtbOptions = { command: xtb.command, timeoutMs: xtb.timeoutSeconds * 1000, seed: xtb.seed };
  const measurements: Measurement[] = new Array(molecules.length);
  let next = 0;
  let done = 0;
  let ok = 0;
  let fatal: unknown;
  // `parallel` workers take the next molecule in turn; the first error that is not a molecule's
  // own (xtb vanishing mid-run) stops them all taking more, and fails the job once they finish.
  const worker = async () => {
    while (fatal === undefined && next < molecules.length) {
      const index = next++;
      try {
        const m = await measureOne(molecules[index]!, options);
        measurements[index] = m;
        done += 1;
        if (m.ok) ok += 1;
        onProgress({ done, total: molecules.length, ok, failed: done - ok, id: m.id });
      } catch (error) {
        fatal ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, molecules.length) }, worker));
  if (fatal !== undefined) throw fatal;
  return {
    measurements,
    summary: { molecules: molecules.length, ok, failed: molecules.length - ok, wallSeconds: round3((performance.now() - t0) / 1000) },
    s3Outputs: [],
  };
}
