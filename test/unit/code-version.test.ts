/**
 * Code versions (pipelines/steps/code-version.ts): what changes a step's cache key and what
 * does not. Each test writes a small tree inside the repository (esbuild resolves from the
 * repository root, and batch jobs live under batch-jobs/), edits files in it, and removes it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { sha256Hex } from '#shared/json.ts';
import { clearCodeVersionMemo, diffCodeVersions, handlerCodeVersion, jobCodeVersion, REPO_ROOT } from '#pipelines/steps/code-version.ts';

const repoPath = (path: string) => relative(REPO_ROOT, path).split('\\').join('/');

/** Recomputes from the files as they are now (the memo would return the previous result). */
function handlerVersion(entry: string, salt?: string) {
  clearCodeVersionMemo();
  return handlerCodeVersion(entry, salt);
}
function jobVersion(dir: string, salt?: string) {
  clearCodeVersionMemo();
  return jobCodeVersion(dir, salt);
}

describe('handlerCodeVersion', () => {
  let dir: string;
  let entry: string;

  before(() => {
    dir = mkdtempSync(join(REPO_ROOT, 'test', '.tmp-cv-'));
    entry = join(dir, 'entry.ts');
    // entry -> a -> b: b is two imports away from the handler. a also bundles zod.
    writeFileSync(entry, "import { describe } from './a.ts';\nexport const handler = (n: number) => describe(n);\n");
    writeFileSync(
      join(dir, 'a.ts'),
      "import { z } from 'zod';\nimport { scale } from './b.ts';\nexport const describe = (n: number) => z.number().parse(n) * scale;\n",
    );
    writeFileSync(join(dir, 'b.ts'), 'export const scale = 2;\n');
    writeFileSync(join(dir, 'unrelated.ts'), 'export const unused = 1;\n');
  });

  after(() => {
    clearCodeVersionMemo();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('lists every first-party file of the bundle by content hash, and nothing else of ours', () => {
    const version = handlerVersion(entry);
    const ours = Object.keys(version.components).filter((k) => !k.startsWith('npm:'));
    assert.deepEqual(ours.sort(), ['a.ts', 'b.ts', 'entry.ts'].map((f) => repoPath(join(dir, f))).sort());
    assert.equal(version.components[repoPath(join(dir, 'b.ts'))], sha256Hex(readFileSync(join(dir, 'b.ts'))));
    assert.match(version.hash, /^[0-9a-f]{64}$/);
  });

  it('lists a third-party package once, as npm:<name> with its installed version', () => {
    const version = handlerVersion(entry);
    const zodVersion = (JSON.parse(readFileSync(join(REPO_ROOT, 'node_modules', 'zod', 'package.json'), 'utf8')) as { version: string }).version;
    assert.equal(version.components['npm:zod'], zodVersion);
    assert.ok(
      Object.keys(version.components).every((k) => !k.includes('node_modules')),
      'package files are not listed one by one',
    );
  });

  it('changes when a file two imports away changes, and the diff names that file', () => {
    const before = handlerVersion(entry);
    writeFileSync(join(dir, 'b.ts'), 'export const scale = 3;\n');
    const after = handlerVersion(entry);
    assert.notEqual(after.hash, before.hash);
    assert.deepEqual(diffCodeVersions(before.components, after.components), {
      added: [],
      removed: [],
      changed: [repoPath(join(dir, 'b.ts'))],
    });
  });

  it('does not change when a file outside the bundle changes', () => {
    const before = handlerVersion(entry);
    writeFileSync(join(dir, 'unrelated.ts'), 'export const unused = 2;\n');
    const after = handlerVersion(entry);
    assert.equal(after.hash, before.hash);
    assert.deepEqual(diffCodeVersions(before.components, after.components), { added: [], removed: [], changed: [] });
  });

  it('names a newly imported file as added', () => {
    const before = handlerVersion(entry);
    writeFileSync(join(dir, 'c.ts'), 'export const offset = 1;\n');
    writeFileSync(join(dir, 'b.ts'), "import { offset } from './c.ts';\nexport const scale = 3 + offset;\n");
    const after = handlerVersion(entry);
    const diff = diffCodeVersions(before.components, after.components);
    assert.deepEqual(diff.added, [repoPath(join(dir, 'c.ts'))]);
    assert.deepEqual(diff.changed, [repoPath(join(dir, 'b.ts'))]);
  });

  it('changes with the salt, and records it as a component', () => {
    const plain = handlerVersion(entry);
    const salted = handlerVersion(entry, 'rerun-2024-06');
    const resalted = handlerVersion(entry, 'rerun-2024-07');
    assert.notEqual(salted.hash, plain.hash);
    assert.notEqual(resalted.hash, salted.hash);
    assert.equal(salted.components['salt'], 'rerun-2024-06');
    assert.deepEqual(diffCodeVersions(plain.components, salted.components).added, ['salt']);
  });

  it('is the same for the same files, and memoized until cleared', () => {
    const first = handlerVersion(entry);
    assert.deepEqual(handlerVersion(entry), first);
    // Within one synth the memo answers: an edit shows only after clearCodeVersionMemo.
    writeFileSync(join(dir, 'a.ts'), `${readFileSync(join(dir, 'a.ts'), 'utf8')}// edited\n`);
    assert.equal(handlerCodeVersion(entry).hash, first.hash);
    assert.notEqual(handlerVersion(entry).hash, first.hash);
  });
});

describe('jobCodeVersion', () => {
  const commonDir = join(REPO_ROOT, 'batch-jobs', 'common');
  let jobDir: string;
  let elsewhere: string;

  /** The files of batch-jobs/common that each job image copies in (bytecode caches excluded). */
  function commonFiles(dir = commonDir): string[] {
    return readdirSync(dir).flatMap((name) => {
      const path = join(dir, name);
      if (name === '__pycache__' || name.endsWith('.pyc')) return [];
      return statSync(path).isDirectory() ? commonFiles(path) : [path];
    });
  }

  before(() => {
    // A job folder beside the real ones; its name starts with a dot so no registry lists it.
    jobDir = mkdtempSync(join(REPO_ROOT, 'batch-jobs', '.tmp-cv-job-'));
    writeFileSync(join(jobDir, 'Dockerfile'), 'FROM python:3.11-slim\nCOPY common /app/common\n');
    writeFileSync(join(jobDir, 'requirements.txt'), 'numpy==1.26.4\n');
    writeFileSync(join(jobDir, 'main.py'), 'from helpers.maths import double\nprint(double(2))\n');
    mkdirSync(join(jobDir, 'helpers'));
    writeFileSync(join(jobDir, 'helpers', 'maths.py'), 'def double(x):\n    return 2 * x\n');
    // Another job beside it: its files are not part of this job's version.
    elsewhere = mkdtempSync(join(REPO_ROOT, 'batch-jobs', '.tmp-cv-other-'));
    writeFileSync(join(elsewhere, 'main.py'), 'x = 1\n');
  });

  after(() => {
    clearCodeVersionMemo();
    if (jobDir) rmSync(jobDir, { recursive: true, force: true });
    if (elsewhere) rmSync(elsewhere, { recursive: true, force: true });
  });

  it('lists every file of the job folder (Dockerfile and requirements included) and of batch-jobs/common', () => {
    const version = jobVersion(jobDir);
    const name = basename(jobDir);
    const own = Object.keys(version.components).filter((k) => k.startsWith(`batch-jobs/${name}/`));
    assert.deepEqual(
      own.sort(),
      ['Dockerfile', 'helpers/maths.py', 'main.py', 'requirements.txt'].map((f) => `batch-jobs/${name}/${f}`),
    );
    const common = commonFiles();
    assert.ok(common.length > 0, 'batch-jobs/common has files');
    for (const file of common) {
      // Hashed by content: editing a common file changes every job's version.
      assert.equal(version.components[repoPath(file)], sha256Hex(readFileSync(file)), repoPath(file));
    }
    assert.equal(Object.keys(version.components).length, own.length + common.length, 'nothing else');
  });

  for (const file of ['main.py', 'helpers/maths.py', 'requirements.txt', 'Dockerfile']) {
    it(`changes when ${file} in the job folder changes, and the diff names it`, () => {
      const before = jobVersion(jobDir);
      writeFileSync(join(jobDir, file), `${readFileSync(join(jobDir, file), 'utf8')}# edited\n`);
      const after = jobVersion(jobDir);
      assert.notEqual(after.hash, before.hash);
      assert.deepEqual(diffCodeVersions(before.components, after.components).changed, [`batch-jobs/${basename(jobDir)}/${file}`]);
    });
  }

  it('does not change when a file outside the job folder and batch-jobs/common changes', () => {
    const before = jobVersion(jobDir);
    writeFileSync(join(elsewhere, 'main.py'), 'x = 2\n');
    writeFileSync(join(REPO_ROOT, 'batch-jobs', `${basename(elsewhere)}.txt`), 'beside the job folders');
    try {
      assert.equal(jobVersion(jobDir).hash, before.hash);
    } finally {
      rmSync(join(REPO_ROOT, 'batch-jobs', `${basename(elsewhere)}.txt`), { force: true });
    }
  });

  it('ignores Python bytecode caches', () => {
    const before = jobVersion(jobDir);
    mkdirSync(join(jobDir, '__pycache__'), { recursive: true });
    writeFileSync(join(jobDir, '__pycache__', 'main.cpython-311.pyc'), 'bytecode');
    writeFileSync(join(jobDir, 'helpers', 'maths.cpython-311.pyc'), 'bytecode');
    assert.equal(jobVersion(jobDir).hash, before.hash);
  });

  it('names a new file of the job folder as added', () => {
    const before = jobVersion(jobDir);
    writeFileSync(join(jobDir, 'helpers', 'losses.py'), 'def mse(a, b):\n    return (a - b) ** 2\n');
    assert.deepEqual(diffCodeVersions(before.components, jobVersion(jobDir).components).added, [`batch-jobs/${basename(jobDir)}/helpers/losses.py`]);
  });

  it('changes with the salt', () => {
    assert.notEqual(jobVersion(jobDir, 'again').hash, jobVersion(jobDir).hash);
  });
});
