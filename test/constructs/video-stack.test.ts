/**
 * The VideoCuration stack as synthesized: separate pools (generate, fetch and cut on the CPU
 * queue, score and captions on the GPU queue), the per-source work in a Distributed Map whose
 * items and results stay in S3, and curate outside every cache (a threshold reaches only it).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Template } from 'aws-cdk-lib/assertions';
import { buildApp } from '#infra/build-app.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { VIDEO_PIPELINE, type VideoStack } from '#pipelines/video/stack.ts';
import { definitionOf } from '../support/stacks.ts';

describe('video stack', () => {
  const { app, platform } = buildApp({ skipBundling: true, fastSynth: true, nag: false, pipelines: [pipelineNamed(VIDEO_PIPELINE)] });
  const stack = app.node.findChild('VideoCuration') as VideoStack;
  const definition = definitionOf(Template.fromStack(stack));

  it('cuts on the CPU queue and scores and captions on the GPU queue', () => {
    for (const job of [stack.jobs.generate, stack.jobs.fetch, stack.jobs.cut]) assert.equal(job.queue, platform.resources.cpuQueue, job.node.id);
    for (const job of [stack.jobs.score, stack.jobs.caption]) assert.equal(job.queue, platform.resources.gpuQueue, job.node.id);
  });

  it('runs each source in a Distributed Map reading its items from S3, and curates outside the cache', () => {
    const map = definition.States['sources-map: Items'] as {
      ItemReader?: unknown;
      ItemProcessor?: { ProcessorConfig?: { Mode?: string }; States: Record<string, unknown> };
    };
    assert.ok(map.ItemReader, 'items read from S3');
    assert.equal(map.ItemProcessor?.ProcessorConfig?.Mode, 'DISTRIBUTED');
    const inner = Object.keys(map.ItemProcessor!.States);
    for (const step of ['fetch', 'cut', 'score'])
      assert.ok(
        inner.some((s) => s.startsWith(`${step}: Cache lookup`)),
        `${step} is cached: ${inner.join(', ')}`,
      );
    const outer = Object.keys(definition.States);
    assert.ok(outer.includes('curate: Invoke'));
    assert.ok(!outer.some((s) => s.startsWith('curate: Cache')), 'curate is never cached');
  });
});
