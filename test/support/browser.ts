import { existsSync } from 'node:fs';
import puppeteer, { type Browser } from 'puppeteer-core';
import { missing, present } from './skip.js';

/** Debian's Chromium (installed by scripts/setup-services.sh), for the browser tests. */
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

/** The need of a browser test: in CI a missing Chromium is a failure, never a skip. */
export const chromium = CHROMIUM
  ? present('Chromium')
  : missing('Chromium', 'not installed (apt-get install chromium, as scripts/setup-services.sh does)');

/** Headless Chromium as the browser tests run it. */
export const launchChromium = (): Promise<Browser> =>
  puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
