import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  approvalDigest,
  approvalItemsSchema,
  approvalSignInFromEnv,
  approverFromClaims,
  approvalItemsView,
  approvalLink,
  checkItemsUri,
  checkLink,
  composeMime,
  csrfToken,
  decisionCode,
  decisionOf,
  decisionUpdate,
  linkSignature,
  MAX_APPROVAL_ITEMS,
  MAX_ITEM_SVG_BYTES,
  memoizeAsync,
  newApprovalId,
  groupsOfClaim,
  newApprovalItem,
  normalizeDecisionCode,
  parseApprovalHttpEvent,
  parseApprovalItem,
  parseApprovalItems,
  parseApprovalRequest,
  parseDecisionForm,
  resolveRecipients,
  RETAIN_AFTER_EXPIRY_SECONDS,
  safeEqual,
  signingKeyFromSecret,
  taskResultFor,
  toApprovalView,
  type ApprovalItems,
  type ApprovalRequest,
} from '#shared/approval.ts';
import {
  CONTENT_SECURITY_POLICY,
  contentSecurityPolicy,
  escapeHtml,
  formAction,
  humanLabel,
  messageResponse,
  PAGE_SCRIPT,
  renderApprovalEmail,
  renderApprovalPage,
  svgDataUri,
  utcText,
} from '#shared/approval-page.ts';
import { ConfigError } from '#shared/errors.ts';
import { canonicalJson, sha256Hex } from '#shared/json.ts';

const KEY = `${'k'.repeat(16)}-test-signing-key`;
const ID = 'AAAAAAAAAAAAAAAAAAAAAA';
const NOW = 1_800_000_000;

/** A page without its own script blocks (the settings and the hashed script), to look for anything else. */
const withoutOwnScripts = (html: string) =>
  html.replace(`<script>${PAGE_SCRIPT}</script>`, '').replace(/<script type="application\/json" id="approval-config">[^<]*<\/script>/, '');

const request: ApprovalRequest = {
  taskToken: 'TOKEN-a1b2c3-secret-task-token-value',
  executionId: 'arn:aws:states:us-east-1:123456789012:execution:sm:run-1',
  pipeline: 'rlhf',
  title: 'Promote policy v7',
  details: { winRate: 0.62, model: 'policy-v7', smoke: false },
  timeoutSeconds: 3600,
};

describe('approval link signatures', () => {
  it('accepts a link it signed, before its expiry', () => {
    const sig = linkSignature(KEY, ID, NOW + 60);
    assert.deepEqual(checkLink({ key: KEY, id: ID, exp: String(NOW + 60), sig, nowSeconds: NOW }), {
      ok: true,
      id: ID,
      exp: NOW + 60,
      sig,
    });
  });

  it('rejects a signature made with another key as forged', () => {
    const sig = linkSignature('another-key-of-enough-length', ID, NOW + 60);
    assert.deepEqual(checkLink({ key: KEY, id: ID, exp: String(NOW + 60), sig, nowSeconds: NOW }), { ok: false, reason: 'forged' });
  });

  it('rejects a tampered id or a lengthened expiry as forged', () => {
    const sig = linkSignature(KEY, ID, NOW + 60);
    const otherId = 'BAAAAAAAAAAAAAAAAAAAAA';
    assert.equal(checkLink({ key: KEY, id: otherId, exp: String(NOW + 60), sig, nowSeconds: NOW }).ok, false);
    assert.deepEqual(checkLink({ key: KEY, id: ID, exp: String(NOW + 6000), sig, nowSeconds: NOW }), { ok: false, reason: 'forged' });
  });

  it('rejects missing or malformed parts as forged', () => {
    const sig = linkSignature(KEY, ID, NOW + 60);
    for (const parts of [
      { id: ID, exp: String(NOW + 60), sig: undefined },
      { id: ID, exp: undefined, sig },
      { id: undefined, exp: String(NOW + 60), sig },
      { id: ID, exp: `${NOW + 60}.5`, sig },
      { id: '../etc/passwd', exp: String(NOW + 60), sig },
      { id: ID, exp: String(NOW + 60), sig: sig.slice(0, -1) },
    ]) {
      assert.deepEqual(checkLink({ key: KEY, ...parts, nowSeconds: NOW }), { ok: false, reason: 'forged' }, JSON.stringify(parts));
    }
  });

  it('reports a correctly signed link past its expiry as expired', () => {
    const sig = linkSignature(KEY, ID, NOW - 1);
    assert.deepEqual(checkLink({ key: KEY, id: ID, exp: String(NOW - 1), sig, nowSeconds: NOW }), { ok: false, reason: 'expired' });
    const atExpiry = linkSignature(KEY, ID, NOW);
    assert.deepEqual(checkLink({ key: KEY, id: ID, exp: String(NOW), sig: atExpiry, nowSeconds: NOW }), { ok: false, reason: 'expired' });
  });

  it('builds a link of id, exp and sig under the base URL, with no token in it', () => {
    const link = approvalLink('https://approve.example.com/', KEY, ID, NOW + 60);
    assert.equal(link, `https://approve.example.com/approvals/${ID}?exp=${NOW + 60}&sig=${linkSignature(KEY, ID, NOW + 60)}`);
    const url = new URL(link);
    assert.deepEqual([...url.searchParams.keys()], ['exp', 'sig']);
  });

  it('makes 128-bit url-safe ids that differ', () => {
    const ids = new Set(Array.from({ length: 100 }, newApprovalId));
    assert.equal(ids.size, 100);
    for (const id of ids) {
      assert.match(id, /^[A-Za-z0-9_-]{22}$/);
      assert.equal(Buffer.from(id, 'base64url').length, 16);
    }
  });

  it('compares strings in constant time and only equal ones match', () => {
    assert.equal(safeEqual('abc', 'abc'), true);
    assert.equal(safeEqual('abc', 'abd'), false);
    assert.equal(safeEqual('abc', 'abcd'), false);
  });
});

describe('anti-forgery token', () => {
  it('depends on key, id and expiry, and never equals the link signature', () => {
    const token = csrfToken(KEY, ID, NOW);
    assert.equal(token, csrfToken(KEY, ID, NOW));
    assert.notEqual(token, csrfToken(KEY, ID, NOW + 1));
    assert.notEqual(token, csrfToken(KEY, 'BAAAAAAAAAAAAAAAAAAAAA', NOW));
    assert.notEqual(token, csrfToken('another-key-of-enough-length', ID, NOW));
    assert.notEqual(token, linkSignature(KEY, ID, NOW));
  });
});

describe('approvalDigest', () => {
  it('is stable under key order and changes with any field', () => {
    const a = approvalDigest({ pipeline: 'p', title: 't', details: { a: 1, b: 'x' } });
    assert.equal(a, approvalDigest({ title: 't', details: { b: 'x', a: 1 }, pipeline: 'p' } as never));
    assert.match(a, /^[0-9a-f]{64}$/);
    assert.notEqual(a, approvalDigest({ pipeline: 'p', title: 't', details: { a: 2, b: 'x' } }));
    assert.notEqual(a, approvalDigest({ pipeline: 'p', title: 'T', details: { a: 1, b: 'x' } }));
    assert.notEqual(a, approvalDigest({ pipeline: 'q', title: 't', details: { a: 1, b: 'x' } }));
  });
});

describe('newApprovalItem', () => {
  it('stores a pending item whose TTL outlasts the link by 30 days', () => {
    const now = new Date(NOW * 1000);
    const { item, exp } = newApprovalItem(request, ID, now, ['a@example.com']);
    assert.equal(exp, NOW + 3600);
    assert.deepEqual(item, {
      pk: `APPROVAL#${ID}`,
      sk: 'APPROVAL',
      token: request.taskToken,
      executionId: request.executionId,
      pipeline: 'rlhf',
      title: 'Promote policy v7',
      details: request.details,
      digest: approvalDigest(request),
      state: 'PENDING',
      createdAt: now.toISOString(),
      expiresAtIso: new Date((NOW + 3600) * 1000).toISOString(),
      expiresAt: NOW + 3600 + RETAIN_AFTER_EXPIRY_SECONDS,
      recipients: ['a@example.com'],
    });
    assert.equal(RETAIN_AFTER_EXPIRY_SECONDS, 30 * 86400);
    assert.equal('token' in toApprovalView(ID, item), false);
  });
});

describe('parseApprovalRequest', () => {
  it('accepts a well-formed request', () => {
    assert.deepEqual(parseApprovalRequest({ ...request, recipients: ['x@example.com'] }), { ...request, recipients: ['x@example.com'] });
  });

  it('names the field and value that are wrong', () => {
    assert.throws(
      () => parseApprovalRequest({ ...request, timeoutSeconds: -5 }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.field, 'approval request.timeoutSeconds');
        assert.match(error.message, /got -5/);
        return true;
      },
    );
    assert.throws(() => parseApprovalRequest({ ...request, details: { nested: { a: 1 } } }), /approval request\.details\.nested/);
    assert.throws(() => parseApprovalRequest({ ...request, recipients: ['not-an-email'] }), /approval request\.recipients\.0.*"not-an-email"/);
    const { pipeline: _pipeline, ...withoutPipeline } = request;
    assert.throws(() => parseApprovalRequest(withoutPipeline), /approval request\.pipeline/);
  });

  it('never repeats the task token in its error', () => {
    assert.throws(
      () => parseApprovalRequest({ ...request, taskToken: ['TOKEN-in-an-array'] }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.field, 'approval request.taskToken');
        assert.doesNotMatch(error.message, /TOKEN-in-an-array/);
        return true;
      },
    );
  });
});

describe('resolveRecipients', () => {
  it('prefers the request, falls back to the approver, and fails without either', () => {
    assert.deepEqual(resolveRecipients(['a@example.com'], 'b@example.com'), ['a@example.com']);
    assert.deepEqual(resolveRecipients(undefined, 'b@example.com'), ['b@example.com']);
    assert.throws(() => resolveRecipients(undefined, undefined), /recipients.*APPROVER_EMAIL/);
  });
});

describe('parseDecisionForm', () => {
  it('reads a plain and a base64-encoded form body', () => {
    const body = 'decision=approve&csrf=abc&comment=ship+it%21';
    const expected = { decision: 'approve', csrf: 'abc', comment: 'ship it!' };
    assert.deepEqual(parseDecisionForm(body, false), expected);
    assert.deepEqual(parseDecisionForm(Buffer.from(body).toString('base64'), true), expected);
  });

  it('treats a blank comment as none', () => {
    assert.deepEqual(parseDecisionForm('decision=reject&csrf=abc&comment=+++', false), { decision: 'reject', csrf: 'abc', comment: undefined });
  });

  it('rejects an unknown decision, a missing csrf and a comment over 500 characters', () => {
    assert.throws(() => parseDecisionForm('decision=maybe&csrf=abc', false), /form\.decision.*"maybe"/);
    assert.throws(() => parseDecisionForm('decision=approve', false), /form\.csrf/);
    assert.throws(() => parseDecisionForm(`decision=approve&csrf=a&comment=${'x'.repeat(501)}`, false), /form\.comment/);
    assert.doesNotThrow(() => parseDecisionForm(`decision=approve&csrf=a&comment=${'x'.repeat(500)}`, false));
  });
});

describe('decision requests', () => {
  const decidedBy = { sourceIp: '203.0.113.9', userAgent: 'Mozilla/5.0' };
  const at = new Date('2027-01-02T03:04:05.000Z');

  it('updates only from PENDING', () => {
    const decision = decisionOf({ decision: 'approve', csrf: 'x', comment: 'ok' }, decidedBy, at);
    const input = decisionUpdate('T', ID, decision);
    assert.equal(input.ConditionExpression, '#state = :pending');
    assert.equal(input.ExpressionAttributeValues?.[':pending'], 'PENDING');
    assert.equal(input.ExpressionAttributeValues?.[':state'], 'APPROVED');
    assert.equal(input.ExpressionAttributeValues?.[':comment'], 'ok');
    assert.deepEqual(input.Key, { pk: `APPROVAL#${ID}`, sk: 'APPROVAL' });
  });

  it('sends success with the approval summary, or failure named ApprovalRejected', () => {
    const approved = taskResultFor('TOK', ID, decisionOf({ decision: 'approve', csrf: 'x', comment: undefined }, decidedBy, at));
    assert.equal(approved.kind, 'success');
    assert.equal(approved.input.taskToken, 'TOK');
    assert.deepEqual(JSON.parse((approved.input as { output: string }).output), {
      approved: true,
      approvalId: ID,
      decidedAt: at.toISOString(),
      comment: null,
    });
    const rejected = taskResultFor('TOK', ID, decisionOf({ decision: 'reject', csrf: 'x', comment: 'no' }, decidedBy, at));
    assert.equal(rejected.kind, 'failure');
    assert.equal((rejected.input as { error: string }).error, 'ApprovalRejected');
    assert.deepEqual(JSON.parse((rejected.input as { cause: string }).cause), {
      approved: false,
      approvalId: ID,
      decidedAt: at.toISOString(),
      comment: 'no',
    });
  });
});

describe('approval page rendering', () => {
  const { item } = newApprovalItem(
    { ...request, title: 'Ship "v7" & <b>more</b>', details: { '<i>key</i>': '<script>alert(1)</script>', n: 3 } },
    ID,
    new Date(NOW * 1000),
    ['a@example.com'],
  );

  it('escapes every character that matters in HTML', () => {
    assert.equal(escapeHtml(`<a href="x">'&'</a>`), '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  });

  it('escapes the title and details, and shows buttons only while pending', () => {
    const html = renderApprovalPage(toApprovalView(ID, item), { action: formAction(ID, NOW, 'sig'), csrf: 'CSRF' });
    assert.ok(!withoutOwnScripts(html).includes('<script'));
    assert.ok(html.includes('&lt;script&gt;alert(1)&lt;/script&gt;'));
    assert.ok(html.includes('&lt;i&gt;key&lt;/i&gt;'));
    assert.ok(html.includes('<tr data-key="&lt;i&gt;key&lt;/i&gt;">'), 'the raw key stays as an attribute');
    assert.ok(html.includes('Ship &quot;v7&quot; &amp; &lt;b&gt;more&lt;/b&gt;'));
    assert.match(html, /<button id="approve"[^>]*name="decision" value="approve"/);
    assert.match(html, /<button id="reject"[^>]*name="decision" value="reject"/);
    assert.match(html, /<input type="hidden" name="csrf" value="CSRF">/);
    assert.ok(html.includes(`action="${ID}?exp=${NOW}&amp;sig=sig"`));
    assert.ok(!html.includes(request.taskToken));

    const decided = renderApprovalPage(
      toApprovalView(ID, {
        ...item,
        state: 'REJECTED',
        decidedAt: '2027-01-01T00:00:00.000Z',
        decidedBy: { sourceIp: '198.51.100.7', userAgent: '<ua>', via: 'link-and-code' },
        comment: 'not <yet>',
      }),
      { action: 'x', csrf: 'CSRF' },
    );
    assert.ok(!decided.includes('id="approve"'));
    assert.ok(!decided.includes('CSRF'));
    assert.match(
      decided,
      /Rejected with the link and its code from 198\.51\.100\.7 \(&lt;ua&gt;\) at <time id="decided-at" datetime="2027-01-01T00:00:00.000Z">/,
    );
    assert.ok(decided.includes('not &lt;yet&gt;'));
  });

  it('sends pages that cannot be cached, framed or scripted', () => {
    const response = messageResponse('expired');
    assert.equal(response.statusCode, 410);
    assert.equal(response.headers?.['Content-Type'], 'text/html; charset=utf-8');
    assert.equal(response.headers?.['Cache-Control'], 'no-store');
    assert.equal(response.headers?.['Referrer-Policy'], 'no-referrer');
    assert.equal(response.headers?.['X-Frame-Options'], 'DENY');
    assert.match(CONTENT_SECURITY_POLICY, /default-src 'none'/);
    assert.match(CONTENT_SECURITY_POLICY, /script-src 'sha256-[^']+'(;|$)/, 'one script, by its hash');
    assert.doesNotMatch(CONTENT_SECURITY_POLICY, /unsafe-inline|unsafe-eval|connect-src/);
    assert.match(String(response.body), /This link has expired/);
  });

  it('lets the page reach the Cognito domain only where sign-in is on', () => {
    const csp = contentSecurityPolicy({
      mode: 'cognito',
      domain: 'https://approvals-x.auth.us-east-1.amazoncognito.com',
      clientId: 'c',
      redirectUri: 'https://api.example.com/approvals',
      scopes: ['openid'],
      group: 'approvers',
    });
    assert.match(csp, /connect-src 'self' https:\/\/approvals-x\.auth\.us-east-1\.amazoncognito\.com(;|$)/);
    assert.doesNotMatch(contentSecurityPolicy({ mode: 'link' }), /connect-src/);
  });

  it('puts what each decision does and the controls before the details and items', () => {
    const outcomes = { approve: 'Measures the batch.', reject: 'Ends the loop, keeping what was measured.', timeout: 'Ends the loop too.' };
    const html = renderApprovalPage(toApprovalView(ID, { ...item, outcomes }), { action: 'x', csrf: 'CSRF' });
    assert.ok(html.includes('<li id="outcome-approve"><strong>Approve</strong>: Measures the batch.</li>'));
    assert.ok(html.includes('<li id="outcome-reject"><strong>Reject</strong>: Ends the loop, keeping what was measured.</li>'));
    assert.match(html, /<li id="outcome-timeout"><strong>No decision<\/strong> by <time id="expires" datetime="[^"]+">.*: Ends the loop too\.<\/li>/);
    const at = (needle: string) => html.indexOf(needle);
    assert.ok(at('id="outcomes"') < at('id="approve"') && at('id="approve"') < at('class="details"'), 'outcomes, then buttons, then details');
    // A request made before gates said what their outcomes are.
    const generic = renderApprovalPage(toApprovalView(ID, item), { action: 'x', csrf: 'CSRF' });
    assert.ok(generic.includes('<strong>Reject</strong>: The run does not go on past this gate.'));
  });

  it("shows times in UTC, marked up for the script to add the reader's local time", () => {
    assert.equal(utcText('2027-01-01T10:00:00.000Z'), '2027-01-01 10:00 UTC');
    assert.equal(utcText('2027-01-01T10:00:07.000Z'), '2027-01-01 10:00:07 UTC');
    const html = renderApprovalPage(toApprovalView(ID, item), { action: 'x', csrf: 'CSRF' });
    assert.match(
      html,
      new RegExp(
        `<time id="expires" datetime="${item.expiresAtIso}"><span class="local" hidden></span><span class="utc">${utcText(item.expiresAtIso)}</span></time>`,
      ),
    );
  });
});

describe('detail labels', () => {
  it('turns keys into words in sentence case, keeping acronyms', () => {
    const cases: [string, string][] = [
      ['knownFromEarlierRuns', 'Known from earlier runs'],
      ['count', 'Count'],
      ['winRate', 'Win rate'],
      ['hit_threshold', 'Hit threshold'],
      ['best-predicted', 'Best predicted'],
      ['maxRPS', 'Max RPS'],
      ['HTTPServerURL', 'HTTP server URL'],
      ['round2Hits', 'Round2 hits'],
      ['Already words', 'Already words'],
    ];
    for (const [key, label] of cases) assert.equal(humanLabel(key), label, key);
  });
});

describe('who may decide', () => {
  const claims = { sub: 'sub-1', 'cognito:username': 'alice', email: 'alice@example.com', 'cognito:groups': '[approvers]' };

  it('reads the groups claim in the forms it arrives in', () => {
    assert.deepEqual(groupsOfClaim('[approvers admins]'), ['approvers', 'admins']);
    assert.deepEqual(groupsOfClaim('["approvers","admins"]'), ['approvers', 'admins']);
    assert.deepEqual(groupsOfClaim('approvers'), ['approvers']);
    assert.deepEqual(groupsOfClaim('[]'), []);
    assert.deepEqual(groupsOfClaim(undefined), []);
  });

  it('accepts a member of the group with sub, user name and email; names a non-member; treats no claims as signed out', () => {
    assert.deepEqual(approverFromClaims(claims, 'approvers'), { ok: true, approver: { sub: 'sub-1', username: 'alice', email: 'alice@example.com' } });
    assert.deepEqual(approverFromClaims({ ...claims, 'cognito:groups': '[players]' }, 'approvers'), { ok: false, reason: 'notApprover', username: 'alice' });
    assert.deepEqual(approverFromClaims({ sub: 's', username: 'bob' }, 'approvers'), { ok: false, reason: 'notApprover', username: 'bob' });
    assert.deepEqual(approverFromClaims(undefined, 'approvers'), { ok: false, reason: 'signedOut' });
    assert.deepEqual(approverFromClaims({}, 'approvers'), { ok: false, reason: 'signedOut' });
  });

  it('takes the claims from the JWT authorizer of the HTTP event, and none without it', () => {
    const base = { requestContext: { http: { method: 'POST', sourceIp: '203.0.113.9', userAgent: 'UA' } }, pathParameters: { id: ID } };
    const signedIn = parseApprovalHttpEvent({ ...base, requestContext: { ...base.requestContext, authorizer: { jwt: { claims, scopes: null } } } });
    assert.deepEqual(signedIn.claims, claims);
    assert.deepEqual(signedIn.client, { sourceIp: '203.0.113.9', userAgent: 'UA' });
    assert.equal(parseApprovalHttpEvent(base).claims, undefined);
  });

  it('reads the sign-in settings from the environment, naming a missing variable', () => {
    const env = {
      APPROVAL_SIGN_IN: 'cognito',
      APPROVAL_AUTH_DOMAIN: 'https://a.auth.us-east-1.amazoncognito.com/',
      APPROVAL_CLIENT_ID: 'client',
      APPROVAL_GROUP: 'approvers',
      APPROVAL_BASE_URL: 'https://api.example.com',
    };
    assert.deepEqual(approvalSignInFromEnv(env, 'APPROVAL_BASE_URL'), {
      mode: 'cognito',
      domain: 'https://a.auth.us-east-1.amazoncognito.com',
      clientId: 'client',
      redirectUri: 'https://api.example.com/approvals',
      scopes: ['openid', 'email', 'profile'],
      group: 'approvers',
    });
    assert.deepEqual(approvalSignInFromEnv({ APPROVAL_SIGN_IN: 'link' }, 'APPROVAL_BASE_URL'), { mode: 'link' });
    assert.throws(
      () => approvalSignInFromEnv({ ...env, APPROVAL_CLIENT_ID: '' }, 'APPROVAL_BASE_URL'),
      (e) => e instanceof ConfigError && e.field === 'APPROVAL_CLIENT_ID',
    );
    assert.throws(() => approvalSignInFromEnv({ APPROVAL_SIGN_IN: 'none' }, 'APPROVAL_BASE_URL'), /APPROVAL_SIGN_IN.*"none"/);
  });

  it('derives a six-character code per link that reads unambiguously, and compares it as typed', () => {
    const code = decisionCode(KEY, ID, NOW);
    assert.match(code, /^[A-HJ-KM-NP-Z2-9]{6}$/);
    assert.equal(code, decisionCode(KEY, ID, NOW));
    assert.notEqual(code, decisionCode(KEY, ID, NOW + 1));
    assert.equal(normalizeDecisionCode(` ${code.slice(0, 3).toLowerCase()}-${code.slice(3)} `), code);
  });
});

describe('approval email', () => {
  it('carries the link and escaped details in both parts, and no token', async () => {
    const link = approvalLink('https://approve.example.com', KEY, ID, NOW + 60);
    const email = renderApprovalEmail({
      from: 'gate@example.com',
      to: ['a@example.com'],
      link,
      pipeline: 'rlhf',
      title: 'Promote\r\nBcc: x@evil.example',
      details: { note: '<b>bold</b>' },
      expiresAtIso: '2027-01-01T00:00:00.000Z',
    });
    assert.equal(email.subject, 'Approval needed: Promote Bcc: x@evil.example');
    assert.ok(email.text.includes(link));
    assert.ok(email.html.includes(escapeHtml(link)));
    assert.ok(email.html.includes('&lt;b&gt;bold&lt;/b&gt;'));
    const mime = (await composeMime(email)).toString('utf8');
    const headers = mime.slice(0, mime.indexOf('\r\n\r\n'));
    assert.match(headers, /^From: gate@example\.com$/m);
    assert.match(headers, /^To: a@example\.com$/m);
    assert.match(headers, /^Subject: Approval needed: Promote Bcc: x@evil\.example$/m);
    assert.doesNotMatch(headers, /^Bcc:/m);
    assert.match(headers, /Content-Type: multipart\/alternative/);
  });
});

describe('signing key handling', () => {
  it('rejects a missing or short secret without showing it', () => {
    assert.throws(() => signingKeyFromSecret(undefined), /SecretString/);
    assert.throws(
      () => signingKeyFromSecret('short-secret'),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.doesNotMatch(error.message, /short-secret/);
        return true;
      },
    );
    assert.equal(signingKeyFromSecret(KEY), KEY);
  });

  it('memoizes a load, and retries one that failed', async () => {
    let calls = 0;
    const load = memoizeAsync(async () => {
      calls += 1;
      if (calls === 1) throw new Error('transient');
      return calls;
    });
    await assert.rejects(load(), /transient/);
    assert.equal(await load(), 2);
    assert.equal(await load(), 2);
    assert.equal(calls, 2);
  });
});

// ---- items documents -------------------------------------------------------------------

const ITEMS_URI = 's3://frontier-bucket/approvals/molecules/0f3c.json';
/** A drawing whose text tries everything an inlined SVG could do. */
const HOSTILE_SVG =
  "<?xml version='1.0' encoding='iso-8859-1'?>\n<svg xmlns='http://www.w3.org/2000/svg' width='40' height='20' onload='alert(1)'>" +
  '<script>alert("svg")</script><text x="2" y="15">C&lt;O ± é</text></svg>';
const PLAIN_SVG = "<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'><rect width='10' height='10'/></svg>";

const itemsDoc: ApprovalItems = {
  caption: 'Round 3 <batch>',
  columns: [
    { key: 'smiles', label: 'SMILES' },
    { key: 'predicted', label: 'Predicted gap' },
    { key: 'arm', label: 'Arm' },
  ],
  items: [
    { values: { smiles: 'c1ccccc1O', predicted: '1.42 ± 0.10 eV', arm: 'exploit' }, svg: HOSTILE_SVG },
    { values: { smiles: '<img src=x onerror=alert(2)>', predicted: 'n/a\nReview and decide: https://evil.example/approvals/x', arm: 'explore' } },
    { values: { smiles: 'CCO', arm: 'random' }, svg: PLAIN_SVG },
  ],
};
const itemsBytes = (doc: unknown) => Buffer.from(JSON.stringify(doc), 'utf8');

/** Asserts a ConfigError whose field and message name what was wrong. */
function rejectsDocument(doc: unknown, field: string, message: RegExp): void {
  assert.throws(
    () => parseApprovalItems(itemsBytes(doc), ITEMS_URI),
    (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(error.field, field);
      assert.match(error.message, message);
      assert.ok(error.message.includes(ITEMS_URI), 'the message names the document');
      return true;
    },
  );
}

describe('approval items document', () => {
  it('parses a well-formed document as it was written', () => {
    assert.deepEqual(parseApprovalItems(itemsBytes(itemsDoc), ITEMS_URI), itemsDoc);
    assert.deepEqual(approvalItemsSchema.parse({ columns: [{ key: 'a', label: 'A' }], items: [] }), { columns: [{ key: 'a', label: 'A' }], items: [] });
  });

  it(`accepts ${MAX_APPROVAL_ITEMS} items and refuses one more, naming the field`, () => {
    const row = { values: { smiles: 'C' } };
    const doc = (n: number) => ({ columns: [{ key: 'smiles', label: 'SMILES' }], items: Array.from({ length: n }, () => row) });
    assert.equal(parseApprovalItems(itemsBytes(doc(100)), ITEMS_URI).items.length, 100);
    rejectsDocument(doc(101), 'approval items.items', /at most 100|<=100/);
  });

  it('refuses a drawing over 100 KB (counted in UTF-8 bytes) or one that is not SVG', () => {
    const svgOf = (bytes: number) => `<svg>${'x'.repeat(bytes - '<svg></svg>'.length)}</svg>`;
    const doc = (svg: string) => ({ columns: [{ key: 'a', label: 'A' }], items: [{ values: { a: 1 } }, { values: { a: 2 }, svg }] });
    assert.doesNotThrow(() => parseApprovalItems(itemsBytes(doc(svgOf(MAX_ITEM_SVG_BYTES))), ITEMS_URI));
    rejectsDocument(doc(svgOf(MAX_ITEM_SVG_BYTES + 1)), 'approval items.items.1.svg', /at most 102400 bytes.*got "<svg>xxx/);
    // 51,200 two-byte characters: within 100 K characters, over 100 KB.
    rejectsDocument(doc(`<svg>${'é'.repeat(51_200)}</svg>`), 'approval items.items.1.svg', /at most 102400 bytes/);
    rejectsDocument(doc('<html><script>alert(1)</script></html>'), 'approval items.items.1.svg', /must be an SVG document.*got "<html><script>/);
  });

  it('names a value whose key is not a column, a repeated column, a nested value and an unknown field', () => {
    rejectsDocument(
      { ...itemsDoc, items: [{ values: { smiles: 'C', gap: 1.2 } }] },
      'approval items.items.0.values.gap',
      /is not a column \(columns: smiles, predicted, arm\).*got 1\.2/,
    );
    rejectsDocument(
      { ...itemsDoc, columns: [...itemsDoc.columns, { key: 'arm', label: 'Arm again' }] },
      'approval items.columns.3.key',
      /repeats column 2.*got "arm"/,
    );
    rejectsDocument({ ...itemsDoc, items: [{ values: { smiles: { nested: true } } }] }, 'approval items.items.0.values.smiles', /got \{"nested":true\}/);
    rejectsDocument({ ...itemsDoc, rows: [] }, 'approval items.(root)', /rows/);
    rejectsDocument({ ...itemsDoc, columns: [] }, 'approval items.columns', /got \[\]/);
  });

  it('refuses bytes that are not JSON, naming the document', () => {
    assert.throws(
      () => parseApprovalItems(Buffer.from('{"columns": ['), ITEMS_URI),
      /items document s3:\/\/frontier-bucket\/approvals\/molecules\/0f3c\.json: is not JSON/,
    );
  });

  it('accepts an items URI under approvals/ of the bucket only', () => {
    assert.equal(checkItemsUri(ITEMS_URI, 'frontier-bucket'), ITEMS_URI);
    for (const bad of [
      's3://frontier-bucket/runs/molecules/x.json',
      's3://other-bucket/approvals/x.json',
      's3://frontier-bucket/approvalsx/y.json',
      'https://example.com/approvals/x.json',
    ]) {
      assert.throws(
        () => checkItemsUri(bad, 'frontier-bucket'),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError);
          assert.equal(error.field, 'itemsUri');
          assert.ok(error.message.includes(JSON.stringify(bad)), error.message);
          return true;
        },
      );
    }
  });

  it('reads the request field: an s3 URI, or null for none', () => {
    assert.equal(parseApprovalRequest({ ...request, itemsUri: ITEMS_URI }).itemsUri, ITEMS_URI);
    assert.equal(parseApprovalRequest({ ...request, itemsUri: null }).itemsUri, undefined);
    assert.equal('itemsUri' in parseApprovalRequest(request), false);
    assert.throws(
      () => parseApprovalRequest({ ...request, itemsUri: 'approvals/x.json' }),
      /approval request\.itemsUri: expected s3:\/\/bucket\/key \(got "approvals\/x\.json"\)/,
    );
  });
});

describe('approvals bound to an items document', () => {
  const sha256 = sha256Hex(itemsBytes(itemsDoc));

  it('digests exactly as before when there are no items', () => {
    const subject = { pipeline: 'p', title: 't', details: { a: 1 } };
    assert.equal(approvalDigest(subject), sha256Hex(canonicalJson(subject)));
  });

  it('binds the digest to the items URI and the bytes read', () => {
    const plain = { pipeline: 'p', title: 't', details: { a: 1 } };
    const bound = approvalDigest({ ...plain, itemsUri: ITEMS_URI, itemsSha256: sha256 });
    assert.notEqual(bound, approvalDigest(plain));
    assert.notEqual(bound, approvalDigest({ ...plain, itemsUri: `${ITEMS_URI}x`, itemsSha256: sha256 }));
    assert.notEqual(bound, approvalDigest({ ...plain, itemsUri: ITEMS_URI, itemsSha256: sha256Hex('other') }));
  });

  it('stores the URI and its sha256 on the item, never the items', () => {
    const { item } = newApprovalItem({ ...request, itemsUri: ITEMS_URI }, ID, new Date(NOW * 1000), ['a@example.com'], { sha256 });
    assert.equal(item.itemsUri, ITEMS_URI);
    assert.equal(item.itemsSha256, sha256);
    assert.equal(item.digest, approvalDigest({ ...request, itemsUri: ITEMS_URI, itemsSha256: sha256 }));
    assert.ok(!JSON.stringify(item).includes('c1ccccc1O'), 'no item value is stored');
    assert.deepEqual(parseApprovalItem(item), item);
    const { item: plain } = newApprovalItem(request, ID, new Date(NOW * 1000), ['a@example.com']);
    assert.equal('itemsUri' in plain, false);
    assert.equal(plain.digest, approvalDigest(request));
    assert.throws(() => newApprovalItem({ ...request, itemsUri: ITEMS_URI }, ID, new Date(NOW * 1000), ['a@example.com']), /itemsUri/);
    assert.throws(() => parseApprovalItem({ ...item, itemsSha256: undefined }), /approval item\.itemsSha256/);
  });

  it('shows the document only while its bytes are the ones requested', () => {
    const bytes = itemsBytes(itemsDoc);
    assert.deepEqual(approvalItemsView(ITEMS_URI, sha256, bytes), { status: 'shown', uri: ITEMS_URI, document: itemsDoc });
    assert.deepEqual(approvalItemsView(ITEMS_URI, sha256, undefined), { status: 'missing', uri: ITEMS_URI });
    assert.deepEqual(approvalItemsView(ITEMS_URI, sha256, itemsBytes({ ...itemsDoc, caption: 'edited' })), { status: 'changed', uri: ITEMS_URI });
  });
});

describe('items on the page and in the email', () => {
  const { item } = newApprovalItem({ ...request, itemsUri: ITEMS_URI }, ID, new Date(NOW * 1000), ['a@example.com'], { sha256: 'a'.repeat(64) });
  const view = toApprovalView(ID, item);
  const form = { action: formAction(ID, NOW, 'sig'), csrf: 'CSRF' };
  const page = renderApprovalPage(view, form, { status: 'shown', uri: ITEMS_URI, document: itemsDoc });

  /** The <tr> rows of the items table, with their data-item-index. */
  const rowsOf = (html: string) => [...html.matchAll(/<tr data-item-index="(\d+)">([\s\S]*?)<\/tr>/g)].map((m) => ({ index: Number(m[1]), html: m[2]! }));

  it('shows one row per item in table#items, with a heading per column', () => {
    assert.match(page, /<table id="items" class="items">/);
    const rows = rowsOf(page);
    assert.deepEqual(
      rows.map((r) => r.index),
      [0, 1, 2],
    );
    assert.match(
      page,
      /<thead><tr><th scope="col">#<\/th><th scope="col">Drawing<\/th><th scope="col">SMILES<\/th><th scope="col">Predicted gap<\/th><th scope="col">Arm<\/th><\/tr><\/thead>/,
    );
    assert.ok(page.includes('<caption>Round 3 &lt;batch&gt;</caption>'));
    assert.ok(rows[0]!.html.includes('<td data-column="predicted">1.42 ± 0.10 eV</td>'));
    assert.ok(rows[2]!.html.includes('<td data-column="predicted"></td>'), 'a missing value is an empty cell');
    assert.ok(rows[1]!.html.includes('<td class="drawing"></td>'), 'an item without a drawing has an empty drawing cell');
    assert.ok(page.includes(`<code id="items-uri">${ITEMS_URI}</code>`));
  });

  it('escapes every value and never inlines a drawing: each is an <img> with a base64 data: URI', () => {
    assert.ok(page.includes('&lt;img src=x onerror=alert(2)&gt;'));
    assert.ok(!page.includes('<img src=x'));
    assert.ok(!page.includes('<svg') && !withoutOwnScripts(page).includes('<script') && !page.includes('onload'), 'no SVG markup in the page');
    const images = [...page.matchAll(/<img alt="([^"]*)" src="data:image\/svg\+xml;base64,([A-Za-z0-9+/=]+)">/g)];
    assert.equal(images.length, 2);
    assert.equal(images[0]![1], 'Drawing of item 1: c1ccccc1O');
    const decoded = Buffer.from(images[0]![2]!, 'base64').toString('ascii');
    // Same drawing, non-ASCII as character references so its iso-8859-1 declaration reads it right.
    assert.equal(decoded, HOSTILE_SVG.replace('±', '&#177;').replace('é', '&#233;'));
    assert.equal(svgDataUri(PLAIN_SVG), `data:image/svg+xml;base64,${Buffer.from(PLAIN_SVG).toString('base64')}`);
  });

  it('allows data: images in the page, and nothing else new', () => {
    assert.match(CONTENT_SECURITY_POLICY, /(^|; )img-src data:(;|$)/);
    assert.doesNotMatch(CONTENT_SECURITY_POLICY, /unsafe-inline|img-src[^;]*(https?:|\*|'self')/);
  });

  it('says so on the page when the document is gone, changed or unreadable, and keeps the buttons', () => {
    const cases = [
      [{ status: 'missing', uri: ITEMS_URI }, /is gone/],
      [{ status: 'changed', uri: ITEMS_URI }, /has changed since the request was made/],
      [{ status: 'unreadable', uri: ITEMS_URI, reason: 'SlowDown <x>' }, /could not be read \(SlowDown &lt;x&gt;\)/],
    ] as const;
    for (const [items, text] of cases) {
      const html = renderApprovalPage(view, form, items);
      assert.match(html, /<p class="notice" id="items-notice">/);
      assert.match(html, text);
      assert.ok(html.includes(ITEMS_URI));
      assert.ok(!html.includes('id="items"'), `${items.status}: no table`);
      assert.match(html, /<button id="approve"/);
    }
    const empty = renderApprovalPage(view, form, { status: 'shown', uri: ITEMS_URI, document: { columns: itemsDoc.columns, items: [] } });
    assert.match(empty, /lists no items/);
  });

  it('renders a page without items as before', () => {
    const without = renderApprovalPage(view, form);
    assert.ok(!without.includes('<h2>Items</h2>') && !without.includes('id="items'));
  });

  it('lists the items in the email: one text line per item, and the table with image drawings in the HTML part', async () => {
    const link = approvalLink('https://approve.example.com', KEY, ID, NOW + 60);
    const email = renderApprovalEmail({
      from: 'gate@example.com',
      to: ['a@example.com'],
      link,
      pipeline: 'molecules',
      title: 'Measure a batch',
      details: { round: 3 },
      items: itemsDoc,
      expiresAtIso: '2027-01-01T00:00:00.000Z',
    });
    const lines = email.text.split('\n');
    const heading = lines.indexOf('Items (3): Round 3 <batch>');
    assert.ok(heading > 0, email.text);
    assert.deepEqual(lines.slice(heading + 1, heading + 4), [
      '  1. SMILES: c1ccccc1O | Predicted gap: 1.42 ± 0.10 eV | Arm: exploit',
      '  2. SMILES: <img src=x onerror=alert(2)> | Predicted gap: n/a Review and decide: https://evil.example/approvals/x | Arm: explore',
      '  3. SMILES: CCO | Predicted gap:  | Arm: random',
    ]);
    // A value cannot start a line of its own, so the only line with a link is the real one.
    assert.deepEqual(
      lines.filter((line) => line.startsWith('http')),
      [link],
    );

    assert.deepEqual(
      rowsOf(email.html).map((r) => r.index),
      [0, 1, 2],
    );
    assert.match(email.html, /<table id="items" class="items" border="1"/);
    assert.ok(email.html.includes('&lt;img src=x onerror=alert(2)&gt;'));
    assert.ok(!email.html.includes('<svg') && !email.html.includes('<script'));
    assert.equal((email.html.match(/<img alt="Drawing of item \d[^"]*" src="data:image\/svg\+xml;base64,/g) ?? []).length, 2);
    const mime = (await composeMime(email)).toString('utf8');
    assert.match(mime, /Content-Type: multipart\/alternative/);
  });

  it('leaves the email as it was without items', () => {
    const input = {
      from: 'gate@example.com',
      to: ['a@example.com'],
      link: 'https://approve.example.com/approvals/x',
      pipeline: 'p',
      title: 't',
      details: { a: 1 },
      expiresAtIso: '2027-01-01T00:00:00.000Z',
    };
    const email = renderApprovalEmail(input);
    assert.ok(!email.text.includes('Items') && !email.html.includes('id="items"'));
  });
});
