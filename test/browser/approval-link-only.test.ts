/**
 * The approval gate in its opt-in link-only mode (CDK context `approvalSignIn=false`), in headless
 * Chromium on the embedded runtime synthesized with that context: no user pool and no sign-in;
 * whoever opens the emailed link may decide, but only after typing the short code the page
 * shows. A mail scanner that presses every button (and submits the form outright) types nothing,
 * so it decides nothing; a person who types the code decides, once.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import type { Browser, Page, Response as PageResponse } from 'playwright-core';
import type { Execution, LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { PROBE_PIPELINE } from '#pipelines/probe/stack.ts';
import { dynamoClient } from '#shared/clients/aws.ts';
import { approvalKey } from '#shared/table.ts';
import { approvalLinkIn, nextEmail, probeInput, readEml, startTestRuntime, stopTestRuntime, waitFor, within } from '../support/runtime.ts';
import { launchChromium } from '../support/browser.ts';
import { csrfOfPage, postDecision } from '../support/approver.ts';
import { clickEverything } from '../support/scanner.ts';

const TEST_TIMEOUT_MS = 90_000;

let rt: LocalRuntime;
let browser: Browser;

interface Waiting {
  execution: Execution;
  link: string;
  id: string;
}

async function startWaitingRun(label: string): Promise<Waiting> {
  const emailed = nextEmail(rt);
  const execution = rt.startExecution(PROBE_PIPELINE, probeInput({ approve: true, label }));
  const file = await emailed;
  await waitFor('the run to wait for its callback', () => rt.pendingCallbacks(execution.executionArn) === 1);
  const link = approvalLinkIn(readEml(file).text);
  return { execution, link, id: new URL(link).pathname.split('/').pop()! };
}

async function approvalItem(id: string): Promise<Record<string, unknown>> {
  const { Item } = await dynamoClient().send(new GetCommand({ TableName: rt.resources.tables[0]!, Key: approvalKey(id), ConsistentRead: true }));
  assert.ok(Item, `approval ${id} is in the table`);
  return Item;
}

function stillWaiting(run: Waiting, because: string): void {
  assert.equal(run.execution.record.status, 'RUNNING', `${because}: the run is still running`);
  assert.equal(rt.pendingCallbacks(run.execution.executionArn), 1, `${because}: the run still waits for its callback`);
}

/** Presses a decision button; the form posts as plain HTML, so the answer is the next page. */
async function pressAndLoad(page: Page, button: '#approve' | '#reject'): Promise<PageResponse> {
  const [response] = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST' && r.url().includes('/approvals/')), page.click(button)]);
  await page.waitForLoadState('load');
  return response;
}

before(async () => {
  rt = await startTestRuntime({ pipelines: [pipelineNamed(PROBE_PIPELINE)], context: { approvalSignIn: false } });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await stopTestRuntime(rt);
});

describe('approval page in the link-only mode (approvalSignIn=false)', () => {
  it('offers no sign-in: the page shows a code to type beside the buttons', { timeout: TEST_TIMEOUT_MS }, async () => {
    const run = await startWaitingRun('shows-code');
    const page = await browser.newPage();
    try {
      await page.goto(run.link);
      assert.equal(await page.locator('#sign-in').count(), 0);
      assert.match((await page.locator('#decision-code').textContent()) ?? '', /^[A-Z2-9]{6}$/);
      assert.equal(await page.locator('#code-input').isVisible(), true);
      assert.equal(await page.locator('#approve').isVisible(), true);
      // No user pool in this app: the stand-in has nothing to sign in to.
      const signIn = await fetch(`${rt.approvalApiUrl}/_local/sign-in`, { method: 'POST', body: '{"username":"alice"}' });
      assert.equal(signIn.status, 400);
    } finally {
      await page.close();
    }
    assert.equal((await postDecision(run.link, 'reject', { code: await codeOf(run.link) })).status, 200);
    assert.equal((await within(run.execution.done, 60_000, 'the run')).error, 'ApprovalRejected');
  });

  it('a scanner that presses every button and submits the form decides nothing', { timeout: TEST_TIMEOUT_MS }, async () => {
    const run = await startWaitingRun('scanner');
    const scan = await clickEverything(browser, run.link);
    for (const button of ['#approve', '#reject'])
      assert.ok(
        scan.pressed.some((p) => p.endsWith(button)),
        `pressed ${button}: ${scan.pressed.join(', ')}`,
      );
    // Pressing a button sends nothing (the code box is required); the form submitted outright
    // reaches the API without a code and is refused.
    assert.ok(scan.posts.length > 0, 'the outright submission reached the API');
    assert.deepEqual(
      scan.posts.filter((post) => post.status !== 400),
      [],
      'every decision it sent was refused as missing the code',
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    stillWaiting(run, 'after the scanner');
    assert.equal((await approvalItem(run.id)).state, 'PENDING');

    // A wrong code, typed by hand, is refused too.
    const wrong = await postDecision(run.link, 'approve', { code: 'AAAAAA' });
    assert.equal(wrong.status, 400);
    assert.match(await wrong.text(), /Type the code shown on the page/);
    stillWaiting(run, 'after a wrong code');

    // A person types the code and decides, once.
    const page = await browser.newPage();
    try {
      await page.goto(run.link);
      await page.fill('#code-input', ((await page.locator('#decision-code').textContent()) ?? '').toLowerCase());
      const decided = await pressAndLoad(page, '#approve');
      assert.equal(decided.status(), 200);
      assert.equal(await page.locator('h1').textContent(), 'Approved');
      assert.match((await page.locator('#decision').textContent()) ?? '', /^Approved with the link and its code from /);
    } finally {
      await page.close();
    }
    assert.equal((await within(run.execution.done, 60_000, 'the run')).status, 'SUCCEEDED');
    const item = await approvalItem(run.id);
    assert.equal(item.state, 'APPROVED');
    assert.equal((item.decidedBy as { via: string }).via, 'link-and-code');
  });

  it('replays get 409 even with the code', { timeout: TEST_TIMEOUT_MS }, async () => {
    const run = await startWaitingRun('replay');
    const [csrf, code] = [await csrfOfPage(run.link), await codeOf(run.link)];
    assert.equal((await postDecision(run.link, 'approve', { csrf, code })).status, 200);
    assert.equal((await postDecision(run.link, 'reject', { csrf, code })).status, 409);
    assert.equal((await within(run.execution.done, 60_000, 'the run')).status, 'SUCCEEDED');
  });
});

/** The code the page shows, read as a person reads it. */
async function codeOf(link: string): Promise<string> {
  const page = await (await fetch(link)).text();
  const code = /id="decision-code">([A-Z0-9]+)</.exec(page)?.[1];
  assert.ok(code, 'the page shows a code');
  return code;
}
