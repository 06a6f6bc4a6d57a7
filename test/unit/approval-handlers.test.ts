import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { Readable } from 'node:stream';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetObjectCommand, NoSuchKey, S3Client, S3ServiceException, type GetObjectCommandOutput } from '@aws-sdk/client-s3';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SendEmailCommand, SESv2Client } from '@aws-sdk/client-sesv2';
import { SendTaskFailureCommand, SendTaskSuccessCommand, SFNClient, SFNServiceException, TaskTimedOut } from '@aws-sdk/client-sfn';
import { DynamoDBDocumentClient, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { approvalDigest, csrfToken, decisionCode, linkSignature, parseApprovalHttpEvent } from '#shared/approval.ts';
import { approvalPage, decideApproval, openApproval, type ApprovalDesk, type OpenedApproval } from '#shared/approval-gate.ts';
import { PAGE_SCRIPT } from '#shared/approval-page.ts';
import { ConfigError, NotFoundError } from '#shared/errors.ts';
import { sha256Hex } from '#shared/json.ts';
import { captureOutput, type OutputCapture } from '../support/output.ts';

// Handlers read their environment at import time.
const SIGNING_KEY = 'test-signing-key-0123456789abcdef';
const BASE_URL = 'https://approve.example.com';
Object.assign(process.env, {
  TABLE_NAME: 'frontier-table',
  SIGNING_SECRET_ARN: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:approval-signing',
  SENDER_EMAIL: 'gate@example.com',
  APPROVAL_BASE_URL: BASE_URL,
  BUCKET_NAME: 'frontier-bucket',
  APPROVER_EMAIL: 'owner@example.com',
  // The default: deciding needs a signed-in member of the approvers group.
  APPROVAL_SIGN_IN: 'cognito',
  APPROVAL_AUTH_DOMAIN: 'https://approvals-abc.auth.us-east-1.amazoncognito.com',
  APPROVAL_CLIENT_ID: 'approval-client-1',
  APPROVAL_GROUP: 'approvers',
});

/** The claims API Gateway's JWT authorizer hands over for a member of the approvers group (arrays flattened as it does). */
const APPROVER_CLAIMS: Record<string, string> = {
  sub: '7d0c7b1e-1111-4c2a-9d1e-000000000001',
  'cognito:username': 'alice',
  email: 'alice@example.com',
  'cognito:groups': '[approvers]',
  token_use: 'id',
  aud: 'approval-client-1',
};

const ddb = mockClient(DynamoDBDocumentClient);
const sfn = mockClient(SFNClient);
const ses = mockClient(SESv2Client);
const secrets = mockClient(SecretsManagerClient);
const s3 = mockClient(S3Client);
secrets.on(GetSecretValueCommand).resolves({ SecretString: SIGNING_KEY });

const { handler: requestApproval } = await import('#functions/platform/approval-request/handler.ts');
const { handler: approvalApi } = await import('#functions/platform/approval-api/handler.ts');

const TASK_TOKEN = 'AQCEAAAAKgAAAAMAAAAAAAAAAbTaskTokenThatMustStaySecret+/=9f8e7d6c5b4a';

const approvalEvent = {
  taskToken: TASK_TOKEN,
  executionId: 'arn:aws:states:us-east-1:123456789012:execution:rlhf:run-42',
  pipeline: 'rlhf',
  title: 'Promote <policy> "v7"',
  details: { winRate: 0.62, note: '<script>alert("x")</script>', smoke: true },
  timeoutSeconds: 3600,
};

/**
 * Everything written to the console or to stdout and stderr during the tests, to scan for the
 * token: the handlers log through Powertools' Logger, which writes to the streams.
 */
const consoleLines: string[] = [];
const originalConsole = { ...console };
let output: OutputCapture | undefined;
before(() => {
  for (const level of ['log', 'info', 'warn', 'error', 'debug'] as const) {
    console[level] = (...args: unknown[]) => {
      consoleLines.push(args.map((arg) => (typeof arg === 'string' ? arg : inspect(arg, { depth: 10 }))).join(' '));
    };
  }
  output = captureOutput();
});
after(() => {
  Object.assign(console, originalConsole);
  output?.restore();
});
const logged = (): string[] => [...consoleLines, ...(output?.text().split('\n') ?? [])];

/** The bucket as the S3 mock serves it: key -> bytes; a missing key is NoSuchKey, as S3 answers. */
const objects = new Map<string, Buffer>();
function serveObjects(): void {
  s3.on(GetObjectCommand).callsFake((input: { Bucket: string; Key: string }) => {
    const bytes = input.Bucket === 'frontier-bucket' ? objects.get(input.Key) : undefined;
    if (!bytes) throw new NoSuchKey({ message: 'The specified key does not exist.', $metadata: {} });
    return { Body: Readable.from([bytes]) as unknown as GetObjectCommandOutput['Body'] };
  });
}

beforeEach(() => {
  ddb.reset();
  sfn.reset();
  ses.reset();
  s3.reset();
  objects.clear();
  serveObjects();
  ddb.on(PutCommand).resolves({});
  ddb.on(UpdateCommand).resolves({});
  sfn.on(SendTaskSuccessCommand).resolves({});
  sfn.on(SendTaskFailureCommand).resolves({});
  ses.on(SendEmailCommand).resolves({ MessageId: 'm-1' });
});

/** Undoes quoted-printable soft breaks and escapes so the message reads as sent text. */
function decodeQuotedPrintable(mime: string): string {
  const latin1 = mime.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  return Buffer.from(latin1, 'latin1').toString('utf8');
}

/** The Subject header, unfolded, with its RFC 2047 encoded words decoded. */
function subjectOf(mime: string): string {
  const headers = mime.slice(0, mime.indexOf('\r\n\r\n')).replace(/\r\n[ \t]/g, ' ');
  const raw = headers.match(/^Subject: (.*)$/m)![1]!;
  return raw.replace(/=\?UTF-8\?Q\?(.*?)\?=\s*/gi, (_, text: string) => decodeQuotedPrintable(text.replaceAll('_', ' ')));
}

/** Runs the request handler and returns what it stored and sent. */
async function requestAndCapture(event: object = approvalEvent) {
  const result = await requestApproval(event);
  const put = ddb.commandCalls(PutCommand).at(-1)!.args[0].input;
  const email = ses.commandCalls(SendEmailCommand).at(-1)!.args[0].input;
  const mime = Buffer.from(email.Content!.Raw!.Data!).toString('utf8');
  const decoded = decodeQuotedPrintable(mime);
  const link = decoded.match(/https:\/\/approve\.example\.com\/approvals\/[^\s"<]+/)![0].replaceAll('&amp;', '&');
  ddb.on(GetCommand).resolves({ Item: put.Item });
  return { result, put, email, mime, decoded, link: new URL(link), item: put.Item! };
}

function httpEvent(method: string, url: URL, body?: string, isBase64Encoded = false, claims?: Record<string, string>): APIGatewayProxyEventV2 {
  const id = url.pathname.split('/').at(-1)!;
  return {
    version: '2.0',
    routeKey: `${method} /approvals/{id}`,
    rawPath: url.pathname,
    rawQueryString: url.search.slice(1),
    headers: { host: url.host, 'user-agent': 'Mozilla/5.0 (test)', ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
    queryStringParameters: Object.fromEntries(url.searchParams),
    pathParameters: { id },
    requestContext: {
      accountId: '123456789012',
      apiId: 'api',
      domainName: url.host,
      domainPrefix: 'approve',
      http: { method, path: url.pathname, protocol: 'HTTP/1.1', sourceIp: '203.0.113.9', userAgent: 'Mozilla/5.0 (test)' },
      requestId: 'r-1',
      routeKey: `${method} /approvals/{id}`,
      stage: '$default',
      time: '01/Jan/2027:00:00:00 +0000',
      timeEpoch: 1_798_761_600_000,
      ...(claims ? { authorizer: { jwt: { claims, scopes: null } } } : {}),
    },
    body,
    isBase64Encoded,
  } as APIGatewayProxyEventV2;
}

const bodyOf = (response: APIGatewayProxyStructuredResultV2) => String(response.body);
const csrfOf = (html: string) => html.match(/name="csrf" value="([^"]+)"/)![1]!;

async function getPage(link: URL) {
  const response = await approvalApi(httpEvent('GET', link));
  return { response, html: bodyOf(response) };
}

/** POSTs a decision as the signed-in approver (the JWT authorizer's claims), unless `claims` says otherwise. */
async function post(link: URL, fields: Record<string, string>, base64 = false, claims: Record<string, string> | null = APPROVER_CLAIMS) {
  const body = new URLSearchParams(fields).toString();
  return approvalApi(httpEvent('POST', link, base64 ? Buffer.from(body).toString('base64') : body, base64, claims ?? undefined));
}

/** The page without its own script blocks (the settings and the hashed script), to look for anything else. */
const withoutOwnScripts = (html: string) =>
  html.replace(`<script>${PAGE_SCRIPT}</script>`, '').replace(/<script type="application\/json" id="approval-config">[^<]*<\/script>/, '');

function assertPageHeaders(response: APIGatewayProxyStructuredResultV2) {
  const headers = response.headers ?? {};
  const csp = String(headers['Content-Security-Policy']);
  assert.equal(headers['Content-Type'], 'text/html; charset=utf-8');
  assert.equal(headers['Cache-Control'], 'no-store');
  assert.equal(headers['Referrer-Policy'], 'no-referrer');
  assert.equal(headers['X-Frame-Options'], 'DENY');
  // One script, allowed by its hash; nothing inline by permission, nothing evaluated.
  assert.match(csp, /script-src 'sha256-[A-Za-z0-9+/]+=*'(;|$)/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  assert.match(csp, /default-src 'none'/);
}

describe('approval-request handler', () => {
  it('stores the request under a random id with a conditional put', async () => {
    const before = Math.floor(Date.now() / 1000);
    const { result, put, item } = await requestAndCapture();
    assert.match(result.approvalId, /^[A-Za-z0-9_-]{22}$/);
    assert.equal(put.TableName, 'frontier-table');
    assert.equal(put.ConditionExpression, 'attribute_not_exists(pk)');
    assert.equal(item.pk, `APPROVAL#${result.approvalId}`);
    assert.equal(item.sk, 'APPROVAL');
    assert.equal(item.token, TASK_TOKEN);
    assert.equal(item.state, 'PENDING');
    assert.match(item.digest, /^[0-9a-f]{64}$/);
    assert.deepEqual(item.recipients, ['owner@example.com']);
    const exp = Math.floor(Date.parse(item.expiresAtIso) / 1000);
    assert.ok(exp >= before + 3600 && exp <= before + 3601);
    assert.equal(item.expiresAt, exp + 30 * 86400);
  });

  it('emails a signed link to the approver through SES', async () => {
    const { result, email, mime, decoded, link, item } = await requestAndCapture();
    assert.equal(email.FromEmailAddress, 'gate@example.com');
    assert.deepEqual(email.Destination?.ToAddresses, ['owner@example.com']);
    assert.equal(subjectOf(mime), 'Approval needed: Promote <policy> "v7"');
    assert.match(mime, /^To: owner@example\.com\r$/m);
    assert.equal(link.origin + link.pathname, `${BASE_URL}/approvals/${result.approvalId}`);
    const exp = Math.floor(Date.parse(item.expiresAtIso) / 1000);
    assert.equal(link.searchParams.get('exp'), String(exp));
    assert.equal(link.searchParams.get('sig'), linkSignature(SIGNING_KEY, result.approvalId, exp));
    assert.ok(decoded.includes('Note: <script>alert("x")</script>'), 'text part lists the details, keys as words');
    assert.ok(decoded.includes('Win rate: 0.62'), 'camelCase keys as words');
    assert.ok(decoded.includes('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;'), 'html part escapes them');
  });

  it('sends to the recipients the request names', async () => {
    const { email, item } = await requestAndCapture({ ...approvalEvent, recipients: ['a@example.com', 'b@example.com'] });
    assert.deepEqual(email.Destination?.ToAddresses, ['a@example.com', 'b@example.com']);
    assert.deepEqual(item.recipients, ['a@example.com', 'b@example.com']);
  });

  it('never puts the task token in the link, the email or the logs', async () => {
    const { link, mime, decoded, email } = await requestAndCapture();
    const page = await getPage(link);
    await post(link, { decision: 'approve', csrf: csrfOf(page.html) });
    const fragments = [TASK_TOKEN, TASK_TOKEN.slice(0, 24), TASK_TOKEN.slice(-24)];
    const emailInput = JSON.stringify({ ...email, Content: undefined });
    for (const fragment of fragments) {
      for (const [where, text] of Object.entries({ link: link.href, mime, decoded, emailInput, page: page.html, logs: logged().join('\n') })) {
        assert.ok(!text.includes(fragment), `token fragment found in ${where}`);
      }
    }
    assert.ok(
      logged().some((line) => line.includes('approval requested')),
      'the handler logs something to scan',
    );
  });

  it('rejects a malformed request naming the field, before storing anything', async () => {
    await assert.rejects(requestApproval({ ...approvalEvent, timeoutSeconds: 'soon' }), /approval request\.timeoutSeconds/);
    assert.equal(ddb.commandCalls(PutCommand).length, 0);
    assert.equal(ses.commandCalls(SendEmailCommand).length, 0);
  });

  it('fetches the signing secret once per container', async () => {
    const warm = await requestAndCapture();
    await getPage(warm.link);
    const loads = secrets.commandCalls(GetSecretValueCommand).length;
    assert.equal(secrets.commandCalls(GetSecretValueCommand)[0]!.args[0].input.SecretId, process.env.SIGNING_SECRET_ARN);
    const { link } = await requestAndCapture();
    await getPage(link);
    await requestAndCapture();
    assert.equal(secrets.commandCalls(GetSecretValueCommand).length, loads);
  });
});

describe('approval-api GET', () => {
  it('shows what is to be approved, escaped, with two buttons and decides nothing', async () => {
    const { link, result } = await requestAndCapture();
    const { response, html } = await getPage(link);
    assert.equal(response.statusCode, 200);
    assertPageHeaders(response);
    assert.ok(html.includes('Promote &lt;policy&gt; &quot;v7&quot;'));
    assert.ok(html.includes('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;'));
    assert.ok(!withoutOwnScripts(html).includes('<script'));
    assert.ok(html.includes('rlhf'));
    assert.match(html, /id="state">PENDING</);
    assert.match(html, /<button id="approve"/);
    assert.match(html, /<button id="reject"/);
    assert.match(html, /<form id="decision-form" method="post" action="[^"]*\?exp=\d+&amp;sig=[^"]+" hidden>/);
    const action = html.match(/action="([^"]+)"/)![1]!.replaceAll('&amp;', '&');
    assert.equal(new URL(action, link).href, link.href, 'the form posts back to the same URL');
    assert.equal(csrfOf(html).length, 43);
    const get = ddb.commandCalls(GetCommand)[0]!.args[0].input;
    assert.deepEqual(get.Key, { pk: `APPROVAL#${result.approvalId}`, sk: 'APPROVAL' });
    assert.equal(get.ConsistentRead, true);
    assert.equal(ddb.commandCalls(UpdateCommand).length, 0);
    assert.equal(sfn.calls().length, 0);
  });

  it('shows who decided, when and what, without buttons, once decided', async () => {
    const { link, item } = await requestAndCapture();
    ddb.on(GetCommand).resolves({
      Item: {
        ...item,
        state: 'APPROVED',
        decidedAt: '2027-01-01T10:00:00.000Z',
        decidedBy: { sourceIp: '198.51.100.4', userAgent: 'Firefox', via: 'sign-in', sub: 'sub-1', username: 'alice', email: 'alice@example.com' },
        comment: 'looks <fine>',
      },
    });
    const { response, html } = await getPage(link);
    assert.equal(response.statusCode, 200);
    assert.match(html, /id="state">APPROVED</);
    assert.match(html, /Approved by alice \(alice@example\.com\) at <time id="decided-at" datetime="2027-01-01T10:00:00\.000Z">.*2027-01-01 10:00 UTC/);
    assert.ok(html.includes('looks &lt;fine&gt;'));
    assert.ok(!html.includes('id="approve"') && !html.includes('name="csrf"'));

    // An item decided before sign-in existed: only the address and browser are known.
    ddb.on(GetCommand).resolves({
      Item: { ...item, state: 'REJECTED', decidedAt: '2027-01-01T10:00:00.000Z', decidedBy: { sourceIp: '198.51.100.4', userAgent: 'Firefox' } },
    });
    assert.match((await getPage(link)).html, /Rejected from 198\.51\.100\.4 \(Firefox\) at <time/);
  });

  it('offers sign-in to the approvers group: the settings for the page script, the Cognito domain allowed to connect', async () => {
    const { link } = await requestAndCapture();
    const { response, html } = await getPage(link);
    const config = JSON.parse(html.match(/<script type="application\/json" id="approval-config">([^<]*)<\/script>/)![1]!);
    assert.deepEqual(config.signIn, {
      mode: 'cognito',
      domain: 'https://approvals-abc.auth.us-east-1.amazoncognito.com',
      clientId: 'approval-client-1',
      redirectUri: `${BASE_URL}/approvals`,
      scopes: ['openid', 'email', 'profile'],
      group: 'approvers',
    });
    assert.match(String(response.headers?.['Content-Security-Policy']), /connect-src 'self' https:\/\/approvals-abc\.auth\.us-east-1\.amazoncognito\.com;/);
    assert.match(html, /<button id="sign-in" type="button">Sign in to decide<\/button>/);
    assert.match(html, /member of the <strong>approvers<\/strong> group/);
    assert.ok(!html.includes('id="code-input"'), 'no code to type with sign-in');
  });

  it('serves the page sign-in returns to at GET /approvals, which decides nothing', async () => {
    const response = await approvalApi({
      ...httpEvent('GET', new URL(`${BASE_URL}/approvals?code=abc&state=xyz`)),
      pathParameters: undefined,
      routeKey: 'GET /approvals',
    });
    assert.equal(response.statusCode, 200);
    assertPageHeaders(response);
    assert.match(bodyOf(response), /<p id="sign-in-return" role="status">/);
    assert.equal(ddb.calls().length, 0);
    assert.equal(sfn.calls().length, 0);
  });

  it('answers a forged signature, a tampered id and an unknown id with 403', async () => {
    const { link } = await requestAndCapture();
    const forged = new URL(link);
    forged.searchParams.set('sig', linkSignature('some-other-key-of-length', forged.pathname.split('/').at(-1)!, Number(link.searchParams.get('exp'))));
    const tampered = new URL(link);
    tampered.pathname = '/approvals/BBBBBBBBBBBBBBBBBBBBBB';
    const extended = new URL(link);
    extended.searchParams.set('exp', String(Number(link.searchParams.get('exp')) + 86400));
    for (const bad of [forged, tampered, extended]) {
      const { response, html } = await getPage(bad);
      assert.equal(response.statusCode, 403, bad.href);
      assertPageHeaders(response);
      assert.match(html, /This link is not valid/);
    }
    assert.equal(ddb.commandCalls(GetCommand).length, 0, 'no lookup for a bad signature');

    const unknownId = 'CCCCCCCCCCCCCCCCCCCCCC';
    const exp = Math.floor(Date.now() / 1000) + 60;
    ddb.on(GetCommand).resolves({});
    const unknown = new URL(`${BASE_URL}/approvals/${unknownId}?exp=${exp}&sig=${linkSignature(SIGNING_KEY, unknownId, exp)}`);
    const { response } = await getPage(unknown);
    assert.equal(response.statusCode, 403);
  });

  it('answers an expired link with 410 and changes nothing', async () => {
    const { result } = await requestAndCapture();
    const exp = Math.floor(Date.now() / 1000) - 5;
    const expired = new URL(`${BASE_URL}/approvals/${result.approvalId}?exp=${exp}&sig=${linkSignature(SIGNING_KEY, result.approvalId, exp)}`);
    const { response, html } = await getPage(expired);
    assert.equal(response.statusCode, 410);
    assertPageHeaders(response);
    assert.match(html, /This link has expired/);
    const posted = await post(expired, { decision: 'approve', csrf: 'whatever' });
    assert.equal(posted.statusCode, 410);
    assert.equal(ddb.commandCalls(UpdateCommand).length, 0);
    assert.equal(sfn.calls().length, 0);
  });

  it('refuses other methods with 405', async () => {
    const { link } = await requestAndCapture();
    const response = await approvalApi(httpEvent('DELETE', link));
    assert.equal(response.statusCode, 405);
  });
});

describe('approval-api POST', () => {
  it('approves once: conditional update, then SendTaskSuccess with the stored token', async () => {
    const { link, result } = await requestAndCapture();
    const { html } = await getPage(link);
    const response = await post(link, { decision: 'approve', csrf: csrfOf(html), comment: 'ship it' });
    assert.equal(response.statusCode, 200);
    assertPageHeaders(response);
    assert.match(bodyOf(response), /<h1>Approved<\/h1>/);

    const update = ddb.commandCalls(UpdateCommand)[0]!.args[0].input;
    assert.deepEqual(update.Key, { pk: `APPROVAL#${result.approvalId}`, sk: 'APPROVAL' });
    assert.equal(update.ConditionExpression, '#state = :pending');
    assert.equal(update.ExpressionAttributeValues?.[':pending'], 'PENDING');
    assert.equal(update.ExpressionAttributeValues?.[':state'], 'APPROVED');
    assert.deepEqual(update.ExpressionAttributeValues?.[':decidedBy'], {
      sourceIp: '203.0.113.9',
      userAgent: 'Mozilla/5.0 (test)',
      via: 'sign-in',
      sub: APPROVER_CLAIMS.sub,
      username: 'alice',
      email: 'alice@example.com',
    });
    assert.equal(update.ExpressionAttributeValues?.[':comment'], 'ship it');

    const calls = sfn.commandCalls(SendTaskSuccessCommand);
    assert.equal(calls.length, 1);
    assert.equal(sfn.commandCalls(SendTaskFailureCommand).length, 0);
    const input = calls[0]!.args[0].input;
    assert.equal(input.taskToken, TASK_TOKEN);
    const output = JSON.parse(input.output!);
    assert.deepEqual(output, {
      approved: true,
      approvalId: result.approvalId,
      decidedAt: update.ExpressionAttributeValues?.[':decidedAt'],
      comment: 'ship it',
    });
  });

  it('rejects with SendTaskFailure named ApprovalRejected (base64-encoded body)', async () => {
    const { link, result } = await requestAndCapture();
    const { html } = await getPage(link);
    const response = await post(link, { decision: 'reject', csrf: csrfOf(html), comment: 'win rate too low' }, true);
    assert.equal(response.statusCode, 200);
    assert.match(bodyOf(response), /<h1>Rejected<\/h1>/);
    assert.equal(ddb.commandCalls(UpdateCommand)[0]!.args[0].input.ExpressionAttributeValues?.[':state'], 'REJECTED');
    assert.equal(sfn.commandCalls(SendTaskSuccessCommand).length, 0);
    const input = sfn.commandCalls(SendTaskFailureCommand)[0]!.args[0].input;
    assert.equal(input.taskToken, TASK_TOKEN);
    assert.equal(input.error, 'ApprovalRejected');
    assert.ok(input.cause!.length < 1000);
    assert.deepEqual(JSON.parse(input.cause!), {
      approved: false,
      approvalId: result.approvalId,
      decidedAt: JSON.parse(input.cause!).decidedAt,
      comment: 'win rate too low',
    });
  });

  it('answers a replayed POST with 409 and sends nothing', async () => {
    const { link } = await requestAndCapture();
    const { html } = await getPage(link);
    ddb.on(UpdateCommand).rejects(new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} }));
    const response = await post(link, { decision: 'approve', csrf: csrfOf(html) });
    assert.equal(response.statusCode, 409);
    assert.match(bodyOf(response), /already decided/);
    assert.equal(sfn.calls().length, 0);
  });

  it('answers a POST on a decided approval with 409 without writing', async () => {
    const { link, item } = await requestAndCapture();
    const { html } = await getPage(link);
    ddb.on(GetCommand).resolves({ Item: { ...item, state: 'REJECTED', decidedAt: '2027-01-01T00:00:00.000Z' } });
    const response = await post(link, { decision: 'approve', csrf: csrfOf(html) });
    assert.equal(response.statusCode, 409);
    assert.equal(ddb.commandCalls(UpdateCommand).length, 0);
    assert.equal(sfn.calls().length, 0);
  });

  it('answers a missing or wrong anti-forgery token with 403 and writes nothing', async () => {
    const { link, result } = await requestAndCapture();
    const exp = Number(link.searchParams.get('exp'));
    // The link's own signature is not the form token.
    const expected: Array<[string, number]> = [
      ['', 400],
      ['x'.repeat(43), 403],
      [linkSignature(SIGNING_KEY, result.approvalId, exp), 403],
    ];
    for (const [csrf, status] of expected) {
      const response = await post(link, { decision: 'approve', csrf });
      assert.equal(response.statusCode, status, `csrf ${JSON.stringify(csrf)}`);
    }
    const wrong = await post(link, { decision: 'approve', csrf: 'x'.repeat(43) });
    assert.equal(wrong.statusCode, 403);
    assert.match(bodyOf(wrong), /This link is not valid/);
    assert.equal(ddb.commandCalls(UpdateCommand).length, 0);
    assert.equal(sfn.calls().length, 0);
  });

  it('answers a bad form with 400 naming the field', async () => {
    const { link } = await requestAndCapture();
    const { html } = await getPage(link);
    const response = await post(link, { decision: 'approve', csrf: csrfOf(html), comment: 'x'.repeat(501) });
    assert.equal(response.statusCode, 400);
    assert.match(bodyOf(response), /form\.comment/);
    assert.equal(ddb.commandCalls(UpdateCommand).length, 0);
  });

  it('refuses a POST that reached it without a signed-in person (401) and changes nothing', async () => {
    const { link } = await requestAndCapture();
    const { html } = await getPage(link);
    const response = await post(link, { decision: 'approve', csrf: csrfOf(html) }, false, null);
    assert.equal(response.statusCode, 401);
    assertPageHeaders(response);
    assert.match(bodyOf(response), /<h1>Sign in to decide<\/h1>/);
    assert.equal(ddb.commandCalls(UpdateCommand).length, 0);
    assert.equal(sfn.calls().length, 0);
  });

  it('refuses a signed-in person outside the approvers group (403), naming them, and changes nothing', async () => {
    const { link } = await requestAndCapture();
    const { html } = await getPage(link);
    for (const groups of [undefined, '[players]', '[approvers-old admins]']) {
      const claims: Record<string, string> = { ...APPROVER_CLAIMS, 'cognito:username': 'mallory' };
      if (groups === undefined) delete claims['cognito:groups'];
      else claims['cognito:groups'] = groups;
      const response = await post(link, { decision: 'approve', csrf: csrfOf(html) }, false, claims);
      assert.equal(response.statusCode, 403, String(groups));
      assert.match(bodyOf(response), /You are not an approver/);
      assert.match(bodyOf(response), /signed in as mallory, who is not a member of the approvers group/);
    }
    assert.equal(ddb.commandCalls(UpdateCommand).length, 0);
    assert.equal(sfn.calls().length, 0);
  });

  it('reads the groups claim as API Gateway flattens it, among other groups', async () => {
    const { link } = await requestAndCapture();
    const { html } = await getPage(link);
    const response = await post(link, { decision: 'reject', csrf: csrfOf(html) }, false, { ...APPROVER_CLAIMS, 'cognito:groups': '[admins approvers]' });
    assert.equal(response.statusCode, 200);
    assert.equal(sfn.commandCalls(SendTaskFailureCommand).length, 1);
  });

  it('says the run no longer waits when the task timed out, keeping the decision', async () => {
    const { link } = await requestAndCapture();
    const { html } = await getPage(link);
    sfn.on(SendTaskSuccessCommand).rejects(new TaskTimedOut({ message: 'Task Timed Out', $metadata: {} }));
    const response = await post(link, { decision: 'approve', csrf: csrfOf(html) });
    assert.equal(response.statusCode, 409);
    assert.match(bodyOf(response), /no longer waiting/);
    assert.equal(ddb.commandCalls(UpdateCommand).length, 1, 'the decision stays recorded');
  });

  it('puts the approval back to PENDING when Step Functions fails for another reason', async () => {
    const { link } = await requestAndCapture();
    const { html } = await getPage(link);
    sfn.on(SendTaskSuccessCommand).rejects(new SFNServiceException({ name: 'ServiceUnavailable', $fault: 'server', message: 'try later', $metadata: {} }));
    const response = await post(link, { decision: 'approve', csrf: csrfOf(html) });
    assert.equal(response.statusCode, 503);
    const updates = ddb.commandCalls(UpdateCommand).map((call) => call.args[0].input);
    assert.equal(updates.length, 2);
    const [decide, revert] = updates;
    assert.equal(revert!.ConditionExpression, '#state = :state AND #decidedAt = :decidedAt');
    assert.equal(revert!.ExpressionAttributeValues?.[':pending'], 'PENDING');
    assert.equal(revert!.ExpressionAttributeValues?.[':decidedAt'], decide!.ExpressionAttributeValues?.[':decidedAt']);
  });
});

// ---- items documents -------------------------------------------------------------------

const ITEMS_KEY = 'approvals/molecules/5d41402abc4b2a76b9719d911017c592.json';
const ITEMS_URI = `s3://frontier-bucket/${ITEMS_KEY}`;
const DRAWING =
  "<?xml version='1.0' encoding='iso-8859-1'?>\n<svg xmlns='http://www.w3.org/2000/svg' width='30' height='20'><script>alert(1)</script><text y='15'>OH</text></svg>";
const itemsDocument = {
  caption: 'Round 1',
  columns: [
    { key: 'smiles', label: 'SMILES' },
    { key: 'predicted', label: 'Predicted gap' },
    { key: 'arm', label: 'Arm' },
  ],
  items: [
    { values: { smiles: 'c1ccccc1O', predicted: '1.42 ± 0.10 eV', arm: 'exploit' }, svg: DRAWING },
    { values: { smiles: 'CC(=O)<b>', predicted: '2.01 ± 0.30 eV', arm: 'random' }, svg: DRAWING },
  ],
};
const itemsEvent = { ...approvalEvent, itemsUri: ITEMS_URI };

function putItems(doc: unknown = itemsDocument): Buffer {
  const bytes = Buffer.from(JSON.stringify(doc), 'utf8');
  objects.set(ITEMS_KEY, bytes);
  return bytes;
}

const rowIndexes = (html: string) => [...html.matchAll(/<tr data-item-index="(\d+)">/g)].map((m) => Number(m[1]));

describe('approval-request handler with an items document', () => {
  it('reads the document, stores its URI and sha256 (not the items) and binds the digest to them', async () => {
    const bytes = putItems();
    const { item } = await requestAndCapture(itemsEvent);
    const get = s3.commandCalls(GetObjectCommand);
    assert.equal(get.length, 1);
    assert.deepEqual(get[0]!.args[0].input, { Bucket: 'frontier-bucket', Key: ITEMS_KEY });
    assert.equal(item.itemsUri, ITEMS_URI);
    assert.equal(item.itemsSha256, sha256Hex(bytes));
    assert.equal(item.digest, approvalDigest({ ...approvalEvent, itemsUri: ITEMS_URI, itemsSha256: sha256Hex(bytes) }));
    assert.notEqual(item.digest, approvalDigest(approvalEvent));
    assert.ok(!JSON.stringify(item).includes('c1ccccc1O') && !JSON.stringify(item).includes('<svg'), 'the item holds no items');
  });

  it('lists the items in the email: a line each in the text part, a table with image drawings in the HTML part', async () => {
    putItems();
    const { decoded } = await requestAndCapture(itemsEvent);
    assert.ok(decoded.includes('Items (2): Round 1'));
    assert.ok(decoded.includes('  1. SMILES: c1ccccc1O | Predicted gap: 1.42 ± 0.10 eV | Arm: exploit'));
    assert.ok(decoded.includes('  2. SMILES: CC(=O)<b> | Predicted gap: 2.01 ± 0.30 eV | Arm: random'));
    const html = decoded.slice(decoded.indexOf('<!doctype html>'));
    assert.deepEqual(rowIndexes(html), [0, 1]);
    assert.ok(html.includes('CC(=3DO)&lt;b&gt;') || html.includes('CC(=O)&lt;b&gt;'));
    const images = [...html.matchAll(/<img alt="Drawing of item \d: [^"]+" src="data:image\/svg\+xml;base64,([A-Za-z0-9+/=]+)"/g)];
    assert.equal(images.length, 2);
    assert.equal(Buffer.from(images[0]![1]!, 'base64').toString('ascii'), DRAWING);
    assert.ok(!html.includes('<svg') && !html.includes('<script'));
  });

  it('treats a null itemsUri as no items', async () => {
    const { item, decoded } = await requestAndCapture({ ...approvalEvent, itemsUri: null });
    assert.equal(s3.commandCalls(GetObjectCommand).length, 0);
    assert.equal('itemsUri' in item, false);
    assert.equal(item.digest, approvalDigest(approvalEvent));
    assert.ok(!decoded.includes('Items ('));
  });

  it('refuses a URI outside approvals/ of the bucket before reading, storing or sending anything', async () => {
    for (const uri of ['s3://frontier-bucket/runs/x.json', 's3://someone-elses-bucket/approvals/x.json']) {
      await assert.rejects(requestApproval({ ...approvalEvent, itemsUri: uri }), (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.field, 'itemsUri');
        assert.ok(error.message.includes(uri));
        return true;
      });
    }
    assert.equal(s3.commandCalls(GetObjectCommand).length, 0);
    assert.equal(ddb.commandCalls(PutCommand).length, 0);
    assert.equal(ses.commandCalls(SendEmailCommand).length, 0);
  });

  it('fails with NotFoundError naming the URI when the document is not there, storing nothing', async () => {
    await assert.rejects(requestApproval(itemsEvent), (error: unknown) => {
      assert.ok(error instanceof NotFoundError);
      assert.equal(error.name, 'NotFoundError');
      assert.match(error.message, new RegExp(`${ITEMS_URI.replaceAll('.', '\\.')} could not be read \\(NoSuchKey\\)`));
      return true;
    });
    assert.equal(ddb.commandCalls(PutCommand).length, 0);
    assert.equal(ses.commandCalls(SendEmailCommand).length, 0);
  });

  it('fails with ConfigError naming the field and value of a bad document, storing nothing', async () => {
    putItems({ ...itemsDocument, items: [{ values: { smiles: 'C', gap: 1.5 } }] });
    await assert.rejects(requestApproval(itemsEvent), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.equal(error.field, 'approval items.items.0.values.gap');
      assert.match(error.message, /is not a column.*got 1\.5/);
      return true;
    });
    assert.equal(ddb.commandCalls(PutCommand).length, 0);
    assert.equal(ses.commandCalls(SendEmailCommand).length, 0);
  });
});

describe('approval-api GET with an items document', () => {
  async function waitingWithItems() {
    serveObjects();
    putItems();
    const captured = await requestAndCapture(itemsEvent);
    s3.resetHistory();
    return captured;
  }

  it('reads the document as the page renders and shows table#items, one row per item, drawings as images', async () => {
    const { link } = await waitingWithItems();
    const { response, html } = await getPage(link);
    assert.equal(response.statusCode, 200);
    assertPageHeaders(response);
    assert.match(String(response.headers?.['Content-Security-Policy']), /img-src data:/);
    assert.deepEqual(
      s3.commandCalls(GetObjectCommand).map((call) => call.args[0].input),
      [{ Bucket: 'frontier-bucket', Key: ITEMS_KEY }],
    );
    assert.match(html, /<table id="items" class="items">/);
    assert.deepEqual(rowIndexes(html), [0, 1]);
    assert.ok(html.includes('<td data-column="smiles">CC(=O)&lt;b&gt;</td>'));
    assert.equal((html.match(/<img alt="[^"]+" src="data:image\/svg\+xml;base64,/g) ?? []).length, 2);
    assert.ok(!html.includes('<svg') && !withoutOwnScripts(html).includes('<script'));
    assert.match(html, /<button id="approve"/);
  });

  it('says the document is gone when S3 has no such key, or answers AccessDenied (its answer without ListBucket)', async () => {
    for (const error of [
      new NoSuchKey({ message: 'The specified key does not exist.', $metadata: {} }),
      new S3ServiceException({ name: 'AccessDenied', $fault: 'client', message: 'Access Denied', $metadata: {} }),
    ]) {
      const { link } = await waitingWithItems();
      s3.on(GetObjectCommand).rejects(error);
      const { response, html } = await getPage(link);
      assert.equal(response.statusCode, 200, error.name);
      assert.match(
        html,
        /<p class="notice" id="items-notice">The items of this approval cannot be shown: their document <code id="items-uri">s3:\/\/frontier-bucket\/approvals\/[^<]+<\/code> is gone/,
      );
      assert.ok(!html.includes('id="items"'));
      assert.match(html, /id="state">PENDING</);
      assert.match(html, /<button id="reject"/);
    }
  });

  it('says the document changed when its bytes are not those requested', async () => {
    const { link } = await waitingWithItems();
    putItems({ ...itemsDocument, items: itemsDocument.items.slice(1) });
    const { response, html } = await getPage(link);
    assert.equal(response.statusCode, 200);
    assert.match(html, /has changed since the request was made/);
    assert.ok(!html.includes('id="items"'));
  });

  it('says the document could not be read on another S3 error, and still serves the page', async () => {
    const { link } = await waitingWithItems();
    s3.on(GetObjectCommand).rejects(new S3ServiceException({ name: 'SlowDown', $fault: 'server', message: 'Please reduce your request rate.', $metadata: {} }));
    const { response, html } = await getPage(link);
    assert.equal(response.statusCode, 200);
    assert.match(html, /could not be read \(SlowDown\)\. Reload the page/);
    assert.ok(logged().some((line) => line.includes('could not read the approval items document') && line.includes('SlowDown')));
  });

  it('decides without reading the document', async () => {
    const { link } = await waitingWithItems();
    const { html } = await getPage(link);
    s3.resetHistory();
    const response = await post(link, { decision: 'approve', csrf: csrfOf(html) });
    assert.equal(response.statusCode, 200);
    assert.equal(s3.commandCalls(GetObjectCommand).length, 0);
    assert.equal(sfn.commandCalls(SendTaskSuccessCommand).length, 1);
  });
});

// ---- the link-only mode ----------------------------------------------------------------------

describe('approval gate in the link-only mode (approvalSignIn=false)', () => {
  const desk: ApprovalDesk = {
    table: 'frontier-table',
    signingKey: () => Promise.resolve(SIGNING_KEY),
    signIn: { mode: 'link' },
  };

  async function opened(): Promise<{ link: URL; approval: OpenedApproval }> {
    const { link } = await requestAndCapture();
    const approval = await openApproval(desk, parseApprovalHttpEvent(httpEvent('GET', link)));
    assert.ok(!('refused' in approval));
    return { link, approval };
  }

  const decideAs = (link: URL, approval: OpenedApproval, fields: Record<string, string>, claims?: Record<string, string>) =>
    decideApproval(desk, parseApprovalHttpEvent(httpEvent('POST', link, new URLSearchParams(fields).toString(), false, claims)), approval);

  it('shows the short code to type, and a plain form that needs it', async () => {
    const { link, approval } = await opened();
    const exp = Number(link.searchParams.get('exp'));
    assert.equal(approval.code, decisionCode(SIGNING_KEY, approval.id, exp));
    assert.match(approval.code, /^[A-HJ-NP-Z2-9]{6}$/);
    const html = await approvalPage(desk, approval);
    assert.ok(html.includes(`<strong class="code" id="decision-code">${approval.code}</strong>`));
    assert.match(html, /<input id="code-input" name="code" required /);
    assert.match(html, /<form id="decision-form" method="post" action="[^"]+">/, 'the form is shown, not hidden');
    assert.ok(!html.includes('id="sign-in"'));
  });

  it('refuses a decision without the code, or with another, changing nothing', async () => {
    const { link, approval } = await opened();
    const csrf = csrfToken(SIGNING_KEY, approval.id, Number(link.searchParams.get('exp')));
    for (const code of [undefined, '', 'AAAAAA']) {
      const fields: Record<string, string> = { decision: 'approve', csrf, ...(code === undefined ? {} : { code }) };
      const result = await decideAs(link, approval, fields);
      assert.ok('refused' in result, String(code));
      assert.equal(result.refused, 'codeRequired', String(code));
    }
    assert.equal(ddb.commandCalls(UpdateCommand).length, 0);
    assert.equal(sfn.calls().length, 0);
  });

  it('decides with the code typed (any case, spaces ignored), recording how', async () => {
    const { link, approval } = await opened();
    const csrf = csrfToken(SIGNING_KEY, approval.id, Number(link.searchParams.get('exp')));
    const typed = ` ${approval.code.slice(0, 3).toLowerCase()} ${approval.code.slice(3)} `;
    const result = await decideAs(link, approval, { decision: 'approve', csrf, code: typed });
    assert.ok(!('refused' in result), JSON.stringify(result));
    assert.deepEqual(ddb.commandCalls(UpdateCommand)[0]!.args[0].input.ExpressionAttributeValues?.[':decidedBy'], {
      sourceIp: '203.0.113.9',
      userAgent: 'Mozilla/5.0 (test)',
      via: 'link-and-code',
    });
    assert.equal(sfn.commandCalls(SendTaskSuccessCommand).length, 1);
  });

  it('still refuses a wrong anti-forgery token before looking at the code', async () => {
    const { link, approval } = await opened();
    const result = await decideAs(link, approval, { decision: 'approve', csrf: 'x'.repeat(43), code: approval.code });
    assert.ok('refused' in result);
    assert.equal(result.refused, 'forged');
  });
});
