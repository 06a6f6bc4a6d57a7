/**
 * The evaluation pipeline's pure parts: checkpoint manifests and their content hash, run names as
 * artifact names, the release guard with its reasons, the leaderboard, and the benchmark registry
 * (DynamoDB and S3 mocked at the SDK).
 */
import { beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { DynamoDBDocumentClient, GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { checkBenchmarkData, registerBenchmark, selectSuite, type BenchmarkEntry } from '#shared/evals/benchmarks.ts';
import { checkpointContentHash, evalArtifactNames, locateCheckpoint, parseManifest, runSlug } from '#shared/evals/checkpoints.ts';
import { ARTIFACT_NAME } from '#shared/artifacts.ts';
import { ConfigError } from '#shared/errors.ts';
import { currentResults, decideRelease, type EvalMetrics } from '#shared/evals/guard.ts';
import { leaderboardHtml } from '#shared/evals/leaderboard.ts';

const HASH = (c: string) => c.repeat(64);
const manifest = (
  files = [
    { name: 'model.safetensors', sha256: HASH('a'), size: 10 },
    { name: 'config.json', sha256: HASH('b'), size: 2 },
  ],
) => JSON.stringify({ run: 'sft-1', step: 200, files, base_step: 0 });

describe('checkpoint manifests', () => {
  const where = locateCheckpoint('bkt', 'checkpoints/sft-1/200/manifest.json');

  it('locates run and step from the key, and refuses other keys', () => {
    assert.deepEqual(where, { run: 'sft-1', step: 200, uri: 's3://bkt/checkpoints/sft-1/200/' });
    for (const key of ['checkpoints/sft-1/manifest.json', 'checkpoints/sft-1/step-2/manifest.json', 'checkpoints/a/1/x/manifest.json']) {
      assert.throws(
        () => locateCheckpoint('bkt', key),
        (e: unknown) => e instanceof ConfigError && e.field === 'key',
      );
    }
  });

  it('checks the manifest against its key and names the bad field', () => {
    assert.equal(parseManifest(manifest(), where).files.length, 2);
    assert.throws(() => parseManifest(JSON.stringify({ run: 'other', step: 200, files: [] }), where), /manifest\.files/);
    assert.throws(
      () => parseManifest(JSON.stringify({ run: 'other', step: 200, files: [{ name: 'a', sha256: HASH('a'), size: 1 }] }), where),
      /manifest\.run.*does not match/,
    );
    assert.throws(() => parseManifest(manifest([{ name: '../x', sha256: HASH('a'), size: 1 }]), where), /manifest\.files\.0\.name/);
    assert.throws(() => parseManifest(manifest([{ name: 'a', sha256: 'nothex', size: 1 }]), where), /manifest\.files\.0\.sha256/);
    assert.throws(
      () =>
        parseManifest(
          manifest([
            { name: 'a', sha256: HASH('a'), size: 1 },
            { name: 'a', sha256: HASH('b'), size: 1 },
          ]),
          where,
        ),
      /listed twice/,
    );
    assert.throws(() => parseManifest('{not json', where), /manifest.*is not JSON/);
  });

  it('hashes the content, not the order, the run or the step', () => {
    const m = parseManifest(manifest(), where);
    const reordered = { ...m, run: 'another', step: 5, files: [...m.files].reverse() };
    assert.equal(checkpointContentHash(reordered), checkpointContentHash(m));
    assert.notEqual(checkpointContentHash({ ...m, files: [{ ...m.files[0]!, sha256: HASH('c') }, m.files[1]!] }), checkpointContentHash(m));
  });

  it('turns any run name into artifact names, keeping distinct runs apart', () => {
    assert.equal(runSlug('sft-1'), 'sft-1');
    assert.notEqual(runSlug('SFT_1'), runSlug('sft_1'));
    for (const run of ['SFT_1', 'a/b', 'x'.repeat(200), '日本']) {
      for (const name of Object.values(evalArtifactNames(run))) assert.match(name, ARTIFACT_NAME);
    }
  });
});

function result(step: number, benchmark: string, accuracy: number, version = 1): EvalMetrics {
  return {
    run: 'r',
    step,
    benchmark,
    benchmarkVersion: version,
    sampleSize: 100,
    n: 100,
    accuracy,
    stderr: Math.sqrt((accuracy * (1 - accuracy)) / 100),
    baseline: 0.1,
    contentHash: `h${step}`,
  };
}
const settings = { target: 'arithmetic', guard: 'reversal', marginPoints: 2, baseStep: 0 };

describe('release guard', () => {
  const results = [
    result(0, 'arithmetic', 0.0),
    result(0, 'reversal', 0.9),
    result(100, 'arithmetic', 0.5),
    result(100, 'reversal', 0.89),
    result(200, 'arithmetic', 0.9),
    result(200, 'reversal', 0.2),
    result(300, 'arithmetic', 0.5),
    result(300, 'reversal', 0.95),
    result(400, 'arithmetic', 0.3),
  ];

  it('picks the best target score among checkpoints within the margin; ties to the earlier step', () => {
    const d = decideRelease(results, settings);
    assert.equal(d.baseGuardPoints, 90);
    assert.equal(d.floorPoints, 88);
    assert.equal(d.candidate, 100);
    const reasons = Object.fromEntries(d.verdicts.map((v) => [v.step, v.reason]));
    assert.match(reasons[0]!, /base model/);
    assert.match(reasons[100]!, /passed: reversal 89\.00 >= floor 88\.00/);
    assert.match(reasons[200]!, /failed: reversal 20\.00 < floor 88\.00/);
    assert.match(reasons[400]!, /not scored on reversal/);
    assert.match(d.summary, /release candidate: step 100/);
  });

  it('has no candidate when every fine-tuned checkpoint breaks the guard, or the base is not scored', () => {
    assert.equal(
      decideRelease(
        results.filter((r) => r.step !== 100 && r.step !== 300),
        settings,
      ).candidate,
      null,
    );
    const noBase = decideRelease(
      results.filter((r) => r.step !== 0),
      settings,
    );
    assert.equal(noBase.candidate, null);
    assert.match(noBase.summary, /base model is not scored on reversal/);
    assert.throws(() => decideRelease(results, { ...settings, guard: 'arithmetic' }), /guard.*must differ/);
  });

  it('counts only the current version of each benchmark, the latest result of a pair', () => {
    const mixed = [result(100, 'arithmetic', 0.4, 1), result(100, 'arithmetic', 0.6, 2), result(100, 'arithmetic', 0.7, 2), result(100, 'reversal', 0.9, 1)];
    const current = currentResults(
      mixed,
      new Map([
        ['arithmetic', 2],
        ['reversal', 1],
      ]),
    );
    assert.deepEqual(
      current.map((r) => [r.benchmark, r.accuracy]),
      [
        ['arithmetic', 0.7],
        ['reversal', 0.9],
      ],
    );
  });

  it('renders the leaderboard with the chart, the table, the candidate and the baselines', async () => {
    const decision = decideRelease(results, settings);
    const html = await leaderboardHtml({
      run: 'r',
      results,
      decision,
      failures: [{ step: 400, benchmark: 'reversal', error: 'CheckpointRefused', cause: 'pickle' }],
      versions: { arithmetic: 1, reversal: 1 },
    });
    assert.equal(html.match(/<svg /g)?.length, 1);
    assert.match(html, /<tr class="candidate"><td>100<\/td>/);
    assert.match(html, /step 400, reversal: CheckpointRefused: pickle/);
    assert.match(html, /commonest answer of the sample scores: arithmetic v1: 10\.0 %/);
  });
});

describe('benchmark registry', () => {
  const ddb = mockClient(DynamoDBDocumentClient);
  const s3 = mockClient(S3Client);
  const where = { table: 't', bucket: 'b' };
  const data = '{"id":1,"prompt":"2+2=","answer":"4"}\n{"id":2,"prompt":"3+3=","answer":"6"}\n';
  let stored: Record<string, unknown> | undefined;

  beforeEach(() => {
    ddb.reset();
    s3.reset();
    stored = undefined;
    ddb.on(GetCommand).callsFake(() => ({ Item: stored }));
    ddb.on(PutCommand).callsFake((input: { Item: Record<string, unknown> }) => {
      if (input.Item.pk === 'BENCHMARKS') stored = input.Item;
      return {};
    });
    ddb.on(QueryCommand).resolves({ Items: [] });
    s3.on(PutObjectCommand).resolves({});
  });

  it('adds, keeps an unchanged registration, bumps on changed data or on request', async () => {
    const first = await registerBenchmark(where, { name: 'arith', data, scorer: 'exact-number', sampleSize: 2 });
    assert.equal(first.change, 'added');
    assert.equal(first.entry.version, 1);
    assert.match(first.entry.dataUri, /^s3:\/\/b\/benchmarks\/arith\/[0-9a-f]{64}\.jsonl$/);
    assert.equal((await registerBenchmark(where, { name: 'arith', data, scorer: 'exact-number', sampleSize: 2 })).change, 'unchanged');
    assert.equal((await registerBenchmark(where, { name: 'arith', data, scorer: 'exact-number', sampleSize: 2, bump: true })).entry.version, 2);
    const resized = await registerBenchmark(where, { name: 'arith', data, scorer: 'exact-number', sampleSize: 1 });
    assert.equal(resized.change, 'bumped');
    assert.equal(resized.entry.version, 3);
    const put = ddb
      .commandCalls(PutCommand)
      .filter((c) => c.args[0].input.Item!.pk === 'BENCHMARKS')
      .at(-1)!.args[0].input;
    assert.equal(put.ConditionExpression, '#v = :old');
    assert.deepEqual(put.ExpressionAttributeValues, { ':old': 2 });
  });

  it('refuses a concurrent registration of the same version', async () => {
    await registerBenchmark(where, { name: 'arith', data, scorer: 'exact-number', sampleSize: 2 });
    ddb.on(PutCommand).rejects(new ConditionalCheckFailedException({ message: 'no', $metadata: {} }));
    await assert.rejects(
      registerBenchmark(where, { name: 'arith', data, scorer: 'exact-number', sampleSize: 2, bump: true }),
      /registered by someone else meanwhile/,
    );
  });

  it('names bad input: the line of bad data, an unknown scorer, a bad name or size; writes nothing', async () => {
    assert.throws(
      () => checkBenchmarkData('{"id":1,"prompt":"a","answer":"b"}\n{"id":1,"prompt":"c","answer":"d"}'),
      /data line 2\.id.*used by an earlier row/,
    );
    assert.throws(() => checkBenchmarkData('{"id":1,"prompt":"a"}'), /data line 1\.answer/);
    assert.throws(() => checkBenchmarkData('nope'), /data line 1.*is not JSON/);
    await assert.rejects(
      registerBenchmark(where, { name: 'arith', data, scorer: 'regex', sampleSize: 2 }),
      /scorer.*must be one of exact-number, exact-string, multiple-choice/,
    );
    await assert.rejects(registerBenchmark(where, { name: 'Arith', data, scorer: 'exact-number', sampleSize: 2 }), /name/);
    await assert.rejects(registerBenchmark(where, { name: 'arith', data, scorer: 'exact-number', sampleSize: 0 }), /sampleSize/);
    assert.equal(s3.commandCalls(PutObjectCommand).length, 0);
    assert.equal(ddb.commandCalls(PutCommand).length, 0);
  });

  it('selects the whole suite or the named benchmarks, naming an unknown one', () => {
    const entry = (name: string) => ({ name }) as BenchmarkEntry;
    assert.deepEqual(
      selectSuite([entry('b'), entry('a')], undefined).map((b) => b.name),
      ['a', 'b'],
    );
    assert.deepEqual(
      selectSuite([entry('b'), entry('a')], ['b']).map((b) => b.name),
      ['b'],
    );
    assert.throws(() => selectSuite([entry('a')], ['zz']), /benchmarks\[0\].*not registered \(registered: a\)/);
  });
});
