import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  approvalDigest, approvalLink, checkLink, composeMime, csrfToken, decisionOf, decisionUpdate, linkSignature,
  memoizeAsync, newApprovalId, newApprovalItem, parseApprovalRequest, parseDecisionForm, resolveRecipients,
  RETAIN_AFTER_EXPIRY_SECONDS, safeEqual, signingKeyFromSecret, taskResultFor, toApprovalView, type ApprovalRequest,
} from '#shared/approval.ts';
import {
  CONTENT_SECURITY_POLICY, escapeHtml, formAction, messageResponse, renderApprovalEmail, renderApprovalPage,
} from '#shared/approval-page.ts';
import { ConfigError } from '#shared/errors.ts';

const KEY = 'k'.repeat(16) + '-test-signing-key';
const ID = 'AAAAAAAAAAAAAAAAAAAAAA';
const NOW = 1_800_000_000;

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
      ok: true, id: ID, exp: NOW + 60, sig,
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
    assert.throws(() => parseApprovalRequest({ ...request, timeoutSeconds: -5 }), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.equal(error.field, 'approval request.timeoutSeconds');
      assert.match(error.message, /got -5/);
      return true;
    });
    assert.throws(() => parseApprovalRequest({ ...request, details: { nested: { a: 1 } } }), /approval request\.details\.nested/);
    assert.throws(() => parseApprovalRequest({ ...request, recipients: ['not-an-email'] }), /approval request\.recipients\.0.*"not-an-email"/);
    const { pipeline: _pipeline, ...withoutPipeline } = request;
    assert.throws(() => parseApprovalRequest(withoutPipeline), /approval request\.pipeline/);
  });

  it('never repeats the task token in its error', () => {
    assert.throws(() => parseApprovalRequest({ ...request, taskToken: ['TOKEN-in-an-array'] }), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.equal(error.field, 'approval request.taskToken');
      assert.doesNotMatch(error.message, /TOKEN-in-an-array/);
      return true;
    });
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
      approved: true, approvalId: ID, decidedAt: at.toISOString(), comment: null,
    });
    const rejected = taskResultFor('TOK', ID, decisionOf({ decision: 'reject', csrf: 'x', comment: 'no' }, decidedBy, at));
    assert.equal(rejected.kind, 'failure');
    assert.equal((rejected.input as { error: string }).error, 'ApprovalRejected');
    assert.deepEqual(JSON.parse((rejected.input as { cause: string }).cause), {
      approved: false, approvalId: ID, decidedAt: at.toISOString(), comment: 'no',
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
    assert.ok(!html.includes('<script>'));
    assert.ok(html.includes('&lt;script&gt;alert(1)&lt;/script&gt;'));
    assert.ok(html.includes('&lt;i&gt;key&lt;/i&gt;'));
    assert.ok(html.includes('Ship &quot;v7&quot; &amp; &lt;b&gt;more&lt;/b&gt;'));
    assert.match(html, /<button id="approve"[^>]*name="decision" value="approve"/);
    assert.match(html, /<button id="reject"[^>]*name="decision" value="reject"/);
    assert.match(html, /<input type="hidden" name="csrf" value="CSRF">/);
    assert.ok(html.includes(`action="${ID}?exp=${NOW}&amp;sig=sig"`));
    assert.ok(!html.includes(request.taskToken));

    const decided = renderApprovalPage(
      toApprovalView(ID, { ...item, state: 'REJECTED', decidedAt: '2027-01-01T00:00:00.000Z', decidedBy: { sourceIp: '198.51.100.7', userAgent: '<ua>' }, comment: 'not <yet>' }),
      { action: 'x', csrf: 'CSRF' },
    );
    assert.ok(!decided.includes('id="approve"'));
    assert.ok(!decided.includes('CSRF'));
    assert.match(decided, /Rejected at 2027-01-01T00:00:00.000Z from 198\.51\.100\.7 \(&lt;ua&gt;\)/);
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
    assert.doesNotMatch(CONTENT_SECURITY_POLICY, /script-src|unsafe-inline/);
    assert.match(String(response.body), /This link has expired/);
  });
});

describe('approval email', () => {
  it('carries the link and escaped details in both parts, and no token', async () => {
    const link = approvalLink('https://approve.example.com', KEY, ID, NOW + 60);
    const email = renderApprovalEmail({
      from: 'gate@example.com', to: ['a@example.com'], link, pipeline: 'rlhf', title: 'Promote\r\nBcc: x@evil.example',
      details: { note: '<b>bold</b>' }, expiresAtIso: '2027-01-01T00:00:00.000Z',
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
    assert.throws(() => signingKeyFromSecret('short-secret'), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.doesNotMatch(error.message, /short-secret/);
      return true;
    });
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
