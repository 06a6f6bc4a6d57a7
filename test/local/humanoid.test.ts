/**
 * Humanoid locomotion end to end on the embedded runtime at the `test` size: ARS trains the G1 on
 * the CPU twin for a few iterations (the real job, on worker threads), writing a checkpoint every
 * two; each checkpoint's upload starts a replay run through the S3 trigger, which films the policy
 * and rewrites the run's live report; the training run replays its final policy, reports and
 * publishes `g1-run-policy` with lineage to `g1-checkpoints`. Then: a rerun is all cache hits; a
 * run continuing a checkpoint (`--checkpoint`) trains on and publishes nothing; a checkpoint whose
 * policy has the wrong shape is refused, named, before any job.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import type { ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { getArtifactVersion, listArtifactVersions } from '#shared/artifacts.ts';
import { s3Client } from '#shared/clients/aws.ts';
import { zeroPolicy } from '#shared/humanoid/ars.ts';
import { readCheckpoint, writeCheckpoint } from '#shared/humanoid/checkpoint.ts';
import { linearPolicyOnnx } from '#shared/humanoid/onnx-policy.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import { HUMANOID_SIZES, HumanoidConfig } from '#pipelines/humanoid/config.ts';
import { CHECKPOINTS_ARTIFACT, HUMANOID_PIPELINE, POLICY_ARTIFACT } from '#pipelines/humanoid/stack.ts';
import { startTestRuntime, stopTestRuntime } from '../support/runtime.ts';
import { assertPlanMatchesRun } from '../support/plan.ts';
import { assertRunCost } from '../support/run-cost.ts';

const config = HumanoidConfig.parse(HUMANOID_SIZES.test);

async function text(uri: string): Promise<string> {
  return (await s3Client().send(new GetObjectCommand(parseS3Uri(uri)))).Body!.transformToString();
}

describe('humanoid locomotion (test size)', () => {
  let runtime: LocalRuntime;
  let cold: ExecutionRecord;
  const triggered: ExecutionRecord[] = [];
  const where = () => ({ table: runtime.resources.tables[0]!, bucket: runtime.resources.buckets[0]! });

  before(async () => {
    runtime = await startTestRuntime({ pipelines: [pipelineNamed(HUMANOID_PIPELINE)] });
    runtime.on('executionDone', (record: ExecutionRecord) => {
      if ((record.input as { trigger?: unknown }).trigger) triggered.push(record);
    });
    cold = await runtime.startExecution(HUMANOID_PIPELINE, { config }).done;
    await runtime.idle();
  });
  after(() => stopTestRuntime(runtime));

  it('trains, replays, reports and publishes g1-run-policy with lineage to its checkpoints', async () => {
    assert.equal(cold.status, 'SUCCEEDED', `${cold.error} ${cold.cause}`);
    await assertRunCost(cold);
    // One training job and one replay job (one replay speed).
    assert.equal(cold.stats.batchJobs, 2);
    assertPlanMatchesRun(HUMANOID_PIPELINE, config, cold);
    const out = cold.output as { run: string; checkpoint: string; published: boolean; metrics: Record<string, number | string> };
    assert.equal(out.published, true);
    assert.equal(out.metrics.steps, (await readCheckpoint(out.checkpoint)).manifest.step);
    assert.equal(typeof out.metrics.speedAt0_5, 'number');
    const policy = await getArtifactVersion(where(), POLICY_ARTIFACT);
    const names = policy.files.map((f) => f.name).sort();
    assert.deepEqual(names, ['checkpoint.json', 'film-0_5.mp4', 'params.json', 'policy.onnx', 'replays.json', 'report.html', 'task.json']);
    const checkpoints = await getArtifactVersion(where(), CHECKPOINTS_ARTIFACT);
    assert.equal(checkpoints.files.length, config.ars.iterations / config.ars.checkpointEvery);
    assert.deepEqual(policy.lineage, [{ name: CHECKPOINTS_ARTIFACT, version: checkpoints.version }]);
    const html = await text(policy.files.find((f) => f.name === 'report.html')!.uri);
    for (const needle of [
      'MuJoCo Menagerie',
      'BSD-3-Clause',
      'Apache License 2.0',
      'tracking_lin_vel weight',
      'feet_air_time weight',
      'data:video/mp4;base64,',
    ]) {
      assert.ok(html.includes(needle), needle);
    }
  });

  it("replays each checkpoint as it lands, and keeps the run's live report", async () => {
    assert.equal(triggered.length, 2, 'one replay run per checkpoint upload');
    for (const r of triggered) assert.equal(r.status, 'SUCCEEDED', `${r.error} ${r.cause}`);
    const run = (cold.output as { run: string }).run;
    const live = await text(`s3://${where().bucket}/data/humanoid/live/${run}/report.html`);
    assert.match(live, /live, updated as checkpoints land/);
    // Both checkpoints' replays are in it (a row per checkpoint at 0.5 m/s).
    assert.equal((live.match(/<tr><td>[\d,]+<\/td><td>0\.5<\/td>/g) ?? []).length, 2);
  });

  it('reruns from the cache, continues a checkpoint without publishing, and refuses a policy of the wrong shape', async () => {
    const again = await runtime.startExecution(HUMANOID_PIPELINE, { config }).done;
    assert.equal(again.status, 'SUCCEEDED');
    assert.equal(again.stats.batchJobs, 0, 'training and replays are cache hits');
    await runtime.idle();

    const published = (await listArtifactVersions(where(), POLICY_ARTIFACT)).length;
    const from = (cold.output as { checkpoint: string }).checkpoint;
    // Its config says zero; the checkpoint's gait start is what trains on, and what the report shows.
    const more = HumanoidConfig.parse({ ...HUMANOID_SIZES.test, checkpoint: from, ars: { ...HUMANOID_SIZES.test.ars, iterations: 6, start: 'zero' } });
    const continued = await runtime.startExecution(HUMANOID_PIPELINE, { config: more }).done;
    assert.equal(continued.status, 'SUCCEEDED', `${continued.error} ${continued.cause}`);
    const out = continued.output as { published: boolean; checkpoint: string; reportUri: string };
    assert.equal(out.published, false);
    assert.match(await text(out.reportUri), /<td>ars\.start<\/td><td>gait \(from the checkpoint; the config says zero\)<\/td>/);
    const read = await readCheckpoint(out.checkpoint);
    assert.ok(read.manifest.step > (await readCheckpoint(from)).manifest.step, 'training went on from the checkpoint');
    assert.equal(read.manifest.history.length, 6);
    await runtime.idle();
    assert.equal((await listArtifactVersions(where(), POLICY_ARTIFACT)).length, published, 'a continued run publishes nothing');

    const wrong = await writeCheckpoint(
      where().bucket,
      { trainer: 'ars', run: 'not-a-policy', step: 0, history: [] },
      { 'policy.onnx': linearPolicyOnnx(zeroPolicy(50, 29)), 'params.json': '{}' },
    ).then((w) => w.uri);
    await runtime.idle();
    const refused = await runtime.startExecution(HUMANOID_PIPELINE, { config: { ...more, checkpoint: wrong } }).done;
    assert.equal(refused.status, 'FAILED');
    assert.equal(refused.stats.batchJobs, 0);
    assert.match(`${refused.error} ${refused.cause}`, /ConfigError.*checkpoint policy\.onnx.*103/);
    // Its upload was refused by the replay run too, named.
    const uploadRun = triggered.find((r) => JSON.stringify(r.input).includes('not-a-policy'));
    assert.equal(uploadRun?.status, 'FAILED');
    assert.match(`${uploadRun?.cause}`, /checkpoint policy\.onnx/);
  });
});
