import { waitFor } from '../../support/app.js';
import { attemptsRepo, OWNER, signIn, startWebFixture, type WebFixture } from '../../support/web.js';

/**
 * Issue 41, item 4: the run pages group a run's attempts. The run's page lists them (verdict, model,
 * F2P/P2P, size, cost, duration, the published one marked), each has its own page with its own tool
 * calls, linking back to its run and to its siblings, every link resolves, an attempt the run does not
 * have is "not found", attempt pages are the run's repository's to read, and the run list shows the run
 * once. The fixture's repair traces through the real trace writer and waits at a gate per attempt.
 */
describe('run pages: a run of several attempts', () => {
  const MULTI = 'multi-calc';
  let f: WebFixture;
  let run: string;
  beforeAll(async () => {
    f = await startWebFixture();
    attemptsRepo(f, MULTI);
    run = await f.label('add() subtracts', MULTI);
  });
  afterAll(() => f?.close());

  const get = (path: string, cookie?: string) =>
    fetch(`${f.site}${path}`, { redirect: 'manual', headers: cookie ? { cookie } : {} });
  const toolEnd = (id: string) => async () =>
    (await f.app.store.events(id, 0, 100)).some((e) => e.type === 'tool_end');

  it('while the attempts go: listed as under way on the run page, each page live with its tool calls', async () => {
    // Both at once, in the app's two slots.
    await waitFor(toolEnd(`${run}-a1`));
    await waitFor(toolEnd(`${run}-a2`));
    const cookie = await signIn(f.site, 'reader-ray');
    const page = await (await get(`/runs/${run}`, cookie)).text();
    expect(page).toContain('Attempts (2)');
    expect(page).toContain(`href="/runs/${run}-a1"`);
    expect(page).toContain(`href="/runs/${run}-a2"`);
    expect(page.match(/under way/g)).toHaveLength(2);
    // The run's own events hold no tool calls: they are the attempt's.
    expect(await f.app.store.events(run, 0, 1000)).not.toContainEqual(
      expect.objectContaining({ type: 'tool_end' }),
    );
    const attempt = await get(`/runs/${run}-a1`, cookie);
    expect(attempt.status).toBe(200);
    expect(attempt.headers.get('content-security-policy')).toContain("style-src 'self'");
    const html = await attempt.text();
    expect(html).toContain(`data-run="${run}-a1"`);
    expect(html).toContain('data-active="true"');
    expect(html).toContain('read_file');
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).not.toContain('<script>alert');
    expect((await get(`/runs/${run}-a1/body`, cookie)).status).toBe(200);
    const live = new AbortController();
    const stream = await fetch(`${f.site}/runs/${run}-a1/live?after=0`, {
      headers: { cookie },
      signal: live.signal,
    });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toBe('text/event-stream');
    live.abort();
    // An attempt recorded is a change of the run's page (its table) even without new events of its own.
    const quiet = (await f.app.store.events(run, 0, 1000)).at(-1)?.seq ?? 0;
    const watch = new AbortController();
    const events = await fetch(`${f.site}/runs/${run}/live?after=${quiet}`, {
      headers: { cookie },
      signal: watch.signal,
    });
    const reader = events.body!.getReader();
    await reader.read(); // the stream's opening comment
    const recorded = await f.app.store.get(run);
    const next = reader.read();
    await f.app.store.update(run, { attempts: JSON.stringify([]) });
    expect(new TextDecoder().decode((await next).value)).toMatch(/^event: change/);
    await f.app.store.update(run, { attempts: recorded!.attempts });
    watch.abort();
  });

  it('once over: every attempt listed and linked both ways, each link resolves, unknown attempts are not found', async () => {
    f.release();
    await waitFor(async () => (await f.app.store.get(run))?.state === 'done', 30_000);
    const cookie = await signIn(f.site, 'reader-ray');
    const page = await (await get(`/runs/${run}`, cookie)).text();
    expect(page).toContain('Attempts (2)');
    const rows = [...page.matchAll(/<tr>\s*<td><a href="\/runs\/([^"]+)">Attempt (\d)<\/a>(.*?)<\/td>/gs)];
    expect(rows.map((m) => [m[1], m[2]])).toEqual([
      [`${run}-a1`, '1'],
      [`${run}-a2`, '2'],
    ]);
    // Same size and cost: the first is published, and marked so.
    expect(rows[0]![3]).toContain('published');
    expect(rows[1]![3]).not.toContain('published');
    // Verdict, model, F2P, P2P (the stand-in judge counts none), size, cost.
    const cells =
      /<td>verified<\/td>\s*<td>default<\/td>\s*<td>0<\/td>\s*<td>—<\/td>\s*<td>2 lines, 1 files<\/td>\s*<td>\$0\.0004<\/td>/g;
    expect(page.match(cells)).toHaveLength(2);
    // The published attempt's diff is also the run's.
    expect(page).toContain('d2h-file-wrapper');
    for (const [, id] of rows) {
      const res = await get(`/runs/${id}`, cookie);
      expect(res.status).toBe(200);
      const html = await res.text();
      expect(html).toContain(`href="/runs/${run}"`); // back to its run
      for (const [, sibling] of rows) if (sibling !== id) expect(html).toContain(`href="/runs/${sibling}"`);
      expect(html).toContain('data-active="false"');
      expect(html).toContain('F2P 0, P2P —');
      expect(html).toContain('edit_file');
    }
    for (const unknown of [`${run}-a3`, `${run}-a9`, `${run}-a01`, `${run}-a1-a1`, 'nothing-a1'])
      expect((await get(`/runs/${unknown}`, cookie)).status).toBe(404);
    // The list: the run once, with its attempts counted, no attempt as a run of its own.
    const list = await (await get(`/runs?repo=${OWNER}/${MULTI}`, cookie)).text();
    expect(list.split(`href="/runs/${run}"`)).toHaveLength(2);
    expect(list).toContain('(2 attempts)');
    expect(list).not.toContain(`${run}-a`);
  });

  it("an attempt's page is its run's repository's to read: outsiders get not found, no session gets nothing", async () => {
    const outsider = await signIn(f.site, 'outsider-olga');
    const res = await get(`/runs/${run}-a1`, outsider);
    expect(res.status).toBe(404);
    expect(await res.text()).not.toContain('subtracts');
    for (const path of [`/runs/${run}-a1`, `/runs/${run}-a1/body`]) {
      const anonymous = await get(path);
      expect([303, 401]).toContain(anonymous.status);
      expect(await anonymous.text()).not.toContain('subtracts');
    }
    // An attempt is cancelled with its run, not on its own page.
    const writer = await signIn(f.site, 'writer-wu');
    const cancel = await fetch(`${f.site}/runs/${run}-a1/cancel`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: writer, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'csrf=x',
    });
    expect(cancel.status).toBe(404);
  });
});
