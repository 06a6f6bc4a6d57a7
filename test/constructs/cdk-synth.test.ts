/**
 * `cdk synth` through the CDK CLI, as a user runs it: offline, with real bundling, the app
 * command from cdk.json and cdk-nag on. Every registered stack comes out.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { PIPELINES, PLATFORM_STACK_ID } from '#infra/registry.ts';

describe('cdk synth (CLI)', () => {
  const out = mkdtempSync(join(tmpdir(), 'fp-cdk-synth-'));
  after(() => rmSync(out, { recursive: true, force: true }));

  it('synthesizes every stack offline, with bundling and cdk-nag', { timeout: 300_000 }, () => {
    const result = spawnSync(join(REPO_ROOT, 'node_modules/.bin/cdk'), ['synth', '--quiet', '--output', out], {
      cwd: REPO_ROOT,
      env: { ...process.env, CDK_DISABLE_CLI_TELEMETRY: 'true', CDK_DISABLE_VERSION_CHECK: 'true' },
      encoding: 'utf8',
      timeout: 280_000,
    });
    assert.equal(result.status, 0, `${result.stdout}\n${result.stderr}`);
    for (const stack of [PLATFORM_STACK_ID, ...PIPELINES.map((p) => p.stackId)]) {
      const file = join(out, `${stack}.template.json`);
      assert.ok(existsSync(file), `${stack}.template.json`);
      const template = JSON.parse(readFileSync(file, 'utf8')) as { Resources: Record<string, { Type: string }> };
      assert.ok(Object.keys(template.Resources).length > 0);
    }
    // Lambdas carry their bundled code, not the source tree.
    const manifest = JSON.parse(readFileSync(join(out, `${PIPELINES[0]!.stackId}.assets.json`), 'utf8')) as {
      files: Record<string, { source: { path: string } }>;
    };
    const bundles = Object.values(manifest.files)
      .map((f) => f.source.path)
      .filter((p) => p.startsWith('asset.'));
    assert.ok(
      bundles.some((p) => existsSync(join(out, p, 'index.mjs'))),
      'a bundled index.mjs',
    );
  });
});
