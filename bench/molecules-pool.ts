/**
 * Builds the default molecule pool once and reports its size and build time (one core).
 * Run alone with `tsx bench/molecules-pool.ts`, or call `measurePool()` from the bench runner.
 */
import { pathToFileURL } from 'node:url';
import { buildDefaultPool, DEFAULT_MAX_HEAVY_ATOMS, DEFAULT_SCAFFOLDS, DEFAULT_SUBSTITUENTS } from '#shared/molecules/pool.ts';
import { loadRDKit } from '#shared/molecules/rdkit.ts';

export interface PoolFigures {
  readonly molecules: number;
  readonly candidates: number;
  readonly skipped: Record<string, number>;
  readonly seconds: number;
  readonly rdkitInitSeconds: number;
  readonly scaffolds: number;
  readonly substituents: number;
  readonly maxHeavyAtoms: number;
}

export async function measurePool(): Promise<PoolFigures> {
  const t0 = performance.now();
  await loadRDKit(); // timed apart: the pool figure is enumeration and validation only
  const t1 = performance.now();
  const pool = await buildDefaultPool();
  const t2 = performance.now();
  return {
    molecules: pool.molecules.length,
    candidates: pool.candidates,
    skipped: { ...pool.skipped },
    seconds: (t2 - t1) / 1000,
    rdkitInitSeconds: (t1 - t0) / 1000,
    scaffolds: DEFAULT_SCAFFOLDS.length,
    substituents: DEFAULT_SUBSTITUENTS.length,
    maxHeavyAtoms: DEFAULT_MAX_HEAVY_ATOMS,
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const figures = await measurePool();
  console.log(
    `default pool: ${figures.molecules} molecules from ${figures.candidates} candidates ` +
      `(${figures.scaffolds} scaffolds x ${figures.substituents} substituents, up to 2, <= ${figures.maxHeavyAtoms} heavy atoms) ` +
      `in ${figures.seconds.toFixed(1)} s (RDKit init ${figures.rdkitInitSeconds.toFixed(2)} s)`,
  );
  console.log(`skipped: ${JSON.stringify(figures.skipped)}`);
}
