/**
 * The run cache (shared/run-cache.ts): its key, the objects a hit checks, the lookup the config
 * check makes (DynamoDB and S3 mocked at the SDK), the hit the counters record, and what a run hit
 * saved (shared/cost/usage.ts).
 */
import { afterEach, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { HeadObjectCommand, NotFound, S3Client } from '@aws-sdk/client-s3';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { z } from 'zod';
import { configCheckHandler } from '#shared/config-check.ts';
import { cacheSaving, costOf, emptyStepUsage, type StepUsage, usageOfStep } from '#shared/cost/usage.ts';
import { ConfigError } from '#shared/errors.ts';
import { bucketObjectsOf, cacheHitOf, lookupRun, RUN_VERSION_ENV, runCacheKey } from '#shared/run-cache.ts';
import { RUN_STEP } from '#shared/table.ts';

const s3 = mockClient(S3Client);
const ddb = mockClient(DynamoDBDocumentClient);
const where = { table: 'frontier-table', bucket: 'frontier-data', pipeline: 'selfplay' };
const COLD = 'arn:aws:states:us-east-1:123456789012:execution:SelfPlay:cold';
const OUTPUT = {
  champion: 'gen-3',
  leagueUri: 's3://frontier-data/data/selfplay/league/ab12.json',
  reportUri: 's3://frontier-data/data/selfplay/report/cd34.html',
  artifact: { name: 'connect4-champion', version: 2, uri: 's3://frontier-data/artifacts/connect4-champion/000000000002/' },
  ratings: [{ id: 'gen-3', elo: 412.5 }],
  elsewhere: 's3://another-bucket/data/x.json',
  again: 's3://frontier-data/data/selfplay/league/ab12.json',
};

beforeEach(() => {
  s3.reset();
  ddb.reset();
});

describe('runCacheKey', () => {
  it('is the same for the same config in any key order, and changes with the config, the version and the pipeline', () => {
    const key = runCacheKey('selfplay', 'v1', { generations: 3, seed: 7, ppo: { lr: 1e-3, epochs: 2 } });
    assert.match(key, /^[0-9a-f]{64}$/);
    assert.equal(runCacheKey('selfplay', 'v1', { seed: 7, ppo: { epochs: 2, lr: 1e-3 }, generations: 3 }), key);
    assert.notEqual(runCacheKey('selfplay', 'v1', { generations: 4, seed: 7, ppo: { lr: 1e-3, epochs: 2 } }), key);
    assert.notEqual(runCacheKey('selfplay', 'v2', { generations: 3, seed: 7, ppo: { lr: 1e-3, epochs: 2 } }), key);
    assert.notEqual(runCacheKey('rewards', 'v1', { generations: 3, seed: 7, ppo: { lr: 1e-3, epochs: 2 } }), key);
  });

  it('takes a config far over the 10,000 characters States.Hash would', () => {
    const config = { items: Array.from({ length: 5000 }, (_, i) => `item-${i}`) };
    assert.ok(JSON.stringify(config).length > 10_000);
    assert.match(runCacheKey('probe', 'v1', config), /^[0-9a-f]{64}$/);
  });
});

describe('bucketObjectsOf', () => {
  it("lists each object of the bucket the output names once, at any depth; other buckets' and folders are not checked", () => {
    assert.deepEqual(
      bucketObjectsOf(OUTPUT, 'frontier-data').map((o) => o.Key),
      ['data/selfplay/league/ab12.json', 'data/selfplay/report/cd34.html'],
    );
    assert.deepEqual(bucketObjectsOf({ n: 1, s: 'text', list: [null, true] }, 'frontier-data'), []);
  });
});

describe('lookupRun', () => {
  const item = { pk: 'CACHE#selfplay#run', sk: 'k', output: JSON.stringify(OUTPUT), executionId: COLD };

  it("is a hit with the entry's output and execution when every object it names exists", async () => {
    ddb.on(GetCommand).resolves({ Item: item });
    s3.on(HeadObjectCommand).resolves({});
    const found = await lookupRun(where, 'k');
    assert.deepEqual(found, { hit: { output: OUTPUT, executionId: COLD } });
    const get = ddb.commandCalls(GetCommand)[0]!.args[0].input;
    assert.deepEqual(get.Key, { pk: 'CACHE#selfplay#run', sk: 'k' });
    assert.equal(get.ConsistentRead, true);
    assert.deepEqual(
      s3
        .commandCalls(HeadObjectCommand)
        .map((c) => c.args[0].input.Key)
        .sort(),
      ['data/selfplay/league/ab12.json', 'data/selfplay/report/cd34.html'],
    );
  });

  it('is a miss that names the object when one is gone', async () => {
    ddb.on(GetCommand).resolves({ Item: item });
    s3.on(HeadObjectCommand).resolves({});
    s3.on(HeadObjectCommand, { Key: 'data/selfplay/report/cd34.html' }).rejects(new NotFound({ message: 'Not Found', $metadata: { httpStatusCode: 404 } }));
    assert.deepEqual(await lookupRun(where, 'k'), { miss: 'its output names s3://frontier-data/data/selfplay/report/cd34.html, which is gone' });
  });

  it('is a miss without an entry, or with one it cannot read', async () => {
    ddb.on(GetCommand).resolves({});
    assert.deepEqual(await lookupRun(where, 'k'), { miss: 'no entry' });
    ddb.on(GetCommand).resolves({ Item: { ...item, output: '{not json' } });
    assert.deepEqual(await lookupRun(where, 'k'), { miss: "the entry's output is not JSON" });
    ddb.on(GetCommand).resolves({ Item: { ...item, executionId: undefined } });
    assert.deepEqual(await lookupRun(where, 'k'), { miss: 'the entry has no output or no execution' });
  });

  it('fails on an S3 error other than a missing object (the config check then computes the run)', async () => {
    ddb.on(GetCommand).resolves({ Item: item });
    s3.on(HeadObjectCommand).rejects(Object.assign(new Error('Access Denied'), { name: 'AccessDenied', $metadata: { httpStatusCode: 403 } }));
    await assert.rejects(lookupRun(where, 'k'), /Access Denied/);
  });
});

describe('the config check of a stack that caches runs', () => {
  const Schema = z.object({ generations: z.int().min(1).max(40), seed: z.int().default(0) }).strict();
  const handler = configCheckHandler(Schema);
  const env = { TABLE_NAME: where.table, BUCKET_NAME: where.bucket, PIPELINE_NAME: where.pipeline, [RUN_VERSION_ENV]: 'v1' };
  beforeEach(() => Object.assign(process.env, env));
  afterEach(() => {
    for (const name of Object.keys(env)) delete process.env[name];
  });
  const key = runCacheKey('selfplay', 'v1', { generations: 3, seed: 0 });

  it('returns the parsed config and its key on a miss', async () => {
    ddb.on(GetCommand).resolves({});
    assert.deepEqual(await handler({ config: { generations: 3 } }), { config: { generations: 3, seed: 0 }, key });
    assert.equal(ddb.commandCalls(GetCommand)[0]!.args[0].input.Key!.sk, key, 'the key of the config with its defaults');
  });

  it('returns the hit, without the config, when the entry is there', async () => {
    ddb.on(GetCommand).resolves({ Item: { output: JSON.stringify({ champion: 'gen-3' }), executionId: COLD } });
    assert.deepEqual(await handler({ config: { generations: 3 } }), { key, hit: { output: { champion: 'gen-3' }, executionId: COLD } });
  });

  it('computes the run when the lookup fails', async () => {
    ddb.on(GetCommand).rejects(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }));
    assert.deepEqual(await handler({ config: { generations: 3 } }), { config: { generations: 3, seed: 0 }, key });
  });

  it('refuses a bad config before any lookup, naming the field', async () => {
    await assert.rejects(handler({ config: { generations: 41 } }), (e: unknown) => e instanceof ConfigError && /generations/.test(e.message));
    assert.equal(ddb.commandCalls(GetCommand).length, 0);
  });

  it('returns only the config without a run version', async () => {
    delete process.env[RUN_VERSION_ENV];
    assert.deepEqual(await handler({ config: { generations: 3 } }), { generations: 3, seed: 0 });
    assert.equal(ddb.commandCalls(GetCommand).length, 0);
  });
});

describe('cacheHitOf', () => {
  it("reads a step's hit from its lookup and the run's from the run check", () => {
    assert.deepEqual(cacheHitOf('train: Restore', { _step: { lookup: { Item: { executionId: { S: COLD } } } } }), { step: 'train', executionArn: COLD });
    assert.deepEqual(cacheHitOf('run: Restore', { _run: { key: 'k', hit: { output: {}, executionId: COLD } } }), { step: RUN_STEP, executionArn: COLD });
    assert.equal(cacheHitOf('run: Restore', { _run: { key: 'k', config: {} } }), undefined);
    assert.equal(cacheHitOf('train: Cache hit', { _step: { lookup: { Item: { executionId: { S: COLD } } } } }), undefined);
  });
});

describe('what a run cache hit saved', () => {
  const usage = (transitions: number, lambdaInvocations = 0, lambdaGbSeconds = 0): StepUsage => ({
    ...emptyStepUsage(),
    transitions,
    lambdaInvocations,
    lambdaBilledMs: lambdaGbSeconds * 1000,
    lambdaGbSeconds,
  });
  const steps: Record<string, StepUsage> = {
    config: usage(3, 1, 0.1),
    train: {
      ...usage(12),
      batch: [{ job: 'TrainDefinition', platform: 'EC2', instanceType: 'g6.xlarge', vcpus: 4, memoryMiB: 15000, gpus: 1, seconds: 300 }],
      stores: 3,
    },
    match: { ...usage(40, 10, 5), stores: 10 },
    '': usage(20),
    [RUN_STEP]: { ...usage(4), stores: 1 },
  };
  const priced = (names: string[]) => names.reduce((n, name) => n + costOf(usageOfStep(steps[name]!)).lowUsd, 0);

  it("is the storing run's cost of every step but the config check and the run cache's own states", () => {
    const saving = cacheSaving([{ step: RUN_STEP, executionArn: COLD }], (arn) => (arn === COLD ? steps : undefined));
    assert.equal(saving.hits, 1);
    assert.equal(saving.priced, 1);
    assert.ok(Math.abs(saving.lowUsd - priced(['train', 'match', ''])) < 1e-12, `${saving.lowUsd}`);
    assert.ok(saving.highUsd >= saving.lowUsd);
  });

  it('is not priced when the storing run is not on record, or stored no run entry', () => {
    assert.equal(cacheSaving([{ step: RUN_STEP, executionArn: 'gone' }], () => undefined).priced, 0);
    const { [RUN_STEP]: _run, ...withoutStore } = steps;
    assert.equal(cacheSaving([{ step: RUN_STEP, executionArn: COLD }], () => withoutStore).priced, 0);
  });
});
