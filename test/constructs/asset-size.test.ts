/**
 * Every Lambda bundle stays under Lambda's 250 MB unzipped limit. Synthesizes the stacks with
 * real esbuild bundling into a temporary cloud assembly, finds each function's asset
 * directory through the template's `aws:asset:path` metadata, and sums its files.
 *
 * To cover a new stack, add an entry to STACKS.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Stack as CdkStack, type Stack } from 'aws-cdk-lib';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { LANGUAGE_MODEL_FILE, LANGUAGE_MODEL_PACKAGE_PATH, PipelineFunction } from '#pipelines/steps/function.ts';
import * as filters from '#shared/refinery/filters.ts';
import * as cxapi from 'aws-cdk-lib/cx-api';
import type { CloudAssembly } from 'aws-cdk-lib/cx-api';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { PlatformStack, type PlatformResources } from '#infra/platform-stack.ts';
import { ProbeStack } from '#pipelines/probe/stack.ts';
import { MolecularDiscoveryStack } from '#pipelines/molecules/stack.ts';
import { RewardSearchStack } from '#pipelines/rewards/stack.ts';

/** Lambda's limit on a function's unzipped code, in bytes. */
const LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024;

/** The stacks whose bundles are measured. The platform stack is always built first. */
const STACKS: { readonly id: string; readonly build: (app: App, platform: PlatformResources) => Stack }[] = [
  // Pipeline stacks, e.g. { id: 'Elo', build: (app, platform) => new EloStack(app, 'Elo', { platform }) },
  { id: 'Probe', build: (app, platform) => new ProbeStack(app, 'Probe', { resources: platform }) },
  { id: 'MolecularDiscovery', build: (app, platform) => new MolecularDiscoveryStack(app, 'MolecularDiscovery', { resources: platform }) },
  { id: 'RewardSearch', build: (app, platform) => new RewardSearchStack(app, 'RewardSearch', { resources: platform }) },
  // A function that ships onnxruntime-node (288 MB for every platform; linux-x64 alone fits).
  {
    id: 'Onnx',
    build: (app) => {
      const stack = new CdkStack(app, 'Onnx');
      new PipelineFunction(stack, 'Inference', { entry: join(REPO_ROOT, 'test/fixtures/onnx/handler.ts'), onnxRuntime: true });
      return stack;
    },
  },
  // A function that runs the refinery's language rule (fastText's lid.176 model beside the bundle).
  {
    id: 'LanguageModel',
    build: (app) => {
      const stack = new CdkStack(app, 'LanguageModel');
      new PipelineFunction(stack, 'Language', { entry: join(REPO_ROOT, 'test/fixtures/refinery-language/handler.ts'), languageModel: true });
      return stack;
    },
  },
  // A function that ships RDKit's WebAssembly build (its loader wants the .wasm beside it).
  {
    id: 'Rdkit',
    build: (app) => {
      const stack = new CdkStack(app, 'Rdkit');
      new PipelineFunction(stack, 'Chemistry', { entry: join(REPO_ROOT, 'test/fixtures/rdkit/handler.ts'), rdkit: true });
      return stack;
    },
  },
];

const CDK_CONTEXT = (JSON.parse(readFileSync(join(REPO_ROOT, 'cdk.json'), 'utf8')) as { context: Record<string, unknown> }).context;

function directorySize(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) total += directorySize(path);
    else total += statSync(path).size;
  }
  return total;
}

type TemplateResource = { Type: string; Metadata?: Record<string, unknown> };

describe('Lambda bundle sizes', () => {
  let outdir: string;
  let assembly: CloudAssembly;
  const stackIds = ['Platform', ...STACKS.map((s) => s.id)];

  before(() => {
    outdir = mkdtempSync(join(tmpdir(), 'asset-size-'));
    const app = new App({
      outdir,
      builtinCloudFormationValidation: false,
      // Bundling runs for every stack (no aws:cdk:bundling-stacks override); asset metadata
      // is on so that each function names its asset directory, as under the CDK CLI.
      context: { ...CDK_CONTEXT, [cxapi.ASSET_RESOURCE_METADATA_ENABLED_CONTEXT]: true },
    });
    const platform = new PlatformStack(app, 'Platform');
    for (const { build } of STACKS) build(app, platform.resources);
    assembly = app.synth();
  });

  after(() => {
    if (outdir) rmSync(outdir, { recursive: true, force: true });
  });

  for (const stackId of stackIds) {
    it(`keeps every function of ${stackId} under 250 MB unzipped`, (t) => {
      const template = assembly.getStackByName(stackId).template as { Resources: Record<string, TemplateResource> };
      const functions = Object.entries(template.Resources).filter(([, r]) => r.Type === 'AWS::Lambda::Function');
      let measured = 0;
      for (const [logicalId, resource] of functions) {
        const assetPath = resource.Metadata?.[cxapi.ASSET_RESOURCE_METADATA_PATH_KEY];
        if (typeof assetPath !== 'string') continue; // inline code (CDK's own custom-resource handlers)
        const bytes = directorySize(join(outdir, assetPath));
        t.diagnostic(`${stackId}/${logicalId}: ${(bytes / 1024 / 1024).toFixed(2)} MB unzipped (${assetPath})`);
        assert.ok(bytes > 0, `${logicalId}: empty asset directory ${assetPath}`);
        assert.ok(bytes < LAMBDA_UNZIPPED_LIMIT, `${logicalId}: ${(bytes / 1024 / 1024).toFixed(1)} MB unzipped exceeds Lambda's 250 MB limit`);
        measured++;
      }
      assert.ok(measured > 0 || functions.length === 0, `${stackId}: no function carried aws:asset:path metadata`);
    });
  }

  it('ships onnxruntime-node with its linux-x64 binary only, and the bundle loads it', () => {
    const template = assembly.getStackByName('Onnx').template as { Resources: Record<string, TemplateResource> };
    const [, fn] = Object.entries(template.Resources).find(([, r]) => r.Type === 'AWS::Lambda::Function')!;
    const asset = join(outdir, String(fn.Metadata![cxapi.ASSET_RESOURCE_METADATA_PATH_KEY]));
    const bin = join(asset, 'node_modules/onnxruntime-node/bin/napi-v6');
    assert.deepEqual(readdirSync(bin), ['linux']);
    assert.deepEqual(readdirSync(join(bin, 'linux')), ['x64']);
    assert.ok(existsSync(join(bin, 'linux/x64/onnxruntime_binding.node')));
    assert.ok(directorySize(asset) < 80 * 1024 * 1024, 'linux-x64 alone is about 45 MB');
    // The bundle, as Lambda would load it: from its own folder, with nothing else on the path.
    const probe = spawnSync(
      process.execPath,
      ['--input-type=module', '-e', `const m = await import(${JSON.stringify(join(asset, 'index.mjs'))}); console.log(JSON.stringify(await m.handler()));`],
      {
        cwd: asset,
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '' },
      },
    );
    assert.equal(probe.status, 0, probe.stderr);
    assert.deepEqual(JSON.parse(probe.stdout.trim()), { onnxRuntime: true, tensor: [2] });
  });

  it("ships fastText's lid.176 beside the bundle, and the bundle's language rule reads it from there", () => {
    assert.deepEqual([LANGUAGE_MODEL_FILE, LANGUAGE_MODEL_PACKAGE_PATH], [filters.LANGUAGE_MODEL_FILE, filters.LANGUAGE_MODEL_PACKAGE_PATH]);
    const template = assembly.getStackByName('LanguageModel').template as { Resources: Record<string, TemplateResource> };
    const [, fn] = Object.entries(template.Resources).find(([, r]) => r.Type === 'AWS::Lambda::Function')!;
    const asset = join(outdir, String(fn.Metadata![cxapi.ASSET_RESOURCE_METADATA_PATH_KEY]));
    assert.equal(statSync(join(asset, LANGUAGE_MODEL_FILE)).size, statSync(join(REPO_ROOT, 'node_modules', LANGUAGE_MODEL_PACKAGE_PATH)).size);
    assert.ok(!existsSync(join(asset, 'node_modules')), 'nothing else ships');
    // The bundle, as Lambda would load it: from its own folder, with nothing else on the path.
    const probe = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const m = await import(${JSON.stringify(join(asset, 'index.mjs'))}); for (const text of [undefined, 'Der Fluss, der durch die alte Marktstadt fließt, hat das Leben der Menschen geprägt.']) console.log(JSON.stringify(await m.handler({ text })));`,
      ],
      { cwd: asset, encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } },
    );
    assert.equal(probe.status, 0, probe.stderr);
    const [english, german] = probe.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { keep: boolean; detail?: string });
    assert.deepEqual(english, { keep: true });
    assert.ok(german && !german.keep && german.detail?.startsWith('detected de '), JSON.stringify(german));
  });

  it('ships RDKit beside the bundle, and the bundle parses and draws a molecule with it', () => {
    const template = assembly.getStackByName('Rdkit').template as { Resources: Record<string, TemplateResource> };
    const [, fn] = Object.entries(template.Resources).find(([, r]) => r.Type === 'AWS::Lambda::Function')!;
    const asset = join(outdir, String(fn.Metadata![cxapi.ASSET_RESOURCE_METADATA_PATH_KEY]));
    assert.ok(existsSync(join(asset, 'node_modules/@rdkit/rdkit/dist/RDKit_minimal.wasm')));
    assert.ok(directorySize(asset) < 20 * 1024 * 1024, 'RDKit is about 7 MB');
    const probe = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const m = await import(${JSON.stringify(join(asset, 'index.mjs'))}); console.log(JSON.stringify(await m.handler({ smiles: 'OC1=CC=CC=C1' })));`,
      ],
      {
        cwd: asset,
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '' },
      },
    );
    assert.equal(probe.status, 0, probe.stderr);
    assert.deepEqual(JSON.parse(probe.stdout.trim().split('\n').at(-1)!), { canonical: 'Oc1ccccc1', svg: true });
  });
});
