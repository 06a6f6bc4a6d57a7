/**
 * The Batch jobs' pure Python modules, tested by their own unittest suites (one per job
 * folder, each run with the job's folder and batch-jobs/common on the path, as in its image).
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

describe('Python job modules (unittest)', () => {
  for (const job of jobs) {
    it(`${job}: its unittest suite passes`, () => {
      const result = spawnSync(python, ['-m', 'unittest', 'discover', '-s', '.', '-p', 'test_*.py', '-v'], {
        cwd: join(jobsDir, job),
        env: { ...process.env, PYTHONPATH: join(jobsDir, 'common'), OMP_NUM_THREADS: '1', PYTHONDONTWRITEBYTECODE: '1' },
        encoding: 'utf8',
        timeout: 600_000,
      });
      const report = `${result.stdout}\n${result.stderr}`;
      assert.equal(result.status, 0, report);
      assert.match(result.stderr, /Ran [1-9]\d* tests?/, `no tests found for ${job}`);
    });
  }
});
