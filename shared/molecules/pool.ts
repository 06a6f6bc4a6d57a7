/**
 * The molecule pool the discovery loop picks candidates from, and the chemistry helpers the
 * surrogate, the xTB oracle and the approval email share.
 *
 * 1. `buildDefaultPool` enumerates aromatic and heteroaromatic scaffolds with up to two
 *    substituents on their C-H positions, then validates, canonicalises and deduplicates each
 *    SMILES with RDKit. Output is sorted by canonical SMILES, so the same options give the same
 *    pool on every machine.
 * 2. `parsePoolFile` reads a pool uploaded to S3: one SMILES per line, optionally followed by an id.
 * 3. Helpers: canonical SMILES, Morgan fingerprints with Tanimoto, SVG depictions, size and charge.
 *
 * What enters a pool: one connected molecule, no radicals, net formal charge zero, and no
 * charged atom except inside a nitro-like group N(+)(=O)O(-) (RDKit writes every nitro group
 * as [N+](=O)[O-]: a neutral molecule written with two formal charges). Zwitterions, N-oxides
 * and ylides are refused because the xTB oracle runs every molecule as a closed-shell neutral
 * (charge 0, no unpaired electrons); those would need a charge-separated treatment it does not do.
 */
import { ConfigError } from '#shared/errors.ts';
import { InvalidSmilesError, PoolFileError } from './errors.ts';
import { loadRDKit, parseMolecule, type RDKitMol } from './rdkit.ts';

/** A named SMILES fragment: a scaffold, or a substituent written from its attaching atom. */
export interface Fragment {
  readonly name: string;
  readonly smiles: string;
}

/**
 * Scaffolds, written with ring-closure digits 1-9 only: substituent ring closures are renumbered
 * into %90-%99, which is what keeps the two from colliding.
 */
export const DEFAULT_SCAFFOLDS: readonly Fragment[] = [
  { name: 'benzene', smiles: 'c1ccccc1' },
  { name: 'pyridine', smiles: 'c1ccncc1' },
  { name: 'pyrimidine', smiles: 'c1cncnc1' },
  { name: 'pyrazine', smiles: 'c1cnccn1' },
  { name: 'pyridazine', smiles: 'c1ccnnc1' },
  { name: '1,3,5-triazine', smiles: 'c1ncncn1' },
  { name: 'thiophene', smiles: 'c1ccsc1' },
  { name: 'furan', smiles: 'c1ccoc1' },
  { name: 'pyrrole', smiles: 'c1cc[nH]c1' },
  { name: 'imidazole', smiles: 'c1c[nH]cn1' },
  { name: 'pyrazole', smiles: 'c1cc[nH]n1' },
  { name: 'oxazole', smiles: 'c1cocn1' },
  { name: 'isoxazole', smiles: 'c1cnoc1' },
  { name: 'thiazole', smiles: 'c1cscn1' },
  { name: 'isothiazole', smiles: 'c1cnsc1' },
  { name: '1,2,4-triazole', smiles: 'c1nc[nH]n1' },
  { name: '1,3,4-oxadiazole', smiles: 'c1nnco1' },
  { name: '1,3,4-thiadiazole', smiles: 'c1nncs1' },
  { name: 'naphthalene', smiles: 'c1ccc2ccccc2c1' },
  { name: 'quinoline', smiles: 'c1ccc2ncccc2c1' },
  { name: 'isoquinoline', smiles: 'c1ccc2cnccc2c1' },
  { name: 'quinoxaline', smiles: 'c1ccc2nccnc2c1' },
  { name: 'quinazoline', smiles: 'c1ccc2ncncc2c1' },
  { name: 'cinnoline', smiles: 'c1ccc2nnccc2c1' },
  { name: 'indole', smiles: 'c1ccc2[nH]ccc2c1' },
  { name: 'benzofuran', smiles: 'c1ccc2occc2c1' },
  { name: 'benzothiophene', smiles: 'c1ccc2sccc2c1' },
  { name: 'benzimidazole', smiles: 'c1ccc2[nH]cnc2c1' },
  { name: 'benzoxazole', smiles: 'c1ccc2ocnc2c1' },
  { name: 'benzothiazole', smiles: 'c1ccc2scnc2c1' },
  { name: 'indazole', smiles: 'c1ccc2[nH]ncc2c1' },
  { name: '7-azaindole', smiles: 'c1cnc2[nH]ccc2c1' },
  { name: 'purine', smiles: 'c1ncc2[nH]cnc2n1' },
  { name: 'biphenyl', smiles: 'c1ccc(cc1)-c1ccccc1' },
];

/** Substituents, each written from the atom that bonds to the scaffold. */
export const DEFAULT_SUBSTITUENTS: readonly Fragment[] = [
  { name: 'F', smiles: 'F' },
  { name: 'Cl', smiles: 'Cl' },
  { name: 'Br', smiles: 'Br' },
  { name: 'CH3', smiles: 'C' },
  { name: 'OCH3', smiles: 'OC' },
  { name: 'OH', smiles: 'O' },
  { name: 'NH2', smiles: 'N' },
  { name: 'N(CH3)2', smiles: 'N(C)C' },
  { name: 'CN', smiles: 'C#N' },
  { name: 'NO2', smiles: '[N+](=O)[O-]' },
  { name: 'CF3', smiles: 'C(F)(F)F' },
  { name: 'CHO', smiles: 'C=O' },
  { name: 'COOH', smiles: 'C(=O)O' },
  { name: 'COCH3', smiles: 'C(=O)C' },
  { name: 'C#CH', smiles: 'C#C' },
  { name: 'vinyl', smiles: 'C=C' },
  { name: 'phenyl', smiles: 'c%99ccccc%99' },
  { name: 'SH', smiles: 'S' },
];

/**
 * Heavy-atom limit of the default pool. Each kept molecule costs an xTB optimisation whose time
 * grows with size (timed here at 0.1-0.4 s for molecules of 13-27 atoms counting hydrogens).
 * The largest enumerated molecule (biphenyl with two phenyls) has 24 heavy atoms; 20 drops only
 * the few hundred largest (biphenyls and fused rings carrying a phenyl and another big group).
 */
export const DEFAULT_MAX_HEAVY_ATOMS = 20;

/**
 * Longest SMILES a pool file may hold. 100 heavy atoms (the config's most) written with every
 * atom bracketed, isotopes, charges and stereo stay far under it; a longer line is not a molecule
 * the oracle can measure, and RDKit's error log for it can outgrow the largest string Node has.
 */
export const MAX_POOL_SMILES_CHARS = 2000;
/** Longest id after a pool file's SMILES (it goes into the campaign and the report's tables). */
export const MAX_POOL_ID_CHARS = 256;
/** How much of a skipped line an example keeps. */
const EXAMPLE_INPUT_CHARS = 200;

/** Why a candidate or a pool-file line was left out. Each is counted once, under the first check it fails. */
export type SkipReason =
  | 'too_long' // a pool-file line whose SMILES or id is over MAX_POOL_SMILES_CHARS or MAX_POOL_ID_CHARS
  | 'malformed' // RDKit could not parse it (bad syntax, unclosed ring, impossible valence, cannot kekulize)
  | 'unsupported_atom' // a dummy atom (*): not a real molecule
  | 'multiple_fragments' // a '.' after canonicalisation: a salt or mixture, not one molecule
  | 'radical' // an atom with unpaired electrons
  | 'net_charge' // formal charges do not sum to zero
  | 'charge_separated' // net zero, but charged atoms outside nitro-like groups (zwitterion, N-oxide)
  | 'too_many_heavy_atoms'
  | 'duplicate'; // same canonical SMILES as a molecule already kept

export type SkipCounts = Partial<Record<SkipReason, number>>;

export interface SkipExample {
  readonly reason: SkipReason;
  /** The SMILES as written (pool file) or as assembled (default pool). */
  readonly input: string;
  /** 1-based line number in a pool file. */
  readonly line?: number;
  readonly detail?: string;
}

export interface PoolMolecule {
  /** Canonical SMILES (RDKit). */
  readonly smiles: string;
  readonly id?: string;
}

export interface PoolResult {
  readonly molecules: PoolMolecule[];
  readonly skipped: SkipCounts;
  /** The first few skips of each reason, in input order. */
  readonly examples: SkipExample[];
}

export interface DefaultPoolResult extends PoolResult {
  /** SMILES assembled before validation: molecules.length plus every skip. */
  readonly candidates: number;
}

export interface PoolOptions {
  /** Substituents per molecule, 1 or 2 (default 2). Bare scaffolds are always included. */
  readonly maxSubstituents?: number;
  /** Molecules with more heavy atoms are skipped (default DEFAULT_MAX_HEAVY_ATOMS). */
  readonly maxHeavyAtoms?: number;
  /** Default DEFAULT_SCAFFOLDS; pass a subset for a small pool. */
  readonly scaffolds?: readonly Fragment[];
  /** Default DEFAULT_SUBSTITUENTS; pass a subset for a small pool. */
  readonly substituents?: readonly Fragment[];
}

export interface PoolFileOptions {
  /** Where the text came from (an S3 URI, a path); named in errors. */
  readonly source?: string;
  readonly maxHeavyAtoms?: number;
}

export interface FingerprintOptions {
  readonly radius?: number;
  readonly nBits?: number;
}

const EXAMPLES_PER_REASON = 3;

/** Counts skips by reason and keeps the first few examples of each. */
class SkipTally {
  readonly counts: SkipCounts = {};
  readonly examples: SkipExample[] = [];

  add(example: SkipExample): void {
    const seen = this.counts[example.reason] ?? 0;
    this.counts[example.reason] = seen + 1;
    if (seen >= EXAMPLES_PER_REASON) return;
    const input =
      example.input.length > EXAMPLE_INPUT_CHARS ? `${example.input.slice(0, EXAMPLE_INPUT_CHARS)}... (${example.input.length} characters)` : example.input;
    this.examples.push({ ...example, input });
  }
}

// ---------------------------------------------------------------------------------------------
// Molecule checks

interface AtomInfo {
  readonly z: number;
  readonly chg: number;
  readonly nRad: number;
  readonly impHs: number;
}

interface MolGraph {
  readonly atoms: AtomInfo[];
  /** neighbours[i]: [atom index, bond order] pairs. Bond orders are Kekulé (1, 2, 3). */
  readonly neighbours: [number, number][][];
}

interface RdkitJsonAtom {
  z?: number;
  chg?: number;
  nRad?: number;
  impHs?: number;
}

/**
 * Atoms and bonds from RDKit's JSON. Fields equal to the file's `defaults` are omitted per atom
 * (a carbon is `{}`), so each atom is merged with them.
 */
function molGraph(mol: RDKitMol): MolGraph {
  const json = JSON.parse(mol.get_json()) as {
    defaults: { atom: Required<RdkitJsonAtom>; bond: { bo: number } };
    molecules: { atoms: RdkitJsonAtom[]; bonds?: { bo?: number; atoms: [number, number] }[] }[];
  };
  const atomDefaults = json.defaults.atom;
  const molecule = json.molecules[0] ?? { atoms: [] };
  const atoms = molecule.atoms.map((a) => ({
    z: a.z ?? atomDefaults.z,
    chg: a.chg ?? atomDefaults.chg,
    nRad: a.nRad ?? atomDefaults.nRad,
    impHs: a.impHs ?? atomDefaults.impHs,
  }));
  const neighbours: [number, number][][] = atoms.map(() => []);
  for (const bond of molecule.bonds ?? []) {
    const order = bond.bo ?? json.defaults.bond.bo;
    const [a, b] = bond.atoms;
    neighbours[a]!.push([b, order]);
    neighbours[b]!.push([a, order]);
  }
  return { atoms, neighbours };
}

/** An N(+1) with a double bond to a neutral O and a single bond to a terminal O(-1). */
function isNitroNitrogen(graph: MolGraph, index: number): boolean {
  const atom = graph.atoms[index]!;
  if (atom.z !== 7 || atom.chg !== 1) return false;
  let oxo = false;
  let oxide = false;
  for (const [other, order] of graph.neighbours[index]!) {
    const o = graph.atoms[other]!;
    if (o.z !== 8) continue;
    if (order === 2 && o.chg === 0) oxo = true;
    if (order === 1 && o.chg === -1 && graph.neighbours[other]!.length === 1) oxide = true;
  }
  return oxo && oxide;
}

/** True when every charged atom is the N(+) or the O(-) of a nitro-like group. */
function chargesOnlyInNitroGroups(graph: MolGraph): boolean {
  return graph.atoms.every((atom, i) => {
    if (atom.chg === 0) return true;
    if (atom.chg === 1) return isNitroNitrogen(graph, i);
    if (atom.chg === -1 && atom.z === 8 && graph.neighbours[i]!.length === 1) {
      return isNitroNitrogen(graph, graph.neighbours[i]![0]![0]);
    }
    return false;
  });
}

type Assessment = { readonly smiles: string; readonly reason?: undefined } | { readonly reason: SkipReason; readonly detail: string };

/** Applies the pool's rules (module docstring) to a parsed molecule, in the SkipReason order. */
function assessMolecule(mol: RDKitMol, maxHeavyAtoms: number): Assessment {
  const smiles = mol.get_smiles();
  const graph = molGraph(mol);
  if (graph.atoms.some((a) => a.z === 0)) return { reason: 'unsupported_atom', detail: `dummy atom in ${smiles}` };
  if (smiles.includes('.')) return { reason: 'multiple_fragments', detail: smiles };
  const radicals = graph.atoms.reduce((sum, a) => sum + a.nRad, 0);
  if (radicals > 0) return { reason: 'radical', detail: `${radicals} unpaired electron(s) in ${smiles}` };
  const charge = graph.atoms.reduce((sum, a) => sum + a.chg, 0);
  if (charge !== 0) return { reason: 'net_charge', detail: `net charge ${charge} in ${smiles}` };
  if (!chargesOnlyInNitroGroups(graph)) return { reason: 'charge_separated', detail: `charged atoms outside nitro groups in ${smiles}` };
  const heavy = graph.atoms.filter((a) => a.z > 1).length;
  if (heavy > maxHeavyAtoms) return { reason: 'too_many_heavy_atoms', detail: `${heavy} heavy atoms, limit ${maxHeavyAtoms}` };
  return { smiles };
}

/** Parses and assesses one SMILES. The module must be loaded. */
function assessSmiles(input: string, maxHeavyAtoms: number): Assessment {
  const parsed = parseMolecule(input);
  if (!parsed.mol) return { reason: 'malformed', detail: parsed.error };
  try {
    return assessMolecule(parsed.mol, maxHeavyAtoms);
  } finally {
    parsed.mol.delete();
  }
}

function checkMaxHeavyAtoms(value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new ConfigError('maxHeavyAtoms', value, 'must be a positive integer');
  return value;
}

// ---------------------------------------------------------------------------------------------
// SMILES assembly

interface AtomToken {
  /** Offset just past the atom and its ring-closure labels: where a branch "(...)" may go. */
  readonly branchAt: number;
}

const ORGANIC_ATOM = /^(Cl|Br|[BCNOPSFI]|[bcnops]|\*)/;
const RING_LABEL = /^[-=#$:/\\]?(%\d\d|\d)/;

/**
 * The atoms of a SMILES in order (RDKit numbers atoms in the order written), each with the offset
 * where a branch can be inserted. Ring-closure labels belong to the atom before them and must
 * stay attached to it, so a branch goes after them: "c1(F)ccccc1", not "c(F)1ccccc1".
 */
function atomTokens(smiles: string): AtomToken[] {
  const tokens: AtomToken[] = [];
  let i = 0;
  while (i < smiles.length) {
    let end: number;
    if (smiles[i] === '[') {
      end = smiles.indexOf(']', i) + 1;
      if (end === 0) throw new ConfigError('smiles', smiles, 'unclosed bracket atom');
    } else {
      const match = ORGANIC_ATOM.exec(smiles.slice(i));
      if (!match) {
        i += 1; // a bond, a branch parenthesis or a ring label not directly after an atom
        continue;
      }
      end = i + match[0].length;
    }
    for (let label = RING_LABEL.exec(smiles.slice(end)); label; label = RING_LABEL.exec(smiles.slice(end))) {
      end += label[0].length;
    }
    tokens.push({ branchAt: end });
    i = end;
  }
  return tokens;
}

/**
 * Rewrites a substituent's ring-closure labels to %90-%99. A substituent written "c1ccccc1"
 * inside a scaffold whose ring 1 is still open would close the scaffold's ring instead of its own;
 * scaffolds use 1-9 only, so labels from %90 up cannot collide. A branch closes all its own rings,
 * so two substituents in one molecule may share labels.
 */
export function renumberRingClosures(substituent: string): string {
  const mapping = new Map<string, string>();
  let out = '';
  let i = 0;
  while (i < substituent.length) {
    const ch = substituent[i]!;
    if (ch === '[') {
      const end = substituent.indexOf(']', i) + 1;
      if (end === 0) throw new ConfigError('substituent', substituent, 'unclosed bracket atom');
      out += substituent.slice(i, end); // digits inside brackets are isotopes and H counts
      i = end;
      continue;
    }
    const label = /^(%\d\d|\d)/.exec(substituent.slice(i));
    if (label) {
      let renamed = mapping.get(label[0]);
      if (!renamed) {
        if (mapping.size >= 10) throw new ConfigError('substituent', substituent, 'uses more than 10 ring-closure labels');
        renamed = `%${90 + mapping.size}`;
        mapping.set(label[0], renamed);
      }
      out += renamed;
      i += label[0].length;
      continue;
    }
    out += ch;
    i += 1;
  }
  return out;
}

/** A position on a scaffold that can take a substituent: an aromatic or aliphatic carbon bearing H. */
interface Site {
  readonly branchAt: number;
}

/** The scaffold's C-H positions, found by parsing it with RDKit and matching atoms to SMILES tokens. */
function substitutionSites(scaffold: Fragment): Site[] {
  const parsed = parseMolecule(scaffold.smiles);
  if (!parsed.mol) throw new ConfigError(`scaffolds[${scaffold.name}]`, scaffold.smiles, `not a valid SMILES: ${parsed.error}`);
  try {
    if (/%9\d/.test(scaffold.smiles)) {
      throw new ConfigError(`scaffolds[${scaffold.name}]`, scaffold.smiles, 'ring labels %90-%99 are reserved for substituents');
    }
    const graph = molGraph(parsed.mol);
    const tokens = atomTokens(scaffold.smiles);
    if (tokens.length !== graph.atoms.length) {
      throw new ConfigError(`scaffolds[${scaffold.name}]`, scaffold.smiles, `tokenised ${tokens.length} atoms, RDKit found ${graph.atoms.length}`);
    }
    return tokens.filter((_, i) => graph.atoms[i]!.z === 6 && graph.atoms[i]!.impHs > 0).map((t) => ({ branchAt: t.branchAt }));
  } finally {
    parsed.mol.delete();
  }
}

/** Inserts "(substituent)" at each site. Sites are inserted right to left so earlier offsets stay valid. */
function attach(scaffold: string, placements: readonly { site: Site; smiles: string }[]): string {
  let out = scaffold;
  const ordered = [...placements].sort((a, b) => b.site.branchAt - a.site.branchAt);
  for (const { site, smiles } of ordered) out = `${out.slice(0, site.branchAt)}(${smiles})${out.slice(site.branchAt)}`;
  return out;
}

/** Every SMILES the options describe: bare scaffolds, one substituent per site, two on distinct sites. */
function* enumerateCandidates(scaffolds: readonly Fragment[], substituents: readonly string[], maxSubstituents: number): Generator<string> {
  for (const scaffold of scaffolds) {
    const sites = substitutionSites(scaffold);
    yield scaffold.smiles;
    for (const site of sites) {
      for (const smiles of substituents) yield attach(scaffold.smiles, [{ site, smiles }]);
    }
    if (maxSubstituents < 2) continue;
    for (let i = 0; i < sites.length; i++) {
      for (let j = i + 1; j < sites.length; j++) {
        for (const a of substituents) {
          for (const b of substituents) {
            yield attach(scaffold.smiles, [
              { site: sites[i]!, smiles: a },
              { site: sites[j]!, smiles: b },
            ]);
          }
        }
      }
    }
  }
}

function compareSmiles(a: PoolMolecule, b: PoolMolecule): number {
  // Code-unit order, not localeCompare: the same on every machine and locale.
  return a.smiles < b.smiles ? -1 : a.smiles > b.smiles ? 1 : 0;
}

/**
 * Builds the default pool (module docstring, step 1). With all defaults: 34 scaffolds x 18
 * substituents, up to 2 per molecule; takes tens of seconds on one core.
 * Every candidate is counted once, so `candidates` = kept + all skips: each distinct molecule is
 * kept or skipped under its first failing check, and every later candidate with the same
 * canonical SMILES (symmetry makes many) counts as 'duplicate', whatever the first one's fate.
 */
export async function buildDefaultPool(options: PoolOptions = {}): Promise<DefaultPoolResult> {
  const maxSubstituents = options.maxSubstituents ?? 2;
  if (maxSubstituents !== 1 && maxSubstituents !== 2) throw new ConfigError('maxSubstituents', maxSubstituents, 'must be 1 or 2');
  const maxHeavyAtoms = checkMaxHeavyAtoms(options.maxHeavyAtoms ?? DEFAULT_MAX_HEAVY_ATOMS);
  const scaffolds = options.scaffolds ?? DEFAULT_SCAFFOLDS;
  const substituentFragments = options.substituents ?? DEFAULT_SUBSTITUENTS;
  if (scaffolds.length === 0) throw new ConfigError('scaffolds', scaffolds, 'must list at least one scaffold');
  if (substituentFragments.length === 0) throw new ConfigError('substituents', substituentFragments, 'must list at least one substituent');

  await loadRDKit();
  const substituents = substituentFragments.map((s) => {
    const renumbered = renumberRingClosures(s.smiles);
    const probe = parseMolecule(`C(${renumbered})`);
    if (!probe.mol) throw new ConfigError(`substituents[${s.name}]`, s.smiles, `does not attach to a carbon: ${probe.error}`);
    probe.mol.delete();
    return renumbered;
  });

  // canonical SMILES -> the first verdict for it, so a symmetric duplicate costs one parse, not a full check.
  const verdicts = new Map<string, Assessment>();
  const tally = new SkipTally();
  const molecules: PoolMolecule[] = [];
  let candidates = 0;
  for (const candidate of enumerateCandidates(scaffolds, substituents, maxSubstituents)) {
    candidates += 1;
    const parsed = parseMolecule(candidate);
    if (!parsed.mol) {
      tally.add({ reason: 'malformed', input: candidate, detail: parsed.error });
      continue;
    }
    let verdict: Assessment;
    try {
      const canonical = parsed.mol.get_smiles();
      const previous = verdicts.get(canonical);
      if (previous) {
        tally.add({ reason: 'duplicate', input: candidate, detail: previous.reason ? `${canonical} (skipped: ${previous.reason})` : canonical });
        continue;
      }
      verdict = assessMolecule(parsed.mol, maxHeavyAtoms);
      verdicts.set(canonical, verdict);
    } finally {
      parsed.mol.delete();
    }
    if (verdict.reason) tally.add({ reason: verdict.reason, input: candidate, detail: verdict.detail });
    else molecules.push({ smiles: verdict.smiles });
  }
  molecules.sort(compareSmiles);
  return { molecules, skipped: tally.counts, examples: tally.examples, candidates };
}

// ---------------------------------------------------------------------------------------------
// Pool files

/** SMILES are ASCII; a file with NULs or mostly non-text characters is binary (gzip, a pickle). */
function looksBinary(text: string): boolean {
  if (text.includes('\u0000')) return true;
  let odd = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if ((code < 32 && code !== 9 && code !== 10 && code !== 13) || code === 0xfffd) odd += 1;
  }
  return odd > 0 && odd >= text.length * 0.05;
}

/**
 * Parses a pool file: one SMILES per line, optionally followed by whitespace and an id. Blank
 * lines and lines starting with '#' are ignored ('#' inside a line is a triple bond, not a comment).
 * Molecules keep file order; a repeated molecule keeps its first line's id. Skipped lines are
 * counted by reason, with the first few examples and their 1-based line numbers.
 * Throws PoolFileError when the text is binary or holds no valid molecule.
 */
export async function parsePoolFile(text: string, options: PoolFileOptions = {}): Promise<PoolResult> {
  const source = options.source ?? '(pool file)';
  const maxHeavyAtoms = checkMaxHeavyAtoms(options.maxHeavyAtoms ?? DEFAULT_MAX_HEAVY_ATOMS);
  if (looksBinary(text)) throw new PoolFileError(source, 'binary content, expected text with one SMILES per line');

  await loadRDKit();
  const tally = new SkipTally();
  const molecules: PoolMolecule[] = [];
  const firstLine = new Map<string, number>();
  let smilesLines = 0;
  const lines = text.split(/\r?\n/);
  for (let index = 0; index < lines.length; index++) {
    const trimmed = lines[index]!.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    smilesLines += 1;
    const line = index + 1;
    const [smiles = '', ...rest] = trimmed.split(/\s+/);
    const id = rest.join(' ');
    if (smiles.length > MAX_POOL_SMILES_CHARS || id.length > MAX_POOL_ID_CHARS) {
      const [what, length, most] =
        smiles.length > MAX_POOL_SMILES_CHARS ? ['SMILES', smiles.length, MAX_POOL_SMILES_CHARS] : ['id', id.length, MAX_POOL_ID_CHARS];
      tally.add({ reason: 'too_long', input: smiles, line, detail: `${what} of ${length} characters, at most ${most}` });
      continue;
    }
    const verdict = assessSmiles(smiles, maxHeavyAtoms);
    if (verdict.reason) {
      tally.add({ reason: verdict.reason, input: smiles, line, detail: verdict.detail });
      continue;
    }
    const seenAt = firstLine.get(verdict.smiles);
    if (seenAt !== undefined) {
      tally.add({ reason: 'duplicate', input: smiles, line, detail: `same molecule as line ${seenAt}` });
      continue;
    }
    firstLine.set(verdict.smiles, line);
    molecules.push(id ? { smiles: verdict.smiles, id } : { smiles: verdict.smiles });
  }
  if (molecules.length === 0) {
    const why = smilesLines === 0 ? 'no SMILES lines' : `no valid molecule in ${smilesLines} SMILES line(s), skipped ${JSON.stringify(tally.counts)}`;
    throw new PoolFileError(source, why);
  }
  return { molecules, skipped: tally.counts, examples: tally.examples };
}

// ---------------------------------------------------------------------------------------------
// Helpers

/** Runs `use` on a parsed molecule and frees it; a malformed SMILES throws InvalidSmilesError. */
async function withMolecule<T>(smiles: string, use: (mol: RDKitMol) => T): Promise<T> {
  await loadRDKit();
  const parsed = parseMolecule(smiles);
  if (!parsed.mol) throw new InvalidSmilesError(smiles, parsed.error);
  try {
    return use(parsed.mol);
  } finally {
    parsed.mol.delete();
  }
}

/** RDKit's canonical SMILES, or null when the input does not parse. No pool rules applied. */
export async function canonicalSmiles(smiles: string): Promise<string | null> {
  await loadRDKit();
  const parsed = parseMolecule(smiles);
  if (!parsed.mol) return null;
  try {
    return parsed.mol.get_smiles();
  } finally {
    parsed.mol.delete();
  }
}

/**
 * Morgan (ECFP-like) fingerprint as a packed bitset: a Uint8Array of ceil(nBits / 8) bytes,
 * bit i at `bytes[i >> 3] & (1 << (i & 7))` (least significant bit first, as RDKit returns it).
 * 2048 bits take 256 bytes, so a 100k-molecule pool's fingerprints fit in 25 MB.
 */
export async function morganFingerprint(smiles: string, options: FingerprintOptions = {}): Promise<Uint8Array> {
  const radius = options.radius ?? 2;
  const nBits = options.nBits ?? 2048;
  if (!Number.isInteger(radius) || radius < 0) throw new ConfigError('radius', radius, 'must be a non-negative integer');
  if (!Number.isInteger(nBits) || nBits < 8 || nBits % 8 !== 0) throw new ConfigError('nBits', nBits, 'must be a positive multiple of 8');
  return withMolecule(smiles, (mol) => new Uint8Array(mol.get_morgan_fp_as_uint8array(JSON.stringify({ radius, nBits })) as Uint8Array));
}

// One Tanimoto and one popcount for the whole project: the surrogate's (two empty fingerprints
// are identical, similarity 1, as the GP's kernel needs).
export { popcount as bitCount, tanimoto } from './surrogate.ts';

/** A 2D depiction as an SVG document (it begins with an XML declaration), for the approval email. */
export async function moleculeSvg(smiles: string, size: { width: number; height: number } = { width: 300, height: 200 }): Promise<string> {
  return withMolecule(smiles, (mol) => mol.get_svg(size.width, size.height));
}

/** Atoms other than hydrogen. */
export async function heavyAtomCount(smiles: string): Promise<number> {
  return withMolecule(smiles, (mol) => molGraph(mol).atoms.filter((a) => a.z > 1).length);
}

/** Sum of formal charges (0 for nitrobenzene, whose [N+] and [O-] cancel). */
export async function netCharge(smiles: string): Promise<number> {
  return withMolecule(smiles, (mol) => molGraph(mol).atoms.reduce((sum, a) => sum + a.chg, 0));
}

/**
 * Applies the pool rules to one SMILES: the canonical SMILES when it would enter a pool,
 * otherwise the reason and a detail. For checking a molecule proposed outside the pool.
 */
export async function checkPoolMolecule(
  smiles: string,
  maxHeavyAtoms: number = DEFAULT_MAX_HEAVY_ATOMS,
): Promise<{ smiles: string } | { reason: SkipReason; detail: string }> {
  checkMaxHeavyAtoms(maxHeavyAtoms);
  await loadRDKit();
  return assessSmiles(smiles, maxHeavyAtoms);
}
