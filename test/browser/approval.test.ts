/**
 * The approval gate end to end, in headless Chromium, on the embedded runtime: the probe
 * pipeline stops at "approve", the approval-request Lambda emails a signed link to the outbox,
 * and a person opens it, signs in as a member of the approvers group (the runtime's stand-in
 * for Cognito serves the sign-in) and decides on the page served by the approval API on
 * loopback. A mail scanner that opens the link and presses every button decides nothing. With
 * an items document (a batch of molecules drawn by RDKit), the email and the page list the
 * batch, drawings as images; a screenshot of a 12-molecule batch is checked for what a person
 * sees: the buttons without scrolling, no word split in a table cell, detail keys as words,
 * times in the reader's zone as well as UTC. The link-only mode is in approval-link-only.test.ts.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeleteObjectCommand, HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { Browser, Page, Response as PageResponse } from 'playwright-core';
import type { Execution, LocalRuntime } from '#infra/local/runtime.ts';
import { approvalDigest, approvalLink, csrfToken, linkSignature } from '#shared/approval.ts';
import { moleculeSvg } from '#shared/molecules/pool.ts';
import { dynamoClient, s3Client } from '#shared/clients/aws.ts';
import { canonicalJson, sha256Hex } from '#shared/json.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import { approvalKey, artifactVersionKey } from '#shared/table.ts';
import { utcText } from '#shared/approval-page.ts';
import {
  approvalLinkIn,
  captureOutput,
  logLines,
  nextEmail,
  probeInput,
  readEml,
  startTestRuntime,
  stopTestRuntime,
  waitFor,
  within,
  type OutputCapture,
  type ParsedEmail,
} from '../support/runtime.ts';
import { launchChromium } from '../support/browser.ts';
import { approverSession, csrfOfPage, postDecision, signInOnPage, type ApproverSession } from '../support/approver.ts';
import { clickEverything } from '../support/scanner.ts';

/** A task token as the runtime mints them (a placeholder is not a token). */
const TOKEN_PATTERN = /local-tt-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;
const TEST_TIMEOUT_MS = 90_000;

let rt: LocalRuntime;
let browser: Browser;
let output: OutputCapture;

interface Waiting {
  execution: Execution;
  email: ParsedEmail;
  link: string;
  id: string;
  exp: number;
  sig: string;
}

/** Starts a probe run that needs approval and returns once it waits at the gate, with its email. */
async function startWaitingRun(label: string, config: Record<string, unknown> = {}): Promise<Waiting> {
  const emailed = nextEmail(rt);
  const execution = rt.startExecution('probe', probeInput({ approve: true, label, ...config }));
  const file = await Promise.race([
    emailed,
    execution.done.then((record) => {
      throw new Error(`the run ended (${record.status} ${record.error ?? ''}: ${record.cause ?? ''}) before asking for approval`);
    }),
  ]);
  await waitFor('the run to wait for its callback', () => rt.pendingCallbacks(execution.executionArn) === 1);
  const email = readEml(file);
  const link = approvalLinkIn(email.text);
  const url = new URL(link);
  return {
    execution,
    email,
    link,
    id: url.pathname.split('/').pop()!,
    exp: Number(url.searchParams.get('exp')),
    sig: url.searchParams.get('sig')!,
  };
}

async function approvalItem(id: string): Promise<Record<string, unknown>> {
  const table = rt.resources.tables[0]!;
  const { Item } = await dynamoClient().send(new GetCommand({ TableName: table, Key: approvalKey(id), ConsistentRead: true }));
  assert.ok(Item, `approval ${id} is in the table`);
  return Item;
}

/** The signing key, as the runtime keeps it in <dataDir>/secrets.json: the secret that signed this link. */
function signingKeyFor(run: Waiting): string {
  const secrets = JSON.parse(readFileSync(join(rt.dataDir, 'secrets.json'), 'utf8')) as Record<string, string>;
  const key = Object.values(secrets).find((value) => linkSignature(value, run.id, run.exp) === run.sig);
  assert.ok(key, 'one of the local secrets signed the emailed link');
  return key;
}

function finished(run: Waiting) {
  return within(run.execution.done, 60_000, `${run.execution.executionArn} to finish`);
}

/**
 * Clicks a decision button and returns the response to the POST the page's script sends; waits
 * until the script has shown the answer in the page.
 */
async function clickDecision(page: Page, button: '#approve' | '#reject'): Promise<PageResponse> {
  const [response] = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST' && r.url().includes('/approvals/')), page.click(button)]);
  await page.waitForSelector(`body[data-outcome="${response.status()}"]`);
  return response;
}

/** A new tab: the link opened, signed in as an approver (each tab signs in: the session is the tab's). */
async function signedInPage(link: string, username = 'alice'): Promise<Page> {
  const page = await browser.newPage();
  await signInOnPage(page, link, { username });
  return page;
}

async function approveThroughPage(link: string): Promise<void> {
  const page = await signedInPage(link);
  try {
    const response = await clickDecision(page, '#approve');
    assert.equal(response.status(), 200, await page.content());
  } finally {
    await page.close();
  }
}

let session: ApproverSession;

function stillWaiting(run: Waiting, because: string): void {
  assert.equal(run.execution.record.status, 'RUNNING', `${because}: the run is still running`);
  assert.equal(rt.pendingCallbacks(run.execution.executionArn), 1, `${because}: the run still waits for its callback`);
}

before(async () => {
  output = captureOutput();
  rt = await startTestRuntime();
  browser = await launchChromium();
  session = await approverSession(rt.approvalApiUrl, { username: 'alice' });
});

after(async () => {
  await browser?.close();
  await stopTestRuntime(rt);
  output?.restore();
});

describe('approval page in a browser', () => {
  it('shows what is being approved; a signed-in approver approves, and the run publishes the summary', { timeout: TEST_TIMEOUT_MS }, async () => {
    const run = await startWaitingRun('approve');
    assert.equal(run.email.headers.subject, 'Approval needed: Publish the probe summary');
    assert.match(run.email.text, /^Approve: Publishes the summary as the next version of the probe-summary artifact\.$/m);
    const page = await browser.newPage();
    try {
      const shown = await page.goto(run.link);
      assert.equal(shown?.status(), 200);
      assert.equal(await page.locator('h1').textContent(), 'Publish the probe summary');
      assert.equal(await page.locator('#pipeline').textContent(), 'probe');
      assert.equal(await page.locator('#state').textContent(), 'PENDING');
      const details = await page
        .locator('table.details tr')
        .evaluateAll((rows) => Object.fromEntries(rows.map((row) => [row.querySelector('th')?.textContent, row.querySelector('td')?.textContent])));
      assert.deepEqual(details, { Count: '3', Total: '14' });
      assert.equal(await page.locator('#outcome-reject').textContent(), 'Reject: Fails the run with ApprovalRejected; nothing is published.');
      // Signed out: an offer to sign in, no buttons.
      assert.equal(await page.locator('#sign-in').isVisible(), true);
      assert.equal(await page.locator('#approve').isVisible(), false);

      await signInOnPage(page, run.link, { username: 'alice' });
      assert.equal(await page.locator('#approve').isVisible(), true);
      await page.fill('#comment-input', 'numbers look right');
      const decided = await clickDecision(page, '#approve');
      assert.equal(decided.status(), 200);
      assert.equal(await page.locator('h1').textContent(), 'Approved');
      assert.match((await page.locator('#decision').textContent()) ?? '', /^Approved by alice at .*\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? UTC\.$/);
      assert.equal(await page.locator('#comment').textContent(), 'numbers look right');
      assert.equal(await page.locator('#outcome').textContent(), 'Publishes the summary as the next version of the probe-summary artifact.');
    } finally {
      await page.close();
    }

    const record = await finished(run);
    assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
    const result = record.output as { total: number; artifact: { name: string; version: number; uri: string } };
    assert.equal(result.total, 14);
    assert.equal(result.artifact.name, 'probe-summary');
    assert.ok(Number.isInteger(result.artifact.version) && result.artifact.version >= 1);
    const { Item: index } = await dynamoClient().send(
      new GetCommand({ TableName: rt.resources.tables[0]!, Key: artifactVersionKey('probe-summary', result.artifact.version) }),
    );
    assert.equal(index?.uri, result.artifact.uri, 'the version is indexed with its URI');
    const where = parseS3Uri(result.artifact.uri);
    await s3Client().send(new HeadObjectCommand({ Bucket: where.Bucket, Key: `${where.Key.replace(/\/?$/, '/')}manifest.json` }));

    const item = await approvalItem(run.id);
    assert.equal(item.state, 'APPROVED');
    assert.equal(item.comment, 'numbers look right');
    // Who decided: the signed-in identity, not only an address and a browser.
    const decidedBy = item.decidedBy as Record<string, string>;
    assert.equal(decidedBy.via, 'sign-in');
    assert.equal(decidedBy.username, 'alice');
    assert.equal(decidedBy.sub, JSON.parse(Buffer.from(session.idToken.split('.')[1]!, 'base64url').toString('utf8')).sub);
  });

  it('Reject fails the run with ApprovalRejected', { timeout: TEST_TIMEOUT_MS }, async () => {
    const run = await startWaitingRun('reject');
    const page = await signedInPage(run.link);
    try {
      const decided = await clickDecision(page, '#reject');
      assert.equal(decided.status(), 200);
      assert.equal(await page.locator('h1').textContent(), 'Rejected');
    } finally {
      await page.close();
    }
    const record = await finished(run);
    assert.equal(record.status, 'FAILED');
    assert.equal(record.error, 'ApprovalRejected');
    assert.equal(record.output, undefined, 'a rejected run has no output');
    assert.equal((await approvalItem(run.id)).state, 'REJECTED');
  });

  it('opening the link decides nothing, with or without a browser', { timeout: TEST_TIMEOUT_MS }, async () => {
    const run = await startWaitingRun('get-only');
    // A mail scanner: a plain GET, twice.
    for (let i = 0; i < 2; i++) {
      const response = await fetch(run.link);
      assert.equal(response.status, 200);
      assert.match(await response.text(), /<button id="sign-in"/);
    }
    // A scanner that renders pages: Chromium visits and leaves without clicking.
    const page = await browser.newPage();
    try {
      assert.equal((await page.goto(run.link))?.status(), 200);
      await page.waitForLoadState('networkidle');
    } finally {
      await page.close();
    }
    // Give anything a GET might have set off the time to reach the run.
    await new Promise((resolve) => setTimeout(resolve, 300));
    stillWaiting(run, 'after three GETs');
    assert.equal((await approvalItem(run.id)).state, 'PENDING');

    await approveThroughPage(run.link);
    assert.equal((await finished(run)).status, 'SUCCEEDED');
  });

  it('a scanner that presses every button, signed out, decides nothing; then the approver decides once', { timeout: TEST_TIMEOUT_MS }, async () => {
    const run = await startWaitingRun('scanner');
    const csrf = await csrfOfPage(run.link);
    const scan = await clickEverything(browser, run.link);
    const paths = scan.pressed.join(', ');
    for (const button of ['#sign-in', '#approve', '#reject'])
      assert.ok(
        scan.pressed.some((p) => p.endsWith(button)),
        `the scanner pressed ${button}: ${paths}`,
      );
    // It even reached the local sign-in page and pressed Sign in there (no password locally), but
    // ticked no group: a signed-in person outside the approvers group decides nothing either.
    assert.ok(
      scan.pressed.some((p) => p.endsWith('#local-sign-in')),
      `the scanner reached the local sign-in: ${paths}`,
    );
    const decisionPosts = scan.posts.filter((post) => new URL(post.url).pathname.startsWith('/approvals/'));
    assert.ok(decisionPosts.length > 0, 'the forms it submitted outright reached the API');
    assert.deepEqual(
      decisionPosts.filter((post) => post.status < 400),
      [],
      'every decision it sent was refused',
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    stillWaiting(run, 'after the scanner');
    assert.equal((await approvalItem(run.id)).state, 'PENDING');

    await approveThroughPage(run.link);
    assert.equal((await finished(run)).status, 'SUCCEEDED');
    const again = await postDecision(run.link, 'reject', { session, csrf });
    assert.equal(again.status, 409, 'a second decision is refused');
    assert.equal((await approvalItem(run.id)).state, 'APPROVED');
  });

  it('a signed-in person outside the approvers group sees no buttons and cannot decide (403)', { timeout: TEST_TIMEOUT_MS }, async () => {
    const run = await startWaitingRun('not-approver');
    const page = await browser.newPage();
    try {
      await signInOnPage(page, run.link, { username: 'mallory', groups: [] });
      assert.equal(await page.locator('#not-approver').isVisible(), true);
      assert.equal(await page.locator('#approve').isVisible(), false);
    } finally {
      await page.close();
    }
    const outsider = await approverSession(rt.approvalApiUrl, { username: 'mallory', groups: [] });
    const refused = await postDecision(run.link, 'approve', { session: outsider });
    assert.equal(refused.status, 403);
    assert.match(await refused.text(), /signed in as mallory, who is not a member of the approvers group/);
    // No token at all: the JWT authorizer answers before the function runs.
    const anonymous = await postDecision(run.link, 'approve');
    assert.equal(anonymous.status, 401);
    stillWaiting(run, 'after an outsider and an anonymous POST');
    assert.equal((await approvalItem(run.id)).state, 'PENDING');
    assert.equal((await postDecision(run.link, 'reject', { session })).status, 200);
    assert.equal((await finished(run)).error, 'ApprovalRejected');
  });

  it('records exactly one decision when approvers post at once', { timeout: TEST_TIMEOUT_MS }, async () => {
    const run = await startWaitingRun('concurrent');
    const bob = await approverSession(rt.approvalApiUrl, { username: 'bob' });
    const csrf = await csrfOfPage(run.link);
    const statuses = await Promise.all(
      Array.from({ length: 6 }, (_, i) => postDecision(run.link, i % 2 ? 'reject' : 'approve', { session: i % 3 ? session : bob, csrf }).then((r) => r.status)),
    );
    assert.deepEqual([...statuses].sort(), [200, 409, 409, 409, 409, 409]);
    const record = await finished(run);
    const item = await approvalItem(run.id);
    assert.equal(record.status, item.state === 'APPROVED' ? 'SUCCEEDED' : 'FAILED');
  });

  it('a replayed decision gets "already decided" (409) and changes nothing', { timeout: TEST_TIMEOUT_MS }, async () => {
    const run = await startWaitingRun('replay');
    // Two tabs on the same link: the second holds a stale form after the first decides.
    const first = await signedInPage(run.link);
    const stale = await signedInPage(run.link);
    try {
      const csrf = (await stale.locator('input[name="csrf"]').getAttribute('value')) ?? '';
      assert.notEqual(csrf, '', 'the page carries an anti-forgery token');
      assert.equal((await clickDecision(first, '#approve')).status(), 200);
      const record = await finished(run);
      assert.equal(record.status, 'SUCCEEDED');
      const decidedAt = (await approvalItem(run.id)).decidedAt;

      const replay = await clickDecision(stale, '#reject');
      assert.equal(replay.status(), 409);
      assert.equal(await stale.locator('h1').textContent(), 'This approval was already decided');

      // The same form, posted again by hand by a signed-in approver, with either decision.
      for (const decision of ['approve', 'reject'] as const) {
        const response = await postDecision(run.link, decision, { csrf, comment: '', session });
        assert.equal(response.status, 409, decision);
        assert.match(await response.text(), /already decided/);
      }

      const item = await approvalItem(run.id);
      assert.equal(item.state, 'APPROVED');
      assert.equal(item.decidedAt, decidedAt, 'the first decision stands');
      const later = rt.executionRecord(run.execution.executionArn)!;
      assert.equal(later.status, 'SUCCEEDED');
      assert.equal(later.stopDate, record.stopDate);
      assert.equal((later.output as { total: number }).total, 14);
    } finally {
      await first.close();
      await stale.close();
    }
  });

  it('forged and expired links get a clear page (403, 410) and change nothing', { timeout: TEST_TIMEOUT_MS }, async () => {
    const run = await startWaitingRun('forged');
    const key = signingKeyFor(run);
    const page = await browser.newPage();
    try {
      // One character of the signature changed.
      const sig = run.sig[0] === 'A' ? `B${run.sig.slice(1)}` : `A${run.sig.slice(1)}`;
      const forged = run.link.replace(`sig=${run.sig}`, `sig=${sig}`);
      assert.notEqual(forged, run.link);
      const forgedResponse = await page.goto(forged);
      assert.equal(forgedResponse?.status(), 403);
      assert.equal(await page.locator('h1').textContent(), 'This link is not valid');
      assert.equal(await page.locator('button').count(), 0, 'a forged link shows no buttons');
      // A forged link cannot decide either, even signed in, with the page's real anti-forgery token.
      const csrf = csrfToken(key, run.id, run.exp);
      const forgedPost = await postDecision(forged, 'approve', { csrf, session });
      assert.equal(forgedPost.status, 403);
      // The real link, signed in, with a made-up anti-forgery token.
      const badCsrf = await postDecision(run.link, 'approve', { csrf: `${csrf.slice(0, -1)}${csrf.endsWith('A') ? 'B' : 'A'}`, session });
      assert.equal(badCsrf.status, 403);
      stillWaiting(run, 'after forged requests');

      // Validly signed, but expired a minute ago.
      const exp = Math.floor(Date.now() / 1000) - 60;
      const expired = approvalLink(rt.approvalApiUrl, key, run.id, exp);
      const expiredResponse = await page.goto(expired);
      assert.equal(expiredResponse?.status(), 410);
      assert.equal(await page.locator('h1').textContent(), 'This link has expired');
      assert.equal(await page.locator('button').count(), 0, 'an expired link shows no buttons');
      const expiredPost = await postDecision(expired, 'approve', { csrf: csrfToken(key, run.id, exp), session });
      assert.equal(expiredPost.status, 410);
      stillWaiting(run, 'after expired requests');
      assert.equal((await approvalItem(run.id)).state, 'PENDING');
    } finally {
      await page.close();
    }
    await approveThroughPage(run.link);
    assert.equal((await finished(run)).status, 'SUCCEEDED');
  });

  it('the task token is in no link, email, page or log line', { timeout: TEST_TIMEOUT_MS }, async () => {
    const run = await startWaitingRun('secrecy');
    const token = String((await approvalItem(run.id)).token);
    assert.match(token, TOKEN_PATTERN, 'the table holds the real token');
    const seen: Record<string, string> = { link: run.link, 'eml (raw)': run.email.raw, 'eml text': run.email.text, 'eml html': run.email.html };
    const page = await signedInPage(run.link);
    try {
      seen['approval page'] = await page.content();
      await clickDecision(page, '#approve');
      seen['decision page'] = await page.content();
    } finally {
      await page.close();
    }
    assert.equal((await finished(run)).status, 'SUCCEEDED');
    const logged = (message: string) => logLines(output.text()).find((line) => line.message === message && line.approvalId === run.id);
    await waitFor('the approval API to log its decision', () => typeof logged('approval decided')?.executionId === 'string');

    // Every email, execution record and job log of this file, and all the output so far.
    for (const file of readdirSync(rt.outboxDir)) seen[`outbox/${file}`] = readFileSync(join(rt.outboxDir, file), 'utf8');
    for (const dir of ['executions', 'jobs']) {
      for (const file of readdirSync(join(rt.dataDir, dir), { recursive: true, withFileTypes: true })) {
        if (file.isFile()) seen[`${dir}/${file.name}`] = readFileSync(join(file.parentPath, file.name), 'utf8');
      }
    }
    seen.output = output.text();
    assert.ok(logged('approval requested'), "the handlers' log lines were captured");

    for (const [where, text] of Object.entries(seen)) {
      assert.ok(!text.includes(token), `the task token appears in ${where}`);
      assert.doesNotMatch(text, TOKEN_PATTERN, `a task token appears in ${where}`);
    }
  });
});

// ---- a batch of items ----------------------------------------------------------------------

/** A drawing that would run script and fetch from the network if it were inlined into the page. */
const HOSTILE_SVG =
  "<svg xmlns='http://www.w3.org/2000/svg' xmlns:xlink='http://www.w3.org/1999/xlink' width='120' height='40' onload='alert(1)'>" +
  "<script>alert('svg script')</script><image xlink:href='http://127.0.0.1:9/beacon.png' width='1' height='1'/>" +
  "<rect width='120' height='40' fill='#ddd'/><text x='4' y='25'>not a molecule</text></svg>";

/** Writes an items document as a producer does (content-addressed under approvals/) and returns its URI. */
async function writeItemsDocument(doc: unknown): Promise<string> {
  const bucket = rt.resources.buckets[0]!;
  const body = canonicalJson(doc);
  const key = `approvals/probe/${sha256Hex(body)}.json`;
  await s3Client().send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentType: 'application/json' }));
  return `s3://${bucket}/${key}`;
}

async function moleculeBatch(label: string) {
  const molecules = [
    { smiles: 'c1ccccc1O', predicted: '1.42 ± 0.10 eV', arm: 'exploit' },
    { smiles: 'O=C1C=CC(=O)C=C1', predicted: '0.87 ± 0.25 eV', arm: 'explore' },
  ];
  return {
    caption: `Batch ${label}`,
    columns: [
      { key: 'smiles', label: 'SMILES' },
      { key: 'predicted', label: 'Predicted gap' },
      { key: 'arm', label: 'Arm' },
    ],
    items: [
      ...(await Promise.all(molecules.map(async (values) => ({ values, svg: await moleculeSvg(values.smiles, { width: 220, height: 160 }) })))),
      { values: { smiles: '<b>C</b>', predicted: 'n/a', arm: 'random' }, svg: HOSTILE_SVG },
    ],
  };
}

describe('approval page with a batch of items', () => {
  it('the email and the page list the batch, drawings as images; Approve resumes the run', { timeout: TEST_TIMEOUT_MS }, async () => {
    const itemsUri = await writeItemsDocument(await moleculeBatch('approve'));
    const run = await startWaitingRun('items', { approvalItemsUri: itemsUri });

    // The email: a line per item in the text part, the table with image drawings in the HTML part.
    assert.ok(run.email.text.includes('Items (3): Batch approve'), run.email.text);
    assert.ok(run.email.text.includes('  1. SMILES: c1ccccc1O | Predicted gap: 1.42 ± 0.10 eV | Arm: exploit'), run.email.text);
    assert.ok(run.email.text.includes('  3. SMILES: <b>C</b> | Predicted gap: n/a | Arm: random'), run.email.text);
    assert.equal((run.email.html.match(/<tr data-item-index="\d+">/g) ?? []).length, 3);
    assert.equal((run.email.html.match(/<img alt="[^"]+" src="data:image\/svg\+xml;base64,/g) ?? []).length, 3);
    assert.ok(!run.email.html.includes('<svg') && !run.email.html.includes('<script'));

    const item = await approvalItem(run.id);
    assert.equal(item.itemsUri, itemsUri);
    assert.equal('items' in item, false, 'the table item holds the URI, not the items');
    assert.equal(
      item.digest,
      approvalDigest({
        pipeline: 'probe',
        title: 'Publish the probe summary',
        details: item.details as Record<string, number>,
        itemsUri,
        itemsSha256: String(item.itemsSha256),
      }),
    );

    const page = await browser.newPage();
    const dialogs: string[] = [];
    const requests: string[] = [];
    const cspReports: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    page.on('request', (request) => requests.push(request.url()));
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) cspReports.push(message.text());
    });
    try {
      assert.equal((await page.goto(run.link))?.status(), 200);
      assert.equal(await page.locator('#items caption').textContent(), 'Batch approve');
      const rows = await page.locator('#items tbody tr').evaluateAll((trs) =>
        trs.map((tr) => ({
          index: tr.getAttribute('data-item-index'),
          cells: [...tr.querySelectorAll('td[data-column]')].map((td) => td.textContent),
          images: [...tr.querySelectorAll('img')].map((img) => ({
            alt: img.alt,
            scheme: img.src.slice(0, img.src.indexOf(',') + 1),
            // Decoded and drawn: a blocked or broken image has naturalWidth 0.
            drawn: img.complete && img.naturalWidth > 0,
          })),
        })),
      );
      const image = (alt: string) => [{ alt, scheme: 'data:image/svg+xml;base64,', drawn: true }];
      assert.deepEqual(rows, [
        { index: '0', cells: ['c1ccccc1O', '1.42 ± 0.10 eV', 'exploit'], images: image('Drawing of item 1: c1ccccc1O') },
        { index: '1', cells: ['O=C1C=CC(=O)C=C1', '0.87 ± 0.25 eV', 'explore'], images: image('Drawing of item 2: O=C1C=CC(=O)C=C1') },
        { index: '2', cells: ['<b>C</b>', 'n/a', 'random'], images: image('Drawing of item 3: <b>C</b>') },
      ]);
      // The drawings stayed images: no SVG, script or bold text entered the page (its scripts
      // are its settings and its own, hashed one), and the hostile drawing ran nothing and
      // fetched nothing.
      assert.equal(await page.locator('svg, b').count(), 0);
      assert.equal(await page.locator('script:not(#approval-config)').count(), 1);
      await page.waitForLoadState('networkidle');
      assert.deepEqual(dialogs, []);
      assert.deepEqual(
        requests.filter((url) => !url.startsWith(rt.approvalApiUrl) && !url.startsWith('data:')),
        [],
      );
      assert.deepEqual(cspReports, [], 'the data: images and the page script are allowed by the page CSP');

      await signInOnPage(page, run.link);
      const decided = await clickDecision(page, '#approve');
      assert.equal(decided.status(), 200);
      assert.equal(await page.locator('h1').textContent(), 'Approved');
    } finally {
      await page.close();
    }
    const record = await finished(run);
    assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
    assert.equal((await approvalItem(run.id)).state, 'APPROVED');
  });

  it('says so on the page when the items document is gone, and can still be rejected', { timeout: TEST_TIMEOUT_MS }, async () => {
    const itemsUri = await writeItemsDocument(await moleculeBatch('gone'));
    const run = await startWaitingRun('items-gone', { approvalItemsUri: itemsUri });
    const where = parseS3Uri(itemsUri);
    await s3Client().send(new DeleteObjectCommand({ Bucket: where.Bucket, Key: where.Key }));
    const page = await browser.newPage();
    try {
      assert.equal((await page.goto(run.link))?.status(), 200);
      assert.match((await page.locator('#items-notice').textContent()) ?? '', /cannot be shown: their document s3:\/\/\S+ is gone/);
      assert.equal(await page.locator('#items').count(), 0);
      assert.equal(await page.locator('#state').textContent(), 'PENDING');
      await signInOnPage(page, run.link);
      const decided = await clickDecision(page, '#reject');
      assert.equal(decided.status(), 200);
    } finally {
      await page.close();
    }
    const record = await finished(run);
    assert.equal(record.status, 'FAILED');
    assert.equal(record.error, 'ApprovalRejected');
  });
});

// ---- what a person sees ----------------------------------------------------------------------

/** Twelve molecules, as a molecules round lists them (the surrogate's picks and the random baseline's). */
const TWELVE = [
  ['c1ccccc1O', 'exploit'],
  ['O=C1C=CC(=O)C=C1', 'exploit'],
  ['c1ccc2ccccc2c1', 'exploit'],
  ['Nc1ccccc1', 'exploit'],
  ['O=Cc1ccccc1', 'explore'],
  ['C#Cc1ccccc1', 'explore'],
  ['CC(=O)Oc1ccccc1C(=O)O', 'random'],
  ['c1ccncc1', 'random'],
  ['O=[N+]([O-])c1ccccc1', 'random'],
  ['CCOC(=O)c1ccccc1', 'random'],
  ['c1ccc(cc1)c1ccccc1', 'random'],
  ['OC(=O)c1ccccc1O', 'random'],
] as const;

/** The details a molecules round sends with its batch (shared/molecules/campaign.ts). */
const ROUND_DETAILS = {
  round: 1,
  molecules: 12,
  exploit: 4,
  explore: 2,
  random: 6,
  knownFromEarlierRuns: 0,
  hitThreshold: '1.057 eV',
  bestPredicted: 'c1ccc2ccccc2c1 (0.91 ± 0.12 eV)',
};

describe('the approval page as a person sees it', () => {
  it('shows the decision without scrolling, no split words, keys as words, local times: a screenshot of a 12-molecule batch', {
    timeout: TEST_TIMEOUT_MS,
  }, async () => {
    const doc = {
      caption: "Round 1: the surrogate's picks (exploit, explore) and the random baseline's, side by side",
      columns: [
        { key: 'smiles', label: 'SMILES' },
        { key: 'predicted', label: 'Predicted gap' },
        { key: 'arm', label: 'Arm' },
        { key: 'pool', label: 'Pool #' },
      ],
      items: await Promise.all(
        TWELVE.map(async ([smiles, arm], i) => ({
          values: { smiles, predicted: `${(0.9 + i / 10).toFixed(2)} ± 0.${10 + i} eV`, arm, pool: String(1000 + 37 * i) },
          svg: await moleculeSvg(smiles, { width: 220, height: 160 }),
        })),
      ),
    };
    const run = await startWaitingRun('layout', { approvalItemsUri: await writeItemsDocument(doc) });
    // The page renders the item as stored; give it the details a molecules round sends.
    await dynamoClient().send(
      new UpdateCommand({
        TableName: rt.resources.tables[0]!,
        Key: approvalKey(run.id),
        UpdateExpression: 'SET details = :details',
        ExpressionAttributeValues: { ':details': ROUND_DETAILS },
      }),
    );

    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, timezoneId: 'Asia/Tokyo', locale: 'en-US' });
    const page = await context.newPage();
    try {
      await signInOnPage(page, run.link);
      await page.waitForFunction(() => [...document.images].every((img) => img.complete && img.naturalWidth > 0));
      const dir = mkdtempSync(join(tmpdir(), 'fp-approval-page-'));
      const screenshot = join(dir, 'approval-page.png');
      await page.screenshot({ path: screenshot });
      await page.screenshot({ path: join(dir, 'approval-page-full.png'), fullPage: true });
      console.log(`approval page screenshot (1280x800, signed in, 12 molecules): ${screenshot}`);

      // The decision controls sit within the first 800 pixels, above the items.
      for (const button of ['#approve', '#reject']) {
        const box = await page.locator(button).boundingBox();
        assert.ok(box && box.y >= 0 && box.y + box.height <= 800, `${button} at ${JSON.stringify(box)}: within the first viewport`);
      }
      const itemsTop = (await page.locator('#items').boundingBox())!.y;
      assert.ok(itemsTop > (await page.locator('#approve').boundingBox())!.y, 'the buttons come before the items');
      assert.equal(await page.evaluate(() => window.scrollY), 0);

      // No table cell splits a word: each word's text sits on one line, and no cell's content
      // is wider than the cell.
      const cells = await page.evaluate(() => {
        const split: string[] = [];
        const overflowing: string[] = [];
        const styles = new Set<string>();
        for (const cell of document.querySelectorAll<HTMLElement>('table th, table td')) {
          const style = getComputedStyle(cell);
          styles.add(`${style.wordBreak}/${style.overflowWrap}`);
          if (cell.scrollWidth > cell.clientWidth + 1) overflowing.push(cell.textContent ?? '');
          const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
          for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (const word of (node.textContent ?? '').matchAll(/\S+/g)) {
              const range = document.createRange();
              range.setStart(node, word.index!);
              range.setEnd(node, word.index! + word[0].length);
              const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
              if (lines.size > 1) split.push(word[0]);
            }
          }
        }
        return { split, overflowing, styles: [...styles], count: document.querySelectorAll('table th, table td').length };
      });
      assert.ok(cells.count > 12 * 6, `the cells were measured (${cells.count})`);
      assert.deepEqual(cells.split, [], 'words split across lines in a table cell');
      assert.deepEqual(cells.overflowing, [], 'cells whose content is wider than the cell');
      assert.deepEqual(cells.styles, ['normal/normal'], 'word-break and overflow-wrap of the table cells');

      // Detail keys as words, in sentence case.
      const labels = await page.locator('table.details th').allTextContents();
      assert.deepEqual(labels, ['Best predicted', 'Exploit', 'Explore', 'Hit threshold', 'Known from earlier runs', 'Molecules', 'Random', 'Round']);
      const keys = await page.locator('table.details tr').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-key')));
      assert.ok(keys.includes('knownFromEarlierRuns'), 'the key itself stays in the markup');

      // What each decision does, and the expiry in the reader's zone with UTC kept.
      assert.match((await page.locator('#outcome-approve').textContent()) ?? '', /^Approve: Publishes the summary/);
      const expiresIso = (await page.locator('#expires').getAttribute('datetime'))!;
      const local = (await page.locator('#expires .local').textContent()) ?? '';
      const localClock = new Intl.DateTimeFormat('en-US', { timeZone: 'Asia/Tokyo', hour: '2-digit', minute: '2-digit' }).format(new Date(expiresIso));
      assert.ok(local.includes(localClock) && local.includes('your time (Asia/Tokyo)'), `local time "${local}" shows ${localClock} in Asia/Tokyo`);
      assert.equal(await page.locator('#expires .utc').textContent(), utcText(expiresIso));
    } finally {
      await context.close();
    }
    assert.equal((await postDecision(run.link, 'approve', { session })).status, 200);
    assert.equal((await finished(run)).status, 'SUCCEEDED');
  });
});
