/**
 * The discovery loop's smoke run, driven from the inbox in headless Chromium: each round's email
 * is read from the outbox, its link opened, the batch on the page checked against the email, and
 * Approve clicked by a signed-in approver; then the oracle runs and the next round's email
 * arrives. The last round is left to time out (60 s at the smoke size), which ends the loop
 * keeping everything measured.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import type { ExecutionRecord, LocalRuntime } from '#infra/local/runtime.ts';
import { pipelineNamed } from '#infra/cli/config.ts';
import { campaignSummary } from '#shared/molecules/discovery.ts';
import { readCampaign } from '#shared/molecules/store.ts';
import { MOLECULES_SIZES, MoleculesConfig } from '#pipelines/molecules/config.ts';
import { MOLECULES_PIPELINE } from '#pipelines/molecules/stack.ts';
import { approvalLinkIn, nextEmailOrEnd, readEml, startTestRuntime, stopTestRuntime, waitFor, type ParsedEmail } from '../support/runtime.ts';
import { launchChromium } from '../support/browser.ts';
import { signInOnPage } from '../support/approver.ts';

interface RoundSeen {
  email: ParsedEmail;
  /** SMILES in the email's text and on the page, in order. */
  emailSmiles: string[];
  pageSmiles: string[];
  drawings: number;
  jobsBefore: number;
  jobsAfter?: number;
  clicked: boolean;
}

describe('molecular discovery smoke run, approved from the inbox in Chromium', () => {
  let rt: LocalRuntime;
  let browser: Browser;
  let record: ExecutionRecord;
  const rounds: RoundSeen[] = [];
  const config = MoleculesConfig.parse(MOLECULES_SIZES.smoke);

  before(async () => {
    rt = await startTestRuntime({ pipelines: [pipelineNamed(MOLECULES_PIPELINE)] });
    browser = await launchChromium();
    const execution = rt.startExecution(MOLECULES_PIPELINE, { config });
    for (;;) {
      const next = await nextEmailOrEnd(rt, execution.done);
      if (next === undefined) break;
      await waitFor('the run to wait at the gate', () => rt.pendingCallbacks(execution.executionArn) === 1);
      const email = readEml(next);
      const link = approvalLinkIn(email.text);
      const page = await browser.newPage();
      try {
        await page.goto(link);
        const pageSmiles = await page
          .locator('#items tr[data-item-index]')
          .evaluateAll((rows) => rows.map((row) => (row.querySelector('td[data-column="smiles"]')?.textContent ?? '').trim()));
        const drawings = await page
          .locator('#items tr[data-item-index] img')
          .evaluateAll((imgs) => imgs.filter((img) => (img as HTMLImageElement).complete && (img as HTMLImageElement).naturalWidth > 0).length);
        const emailSmiles = [...email.text.matchAll(/^\s*\d+\.\s+SMILES:\s+(\S+)/gm)].map((m) => m[1]!);
        const seen: RoundSeen = { email, emailSmiles, pageSmiles, drawings, jobsBefore: rt.counters().batchJobs, clicked: false };
        rounds.push(seen);
        // Approve every round but the last, which is left to time out: signed in as a member of
        // the approvers group, through the runtime's stand-in for Cognito.
        if (rounds.length <= config.rounds) {
          await signInOnPage(page, link);
          const [response] = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST'), page.click('#approve')]);
          await page.waitForSelector(`body[data-outcome="${response.status()}"]`);
          seen.clicked = true;
          assert.equal(await page.locator('h1').textContent(), 'Approved');
        }
      } finally {
        await page.close();
      }
    }
    record = await execution.done;
    for (let i = 0; i < rounds.length - 1; i++) rounds[i]!.jobsAfter = rounds[i + 1]!.jobsBefore;
  });
  after(async () => {
    await browser?.close();
    await stopTestRuntime(rt);
  });

  it('ran the loop: every round approved by a click, the last one timed out, everything kept', async () => {
    assert.equal(record.status, 'SUCCEEDED', `${record.error}: ${record.cause}`);
    assert.equal(rounds.length, config.rounds + 1);
    assert.deepEqual(
      rounds.map((r) => r.clicked),
      [true, true, true, false],
    );
    const campaign = await readCampaign((record.output as { campaignUri: string }).campaignUri);
    assert.deepEqual(
      campaign.rounds.map((r) => r.decision),
      ['approved', 'approved', 'approved', 'timedOut'],
    );
    assert.deepEqual(campaign.stopped, { reason: 'timedOut', round: 3 });
    const s = campaignSummary(campaign);
    assert.equal(campaign.measurements.length, config.sampleSize + 2 * (config.rounds - 1) * config.batchSize);
    assert.equal(s.surrogate.calls, s.random.calls);
    // No molecule measured twice.
    assert.equal(new Set(campaign.measurements.map((m) => m.smiles)).size, campaign.measurements.length);
  });

  it('showed on the page the batch the email listed, each molecule drawn', () => {
    for (const [i, round] of rounds.entries()) {
      const expected = i === 0 ? config.sampleSize : 2 * config.batchSize;
      assert.equal(round.pageSmiles.length, expected, `round ${i}: rows on the page`);
      assert.equal(round.drawings, expected, `round ${i}: drawings rendered`);
      assert.deepEqual(round.pageSmiles, round.emailSmiles, `round ${i}: the page shows the emailed batch`);
    }
  });

  it('ran the oracle after each click, before the next email', () => {
    for (const round of rounds.filter((r) => r.clicked)) {
      assert.ok(round.jobsAfter! > round.jobsBefore, `oracle jobs ran: ${round.jobsBefore} -> ${round.jobsAfter}`);
    }
  });
});
