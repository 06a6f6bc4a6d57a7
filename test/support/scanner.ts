/**
 * A mail scanner that "detonates" links, as some mail security tools do: it opens the emailed
 * link in a fresh browser context (no session of anyone's), and on every page of the link's site
 * it reaches it presses every button, visible or not, the way a script does (`element.click()`),
 * then submits every form outright (`form.submit()`, which skips the page's own checks). It never
 * types and never ticks a box. It follows where its presses lead on the same site, a few pages
 * deep.
 */
import type { Browser, Page } from 'playwright-core';

export interface ScanReport {
  /** "<page path> #<button id or text>" for each button pressed. */
  readonly pressed: string[];
  /** The pages it opened. */
  readonly pages: string[];
  /** Every POST the browser sent, with the status it got. */
  readonly posts: { url: string; status: number }[];
}

const BUTTONS = 'button, input[type="submit"], input[type="button"]';

/** Lets what a press set off (a navigation, a fetch, a redirect chain) finish. */
async function settle(page: Page): Promise<void> {
  await page.waitForTimeout(150);
  await page.waitForLoadState('networkidle').catch(() => undefined);
}

/** Presses everything on the pages reachable from `link`, at most `maxPages` of them. */
export async function clickEverything(browser: Browser, link: string, maxPages = 6): Promise<ScanReport> {
  const origin = new URL(link).origin;
  const context = await browser.newContext();
  const page = await context.newPage();
  const report: ScanReport = { pressed: [], pages: [], posts: [] };
  page.on('response', (response) => {
    if (response.request().method() === 'POST') report.posts.push({ url: response.url(), status: response.status() });
  });
  const open = async (url: string) => {
    await page.goto(url).catch(() => undefined);
    await settle(page);
  };
  const queue = [link];
  try {
    while (queue.length > 0 && report.pages.length < maxPages) {
      const url = queue.shift()!;
      if (report.pages.includes(url)) continue;
      report.pages.push(url);
      await open(url);
      const names = await page
        .locator(BUTTONS)
        .evaluateAll((els) => els.map((el) => el.id || (el.textContent ?? '').trim() || el.getAttribute('value') || '?'));
      for (const [i, name] of names.entries()) {
        await open(url);
        report.pressed.push(`${new URL(url).pathname} #${name}`);
        await page
          .evaluate(
            ({ selector, index }) => {
              const element = document.querySelectorAll<HTMLElement>(selector)[index];
              element?.click();
            },
            { selector: BUTTONS, index: i },
          )
          .catch(() => undefined);
        await settle(page);
        const reached = page.url();
        if (reached.startsWith(`${origin}/`) && !report.pages.includes(reached) && !queue.includes(reached)) queue.push(reached);
      }
      const forms = await page.locator('form').count();
      for (let i = 0; i < forms; i++) {
        await open(url);
        await page.evaluate((index) => HTMLFormElement.prototype.submit.call(document.forms[index]), i).catch(() => undefined);
        await settle(page);
      }
    }
  } finally {
    await context.close();
  }
  return report;
}
