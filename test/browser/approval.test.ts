/**
 * The approval gate end to end, in headless Chromium, on the embedded runtime: the probe
 * pipeline stops at "approve", the approval-request Lambda emails a signed link to the outbox,
 * and a person opens it and decides on the page served by the approval API on loopback. With
 * an items document (a batch of molecules drawn by RDKit), the email and the page list the
 * batch, drawings as images.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DeleteObjectCommand, HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import type { Browser, Page, Response as PageResponse } from 'playwright-core';
import type { Execution, LocalRuntime } from '#infra/local/runtime.ts';
import { approvalDigest, approvalLink, csrfToken, linkSignature } from '#shared/approval.ts';
import { moleculeSvg } from '#shared/molecules/pool.ts';
import { dynamoClient, s3Client } from '#shared/clients/aws.ts';
import { canonicalJson, sha256Hex } from '#shared/json.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import { approvalKey, artifactVersionKey } from '#shared/table.ts';
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

/** Clicks a decision button and returns the response to the form's POST. */
async function clickDecision(page: Page, button: '#approve' | '#reject'): Promise<PageResponse> {
  const [response] = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST' && r.url().includes('/approvals/')), page.click(button)]);
  await page.waitForLoadState('load');
  return response;
}

async function approveThroughPage(link: string): Promise<void> {
  const page = await browser.newPage();
  try {
    await page.goto(link);
    const response = await clickDecision(page, '#approve');
    assert.equal(response.status(), 200, await page.content());
  } finally {
    await page.close();
  }
}

function stillWaiting(run: Waiting, because: string): void {
  assert.equal(run.execution.record.status, 'RUNNING', `${because}: the run is still running`);
  assert.equal(rt.pendingCallbacks(run.execution.executionArn), 1, `${because}: the run still waits for its callback`);
}

before(async () => {
  output = captureOutput();
  rt = await startTestRuntime();
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await stopTestRuntime(rt);
  output?.restore();
});

describe('approval page in a browser', () => {
  it('shows what is being approved; Approve resumes the run, which publishes the summary', { timeout: TEST_TIMEOUT_MS }, async () => {
    const run = await startWaitingRun('approve');
    assert.equal(run.email.headers.subject, 'Approval needed: Publish the probe summary');
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
      assert.deepEqual(details, { count: '3', total: '14' });

      await page.fill('#comment-input', 'numbers look right');
      const decided = await clickDecision(page, '#approve');
      assert.equal(decided.status(), 200);
      assert.equal(await page.locator('h1').textContent(), 'Approved');
      assert.match((await page.locator('#decision').textContent()) ?? '', /^Approved at \d{4}-\d\d-\d\dT/);
      assert.equal(await page.locator('#comment').textContent(), 'numbers look right');
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
  });

  it('Reject fails the run with ApprovalRejected', { timeout: TEST_TIMEOUT_MS }, async () => {
    const run = await startWaitingRun('reject');
    const page = await browser.newPage();
    try {
      await page.goto(run.link);
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
      assert.match(await response.text(), /<button id="approve"/);
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

  it('a replayed decision gets "already decided" (409) and changes nothing', { timeout: TEST_TIMEOUT_MS }, async () => {
    const run = await startWaitingRun('replay');
    // Two tabs on the same link: the second holds a stale form after the first decides.
    const first = await browser.newPage();
    const stale = await browser.newPage();
    try {
      await first.goto(run.link);
      await stale.goto(run.link);
      const csrf = (await stale.locator('input[name="csrf"]').getAttribute('value')) ?? '';
      assert.notEqual(csrf, '', 'the page carries an anti-forgery token');
      assert.equal((await clickDecision(first, '#approve')).status(), 200);
      const record = await finished(run);
      assert.equal(record.status, 'SUCCEEDED');
      const decidedAt = (await approvalItem(run.id)).decidedAt;

      const replay = await clickDecision(stale, '#reject');
      assert.equal(replay.status(), 409);
      assert.equal(await stale.locator('h1').textContent(), 'This approval was already decided');

      // The same form, posted again by hand, with either decision.
      for (const decision of ['approve', 'reject']) {
        const response = await fetch(run.link, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ decision, csrf, comment: '' }).toString(),
        });
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
      // A forged link cannot decide either, even with the page's real anti-forgery token.
      const csrf = csrfToken(key, run.id, run.exp);
      const forgedPost = await fetch(forged, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ decision: 'approve', csrf }).toString(),
      });
      assert.equal(forgedPost.status, 403);
      // The real link with a made-up anti-forgery token.
      const badCsrf = await fetch(run.link, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ decision: 'approve', csrf: `${csrf.slice(0, -1)}${csrf.endsWith('A') ? 'B' : 'A'}` }).toString(),
      });
      assert.equal(badCsrf.status, 403);
      stillWaiting(run, 'after forged requests');

      // Validly signed, but expired a minute ago.
      const exp = Math.floor(Date.now() / 1000) - 60;
      const expired = approvalLink(rt.approvalApiUrl, key, run.id, exp);
      const expiredResponse = await page.goto(expired);
      assert.equal(expiredResponse?.status(), 410);
      assert.equal(await page.locator('h1').textContent(), 'This link has expired');
      assert.equal(await page.locator('button').count(), 0, 'an expired link shows no buttons');
      const expiredPost = await fetch(expired, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ decision: 'approve', csrf: csrfToken(key, run.id, exp) }).toString(),
      });
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
    const page = await browser.newPage();
    try {
      await page.goto(run.link);
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
      // The drawings stayed images: no SVG, script or bold text entered the page, and the
      // hostile drawing ran nothing and fetched nothing.
      assert.equal(await page.locator('svg, script, b').count(), 0);
      await page.waitForLoadState('networkidle');
      assert.deepEqual(dialogs, []);
      assert.deepEqual(
        requests.filter((url) => !url.startsWith(rt.approvalApiUrl) && !url.startsWith('data:')),
        [],
      );
      assert.deepEqual(cspReports, [], 'the data: images are allowed by the page CSP');

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
