/**
 * The run cache as synthesized (PipelineStack.cacheRuns, shared/run-cache.ts): the self-play
 * league's config check branches on a hit, its Output stores the entry unless a fan-out tolerated
 * failures, the check's function may read only the run entries, and the run version follows the
 * definition. And the guards a stack meets when it declares its runs cacheable.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { type App, Duration, type Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { z } from 'zod';
import { buildApp } from '#infra/build-app.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { SELFPLAY_PIPELINE } from '#pipelines/selfplay/stack.ts';
import { checkStepId, PipelineStack, type StepResources } from '#pipelines/steps/index.ts';
import { ConfigError } from '#shared/errors.ts';
import { RUN_VERSION_ENV } from '#shared/run-cache.ts';
import { definitionOf, minimalScope } from '../support/stacks.ts';

type Resource = { Type: string; Properties: Record<string, unknown> };

function runVersionOf(template: Template): string[] {
  return Object.values(template.findResources('AWS::Lambda::Function') as Record<string, Resource>)
    .map((r) => (r.Properties['Environment'] as { Variables?: Record<string, string> } | undefined)?.Variables?.[RUN_VERSION_ENV])
    .filter((v): v is string => v !== undefined);
}

describe('the self-play league caches its runs', () => {
  const { app } = buildApp({ skipBundling: true, fastSynth: true, nag: false, pipelines: [pipelineNamed(SELFPLAY_PIPELINE)] });
  const template = Template.fromStack(app.node.findChild('SelfPlayLeague') as Stack);
  const { StartAt, States } = definitionOf(template);

  it('checks the config first and ends a hit with the stored output; a miss goes on with the parsed config', () => {
    assert.equal(StartAt, 'config: Inputs');
    assert.equal(States['config: Invoke']!['ResultPath'], '$._run');
    assert.equal(States['config: Done']!['Next'], 'run: Cached?');
    const cached = States['run: Cached?'] as unknown as { Choices: Record<string, unknown>[]; Default: string };
    assert.deepEqual(cached.Choices, [{ Variable: '$._run.hit', IsPresent: true, Next: 'run: Restore' }]);
    assert.deepEqual(States['run: Restore'], { Type: 'Pass', InputPath: '$._run.hit.output', End: true });
    assert.equal(cached.Default, 'run: Miss');
    assert.deepEqual(States['run: Miss']!['Parameters'], { 'config.$': '$._run.config', _run: { 'key.$': '$._run.key' } });
    assert.equal(States['run: Miss']!['Next'], 'start: Inputs');
  });

  it('stores the Output as the entry unless a fan-out tolerated failed items, then makes it the output', () => {
    assert.equal(States['Output']!['ResultPath'], '$._run.output');
    assert.equal(States['Output']!['Next'], 'run: Complete?');
    const complete = States['run: Complete?'] as unknown as { Choices: Record<string, unknown>[]; Default: string };
    assert.deepEqual(complete.Choices, [{ Variable: '$._partial', IsPresent: true, Next: 'run: Output' }]);
    assert.equal(complete.Default, 'run: Cache store');
    const store = States['run: Cache store']!;
    assert.match(String(store['Resource']), /:states:::aws-sdk:dynamodb:putItem$/);
    const item = (store['Parameters'] as { Item: Record<string, Record<string, string>> }).Item;
    assert.deepEqual(item['pk'], { S: 'CACHE#selfplay#run' });
    assert.deepEqual(item['sk'], { 'S.$': '$._run.key' });
    assert.deepEqual(item['output'], { 'S.$': 'States.JsonToString($._run.output)' });
    assert.deepEqual(item['executionId'], { 'S.$': '$$.Execution.Id' });
    // A put that fails is caught: the run ends with its output, and the next run computes.
    const catchers = store['Catch'] as { ErrorEquals: string[]; Next: string }[];
    assert.deepEqual(catchers[0]!.ErrorEquals, ['States.ALL']);
    assert.equal(catchers[0]!.Next, 'run: Output');
    assert.equal(store['Next'], 'run: Output');
    assert.deepEqual(States['run: Output'], { Type: 'Pass', InputPath: '$._run.output', End: true });
  });

  it('gives the config check the run version and a read of the run entries only', () => {
    const [version] = runVersionOf(template);
    assert.match(version ?? '', /^[0-9a-f]{32}$/);
    const policies = Object.values(template.findResources('AWS::IAM::Policy') as Record<string, Resource>);
    const statements = policies.flatMap((p) => (p.Properties['PolicyDocument'] as { Statement: Record<string, unknown>[] }).Statement);
    const get = statements.find((s) => s['Action'] === 'dynamodb:GetItem' && s['Condition']);
    assert.ok(get, 'a GetItem grant with a condition');
    assert.deepEqual(get['Condition'], { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': ['CACHE#selfplay#run'] } });
  });
});

/** A pipeline of one Pass and an Output, whose runs are cached (its config check is the probe's). */
class TinyRunStack extends PipelineStack {
  constructor(
    scope: Construct,
    id: string,
    resources: StepResources,
    options: { work?: string; order?: 'late' | 'no-output' | 'two-outputs' | 'distributed'; noteChars?: number } = {},
  ) {
    super(scope, id, 'probe', { resources }, z.object({ n: z.int().max(9), note: z.string().max(options.noteChars ?? 100) }).strict());
    if (options.order === 'late') this.configCheck();
    this.cacheRuns('The output is a function of the config alone: one Pass state and the Output read nothing else.');
    const work = new sfn.Pass(this, 'Work', { result: sfn.Result.fromString(options.work ?? 'a'), resultPath: '$.work' });
    let chain = sfn.Chain.start(work);
    if (options.order === 'distributed') {
      const spread = new sfn.DistributedMap(this, 'Spread', { itemsPath: '$.config.items', toleratedFailurePercentage: 10 });
      spread.itemProcessor(new sfn.Pass(this, 'Each'));
      chain = chain.next(spread);
    }
    if (options.order !== 'no-output') chain = chain.next(this.output('Output', { 'n.$': '$.config.n', 'note.$': '$.config.note' }));
    if (options.order === 'two-outputs') chain.next(this.output('Output again', { 'n.$': '$.config.n' }));
    this.finish(chain, { timeout: Duration.hours(1) });
  }
}

describe('PipelineStack.cacheRuns', () => {
  const tiny = (options: ConstructorParameters<typeof TinyRunStack>[3] = {}) => {
    const { stack, resources } = minimalScope();
    return runVersionOf(Template.fromStack(new TinyRunStack(stack.node.root as App, 'Tiny', resources, options)));
  };

  it('makes the same run version for the same stack, and another when the definition changes', () => {
    const [a] = tiny();
    assert.match(a ?? '', /^[0-9a-f]{32}$/);
    assert.deepEqual(tiny(), [a]);
    assert.notDeepEqual(tiny({ work: 'b' }), [a]);
  });

  it('refuses a declaration after the config check, a stack without an Output, a second Output and a Distributed Map', () => {
    assert.throws(
      () => tiny({ order: 'late' }),
      (e: unknown) => e instanceof ConfigError && e.field === 'cacheRuns' && /before configCheck/.test(e.message),
    );
    assert.throws(
      () => tiny({ order: 'no-output' }),
      (e: unknown) => e instanceof ConfigError && /Output made with this.output/.test(e.message),
    );
    assert.throws(
      () => tiny({ order: 'two-outputs' }),
      (e: unknown) => e instanceof ConfigError && e.field === 'output' && /one Output/.test(e.message),
    );
    // A Distributed Map's tolerated failures mark nothing: its runs could be stored partial.
    assert.throws(
      () => tiny({ order: 'distributed' }),
      (e: unknown) => e instanceof ConfigError && e.field === 'cacheRuns' && /Distributed Map/.test(e.message),
    );
  });

  it("refuses, at synth, an output and config whose entry's put could pass the 256 KiB a state takes", () => {
    // The note is in the config and in the output: the put holds both as strings, escaped again.
    // 40,000 characters at their worst escaping (6 each, as \u0000) bound the entry at about 1 MB.
    assert.throws(
      () => tiny({ noteChars: 40_000 }),
      (e: unknown) => e instanceof ConfigError && e.field === 'probe: run cache entry' && /200 KiB/.test(e.message),
    );
    assert.match(tiny({ noteChars: 1_000 })[0] ?? '', /^[0-9a-f]{32}$/);
  });

  it("refuses a reason that does not say why, and a step that takes the run cache's id", () => {
    const { stack, resources } = minimalScope();
    class Vague extends PipelineStack {
      constructor(scope: Construct) {
        super(scope, 'Vague', 'probe', { resources }, z.object({}));
        this.cacheRuns('deterministic');
      }
    }
    assert.throws(
      () => new Vague(stack.node.root as App),
      (e: unknown) => e instanceof ConfigError && e.field === 'cacheRuns',
    );
    assert.throws(
      () => checkStepId('run'),
      (e: unknown) => e instanceof ConfigError && e.field === 'stepId' && /run cache/.test(e.message),
    );
  });
});
