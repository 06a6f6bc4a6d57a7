/**
 * The SelfPlayLeague stack as synthesized: the training job on the GPU queue, the generation loop,
 * the cached per-pair matches, cache keys that cover the game engine and the trainer, and the
 * config's bound on generations read from what the definition records in the execution's history.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Template } from 'aws-cdk-lib/assertions';
import { buildApp } from '#infra/build-app.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { BatchJob } from '#pipelines/steps/batch-job.ts';
import type { PipelineFunction } from '#pipelines/steps/function.ts';
import { SELFPLAY_PIPELINE, type SelfPlayLeagueStack } from '#pipelines/selfplay/stack.ts';
import { definitionOf } from '../support/stacks.ts';
import { type AslGraph, HISTORY_EVENT_LIMIT, pathEvents } from '#pipelines/steps/history.ts';
import { LEAGUE_HISTORY, LEAGUE_HISTORY_BUDGET, leagueHistoryEvents, MAX_GENERATIONS, SelfPlayConfig } from '#pipelines/selfplay/config.ts';

type State = { Type: string; Next?: string; Choices?: { Variable: string; NumericLessThanEqualsPath?: string; Next: string }[]; [key: string]: unknown };

describe('SelfPlayLeague stack', () => {
  const { app } = buildApp({ skipBundling: true, fastSynth: true, nag: false, pipelines: [pipelineNamed(SELFPLAY_PIPELINE)] });
  const stack = app.node.findChild('SelfPlayLeague') as SelfPlayLeagueStack;
  const template = Template.fromStack(stack);
  const definition = definitionOf(template) as { States: Record<string, State> };

  it('trains on the GPU queue with one GPU per job', () => {
    const definitions = template.findResources('AWS::Batch::JobDefinition');
    const [train] = Object.values(definitions) as { Properties: { ContainerProperties: { ResourceRequirements: { Type: string; Value: string }[] } } }[];
    assert.ok(train!.Properties.ContainerProperties.ResourceRequirements.some((r) => r.Type === 'GPU' && r.Value === '1'));
    const job = stack.node.findAll().find((c): c is BatchJob => c instanceof BatchJob)!;
    assert.equal(job.queue, (app.node.findChild('FrontierPlatform') as unknown as { resources: { gpuQueue: unknown } }).resources.gpuQueue);
  });

  it('loops over generations: after the Elo step, back to training while generations remain', () => {
    const more = definition.States['More generations?']!;
    assert.equal(more.Type, 'Choice');
    const loop = more.Choices![0]!;
    assert.equal(loop.Variable, '$.gen.n');
    assert.equal(loop.NumericLessThanEqualsPath, '$.config.generations');
    assert.equal(loop.Next, 'train: Inputs');
    assert.equal(
      definition.States['Next generation']!['Parameters'] && (definition.States['Next generation']!['Parameters'] as Record<string, string>)['n.$'],
      'States.MathAdd($.gen.n, 1)',
    );
    for (const name of ['train: Cache lookup', 'plan: Invoke', 'matches: Items', 'elo: Invoke', 'report: Cache lookup', 'publish: Inputs']) {
      assert.ok(definition.States[name], `state "${name}"`);
    }
    const map = definition.States['matches: Items']!;
    const inner = JSON.stringify(map['ItemProcessor'] ?? map['Iterator']);
    assert.match(inner, /match: Cache lookup/, 'each pair is cached');
  });

  it('caches cover the game engine and the trainer: Connect Four code is part of both code versions', () => {
    const job = stack.node.findAll().find((c): c is BatchJob => c instanceof BatchJob)!;
    for (const file of ['connect4_env.py', 'trainer.py', 'ppo.py', 'policy.py', 'main.py']) {
      assert.ok(job.codeVersion.components[`batch-jobs/selfplay-train/${file}`], `training code version covers ${file}`);
    }
    const match = stack.node.findChild('Match') as PipelineFunction;
    for (const file of ['shared/selfplay/connect4.ts', 'shared/selfplay/match.ts', 'shared/selfplay/bots.ts', 'shared/selfplay/onnx.ts']) {
      assert.ok(match.codeVersion.components[file], `match code version covers ${file}`);
    }
    assert.ok(match.codeVersion.components['npm:onnxruntime-node'], 'and the onnxruntime-node version');
  });

  it('bounds generations by the history the definition records: the most that fits, and a longer league refused naming the field', () => {
    const graph = definition as unknown as AslGraph;
    // The outputs a cache hit checks: the training job's 3 files, the report's 6, the published manifest; a match lists none.
    const mapItems = (matches: number) => ({
      'matches: Items': matches,
      'match: Check outputs': 0,
      'train: Check outputs': 3,
      'report: Check outputs': 6,
      'publish: Check outputs': 1,
    });
    const start = pathEvents(graph, (definition as unknown as AslGraph).StartAt, { mapItems: mapItems(0), until: ['train: Inputs'] }) + 1;
    const generation = (matches: number) => pathEvents(graph, 'train: Inputs', { mapItems: mapItems(matches), until: ['More generations?'] }) + 2;
    const end = pathEvents(graph, 'report: Inputs', { mapItems: mapItems(0) }) + 1;
    // The execution's own 2 events are counted with its start and end.
    assert.deepEqual({ start, generation: generation(0), match: generation(1) - generation(0), end }, LEAGUE_HISTORY);
    assert.equal(generation(7) - generation(0), 7 * LEAGUE_HISTORY.match, 'each match adds the same events');

    assert.ok(leagueHistoryEvents(MAX_GENERATIONS) <= LEAGUE_HISTORY_BUDGET);
    assert.ok(leagueHistoryEvents(MAX_GENERATIONS + 1) > LEAGUE_HISTORY_BUDGET);
    assert.ok(leagueHistoryEvents(40) > HISTORY_EVENT_LIMIT, `the old bound, 40 generations: ${leagueHistoryEvents(40)} events`);
    const base = { gamesPerIteration: 8, iterations: 1 };
    assert.equal(SelfPlayConfig.parse({ ...base, generations: MAX_GENERATIONS }).generations, MAX_GENERATIONS);
    const refused = SelfPlayConfig.safeParse({ ...base, generations: 40 });
    assert.equal(refused.success, false);
    const [issue] = refused.error!.issues;
    assert.deepEqual(issue!.path, ['generations']);
    assert.match(issue!.message, new RegExp(`must be at most ${MAX_GENERATIONS}: .* history events`));
  });
});
