/**
 * The oracle's single-molecule measurement against the real xtb (Debian's package): a known gap,
 * the bond-graph check that catches optimisations that change the molecule, and the failures a
 * run records instead of crashing (timeout, xtb error) or names (xtb missing).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { bondChanges, bondsFromCoordinates, measureGap, startGeometry, type Atom } from '#shared/molecules/xtb.ts';
import { XtbMissingError } from '#shared/molecules/errors.ts';
import { assertClose } from '../support/floats.ts';

describe('xtb oracle, one molecule', () => {
  it('measures phenol: GFN2-xTB gap after optimisation near 4.35 eV, the same on a rerun', async () => {
    const first = await measureGap('c1ccc(O)cc1');
    assert.ok(first.ok, JSON.stringify(first));
    // xtb (Fortran, the machine's BLAS and LAPACK, an optimisation stopped at its own
    // convergence threshold) against a reference value: builds and CPUs move the gap by far less
    // than 1e-3 eV; 0.05 eV still catches a wrong method, charge or molecule.
    assertClose(first.gap, 4.35, { abs: 0.05 }, 'phenol gap (eV)');
    const again = await measureGap('c1ccc(O)cc1');
    assert.ok(again.ok, JSON.stringify(again));
    // A rerun is the same binary on the same CPU with one OpenMP thread and the same seeded start
    // geometry, so it should repeat bit for bit; 1e-6 eV (below the printed precision that
    // matters) keeps this a test of the seeded start rather than of BLAS's thread scheduling.
    assertClose(again.gap, first.gap, { abs: 1e-6 }, 'phenol gap on a rerun (eV)');
  });

  it('starts from RDKit 2D coordinates with explicit hydrogens, lifted out of plane by a seeded offset', async () => {
    const a = await startGeometry('c1ccc(O)cc1', 1);
    const b = await startGeometry('c1ccc(O)cc1', 1);
    const c = await startGeometry('c1ccc(O)cc1', 2);
    assert.equal(a.atoms.length, 13);
    assert.equal(a.atoms.filter((x) => x.element === 'H').length, 6);
    assert.equal(a.bonds.length, 13);
    assert.deepEqual(a, b);
    assert.notDeepEqual(
      a.atoms.map((x) => x.z),
      c.atoms.map((x) => x.z),
    );
    assert.ok(a.atoms.every((x) => Math.abs(x.z) <= 0.15));
  });

  it('puts CH3, CH2 and NH2 hydrogens out of the plane at bond length: no two hydrogens start bonded', async () => {
    // Flat, the two methyls of a dimethylamino group hold hydrogens 1.1 A apart, which xtb joins into H2.
    for (const smiles of ['CN(C)c1ccccc1', 'CCc1ccc(N)cc1', 'C']) {
      const { atoms, bonds } = await startGeometry(smiles, 0);
      const hs = atoms.map((a, i) => ({ a, i })).filter(({ a }) => a.element === 'H');
      for (const x of hs) {
        for (const y of hs)
          if (x.i < y.i) assert.ok(Math.hypot(x.a.x - y.a.x, x.a.y - y.a.y, x.a.z - y.a.z) > 1.5, `${smiles}: H${x.i + 1} and H${y.i + 1} start apart`);
        const [a, b] = bonds.find(([p, q]) => p === x.i || q === x.i)!;
        const heavy = atoms[a === x.i ? b : a]!;
        // Placed along a unit vector scaled to 1.05 A, measured back with hypot: a few roundings
        // of numbers ~1 apart (~1e-15), so 1e-9 A is headroom only.
        assertClose(Math.hypot(heavy.x - x.a.x, heavy.y - x.a.y, heavy.z - x.a.z), 1.05, { abs: 1e-9 }, `${smiles}: H${x.i + 1} bond length`);
      }
      assert.deepEqual(bondChanges(bonds, bondsFromCoordinates(atoms)), { made: [], broken: [] }, `${smiles}: the start has the molecule's bonds`);
    }
    const aniline = await measureGap('CN(C)c1ccccc1');
    assert.ok(aniline.ok, JSON.stringify(aniline));
    assert.equal(aniline.attempts, 1);
    const methane = await measureGap('C');
    assert.ok(methane.ok && methane.gap > 15, JSON.stringify(methane));
  });

  it('finds the bonds an optimisation made or broke', () => {
    const water: Atom[] = [
      { element: 'O', x: 0, y: 0, z: 0 },
      { element: 'H', x: 0.96, y: 0, z: 0 },
      { element: 'H', x: -0.24, y: 0.93, z: 0 },
    ];
    const expected = bondsFromCoordinates(water);
    assert.deepEqual(expected, [
      [0, 1],
      [0, 2],
    ]);
    const lost = water.map((a, i) => (i === 2 ? { ...a, x: -3, y: 3 } : a));
    assert.deepEqual(bondChanges(expected, bondsFromCoordinates(lost)), { made: [], broken: [[0, 2]] });
    const hh = water.map((a, i) => (i === 2 ? { ...a, x: 0.96, y: 0.6 } : a));
    assert.deepEqual(bondChanges(expected, bondsFromCoordinates(hh)).made, [[1, 2]]);
  });

  it('records a timeout or an xtb failure for the molecule instead of throwing', async () => {
    const slow = await measureGap('c1ccc2ccccc2c1', { timeoutMs: 1 });
    assert.equal(slow.ok, false);
    assert.match(!slow.ok ? slow.reason : '', /^timeout after 1 ms$/);
    assert.equal(slow.attempts, 1);
    const failing = await measureGap('c1ccccc1', { command: 'false' });
    assert.equal(failing.ok, false);
    assert.match(!failing.ok ? failing.reason : '', /^xtb exited 1/);
    assert.equal(failing.attempts, 2, 'retried once from another start');
  });

  it('names the Debian package when xtb is missing', async () => {
    await assert.rejects(measureGap('c1ccccc1', { command: 'xtb-not-installed' }), (error: unknown) => {
      assert.ok(error instanceof XtbMissingError);
      assert.match(error.message, /install Debian's xtb package \(apt-get install xtb\)/);
      return true;
    });
  });
});
