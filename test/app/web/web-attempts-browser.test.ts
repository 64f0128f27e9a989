import type { Browser } from 'puppeteer-core';
import { waitFor } from '../../support/app.js';
import { describeIf } from '../../support/skip.js';
import { chromium, launchChromium } from '../../support/browser.js';
import { attemptsRepo, startWebFixture, type WebFixture } from '../../support/web.js';

/**
 * Issue 41, item 4 in a browser: from a run's page to its attempt's page and back, the attempt's page
 * live until its outcome is recorded, under the pages' CSP (no violation, no inline style).
 */

describeIf(chromium)('attempt pages in a browser', () => {
  const MULTI = 'multi-calc';
  let f: WebFixture;
  let browser: Browser;
  beforeAll(async () => {
    f = await startWebFixture();
    attemptsRepo(f, MULTI);
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await f?.close();
  });

  it('goes from the run to its attempt and back; the attempt page follows the attempt to its outcome', async () => {
    const run = await f.label('add() subtracts', MULTI);
    await waitFor(async () =>
      (await f.app.store.events(`${run}-a1`, 0, 100)).some((e) => e.type === 'tool_end'),
    );
    const page = await browser.newPage();
    const violations: string[] = [];
    await page.evaluateOnNewDocument(
      "document.addEventListener('securitypolicyviolation', (e) => console.error('CSP violation: ' + e.violatedDirective))",
    );
    page.on('console', (m) => {
      if (/Content Security Policy|CSP violation/.test(m.text())) violations.push(m.text());
    });
    await page.goto(`${f.site}/login?login=writer-wu&next=/runs/${run}`);
    expect(new URL(page.url()).pathname).toBe(`/runs/${run}`);
    await Promise.all([page.waitForNavigation(), page.click(`table.attempts a[href="/runs/${run}-a1"]`)]);
    expect(await page.$eval('h1', (e) => e.textContent)).toMatch(/Attempt 1 of run/);
    expect(
      await page.$eval('#run', (e) => (e as unknown as { dataset: { active: string } }).dataset.active),
    ).toBe('true');
    expect(await page.$$('.calls > li > details')).toHaveLength(1);

    // The attempts end (both wait at the gate, side by side): attempt 1's page takes its outcome in
    // without a reload.
    f.release();
    await page.waitForFunction("document.getElementById('run').dataset.active === 'false'", {
      timeout: 20_000,
    });
    expect(await page.$$('.calls > li > details')).toHaveLength(3);
    expect(String(await page.$eval('.facts', (e) => e.textContent))).toMatch(/verified/);

    await Promise.all([page.waitForNavigation(), page.click(`nav a[href="/runs/${run}"]`)]);
    await page.waitForFunction("document.getElementById('run').dataset.active === 'false'", {
      timeout: 20_000,
    });
    expect(await page.$$('table.attempts tbody tr')).toHaveLength(2);
    expect(await page.evaluate("document.querySelectorAll('[style]').length")).toBe(0);
    expect(violations).toEqual([]);
  }, 90_000);
});
