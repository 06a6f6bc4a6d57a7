/**
 * Named errors are part of each pipeline's API: Step Functions' ErrorEquals and the fan-out's
 * recorded `error` match `error.name`, which comes from the class. Every class in shared/errors.ts
 * and shared/<pipeline>/errors.ts names itself, survives bundling with its name, and every name
 * a synthesized state machine matches is either an AWS one (States.*, Lambda.*, S3.*, ...) or
 * one of these classes, so a rename on one side cannot silently stop a Retry or Catch.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { buildApp } from '#infra/build-app.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { PipelineError } from '#shared/errors.ts';

type ErrorClass = new (...args: unknown[]) => Error;

/** shared/errors.ts and every shared/<pipeline>/errors.ts, relative to the repository. */
function errorModules(): string[] {
  const shared = join(REPO_ROOT, 'shared');
  const perPipeline = readdirSync(shared, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(shared, d.name, 'errors.ts')))
    .map((d) => `shared/${d.name}/errors.ts`);
  return ['shared/errors.ts', ...perPipeline];
}

async function errorClasses(): Promise<Map<string, { module: string; cls: ErrorClass }>> {
  const classes = new Map<string, { module: string; cls: ErrorClass }>();
  for (const module of errorModules()) {
    const exports = (await import(join(REPO_ROOT, module))) as Record<string, unknown>;
    for (const [exported, value] of Object.entries(exports)) {
      if (typeof value !== 'function' || !(value.prototype instanceof Error)) continue;
      assert.ok(!classes.has(exported), `${exported} is defined in ${classes.get(exported)?.module} and ${module}`);
      classes.set(exported, { module, cls: value as ErrorClass });
    }
  }
  return classes;
}

/** Every ErrorEquals name in every synthesized state machine, with the stacks that use it. */
function matchedNames(): Map<string, Set<string>> {
  const { app } = buildApp({ skipBundling: true, nag: false, fastSynth: true });
  const names = new Map<string, Set<string>>();
  for (const artifact of app.synth().stacks) {
    const resources = (artifact.template as { Resources: Record<string, { Type: string; Properties: Record<string, unknown> }> }).Resources;
    for (const resource of Object.values(resources)) {
      if (resource.Type !== 'AWS::StepFunctions::StateMachine') continue;
      const text = JSON.stringify(resource.Properties.DefinitionString);
      for (const [, list] of text.matchAll(/\\"ErrorEquals\\":\[([^\]]*)\]/g)) {
        for (const [, name] of list!.matchAll(/\\"([^\\"]+)\\"/g)) {
          if (!names.has(name!)) names.set(name!, new Set());
          names.get(name!)!.add(artifact.stackName);
        }
      }
    }
  }
  return names;
}

describe('named errors', () => {
  it('each class is a PipelineError whose name is its exported name, in one module only', async () => {
    const classes = await errorClasses();
    assert.ok(classes.size >= 20, `only ${classes.size} error classes found`);
    for (const [exported, { module, cls }] of classes) {
      const error = new cls('field', ['value'], 'reason');
      assert.equal(error.name, exported, `${module}: ${exported} names itself ${error.name}`);
      if (exported !== 'PipelineError') assert.ok(error instanceof PipelineError, `${module}: ${exported} is not a PipelineError`);
    }
  });

  it("every name a state machine matches is AWS's or one of these classes", async () => {
    const classes = await errorClasses();
    const matched = matchedNames();
    assert.ok(matched.has('States.ALL') && matched.has('ApprovalRejected'), `the scan found ${[...matched.keys()]}`);
    for (const [name, stacks] of matched) {
      if (/^(States|Lambda|S3|DynamoDb|Batch|SecretsManager|SESV2|SFN)\./.test(name)) continue;
      assert.ok(classes.has(name), `${[...stacks].join(', ')} match ${name}, which no errors module defines`);
    }
  });

  it('names survive bundling, as the Lambdas and the oracle job are bundled (keepNames)', async () => {
    // Another bundled module with a class of the same name (as SDKs have: NotFoundError, ...):
    // esbuild renames one of the two, which without keepNames changes the real one's name too.
    const dir = mkdtempSync(join(tmpdir(), 'fp-names-'));
    try {
      writeFileSync(join(dir, 'other.ts'), 'export class PoolFileError extends Error {}\nexport class ApprovalRejected extends Error {}\n');
      const bundle = async (keepNames: boolean) => {
        const result = await build({
          stdin: {
            contents: [
              "import { PoolFileError } from '#shared/molecules/errors.ts';",
              "import { ApprovalRejected } from '#shared/errors.ts';",
              `import * as other from ${JSON.stringify(join(dir, 'other.ts'))};`,
              'export const names = [new PoolFileError("a.smi", "empty").name, new ApprovalRejected("no").name, other.PoolFileError.name];',
            ].join('\n'),
            resolveDir: REPO_ROOT,
            loader: 'ts',
          },
          bundle: true,
          platform: 'node',
          format: 'esm',
          keepNames,
          write: false,
        });
        const code = result.outputFiles[0]!.text;
        return (await import(`data:text/javascript;base64,${Buffer.from(code).toString('base64')}`)).names as string[];
      };
      assert.deepEqual(await bundle(true), ['PoolFileError', 'ApprovalRejected', 'PoolFileError']);
      // The premise: without keepNames a collision does rename a class.
      assert.notDeepEqual(await bundle(false), ['PoolFileError', 'ApprovalRejected', 'PoolFileError']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
