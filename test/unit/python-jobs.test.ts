/**
 * The Batch jobs' pure Python modules, tested by their own unittest suites (one per job
 * folder, each run with the job's folder and batch-jobs/common on the path, as in its image).
 *
 * Each suite runs twice: once as the machine is, and once with numpy's widest SIMD kernels
 * switched off (NPY_DISABLE_CPU_FEATURES, the widest family of dispatched features this CPU has,
 * read from numpy's own lists) and PyTorch on its scalar kernels (ATEN_CPU_CAPABILITY=default).
 * numpy and PyTorch pick kernels by the CPU at run time and the kernels differ in the last place,
 * so a test that compares two computations of a float bit for bit passes on one machine and fails
 * on the next; the second run makes this machine behave like another one.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';

const python = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const jobsDir = join(REPO_ROOT, 'batch-jobs');
// Every folder with unittest modules: job folders, and common/ (the contract every image copies in).
const jobs = readdirSync(jobsDir, { withFileTypes: true })
  .filter((d) => d.isDirectory() && !d.name.startsWith('.'))
  .map((d) => d.name)
  .filter((d) => readdirSync(join(jobsDir, d)).some((f) => /^test_.*\.py$/.test(f)));

/** numpy's dispatched SIMD features (lowest first) and those this CPU has. */
function numpyCpuFeatures(): { dispatched: string[]; supported: string[] } {
  const script = [
    'import json',
    'try:',
    '    from numpy._core._multiarray_umath import __cpu_dispatch__ as d, __cpu_features__ as f',
    'except ImportError:',
    '    from numpy.core._multiarray_umath import __cpu_dispatch__ as d, __cpu_features__ as f',
    'print(json.dumps({"dispatched": list(d), "supported": [k for k, v in f.items() if v]}))',
  ].join('\n');
  const result = spawnSync(python, ['-c', script], { encoding: 'utf8' });
  assert.equal(result.status, 0, `reading numpy's CPU features: ${result.stderr}`);
  return JSON.parse(result.stdout);
}

/**
 * The widest family of numpy's dispatched features that this CPU has: the features named like the
 * highest one (AVX512F, AVX512_SKX ... AVX512_ICL on an AVX-512 machine; AVX2 on an AVX2 one;
 * ASIMDFHM on an ARM one), or [] when numpy dispatches to nothing beyond its baseline here.
 */
export function widestSimdFamily(features: { dispatched: string[]; supported: string[] }): string[] {
  const available = features.dispatched.filter((f) => features.supported.includes(f));
  const widest = available.at(-1);
  if (!widest) return [];
  const family = /^[A-Z]+\d*/.exec(widest)?.[0] ?? widest;
  return available.filter((f) => f.startsWith(family));
}

function runSuite(job: string, extraEnv: Record<string, string>): void {
  const result = spawnSync(python, ['-m', 'unittest', 'discover', '-s', '.', '-p', 'test_*.py', '-v'], {
    cwd: join(jobsDir, job),
    env: {
      ...process.env,
      PYTHONPATH: join(jobsDir, 'common'),
      OMP_NUM_THREADS: '1',
      PYTHONDONTWRITEBYTECODE: '1',
      ...extraEnv,
    },
    encoding: 'utf8',
    timeout: 600_000,
  });
  const report = `${result.stdout}\n${result.stderr}`;
  assert.equal(result.status, 0, report);
  assert.match(result.stderr, /Ran [1-9]\d* tests?/, `no tests found for ${job}`);
  assert.doesNotMatch(result.stderr, /You cannot disable CPU feature/, report);
}

describe('Python job modules (unittest)', () => {
  for (const job of jobs) {
    it(`${job}: its unittest suite passes`, () => runSuite(job, {}));
  }

  const widest = widestSimdFamily(numpyCpuFeatures());
  for (const job of jobs) {
    it(`${job}: its unittest suite passes on the next kernels down (numpy without ${widest.join(', ') || 'nothing'}, PyTorch scalar)`, () =>
      runSuite(job, { NPY_DISABLE_CPU_FEATURES: widest.join(','), ATEN_CPU_CAPABILITY: 'default' }));
  }

  it('the widest SIMD family is read from numpy, for x86-64 with and without AVX-512 and for ARM', () => {
    const x86 = [
      'SSSE3',
      'SSE41',
      'POPCNT',
      'SSE42',
      'AVX',
      'F16C',
      'FMA3',
      'AVX2',
      'AVX512F',
      'AVX512CD',
      'AVX512_SKX',
      'AVX512_CLX',
      'AVX512_CNL',
      'AVX512_ICL',
    ];
    assert.deepEqual(widestSimdFamily({ dispatched: x86, supported: ['SSE', ...x86, 'AVX512VL'] }), x86.slice(8));
    assert.deepEqual(widestSimdFamily({ dispatched: x86, supported: x86.slice(0, 8) }), ['AVX2']);
    assert.deepEqual(widestSimdFamily({ dispatched: x86, supported: ['SSE', 'SSE2', 'SSE3'] }), []);
    const arm = ['ASIMDHP', 'ASIMDDP', 'ASIMDFHM'];
    assert.deepEqual(widestSimdFamily({ dispatched: arm, supported: ['NEON', 'ASIMD', 'ASIMDHP', 'ASIMDDP'] }), ['ASIMDDP']);
    // This machine's own reading names only features numpy both dispatches and finds here.
    const here = numpyCpuFeatures();
    for (const f of widestSimdFamily(here)) assert.ok(here.dispatched.includes(f) && here.supported.includes(f), f);
  });
});
