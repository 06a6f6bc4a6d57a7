/**
 * The RewardSearch stack as synthesized: the trainer sandboxed (no role, the sandbox queue,
 * presigned URLs in a staging document, one URL in its container overrides, which stay far under
 * Batch's 8,192 characters with a session token as long as AWS gives one), the source's hash (not its text) in the training cache key, the trusted grade
 * after each training run, the generation loop and the final through the same fan-out, and the
 * config's seed checks.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Template } from 'aws-cdk-lib/assertions';
import { mockClient } from 'aws-sdk-client-mock';
import { handler as presignHandler } from '#functions/platform/presign-job/handler.ts';
import { buildApp } from '#infra/build-app.ts';
import { pipelineNamed, resolveConfig } from '#infra/cli/config.ts';
import { REWARDS_PIPELINE, type RewardSearchStack } from '#pipelines/rewards/stack.ts';
import { resetClients } from '#shared/clients/aws.ts';
import { StagingDocument } from '#shared/presign.ts';
import { definitionOf } from '../support/stacks.ts';

type Nested = {
  Parameters?: Record<string, unknown>;
  Next?: string;
  States?: Record<string, Nested>;
  ItemProcessor?: { States: Record<string, Nested> };
  Branches?: { States: Record<string, Nested> }[];
};

/** Every state nested under a state (Map item processors, Parallel branches), by name. */
function allStates(state: unknown): Record<string, Nested> {
  const found: Record<string, Nested> = {};
  const visit = (s: Nested) => {
    for (const machine of [s.ItemProcessor, ...(s.Branches ?? [])]) {
      for (const [name, child] of Object.entries(machine?.States ?? {})) {
        found[name] = child;
        visit(child);
      }
    }
  };
  visit(state as Nested);
  return found;
}

/** Batch refuses a SubmitJob whose containerOverrides, as JSON, are longer (its own AWS_BATCH_* variables come on top). */
const BATCH_MAX_OVERRIDE_CHARS = 8192;

/** A session token as long as a Lambda's can be (900 to about 2,000 characters), base64 as AWS's are. */
function sessionToken(chars: number): string {
  const blocks: Buffer[] = [];
  for (let i = 0; blocks.length * 64 < chars; i++) blocks.push(createHash('sha512').update(`token-${i}`).digest());
  return Buffer.concat(blocks).toString('base64').slice(0, chars);
}

/** A Parameters template with its `.$` fields (plain `$.a.b` paths) read from `state`, as Step Functions does. */
function resolveParameters(template: unknown, state: unknown): unknown {
  if (Array.isArray(template)) return template.map((v) => resolveParameters(v, state));
  if (!template || typeof template !== 'object') return template;
  return Object.fromEntries(
    Object.entries(template).map(([key, value]) => {
      if (!key.endsWith('.$')) return [key, resolveParameters(value, state)];
      assert.match(value as string, /^\$(\.\w+)+$/, `${key}: a plain path`);
      const at = (value as string)
        .split('.')
        .slice(1)
        .reduce<unknown>((node, name) => (node as Record<string, unknown> | undefined)?.[name], state);
      assert.notEqual(at, undefined, `${key}: ${value as string} is in the state`);
      return [key.slice(0, -2), at];
    }),
  );
}

describe('RewardSearch stack', () => {
  const savedEnv = { ...process.env };
  after(() => {
    process.env = savedEnv;
    resetClients();
  });

  const { app } = buildApp({ skipBundling: true, fastSynth: true, nag: false, pipelines: [pipelineNamed(REWARDS_PIPELINE)] });
  const stack = app.node.findChild('RewardSearch') as RewardSearchStack;
  const template = Template.fromStack(stack);
  const definition = definitionOf(template);
  const states = definition.States as Record<
    string,
    {
      Type: string;
      Next?: string;
      Parameters?: Record<string, unknown>;
      ItemProcessor?: { States: Record<string, { Parameters?: Record<string, unknown>; Next?: string }> };
      Choices?: { Next: string }[];
      Default?: string;
      Result?: Record<string, string>;
    }
  >;

  it('trains each candidate in the sandbox, then grades it outside, both cached; the content-addressed spec keys the cache', () => {
    assert.ok(stack.trainJob.sandboxOutputs?.includes('policy.json'));
    const inner = allStates(states['runs: Items']);
    // The spec (with the source) was staged in S3 by propose: its content-addressed key is the cache key, and it is copied, never read into the state.
    assert.deepEqual(inner['train: Inputs']!.Parameters, { in: { 'spec.$': '$.item.specKey' } });
    assert.equal(inner['train: Job spec'], undefined);
    const copy = inner['train: Copy spec'] as { Resource?: string; Parameters: Record<string, string> };
    assert.match(copy.Resource!, /:states:::aws-sdk:s3:copyObject$/);
    assert.match(copy.Parameters['CopySource.$']!, /\$\.item\.specKey/);
    // The job's own result.json (the candidate's word) stays in S3: the step's result is its URI and the output prefix.
    assert.equal(inner['train: Read result'], undefined);
    assert.deepEqual(Object.keys(inner['train: Job result']!.Parameters!).sort(), ['outputUri.$', 'resultUri.$']);
    assert.ok(inner['train: Presign'], 'presigned URLs for the sandboxed job');
    // The run's wall limit goes to Batch at submit (it replaces the definition's 30 minutes), not into the cache key.
    const submit = inner['train: Run job']!.Parameters as { Timeout?: Record<string, string> };
    assert.deepEqual(submit.Timeout, { 'AttemptDurationSeconds.$': '$.timeoutSeconds' });
    assert.equal((inner['train: Run job'] as { TimeoutSecondsPath?: string }).TimeoutSecondsPath, undefined);
    assert.ok(inner['train: Cache lookup'] && inner['grade: Cache lookup']);
    assert.equal((inner['grade: Inputs']!.Parameters as { in: Record<string, string> }).in['policyUri.$'], "States.Format('{}policy.json', $.train.outputUri)");
  });

  it("hands the trainer one presigned URL: its container overrides stay far under Batch's 8,192 characters with a 2,000-character session token", async (t) => {
    const inner = allStates(states['runs: Items']);
    // The state as the Presign state gets it, with names as long as AWS allows (a 63-character
    // bucket, an 80-character execution), and the presign Lambda's temporary credentials.
    const prefix = `s3://${'b'.repeat(63)}/runs/rewards/${'e'.repeat(80)}/train/0f6c2a5e-3b1d-4c8e-9a7f-2d4b6e8c1a3f/`;
    const job: Record<string, unknown> = { specUri: `${prefix}spec.json`, outputUri: `${prefix}output/` };
    const state = { _step: { job } };
    const token = sessionToken(2000);
    process.env = {
      ...savedEnv,
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'ASIAQ3EGVZ7EXAMPLE42',
      AWS_SECRET_ACCESS_KEY: 'x'.repeat(40),
      AWS_SESSION_TOKEN: token,
    };
    delete process.env.AWS_ENDPOINT_URL_S3;
    resetClients();
    // The staging document's PutObject is the only call the Lambda makes (presigning is offline).
    const s3 = mockClient(S3Client);
    try {
      job.staging = await presignHandler(resolveParameters(inner['train: Presign']!.Parameters, state));
    } finally {
      s3.restore();
    }

    const overrides = resolveParameters(inner['train: Run job']!.Parameters!['ContainerOverrides'], state) as {
      Environment: { Name: string; Value: string }[];
    };
    // As Batch counts it: the JSON of the SubmitJob request's containerOverrides.
    const chars = JSON.stringify({ environment: overrides.Environment.map((e) => ({ name: e.Name, value: e.Value })) }).length;
    t.diagnostic(`containerOverrides: ${chars} characters with a 2,000-character session token`);
    assert.deepEqual(
      overrides.Environment.map((e) => e.Name),
      ['JOB_SPEC_URI', 'OUTPUT_URI', 'JOB_STAGING_URL'],
    );
    const stagingUrl = overrides.Environment[2]!.Value;
    assert.ok(stagingUrl.includes(`X-Amz-Security-Token=${encodeURIComponent(token)}&`), 'the URL carries the whole token');
    assert.ok(chars < BATCH_MAX_OVERRIDE_CHARS / 2, `${chars} characters of container overrides, against Batch's ${BATCH_MAX_OVERRIDE_CHARS}`);

    // The spec's and the outputs' URLs are in the staging document, next to the spec, never in the state.
    const puts = s3.commandCalls(PutObjectCommand);
    assert.equal(puts.length, 1);
    const { Bucket, Key, Body } = puts[0]!.args[0].input;
    assert.equal(`s3://${Bucket}/${Key}`, `${prefix}staging.json`);
    const document = StagingDocument.parse(JSON.parse(Body as string));
    assert.deepEqual(Object.keys(document.outputUrls), ['result.json', 'policy.json', 'curves.json']);
    assert.ok(!JSON.stringify(job.staging).includes(document.specUrl));
    // Read as the container starts: the queue wait. Written at the end: the queue wait and the run (30 minutes at most).
    assert.match(stagingUrl, /X-Amz-Expires=3600&/);
    assert.match(document.specUrl, /X-Amz-Expires=3600&/);
    for (const url of Object.values(document.outputUrls)) assert.match(url, /X-Amz-Expires=5400&/);
  });

  it('loops over generations, then runs the final through the same fan-out and publishes', () => {
    assert.deepEqual(
      states['More generations?']!.Choices!.map((c) => c.Next),
      ['final-plan: Inputs'],
    );
    assert.equal(states['More generations?']!.Default, 'propose: Inputs');
    assert.equal(states['propose: Done']!.Next, 'Count items');
    assert.equal(states['final-plan: Done']!.Next, 'Count items');
    assert.deepEqual(
      states['Search or final?']!.Choices!.map((c) => c.Next),
      ['final-record: Inputs'],
    );
    assert.match(states['Baselines']!.Result!.env!, /def reward\(/);
    assert.match(states['Baselines']!.Result!.shaped!, /def reward\(/);
  });

  it("trains in the sandbox's own VPC, whose interface endpoints admit this account only and whose DNS only AWS names", () => {
    const vpcs = template.findResources('AWS::EC2::VPC');
    assert.equal(Object.keys(vpcs).length, 1, 'the sandbox VPC, not the platform one');
    const endpoints = Object.values(template.findResources('AWS::EC2::VPCEndpoint', { Properties: { VpcEndpointType: 'Interface' } })) as {
      Properties: { PolicyDocument?: { Statement: { Condition?: Record<string, Record<string, unknown>> }[] } };
    }[];
    assert.equal(endpoints.length, 3);
    for (const endpoint of endpoints) {
      const statements = endpoint.Properties.PolicyDocument?.Statement ?? [];
      assert.ok(statements.length > 0);
      for (const s of statements) assert.deepEqual(s.Condition?.['StringEquals']?.['aws:PrincipalAccount'], { Ref: 'AWS::AccountId' });
    }
    const [association] = Object.values(template.findResources('AWS::Route53Resolver::FirewallRuleGroupAssociation')) as { Properties: { VpcId: unknown } }[];
    assert.deepEqual(association!.Properties.VpcId, { Ref: Object.keys(vpcs)[0] });
  });

  it('checks the seeds: grading and the final use seeds no candidate trained on', () => {
    const entry = pipelineNamed(REWARDS_PIPELINE);
    assert.ok(resolveConfig(entry, { size: 'test' }));
    assert.throws(() => resolveConfig(entry, { config: '{"trainSeeds": [1], "gradeSeeds": [1]}' }), /gradeSeeds\.0: is a training seed/);
    assert.throws(() => resolveConfig(entry, { config: '{"gradeSeeds": [5], "finalSeeds": [5]}' }), /finalSeeds\.0: is a search grading seed/);
    assert.throws(() => resolveConfig(entry, { config: '{"trainSeeds": [1, 2], "finalTrainSeeds": [2]}' }), /finalTrainSeeds\.0: is a search training seed/);
    assert.throws(() => resolveConfig(entry, { config: '{"finalTrainSeeds": [7], "finalSeeds": [7]}' }), /finalSeeds\.0: is a final training seed/);
    assert.throws(() => resolveConfig(entry, { config: '{"trainTimeoutSeconds": 30}' }), /trainTimeoutSeconds/);
    assert.throws(() => resolveConfig(entry, { config: '{"trainTimeoutSeconds": 3600}' }), /trainTimeoutSeconds/);
  });
});
