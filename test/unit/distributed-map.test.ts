/**
 * Lowering Distributed Map states for the local engine (which would otherwise run them as
 * inline Maps over the state input, ignoring ItemReader, ResultWriter and the tolerance).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { StateMachineDefinition } from 'aws-local-stepfunctions';
import { DISTRIBUTED_MAP_RESOURCE, exceedsTolerance, lowerDistributedMaps } from '#infra/local/distributed-map.ts';
import { prepareAsl } from '#infra/local/asl-prepass.ts';

function definition(extra: Record<string, unknown> = {}): StateMachineDefinition {
  return {
    StartAt: 'Fan',
    States: {
      Fan: {
        Type: 'Map',
        ItemReader: { Resource: 'arn:aws:states:::s3:getObject', ReaderConfig: { InputType: 'JSON' }, Parameters: { Bucket: 'b', 'Key.$': '$.key' } },
        ResultWriter: { Resource: 'arn:aws:states:::s3:putObject', Parameters: { Bucket: 'b', Prefix: 'runs/x' } },
        ItemSelector: { 'item.$': '$$.Map.Item.Value' },
        ItemProcessor: {
          ProcessorConfig: { Mode: 'DISTRIBUTED', ExecutionType: 'STANDARD' },
          StartAt: 'Work',
          States: { Work: { Type: 'Task', Resource: 'arn:aws:lambda:us-east-1:000000000000:function:f', End: true } },
        },
        ToleratedFailurePercentagePath: '$.pct',
        MaxConcurrency: 7,
        ResultPath: '$.out',
        End: true,
        ...extra,
      },
    },
  } as unknown as StateMachineDefinition;
}

describe('Distributed Map lowering', () => {
  it('turns the Map into a runtime Task that evaluates the reader, writer and tolerance paths', () => {
    const { asl, maps } = lowerDistributedMaps(definition());
    const task = asl.States['Fan'] as unknown as Record<string, unknown>;
    assert.equal(task['Type'], 'Task');
    assert.equal(task['Resource'], DISTRIBUTED_MAP_RESOURCE);
    assert.deepEqual(task['Parameters'], {
      'input.$': '$',
      reader: { Bucket: 'b', 'Key.$': '$.key' },
      writer: { Bucket: 'b', Prefix: 'runs/x' },
      'toleratedFailurePercentage.$': '$.pct',
    });
    assert.equal(task['ResultPath'], '$.out');
    assert.equal(task['End'], true);
    const map = maps.get('Fan')!;
    assert.equal(map.maxConcurrency, 7);
    assert.deepEqual(map.itemSelector, { 'item.$': '$$.Map.Item.Value' });
    assert.equal(map.processor.StartAt, 'Work');
    // What remains passes the pre-pass that rejects what the engine would ignore.
    assert.doesNotThrow(() => prepareAsl(asl));
    assert.doesNotThrow(() => prepareAsl(map.processor));
  });

  it('refuses what it cannot run locally rather than run it differently', () => {
    assert.throws(() => lowerDistributedMaps(definition({ ItemBatcher: { MaxItemsPerBatch: 10 } })), /Distributed Map "Fan": ItemBatcher cannot run locally/);
    const csv = definition();
    (csv.States['Fan'] as unknown as { ItemReader: { ReaderConfig: { InputType: string } } }).ItemReader.ReaderConfig.InputType = 'CSV';
    assert.throws(() => lowerDistributedMaps(csv), /only s3:getObject of a JSON array/);
  });

  it('leaves inline Maps to the engine', () => {
    const inline = definition();
    const fan = inline.States['Fan'] as unknown as Record<string, unknown>;
    delete fan['ItemReader'];
    delete fan['ResultWriter'];
    delete fan['ToleratedFailurePercentagePath'];
    (fan['ItemProcessor'] as { ProcessorConfig: { Mode: string } }).ProcessorConfig.Mode = 'INLINE';
    const { asl, maps } = lowerDistributedMaps(inline);
    assert.equal(maps.size, 0);
    assert.equal((asl.States['Fan'] as unknown as { Type: string }).Type, 'Map');
  });
});

describe('Distributed Map failure tolerance', () => {
  it('tolerates nothing by default', () => {
    assert.equal(exceedsTolerance(0, 10, undefined, undefined), false);
    assert.equal(exceedsTolerance(1, 10, undefined, undefined), true);
  });
  it('fails past the percentage or past the count, whichever is crossed', () => {
    assert.equal(exceedsTolerance(2, 10, 20, undefined), false);
    assert.equal(exceedsTolerance(3, 10, 20, undefined), true);
    assert.equal(exceedsTolerance(3, 10, undefined, 3), false);
    assert.equal(exceedsTolerance(4, 10, undefined, 3), true);
    assert.equal(exceedsTolerance(3, 10, 50, 2), true);
  });
});
