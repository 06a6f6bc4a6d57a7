/**
 * The oracle's measurement of one molecule: the HOMO-LUMO gap (eV) from GFN2-xTB after a
 * geometry optimisation (`xtb --opt`), in its own work directory, with a timeout.
 *
 * Starting geometry: RDKit's 2D coordinates with explicit hydrogens, each atom lifted out of the
 * plane by a small seeded offset (a flat start can sit on a saddle point). openbabel's --gen3d
 * was measured here with a long random runtime tail (0.1 s to over 40 s for one small molecule),
 * this route matched it within 0.01 eV.
 *
 * About 11 % of optimisations change the molecule (hydrogens lost or moved, spurious bonds between
 * neighbouring groups) and then report falsely low gaps: the bond graph of the optimised geometry
 * (bonds from covalent radii) must equal the molecule's, else the measurement is retried once, and
 * then recorded as failed with that reason. The retry starts from a different geometry, not just
 * other offsets: the flat layout of a crowded molecule (ortho tert-butyl or nitro groups, peri
 * substituents) puts atoms of neighbouring groups within bonding distance (1.5 A between oxygens
 * of o-dinitrobenzene, 0.04 A between two methyl carbons of 1,8-bis(dimethylamino)naphthalene),
 * and GFN2 joins them from any seed. So the retry's start has such clashes lifted apart out of
 * plane, and xtb's GFN-FF force field (`--gfnff --opt`, well under a second for these molecules)
 * relaxes it before GFN2 runs from the result. GFN-FF gets the molecule's bonds as an SDF
 * connection table: from an xyz file it would take its bonds from the crowded distances too. On
 * 34 crowded aromatics, 11 failed both attempts with a flat retry, none with this one.
 *
 * A failed xtb run is recorded with xtb's own reason: the error block at the end of its output
 * (e.g. "Geometry optimization failed; ...; optimizer_relax: |grad| > 500, something is totally
 * wrong!"), at most XTB_ERROR_CHARS characters, or stderr's error line when there is no block.
 */
import { spawn } from 'node:child_process';
import { XtbMissingError } from './errors.ts';
import { closeSync, fstatSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PipelineError } from '../errors.ts';
import { seededRandom } from '../random.ts';
import { parseMolecule, loadRDKit } from './rdkit.ts';

export interface Atom {
  readonly element: string;
  x: number;
  y: number;
  z: number;
}

export interface StartGeometry {
  readonly atoms: Atom[];
  /** Bonds as atom index pairs (i < j), hydrogens included. */
  readonly bonds: [number, number][];
  /** RDKit's V2000 molblock with explicit hydrogens, atoms in the order of `atoms`: the bond orders and charges the GFN-FF retry is given (its coordinates are not used). */
  readonly molblock: string;
}

/** Covalent radii (Angstrom) of the elements the pool uses. */
const COVALENT_RADIUS: Record<string, number> = {
  H: 0.31,
  B: 0.84,
  C: 0.76,
  N: 0.71,
  O: 0.66,
  F: 0.57,
  Si: 1.11,
  P: 1.07,
  S: 1.05,
  Cl: 1.02,
  Br: 1.2,
  I: 1.39,
};
/** Two atoms are bonded when closer than this factor times the sum of their covalent radii. */
const BOND_TOLERANCE = 1.25;

export interface StartOptions {
  /** Each atom is lifted out of plane by up to this (Angstrom, seeded). Default 0.15. */
  readonly offset?: number;
  /** Clashing heavy atoms are moved this far apart out of plane (liftClashes). Default 0: not moved. */
  readonly lift?: number;
}

/** RDKit's 2D layout with explicit hydrogens, each atom lifted out of plane by a small seeded offset, clashes lifted apart on request. */
export async function startGeometry(smiles: string, seed: number, options: StartOptions = {}): Promise<StartGeometry> {
  const { offset = 0.15, lift = 0 } = options;
  await loadRDKit();
  const parsed = parseMolecule(smiles);
  if ('error' in parsed) throw new PipelineError(`smiles: ${parsed.error} (got ${JSON.stringify(smiles)})`);
  let molblock: string;
  try {
    molblock = parsed.mol.add_hs();
  } finally {
    parsed.mol.delete();
  }
  const lines = molblock.split('\n');
  const counts = lines[3]!;
  const atomCount = Number(counts.slice(0, 3));
  const bondCount = Number(counts.slice(3, 6));
  const random = seededRandom(seed);
  const atoms: Atom[] = [];
  for (let i = 0; i < atomCount; i++) {
    const line = lines[4 + i]!;
    atoms.push({ element: line.slice(31, 34).trim(), x: Number(line.slice(0, 10)), y: Number(line.slice(10, 20)), z: (random() * 2 - 1) * offset });
  }
  const bonds: [number, number][] = [];
  for (let i = 0; i < bondCount; i++) {
    const line = lines[4 + atomCount + i]!;
    const a = Number(line.slice(0, 3)) - 1;
    const b = Number(line.slice(3, 6)) - 1;
    bonds.push(a < b ? [a, b] : [b, a]);
  }
  if (lift > 0) liftClashes(atoms, bonds, lift);
  placeHydrogens(atoms, bonds);
  return { atoms, bonds, molblock };
}

/** Heavy atoms at least three bonds apart that the flat layout puts closer than this (Angstrom) clash. */
const CLASH_DISTANCE = 1.6;

/**
 * Moves clashing heavy atoms (CLASH_DISTANCE) out of plane in opposite directions until they are
 * `lift` Angstrom apart in z; their hydrogens follow (placeHydrogens runs after). The flat layout
 * of 1,8-bis(dimethylamino)naphthalene puts two methyl carbons 0.04 A apart, too close for GFN-FF
 * to start from; lifted, GFN-FF pushes them apart along the molecule's own bonds.
 */
function liftClashes(atoms: Atom[], bonds: readonly [number, number][], lift: number): void {
  const heavy = atoms.map((a) => a.element !== 'H');
  const neighbours = atoms.map(() => [] as number[]);
  for (const [a, b] of bonds) {
    if (!heavy[a] || !heavy[b]) continue;
    neighbours[a]!.push(b);
    neighbours[b]!.push(a);
  }
  for (let i = 0; i < atoms.length; i++) {
    if (!heavy[i]) continue;
    // The atom itself, its neighbours and theirs: those sit close by design.
    const near = new Set([i, ...neighbours[i]!, ...neighbours[i]!.flatMap((n) => neighbours[n]!)]);
    for (let j = i + 1; j < atoms.length; j++) {
      if (!heavy[j] || near.has(j)) continue;
      const a = atoms[i]!;
      const b = atoms[j]!;
      const dz = b.z - a.z;
      if (Math.hypot(a.x - b.x, a.y - b.y) >= CLASH_DISTANCE || Math.abs(dz) >= lift) continue;
      const push = ((lift - Math.abs(dz)) / 2) * (dz >= 0 ? 1 : -1);
      a.z -= push;
      b.z += push;
    }
  }
}

/** X-H bond length (Angstrom) of the starting geometry; the optimisation refines it. */
const XH_LENGTH = 1.05;
/** The angle between a tetrahedral X-H bond and the opposite direction of X's heavy neighbour. */
const TETRAHEDRAL_TILT = (70.5 * Math.PI) / 180;

/**
 * Puts the hydrogens of an atom that carries two or three out of the 2D plane, tetrahedrally, at
 * X-H bond length. RDKit's 2D layout draws them flat, and two methyl groups on one nitrogen then
 * hold hydrogens 1.1 Angstrom apart, which xtb joins into H2: every N(CH3)2 molecule failed the
 * bond check from any seed. A single hydrogen keeps its 2D direction.
 */
function placeHydrogens(atoms: Atom[], bonds: readonly [number, number][]): void {
  const neighbours = atoms.map(() => [] as number[]);
  for (const [a, b] of bonds) {
    neighbours[a]!.push(b);
    neighbours[b]!.push(a);
  }
  atoms.forEach((heavy, x) => {
    if (heavy.element === 'H') return;
    const hs = neighbours[x]!.filter((n) => atoms[n]!.element === 'H');
    const others = neighbours[x]!.filter((n) => atoms[n]!.element !== 'H');
    if (hs.length === 0) return;
    // w: the in-plane direction pointing away from the heavy neighbours (or towards the first H).
    let wx = 0;
    let wy = 0;
    for (const n of others) {
      const dx = heavy.x - atoms[n]!.x;
      const dy = heavy.y - atoms[n]!.y;
      const d = Math.hypot(dx, dy) || 1;
      wx += dx / d;
      wy += dy / d;
    }
    if (Math.hypot(wx, wy) < 1e-6) {
      wx = atoms[hs[0]!]!.x - heavy.x;
      wy = atoms[hs[0]!]!.y - heavy.y;
    }
    const wn = Math.hypot(wx, wy) || 1;
    wx /= wn;
    wy /= wn;
    const vx = -wy; // in-plane, perpendicular to w
    const vy = wx;
    const place = (h: number, along: number, side: number, up: number) => {
      const dx = along * wx + side * vx;
      const dy = along * wy + side * vy;
      const dz = up;
      const d = Math.hypot(dx, dy, dz);
      const atom = atoms[h]!;
      atom.x = heavy.x + (XH_LENGTH * dx) / d;
      atom.y = heavy.y + (XH_LENGTH * dy) / d;
      atom.z = heavy.z + (XH_LENGTH * dz) / d;
    };
    if (hs.length === 1) {
      // Keeps its direction (with the seeded out-of-plane offsets), at bond length.
      const h = atoms[hs[0]!]!;
      const dx = h.x - heavy.x;
      const dy = h.y - heavy.y;
      const dz = h.z - heavy.z;
      const d = Math.hypot(dx, dy, dz) || 1;
      h.x = heavy.x + (XH_LENGTH * dx) / d;
      h.y = heavy.y + (XH_LENGTH * dy) / d;
      h.z = heavy.z + (XH_LENGTH * dz) / d;
      return;
    }
    if (hs.length === 2 && others.length >= 2) {
      // Between two heavy neighbours: above and below the plane, along the outer bisector.
      hs.forEach((h, k) => {
        place(h, Math.cos((54.75 * Math.PI) / 180), 0, (k === 0 ? 1 : -1) * Math.sin((54.75 * Math.PI) / 180));
      });
      return;
    }
    if (others.length === 0) {
      // No heavy neighbour (methane, water, ammonia): the corners of a tetrahedron.
      const corners = [
        [1, 1, 1],
        [-1, -1, 1],
        [-1, 1, -1],
        [1, -1, -1],
      ] as const;
      hs.forEach((h, k) => {
        const [cx, cy, cz] = corners[k % 4]!;
        const atom = atoms[h]!;
        atom.x = heavy.x + (XH_LENGTH * cx) / Math.sqrt(3);
        atom.y = heavy.y + (XH_LENGTH * cy) / Math.sqrt(3);
        atom.z = heavy.z + (XH_LENGTH * cz) / Math.sqrt(3);
      });
      return;
    }
    // One heavy neighbour: a cone of hydrogens around w, 120 degrees apart.
    hs.forEach((h, k) => {
      const phi = (2 * Math.PI * k) / Math.max(hs.length, 3);
      place(h, Math.cos(TETRAHEDRAL_TILT), Math.sin(TETRAHEDRAL_TILT) * Math.cos(phi), Math.sin(TETRAHEDRAL_TILT) * Math.sin(phi));
    });
  });
}

export function toXyz(atoms: readonly Atom[], comment = ''): string {
  return `${atoms.length}\n${comment}\n${atoms.map((a) => `${a.element} ${a.x.toFixed(6)} ${a.y.toFixed(6)} ${a.z.toFixed(6)}`).join('\n')}\n`;
}

export function parseXyz(text: string): Atom[] {
  const lines = text.split('\n');
  const count = Number(lines[0]!.trim());
  return lines.slice(2, 2 + count).map((line) => {
    const [element, x, y, z] = line.trim().split(/\s+/);
    return { element: element!, x: Number(x), y: Number(y), z: Number(z) };
  });
}

/**
 * The start's molblock with `atoms`' coordinates, `title` on its first line, as one SDF record.
 * xtb's reader wants all seven fields of a V2000 bond line; RDKit writes the first four.
 */
export function toSdf(start: StartGeometry, atoms: readonly Atom[], title = ''): string {
  const lines = start.molblock.split('\n');
  const atomCount = Number(lines[3]!.slice(0, 3));
  const bondCount = Number(lines[3]!.slice(3, 6));
  if (atomCount !== atoms.length) throw new PipelineError(`molblock has ${atomCount} atoms, the geometry ${atoms.length}`);
  lines[0] = title;
  // The header's dimension code: RDKit's says 2D (its layout), and a 2D record makes xtb convert
  // it to 3D with a short GFN-FF molecular dynamics from random velocities, a different geometry
  // on every run. The coordinates here are 3D; said so, xtb only optimises them.
  lines[1] = `${lines[1]!.slice(0, 20).padEnd(20)}3D`;
  const coordinate = (x: number) => x.toFixed(4).padStart(10);
  atoms.forEach((a, i) => {
    lines[4 + i] = `${coordinate(a.x)}${coordinate(a.y)}${coordinate(a.z)}${lines[4 + i]!.slice(30)}`;
  });
  for (let i = 0; i < bondCount; i++) {
    let line = lines[4 + atomCount + i]!.trimEnd();
    while (line.length < 21) line += '  0';
    lines[4 + atomCount + i] = line;
  }
  const end = lines.findIndex((l) => l.startsWith('M  END'));
  return `${lines.slice(0, end + 1).join('\n')}\n$$$$\n`;
}

/** The atoms of an SDF record (V2000, as xtb writes its optimised geometry). */
export function parseSdfAtoms(text: string): Atom[] {
  const lines = text.split('\n');
  const count = Number(lines[3]?.slice(0, 3));
  return lines.slice(4, 4 + count).map((line) => ({
    element: line.slice(31, 34).trim(),
    x: Number(line.slice(0, 10)),
    y: Number(line.slice(10, 20)),
    z: Number(line.slice(20, 30)),
  }));
}

/** Bonds implied by distances: pairs closer than BOND_TOLERANCE x the sum of their covalent radii. */
export function bondsFromCoordinates(atoms: readonly Atom[]): [number, number][] {
  const bonds: [number, number][] = [];
  for (let i = 0; i < atoms.length; i++) {
    for (let j = i + 1; j < atoms.length; j++) {
      const a = atoms[i]!;
      const b = atoms[j]!;
      const limit = BOND_TOLERANCE * ((COVALENT_RADIUS[a.element] ?? 1.5) + (COVALENT_RADIUS[b.element] ?? 1.5));
      if (Math.hypot(a.x - b.x, a.y - b.y, a.z - b.z) < limit) bonds.push([i, j]);
    }
  }
  return bonds;
}

/** The bonds the optimisation made or broke (empty: the molecule is the same). */
export function bondChanges(
  expected: readonly [number, number][],
  found: readonly [number, number][],
): { made: [number, number][]; broken: [number, number][] } {
  const key = ([a, b]: readonly [number, number]) => `${a}-${b}`;
  const want = new Set(expected.map(key));
  const have = new Set(found.map(key));
  return { made: found.filter((b) => !want.has(key(b))), broken: expected.filter((b) => !have.has(key(b))) };
}

export interface XtbOptions {
  /** The xtb executable. Default: `xtb` on PATH. */
  readonly command?: string;
  /** Per attempt (the retry's GFN-FF and GFN2 runs share it). Default: 120 s. */
  readonly timeoutMs?: number;
  /** Seed of the first attempt's out-of-plane offsets; the retry uses seed + 1 and pre-optimises with GFN-FF. */
  readonly seed?: number;
}

export type GapMeasurement =
  | { readonly ok: true; readonly gap: number; readonly attempts: number; readonly seconds: number }
  | { readonly ok: false; readonly reason: string; readonly attempts: number; readonly seconds: number };

/** One optimisation: the gap, or why there is none. */
export interface Attempt {
  readonly gap?: number;
  readonly failure?: string;
}

/** The most characters of xtb's own error text a failure records (after "xtb exited N: "). */
export const XTB_ERROR_CHARS = 500;
/** How much of the end of a failed run's xtb.out is read back: its error block is the last thing in it. */
const OUT_TAIL_BYTES = 16_384;

function readTail(path: string, bytes: number): string {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    const length = Math.min(size, bytes);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, size - length);
    return buffer.toString('utf8');
  } finally {
    closeSync(fd);
  }
}

const bounded = (text: string) => (text.length <= XTB_ERROR_CHARS ? text : `${text.slice(0, XTB_ERROR_CHARS - 1)}…`);

/**
 * Why an xtb run failed, in xtb's words. xtb ends its output with a block
 *
 *     [ERROR] Program stopped due to fatal error
 *     -2- xtb_geoopt: Geometry optimization did not converge
 *     -1- optimizer_relax: |grad| > 500, something is totally wrong!
 *     ####...
 *
 * and writes only "ERROR STOP" and a backtrace to stderr. The block's numbered lines are the
 * reason, in xtb's order (outermost first), joined with "; "; longer than XTB_ERROR_CHARS, the
 * first and the last line are kept (what failed, and the innermost cause). Without a block (a
 * crash before xtb wrote one, or another program), stderr's first error line; undefined when
 * neither has one.
 */
export function xtbErrorText(outTail: string, stderr: string): string | undefined {
  const at = outTail.lastIndexOf('[ERROR]');
  if (at >= 0) {
    const lines: string[] = [];
    for (const line of outTail.slice(at).split('\n').slice(1)) {
      if (/^#{8,}/.test(line.trim())) break;
      const numbered = /^\s*-\d+-\s*(.*\S)/.exec(line);
      if (numbered) lines.push(numbered[1]!);
    }
    if (lines.length) {
      const all = lines.join('; ');
      return bounded(all.length <= XTB_ERROR_CHARS || lines.length < 3 ? all : `${lines[0]}; …; ${lines.at(-1)}`);
    }
  }
  const line = /\[ERROR\][^\n]*|error[^\n]*/i.exec(stderr)?.[0].trim();
  return line ? bounded(line) : undefined;
}

interface XtbRun {
  readonly code: number | null;
  readonly timedOut: boolean;
  /** xtb's error text when the run failed (xtbErrorText), else undefined. */
  readonly error?: string;
}

function runXtb(command: string, dir: string, args: readonly string[], timeoutMs: number): Promise<XtbRun> {
  // xtb's stdout is long (every optimisation cycle); piping it into Node cost about 7 % of the
  // run time, so it goes to a file in the work dir and only its tail is read, only when the run failed.
  const outFile = join(dir, 'xtb.out');
  const out = openSync(outFile, 'w');
  return new Promise<{ code: number | null; stderr: string; timedOut: boolean }>((resolve, reject) => {
    const child = spawn(command, [...args], {
      cwd: dir,
      env: { ...process.env, OMP_NUM_THREADS: '1', OMP_STACKSIZE: '500M' },
      stdio: ['ignore', out, 'pipe'],
    });
    let stderr = '';
    let timedOut = false;
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(error.code === 'ENOENT' ? new XtbMissingError(command) : error);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, timedOut });
    });
  })
    .finally(() => closeSync(out))
    .then(({ code, stderr, timedOut }) => ({
      code,
      timedOut,
      error: code === 0 || timedOut ? undefined : xtbErrorText(readTail(outFile, OUT_TAIL_BYTES), stderr),
    }));
}

const exited = (run: XtbRun, step = '') => `xtb exited ${run.code}${step}${run.error ? `: ${run.error}` : ''}`;

/**
 * Optimises `start` with GFN2-xTB in a work dir of its own and returns the gap, or why there is
 * none: a timeout, xtb's error, an unreadable result, or the bonds the optimisation changed.
 * With `preoptimise`, GFN-FF relaxes the start first (module docstring); the two runs share
 * `timeoutMs`. `title` is the xyz comment line (the SMILES).
 */
export async function optimiseGap(
  start: StartGeometry,
  options: { readonly command: string; readonly timeoutMs: number; readonly preoptimise: boolean; readonly title?: string },
): Promise<Attempt> {
  const { command, timeoutMs, preoptimise, title = '' } = options;
  const deadline = performance.now() + timeoutMs;
  const dir = mkdtempSync(join(tmpdir(), 'xtb-'));
  try {
    let atoms = start.atoms;
    if (preoptimise) {
      // Its own dir: GFN-FF leaves topology files behind, and the GFN2 run starts clean.
      const ff = join(dir, 'gfnff');
      mkdirSync(ff);
      writeFileSync(join(ff, 'mol.sdf'), toSdf(start, start.atoms, title));
      const run = await runXtb(command, ff, ['mol.sdf', '--gfnff', '--opt'], timeoutMs);
      if (run.timedOut) return { failure: `timeout after ${timeoutMs} ms` };
      if (run.code !== 0) return { failure: exited(run, ' in the GFN-FF pre-optimisation') };
      try {
        atoms = parseSdfAtoms(readFileSync(join(ff, 'xtbopt.sdf'), 'utf8'));
      } catch (error) {
        return { failure: `GFN-FF left no readable geometry (${(error as Error).message})` };
      }
      if (atoms.length !== start.atoms.length || atoms.some((a, i) => a.element !== start.atoms[i]!.element || !Number.isFinite(a.x + a.y + a.z))) {
        return { failure: 'GFN-FF left no readable geometry (atoms differ from the start)' };
      }
    }
    writeFileSync(join(dir, 'mol.xyz'), toXyz(atoms, title));
    const run = await runXtb(command, dir, ['mol.xyz', '--gfn', '2', '--opt', '--json'], Math.max(1, deadline - performance.now()));
    if (run.timedOut) return { failure: `timeout after ${timeoutMs} ms` };
    if (run.code !== 0) return { failure: exited(run) };
    let gap: number | undefined;
    let optimised: Atom[];
    try {
      gap = (JSON.parse(readFileSync(join(dir, 'xtbout.json'), 'utf8')) as Record<string, number>)['HOMO-LUMO gap/eV'];
      optimised = parseXyz(readFileSync(join(dir, 'xtbopt.xyz'), 'utf8'));
    } catch (error) {
      return { failure: `xtb left no readable result (${(error as Error).message})` };
    }
    if (typeof gap !== 'number' || !Number.isFinite(gap)) return { failure: 'xtb reported no HOMO-LUMO gap' };
    const changes = bondChanges(start.bonds, bondsFromCoordinates(optimised));
    if (changes.made.length || changes.broken.length) {
      const name = (i: number) => `${start.atoms[i]!.element}${i + 1}`;
      const list = (bs: [number, number][]) => bs.map(([a, b]) => `${name(a)}-${name(b)}`).join(', ');
      return { failure: `optimisation changed the bonds (made: ${list(changes.made) || 'none'}; broken: ${list(changes.broken) || 'none'})` };
    }
    return { gap };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** How far apart (Angstrom, out of plane) the retry's start puts heavy atoms that clash in the flat layout. */
const RETRY_LIFT = 1.0;

/**
 * The molecule's GFN2-xTB HOMO-LUMO gap after optimisation, or why it could not be measured
 * (timeout, xtb error, bonds changed on both attempts). Throws only when xtb itself is missing.
 * The first attempt optimises the seeded flat start; the retry starts from seed + 1 with clashes
 * lifted apart, relaxed by GFN-FF (module docstring).
 */
export async function measureGap(smiles: string, options: XtbOptions = {}): Promise<GapMeasurement> {
  const command = options.command ?? 'xtb';
  const timeoutMs = options.timeoutMs ?? 120_000;
  const seed = options.seed ?? 0;
  const t0 = performance.now();
  let last: Attempt = {};
  for (let i = 0; i < 2; i++) {
    const retry = i === 1;
    const start = await startGeometry(smiles, seed + i, retry ? { lift: RETRY_LIFT } : {});
    last = await optimiseGap(start, { command, timeoutMs, preoptimise: retry, title: smiles });
    const seconds = (performance.now() - t0) / 1000;
    if (last.gap !== undefined) return { ok: true, gap: last.gap, attempts: i + 1, seconds };
    // A timeout is not worth a second wait; a changed molecule or an xtb error may be the start.
    if (last.failure?.startsWith('timeout')) return { ok: false, reason: last.failure, attempts: i + 1, seconds };
  }
  return { ok: false, reason: last.failure ?? 'unknown', attempts: 2, seconds: (performance.now() - t0) / 1000 };
}
