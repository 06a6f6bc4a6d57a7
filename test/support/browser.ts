/** Headless Chromium for the browser tests: Debian's, driven by playwright-core (no browser download). */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';
/** No sandbox (tests run as root in CI), no GPU, nothing that reaches the network by itself. */
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Starts Debian's Chromium, or fails saying which package to install. */
export async function launchChromium(): Promise<Browser> {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: install Debian's chromium package`);
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}
