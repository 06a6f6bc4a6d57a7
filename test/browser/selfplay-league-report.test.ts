/**
 * The league report as a browser shows it: headless Chromium opens the HTML the report Lambda
 * writes (from a hand-made two-generation league) and checks the three charts are drawn with real
 * sizes, the heat map has a cell per pair that met, and the sentence on Elo gaps is there.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { newLeague } from '#shared/selfplay/league-doc.ts';
import { leagueReportHtml } from '#shared/selfplay/league-report.ts';
import { leagueFixtures } from '../support/selfplay-league.ts';
import { launchChromium } from '../support/browser.ts';

describe('league report in Chromium', () => {
  let browser: Browser;
  before(async () => {
    browser = await launchChromium();
  });
  after(() => browser?.close());

  it('shows the champion, three drawn charts, the heat map cells and the tables', async () => {
    const { generation } = leagueFixtures;
    const doc = generation(generation(generation(newLeague(), 1, { random: 90, tactical: 30 }), 2, { random: 95, tactical: 70, 'gen-1': 75 }), 3, {
      random: 99,
      tactical: 80,
      'gen-1': 85,
      'gen-2': 60,
    });
    const html = await leagueReportHtml(doc, { generations: 3 });
    const page = await browser.newPage();
    const requests: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith('data:') && r.url() !== 'about:blank') requests.push(r.url());
    });
    await page.setContent(html, { waitUntil: 'load' });
    assert.match((await page.locator('#champion').textContent()) ?? '', /Champion: gen-3 \(generation 3\)/);
    for (const id of ['elo-chart', 'head-to-head', 'training-chart']) {
      const box = await page.locator(`#${id} svg`).boundingBox();
      assert.ok(box && box.width > 150 && box.height > 100, `${id} is drawn: ${JSON.stringify(box)}`);
    }
    // 9 pairs met (2 + 3 + 4), each cell drawn from both sides: 18 cells.
    assert.equal((await page.locator('#head-to-head svg path[aria-roledescription="rect mark"], #head-to-head svg g.mark-rect path').count()) >= 18, true);
    assert.equal(await page.locator('#elo-table tr').count(), 1 + 5);
    assert.equal(await page.locator('#generations tr').count(), 1 + 3);
    assert.match((await page.locator('#elo-gap').textContent()) ?? '', /An Elo gap and a head-to-head score can differ/);
    assert.deepEqual(requests, [], 'the report loads nothing from the network');
    await page.close();
  });
});
