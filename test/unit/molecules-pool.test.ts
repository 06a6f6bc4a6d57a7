import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '#shared/errors.ts';
import {
  bitCount,
  buildDefaultPool,
  canonicalSmiles,
  checkPoolMolecule,
  DEFAULT_SCAFFOLDS,
  DEFAULT_SUBSTITUENTS,
  heavyAtomCount,
  moleculeSvg,
  morganFingerprint,
  netCharge,
  MAX_POOL_ID_CHARS,
  MAX_POOL_SMILES_CHARS,
  parsePoolFile,
  renumberRingClosures,
  tanimoto,
  type Fragment,
} from '#shared/molecules/pool.ts';
import { InvalidSmilesError, PoolFileError } from '#shared/molecules/errors.ts';
import { loadRDKit } from '#shared/molecules/rdkit.ts';

const scaffolds = (...names: string[]): Fragment[] => names.map((n) => DEFAULT_SCAFFOLDS.find((s) => s.name === n)!);
const substituents = (...names: string[]): Fragment[] => names.map((n) => DEFAULT_SUBSTITUENTS.find((s) => s.name === n)!);
const sum = (counts: Record<string, number | undefined>) => Object.values(counts).reduce<number>((a, b) => a + (b ?? 0), 0);

describe('canonicalSmiles', () => {
  it('gives one spelling per molecule and null for a malformed SMILES', async () => {
    assert.equal(await canonicalSmiles('OCC'), 'CCO');
    assert.equal(await canonicalSmiles('C(O)C'), 'CCO');
    assert.equal(await canonicalSmiles('C1=CC=CC=C1'), 'c1ccccc1');
    assert.equal(await canonicalSmiles('C1CC'), null);
    assert.equal(await canonicalSmiles('c1cccc1'), null); // cannot kekulize
  });
});

describe('molecule properties', () => {
  it('counts heavy atoms and the net formal charge', async () => {
    assert.equal(await heavyAtomCount('CCO'), 3);
    assert.equal(await heavyAtomCount('O=[N+]([O-])c1ccccc1'), 9);
    assert.equal(await netCharge('O=[N+]([O-])c1ccccc1'), 0);
    assert.equal(await netCharge('CC(=O)[O-]'), -1);
    assert.equal(await netCharge('[NH4+]'), 1);
  });

  it('throws InvalidSmilesError naming the input', async () => {
    await assert.rejects(
      heavyAtomCount('C1CC'),
      (e: unknown) => e instanceof InvalidSmilesError && e.name === 'InvalidSmilesError' && e.message.includes('"C1CC"') && /unclosed ring/.test(e.message),
    );
  });

  it('applies the pool rules to a single molecule', async () => {
    assert.deepEqual(await checkPoolMolecule('[O-][N+](=O)C'), { smiles: 'C[N+](=O)[O-]' });
    assert.equal(((await checkPoolMolecule('C[N+](C)(C)CC(=O)[O-]')) as { reason: string }).reason, 'charge_separated');
    assert.equal(((await checkPoolMolecule('[O-][n+]1ccccc1')) as { reason: string }).reason, 'charge_separated');
    assert.equal(((await checkPoolMolecule('*c1ccccc1')) as { reason: string }).reason, 'unsupported_atom');
  });
});

describe('ring-closure labels in substituents', () => {
  it('renumbers substituent ring closures into %90-%99, leaving bracket atoms alone', () => {
    assert.equal(renumberRingClosures('c1ccccc1'), 'c%90ccccc%90');
    assert.equal(renumberRingClosures('C1CC1C2CC2'), 'C%90CC%90C%91CC%91');
    assert.equal(renumberRingClosures('[13CH3]'), '[13CH3]');
  });

  it('attaches a ring-1 substituent to a scaffold whose ring 1 is open without the rings crossing', async () => {
    // Written naively, the phenyl's "1" closes the benzene's ring: not biphenyl at all.
    assert.notEqual(await canonicalSmiles('c1(c1ccccc1)ccccc1'), 'c1ccc(-c2ccccc2)cc1');

    const pool = await buildDefaultPool({
      scaffolds: scaffolds('benzene', 'naphthalene'),
      substituents: [
        { name: 'phenyl written with ring 1', smiles: 'c1ccccc1' },
        { name: 'cyclopropyl written with ring 2', smiles: 'C2CC2' },
      ],
      maxSubstituents: 1,
    });
    assert.deepEqual(pool.skipped.malformed, undefined);
    const kept = new Set(pool.molecules.map((m) => m.smiles));
    assert.ok(kept.has('c1ccc(-c2ccccc2)cc1'), 'biphenyl');
    assert.ok(kept.has('c1ccc(C2CC2)cc1'), 'cyclopropylbenzene');
    assert.ok(kept.has('c1ccc2cc(C3CC3)ccc2c1'), '2-cyclopropylnaphthalene (ring 2 open in the scaffold)');
    assert.ok(kept.has('c1ccc(-c2cccc3ccccc23)cc1'), '1-phenylnaphthalene');
    // benzene: bare + 2; naphthalene (positions 1 and 2 up to symmetry): bare + 2 x 2.
    assert.equal(pool.molecules.length, 3 + 5);
  });
});

describe('buildDefaultPool', () => {
  const small = { scaffolds: scaffolds('benzene', 'pyridine'), substituents: substituents('F', 'Cl', 'phenyl') };

  it('builds the exact small pool, counting every candidate once', async () => {
    const pool = await buildDefaultPool(small);
    // Benzene with 3 substituents: bare 1 + mono 3 + ortho/meta/para x (3 same + 3 mixed pairs) 18 = 22.
    // Pyridine: bare 1 + mono 3 positions x 3 = 9; 6 position pairs up to symmetry x 3 same = 18;
    // mixed pairs: 10 distinct placements (2,3 2,4 2,5 3,4 ordered; 2,6 and 3,5 symmetric) x 3 = 30. Total 58.
    assert.equal(pool.molecules.length, 22 + 58);
    // Candidates: each scaffold 1 + 3 x sites + 9 x C(sites, 2): benzene (6 sites) 154, pyridine (5 sites) 106.
    assert.equal(pool.candidates, 154 + 106);
    assert.deepEqual(pool.skipped, { duplicate: 260 - 80 });
    assert.ok(pool.molecules.some((m) => m.smiles === 'Fc1ccc(Cl)cc1'));
    assert.ok(pool.molecules.some((m) => m.smiles === 'Fc1ccc(-c2ccccc2)nc1'));
  });

  it('gives the same sorted pool whatever the order of the inputs', async () => {
    const a = await buildDefaultPool(small);
    const b = await buildDefaultPool({ scaffolds: [...small.scaffolds].reverse(), substituents: [...small.substituents].reverse() });
    assert.deepEqual(b.molecules, a.molecules);
    const smiles = a.molecules.map((m) => m.smiles);
    assert.deepEqual(smiles, [...smiles].sort());
  });

  it('keeps one substituent per molecule when maxSubstituents is 1', async () => {
    const pool = await buildDefaultPool({ ...small, maxSubstituents: 1 });
    assert.equal(pool.molecules.length, 1 + 3 + 1 + 9);
  });

  it('drops molecules above the heavy-atom limit and counts each once', async () => {
    const pool = await buildDefaultPool({ ...small, maxHeavyAtoms: 12 });
    // Over 12: phenyl plus any second substituent. Benzene 3 positions x (Ph+Ph, Ph+F, Ph+Cl) = 9;
    // pyridine: Ph+Ph on 6 position pairs, Ph+F and Ph+Cl on 10 each = 26.
    assert.equal(pool.skipped.too_many_heavy_atoms, 9 + 26);
    assert.equal(pool.molecules.length, 80 - 35);
    assert.equal(pool.molecules.length + sum(pool.skipped), pool.candidates);
    assert.ok(
      pool.molecules.some((m) => m.smiles === 'c1ccc(-c2ccccc2)cc1'),
      'biphenyl has exactly 12',
    );
    const example = pool.examples.find((e) => e.reason === 'too_many_heavy_atoms');
    assert.match(example?.detail ?? '', /heavy atoms, limit 12/);
  });

  it('keeps nitro compounds as neutral', async () => {
    const pool = await buildDefaultPool({ scaffolds: scaffolds('thiophene'), substituents: substituents('NO2'), maxSubstituents: 2 });
    // thiophene: bare, 2- and 3-nitro, and four dinitro isomers (2,3 2,4 2,5 3,4).
    assert.equal(pool.molecules.length, 7);
    assert.ok(pool.molecules.some((m) => m.smiles === 'O=[N+]([O-])c1cccs1'));
    assert.deepEqual(Object.keys(pool.skipped), ['duplicate']);
  });

  it('rejects out-of-range options by name', async () => {
    await assert.rejects(buildDefaultPool({ maxSubstituents: 3 }), (e: unknown) => e instanceof ConfigError && e.field === 'maxSubstituents');
    await assert.rejects(buildDefaultPool({ maxHeavyAtoms: 0 }), (e: unknown) => e instanceof ConfigError && e.field === 'maxHeavyAtoms');
    await assert.rejects(
      buildDefaultPool({ scaffolds: scaffolds('benzene'), substituents: [{ name: 'broken', smiles: 'C(' }] }),
      (e: unknown) => e instanceof ConfigError && e.field === 'substituents[broken]',
    );
  });
});

describe('parsePoolFile', () => {
  const file = [
    '# candidate pool, one SMILES per line',
    '',
    'OCC ethanol',
    'C1CC broken-ring',
    'c1ccccc1[N+](=O)[O-]\tnitrobenzene',
    '[NH4+]',
    'CC(=O)[O-]',
    '[CH3]',
    'C(O)C ethanol-again',
    'CCCCCCCCCCCC dodecane',
    'c1ccccc1C#N',
    'CC(=O)O.[Na+]',
    '   ',
  ].join('\r\n');

  it('keeps valid molecules canonically with their ids and counts every skipped line by reason', async () => {
    const result = await parsePoolFile(file, { source: 's3://pools/test.smi', maxHeavyAtoms: 10 });
    assert.deepEqual(result.molecules, [{ smiles: 'CCO', id: 'ethanol' }, { smiles: 'O=[N+]([O-])c1ccccc1', id: 'nitrobenzene' }, { smiles: 'N#Cc1ccccc1' }]);
    assert.deepEqual(result.skipped, { malformed: 1, net_charge: 2, radical: 1, duplicate: 1, too_many_heavy_atoms: 1, multiple_fragments: 1 });
    const byLine = new Map(result.examples.map((e) => [e.line, e]));
    assert.equal(byLine.get(4)?.reason, 'malformed');
    assert.equal(byLine.get(4)?.input, 'C1CC');
    assert.match(byLine.get(4)?.detail ?? '', /unclosed ring/);
    assert.equal(byLine.get(6)?.reason, 'net_charge');
    assert.equal(byLine.get(7)?.reason, 'net_charge');
    assert.equal(byLine.get(8)?.reason, 'radical');
    assert.deepEqual(byLine.get(9), { reason: 'duplicate', input: 'C(O)C', line: 9, detail: 'same molecule as line 3' });
    assert.equal(byLine.get(10)?.reason, 'too_many_heavy_atoms');
  });

  it('keeps only the first few examples of a reason but counts them all', async () => {
    const text = ['CCO', ...Array.from({ length: 20 }, (_, i) => `C1C${'C'.repeat(i)}`)].join('\n');
    const result = await parsePoolFile(text);
    assert.equal(result.skipped.malformed, 20);
    assert.deepEqual(
      result.examples.map((e) => e.line),
      [2, 3, 4],
    );
  });

  it('skips a line whose SMILES or id is too long, keeping a short example, before RDKit reads it', async () => {
    const junk = `C${'(C'.repeat(50_000)}`;
    const text = ['CCO', junk, `CCN ${'i'.repeat(MAX_POOL_ID_CHARS + 1)}`, `CCCl ${'i'.repeat(MAX_POOL_ID_CHARS)}`].join('\n');
    const result = await parsePoolFile(text);
    assert.deepEqual(
      result.molecules.map((m) => m.smiles),
      ['CCO', 'CCCl'],
    );
    assert.equal(result.molecules[1]!.id!.length, MAX_POOL_ID_CHARS);
    assert.equal(result.skipped.too_long, 2);
    const [smiles, id] = result.examples;
    assert.equal(smiles!.line, 2);
    assert.equal(smiles!.detail, `SMILES of ${junk.length} characters, at most ${MAX_POOL_SMILES_CHARS}`);
    assert.ok(smiles!.input.length < 300, 'the example keeps the start of the line');
    assert.equal(id!.detail, `id of ${MAX_POOL_ID_CHARS + 1} characters, at most ${MAX_POOL_ID_CHARS}`);
  });

  it('names the file when it is binary', async () => {
    const binary = Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xfe, 0x41]).toString('utf8');
    await assert.rejects(
      parsePoolFile(binary, { source: 's3://pools/pool.smi.gz' }),
      (e: unknown) => e instanceof PoolFileError && e.name === 'PoolFileError' && e.source === 's3://pools/pool.smi.gz' && /binary/.test(e.message),
    );
  });

  it('names the file when no line is a valid molecule', async () => {
    await assert.rejects(
      parsePoolFile('C1CC\n[NH4+]\nnot-a-molecule\n', { source: 's3://pools/bad.smi' }),
      (e: unknown) =>
        e instanceof PoolFileError &&
        e.message.startsWith('pool file s3://pools/bad.smi: no valid molecule in 3 SMILES line(s)') &&
        e.message.includes('"malformed":2'),
    );
    await assert.rejects(parsePoolFile('# only a comment\n\n'), (e: unknown) => e instanceof PoolFileError && /no SMILES lines/.test(e.message));
  });
});

describe('Morgan fingerprints', () => {
  it('packs 2048 bits into 256 bytes, least significant bit first, matching RDKit bit string', async () => {
    const fp = await morganFingerprint('Cc1ccc(O)cc1N');
    assert.ok(fp instanceof Uint8Array);
    assert.equal(fp.length, 256);
    const rdkit = await loadRDKit();
    const mol = rdkit.get_mol('Cc1ccc(O)cc1N')!;
    const bits = mol.get_morgan_fp(JSON.stringify({ radius: 2, nBits: 2048 }));
    mol.delete();
    const setBits = [...bits].flatMap((b, i) => (b === '1' ? [i] : []));
    assert.ok(setBits.length > 5 && setBits.length < 100, `${setBits.length} bits set`);
    assert.equal(bitCount(fp), setBits.length);
    for (const i of setBits) assert.ok(fp[i >> 3]! & (1 << (i & 7)), `bit ${i}`);
    assert.equal((await morganFingerprint('CCO', { nBits: 1024 })).length, 128);
  });

  it('has Tanimoto 1 with itself and less with a different molecule', async () => {
    const phenol = await morganFingerprint('Oc1ccccc1');
    const cresol = await morganFingerprint('Cc1ccc(O)cc1');
    const hexane = await morganFingerprint('CCCCCC');
    assert.equal(tanimoto(phenol, phenol), 1);
    assert.equal(tanimoto(phenol, await morganFingerprint('c1ccc(O)cc1')), 1);
    const similar = tanimoto(phenol, cresol);
    assert.ok(similar > 0 && similar < 1, `phenol/cresol ${similar}`);
    assert.ok(tanimoto(phenol, hexane) < similar);
    assert.equal(tanimoto(phenol, cresol), tanimoto(cresol, phenol));
    assert.throws(() => tanimoto(phenol, new Uint8Array(128)), ConfigError);
  });

  it('rejects a malformed SMILES', async () => {
    await assert.rejects(morganFingerprint('C1CC'), InvalidSmilesError);
  });
});

describe('moleculeSvg', () => {
  it('draws an SVG document', async () => {
    const svg = await moleculeSvg('O=[N+]([O-])c1ccccc1');
    assert.ok(svg.startsWith('<?xml') || svg.startsWith('<svg'), svg.slice(0, 40));
    assert.match(svg, /<svg[^>]*width='300px'/);
    assert.ok(svg.trimEnd().endsWith('</svg>'));
  });
});
