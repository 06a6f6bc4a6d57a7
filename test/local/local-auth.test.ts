/**
 * The runtime's loopback services as another process on the machine meets them: S3, DynamoDB and
 * the AWS API (Secrets Manager holds the link-signing key) take only requests signed with the
 * credentials this start made; an unsigned request, another key, a wrong secret or an expired
 * presigned URL is refused, as AWS refuses them. S3 enforces If-Match on GetObject and
 * HeadObject. And the CLI's read commands work beside the running runtime, through it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { REPO_ROOT } from '#pipelines/steps/code-version.ts';
import { PROBE_PIPELINE } from '#pipelines/probe/stack.ts';
import { ProbeConfig } from '#pipelines/probe/config.ts';
import { approvalLinkIn, nextEmail, readEml, startTestRuntime, stopTestRuntime, waitFor } from '../support/runtime.ts';

const region = 'us-east-1';

describe('loopback services take only this runtime’s signatures', () => {
  let rt: LocalRuntime;
  let bucket: string;
  const own = () => ({ accessKeyId: process.env.AWS_ACCESS_KEY_ID!, secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY! });
  const s3With = (credentials: { accessKeyId: string; secretAccessKey: string }) =>
    new S3Client({ endpoint: process.env.AWS_ENDPOINT_URL_S3, forcePathStyle: true, region, credentials, maxAttempts: 1 });

  before(async () => {
    rt = await startTestRuntime({ pipelines: [pipelineNamed(PROBE_PIPELINE)] });
    bucket = rt.resources.buckets[0]!;
  });
  after(() => stopTestRuntime(rt));

  it('refuses unsigned requests, other keys and wrong secrets on S3, DynamoDB and Secrets Manager', async () => {
    const { accessKeyId } = own();
    assert.match(accessKeyId, /^AKLO[A-Z2-7]{16}$/, 'a key made for this start');
    await s3With(own()).send(new PutObjectCommand({ Bucket: bucket, Key: 'auth/x.txt', Body: 'x' }));

    const unsigned = await fetch(`${process.env.AWS_ENDPOINT_URL_S3}/${bucket}/auth/x.txt`);
    assert.equal(unsigned.status, 403);
    assert.match(await unsigned.text(), /<Code>MissingAuthenticationToken<\/Code>/);
    await assert.rejects(s3With({ accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' }).send(new GetObjectCommand({ Bucket: bucket, Key: 'auth/x.txt' })), {
      name: 'InvalidAccessKeyId',
    });
    await assert.rejects(s3With({ accessKeyId, secretAccessKey: 'guessed' }).send(new GetObjectCommand({ Bucket: bucket, Key: 'auth/x.txt' })), {
      name: 'SignatureDoesNotMatch',
    });

    const dynamo = (secretAccessKey: string) =>
      new DynamoDBClient({ endpoint: process.env.AWS_ENDPOINT_URL_DYNAMODB, region, credentials: { accessKeyId, secretAccessKey }, maxAttempts: 1 });
    await assert.rejects(dynamo('guessed').send(new ListTablesCommand({})), { name: 'SignatureDoesNotMatch' });
    assert.ok((await dynamo(own().secretAccessKey).send(new ListTablesCommand({}))).TableNames!.length > 0);

    const secrets = (secretAccessKey: string) =>
      new SecretsManagerClient({
        endpoint: process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER,
        region,
        credentials: { accessKeyId, secretAccessKey },
        maxAttempts: 1,
      });
    const secretId = [...(rt as unknown as { secrets: Map<string, string> }).secrets.keys()][0]!;
    await assert.rejects(secrets('guessed').send(new GetSecretValueCommand({ SecretId: secretId })), { name: 'SignatureDoesNotMatch' });
    const plain = await fetch(process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER!, {
      method: 'POST',
      headers: { 'x-amz-target': 'secretsmanager.GetSecretValue', 'content-type': 'application/x-amz-json-1.1' },
      body: JSON.stringify({ SecretId: secretId }),
    });
    assert.equal(plain.status, 403);
    assert.doesNotMatch(await plain.text(), /SecretString/);
    assert.ok((await secrets(own().secretAccessKey).send(new GetSecretValueCommand({ SecretId: secretId }))).SecretString);
  });

  it('honours presigned URLs until they expire, for exactly the key they name', async () => {
    const s3 = s3With(own());
    const url = await getSignedUrl(s3, new GetObjectCommand({ Bucket: bucket, Key: 'auth/x.txt' }), { expiresIn: 2 });
    assert.equal(await (await fetch(url)).text(), 'x');
    assert.equal((await fetch(url.replace('auth/x.txt', 'auth/y.txt'))).status, 403);
    const put = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: 'auth/out.json' }), { expiresIn: 60 });
    assert.equal((await fetch(put, { method: 'PUT', body: '{"ok":true}' })).status, 200);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const expired = await fetch(url);
    assert.equal(expired.status, 403);
    assert.match(await expired.text(), /Request has expired/);
  });

  it('answers 412 to GetObject and HeadObject whose If-Match names another version of the object', async () => {
    const s3 = s3With(own());
    const first = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'auth/manifest.json', Body: '{"v":1}' }));
    const ok = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'auth/manifest.json', IfMatch: first.ETag }));
    assert.equal(await ok.Body!.transformToString(), '{"v":1}');
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'auth/manifest.json', Body: '{"v":2}' }));
    await assert.rejects(
      s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'auth/manifest.json', IfMatch: first.ETag })),
      (e: Error & { $metadata?: { httpStatusCode?: number } }) => {
        assert.equal(e.$metadata?.httpStatusCode, 412);
        assert.equal(e.name, 'PreconditionFailed');
        return true;
      },
    );
    await assert.rejects(
      s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'auth/manifest.json', IfMatch: first.ETag })),
      (e: Error & { $metadata?: { httpStatusCode?: number } }) => {
        assert.equal(e.$metadata?.httpStatusCode, 412);
        return true;
      },
    );
    const star = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'auth/manifest.json', IfMatch: '*' }));
    assert.notEqual(star.ETag, first.ETag);
  });

  it('lists a waiting approval from the CLI while the runtime runs, and answers HEAD on its link with 405', async () => {
    const execution = rt.startExecution(PROBE_PIPELINE, { config: ProbeConfig.parse({ items: [2, 3], approve: true }) });
    const link = approvalLinkIn(readEml(await nextEmail(rt)).text);
    await waitFor('the run to wait at the gate', () => rt.pendingCallbacks(execution.executionArn) === 1);
    // HEAD on the approval route: 405 naming the methods it takes, as on AWS (the route goes to the function).
    const head = await fetch(link, { method: 'HEAD' });
    assert.equal(head.status, 405);
    assert.equal(head.headers.get('allow'), 'GET, POST');
    // Asynchronously: the runtime in this process answers the CLI's requests meanwhile.
    const cli = await promisify(execFile)(
      join(REPO_ROOT, 'node_modules/.bin/node'),
      ['--import', 'tsx', join(REPO_ROOT, 'infra/cli.ts'), 'approvals', 'list', '--data-dir', rt.dataDir],
      // Another process: none of this one's credentials or endpoints.
      { cwd: REPO_ROOT, encoding: 'utf8', timeout: 120_000, env: { PATH: process.env.PATH, HOME: process.env.HOME } },
    );
    assert.doesNotMatch(cli.stderr, /in use by another local runtime/);
    assert.match(cli.stdout, /^\S+\s+probe\s+.*PENDING/m, cli.stdout);
  });
});
