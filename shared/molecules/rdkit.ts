/**
 * The RDKit WebAssembly module (@rdkit/rdkit), initialised once per process and shared by
 * everything that touches chemistry. Initialising costs about 160 ms and 7 MB of WebAssembly,
 * so it happens on first use, never at import time: a Lambda that never parses a molecule
 * never pays for it.
 *
 * The module looks for RDKit_minimal.wasm next to the script that loads it (emscripten's
 * `scriptDirectory`), so a bundled function must ship that file beside its bundle.
 */
import rdkitPackage from '@rdkit/rdkit';
import type { MainModule, Mol } from '@rdkit/rdkit';

export type RDKitModule = MainModule;
export type RDKitMol = Mol;

// The package is CommonJS: `module.exports` is the init function and `.default` points at it
// too. Its typings declare only the `default` export, so take that one.
const initRDKitModule = rdkitPackage.default;

interface Loaded {
  readonly rdkit: RDKitModule;
  /** Captures RDKit's error log, which otherwise goes to stderr, so a parse error can be reported per input. */
  readonly errorLog: ReturnType<RDKitModule['set_log_capture']>;
}

let loading: Promise<Loaded> | undefined;
let loaded: Loaded | undefined;

async function load(): Promise<Loaded> {
  const rdkit = await initRDKitModule();
  const errorLog = rdkit.set_log_capture('rdApp.error');
  loaded = { rdkit, errorLog };
  return loaded;
}

/** The shared RDKit module; the first call initialises it, concurrent callers share that work. */
export async function loadRDKit(): Promise<RDKitModule> {
  if (loaded) return loaded.rdkit;
  loading ??= load().catch((error: unknown) => {
    // A failed start (a missing .wasm) must not be cached: the next call tries again.
    loading = undefined;
    throw error;
  });
  return (await loading).rdkit;
}

/**
 * The module if it is already initialised. Hot loops (building the pool, fingerprinting
 * thousands of molecules) call this after one `await loadRDKit()` instead of awaiting per molecule.
 */
export function rdkitIfLoaded(): RDKitModule | undefined {
  return loaded?.rdkit;
}

/** What `parseMolecule` returns: a molecule the caller must `delete()`, or RDKit's reason for refusing the input. */
export type ParsedMolecule = { readonly mol: RDKitMol; readonly error?: undefined } | { readonly mol?: undefined; readonly error: string };

/**
 * Parses SMILES with the loaded module. `get_mol` returns null for a malformed SMILES and logs
 * why (unclosed ring, bad valence, cannot kekulize); that message is returned as `error`.
 * Throws if `loadRDKit()` has not completed.
 */
export function parseMolecule(smiles: string): ParsedMolecule {
  if (!loaded) throw new Error('RDKit is not initialised: await loadRDKit() first');
  const { rdkit, errorLog } = loaded;
  errorLog?.clear_buffer();
  const mol = rdkit.get_mol(smiles);
  if (mol) {
    errorLog?.clear_buffer();
    return { mol };
  }
  const logged = errorLog?.get_buffer() ?? '';
  errorLog?.clear_buffer();
  return { error: firstErrorLine(logged) || 'RDKit could not parse the SMILES' };
}

/** RDKit log lines look like "[13:09:04] SMILES Parse Error: unclosed ring ..."; keep the message only. */
function firstErrorLine(log: string): string {
  const line = log.split('\n').find((l) => l.trim() !== '') ?? '';
  return line.replace(/^\[\d\d:\d\d:\d\d\]\s*/, '').trim();
}
