import { HOSTILE, OWNER, REPO, signIn, startWebFixture, type WebFixture } from './support/web.js';
import { waitFor } from './support/app.js';
import { evidenceComment } from '../src/publish/render.js';
import { renderStatus, runPageUrl } from '../src/publish/status.js';
import type { RunRecord } from '../src/store/store.js';

/**
 * Issue 29, items 1 and 2: run pages show a run only to people GitHub lets read its repository (asked
 * with their own token from the app's OAuth web flow), nothing without a session, and the cancel
 * button (and its POST) only to writers, with a CSRF token.
 */

describe('run pages: access as GitHub decides it', () => {
  let f: WebFixture;
  let run: string;
  beforeAll(async () => {
    f = await startWebFixture();
    run = await f.label('add() subtracts');
    // At the gate: the first tool call is in the store.
    await waitFor(async () => (await f.app.store.events(run, 0, 100)).some((e) => e.type === 'tool_end'));
  });
  afterAll(() => f?.close());

  const get = (path: string, cookie?: string) =>
    fetch(`${f.site}${path}`, { redirect: 'manual', headers: cookie ? { cookie } : {} });

  it('without a session no request about a private repository run gets its data', async () => {
    for (const path of [
      `/runs/${run}`,
      `/runs/${run}/body`,
      `/runs/${run}/live`,
      '/runs',
      `/runs?repo=${OWNER}/${REPO}`,
    ]) {
      const res = await get(path);
      const text = await res.text();
      expect([303, 401]).toContain(res.status);
      if (res.status === 303) expect(res.headers.get('location')).toMatch(/^\/login\?next=/);
      expect(text).not.toContain(run);
      expect(text).not.toContain('subtracts');
    }
    // A made-up cookie is no session.
    const forged = await get(`/runs/${run}/body`, 'agenticfix_session=forged');
    expect(forged.status).toBe(401);
  });

  it('someone GitHub does not let read the repository gets "not found", as for a run that does not exist', async () => {
    const cookie = await signIn(f.site, 'outsider-olga');
    const page = await get(`/runs/${run}`, cookie);
    expect(page.status).toBe(404);
    expect(await page.text()).not.toContain('subtracts');
    expect((await get('/runs/r-none', cookie)).status).toBe(404);
    expect(await (await get('/runs', cookie)).text()).not.toContain(run);
  });

  it('a reader sees the run, escaped, without the cancel button, and may not cancel', async () => {
    const cookie = await signIn(f.site, 'reader-ray');
    const list = await (await get('/runs', cookie)).text();
    expect(list).toContain(run);
    const page = await get(`/runs/${run}`, cookie);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await page.text();
    expect(html).toContain('subtracts');
    expect(html).toContain('read_file');
    expect(html).not.toContain('<script>alert');
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).not.toContain('Cancel this run');
    const csrf = /name="csrf" value="([^"]+)"/.exec(html)![1]!; // the sign-out form's
    const refused = await fetch(`${f.site}/runs/${run}/cancel`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: `csrf=${encodeURIComponent(csrf)}`,
    });
    expect(refused.status).toBe(403);
    expect((await f.app.store.get(run))?.state).toBe('running');
  });

  it('a writer sees the cancel button; a POST without its CSRF token is refused, with it the run is cancelled', async () => {
    const cookie = await signIn(f.site, 'writer-wu');
    const html = await (await get(`/runs/${run}`, cookie)).text();
    expect(html).toContain('Cancel this run');
    const post = (body: string, headers: Record<string, string> = {}) =>
      fetch(`${f.site}/runs/${run}/cancel`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body,
      });
    expect((await post('csrf=wrong')).status).toBe(403);
    const csrf = /action="\/runs\/[^"]+\/cancel"[^]*?name="csrf" value="([^"]+)"/.exec(html)![1]!;
    expect((await post(`csrf=${csrf}`, { origin: 'https://evil.example' })).status).toBe(403);
    expect((await f.app.store.get(run))?.state).toBe('running');
    const ok = await post(`csrf=${csrf}`);
    expect(ok.status).toBe(303);
    await waitFor(async () => (await f.app.store.get(run))?.state === 'cancelled');
    expect(HOSTILE).toContain('<script>'); // the fixture's hostile text is what the page escaped
  });
});

describe('links to the run page (issue 29, item 3)', () => {
  const run = { id: 'r-1', base_commit: 'b'.repeat(40), issue: 3, issue_updated_at: null } as RunRecord;

  it('the status comment and the PR comments link the run id to its page when a public URL is set', () => {
    const page = runPageUrl('https://fix.example', 'r-1');
    expect(page).toBe('https://fix.example/runs/r-1');
    expect(renderStatus('r-1', run.base_commit, { phase: 'working' }, page)).toContain(
      '[`r-1`](https://fix.example/runs/r-1)',
    );
    expect(evidenceComment({ ...run, page }, 'evidence')).toContain('[`r-1`](https://fix.example/runs/r-1)');
    // Without one, the id stays plain.
    expect(runPageUrl(null, 'r-1')).toBeNull();
    expect(renderStatus('r-1', run.base_commit, { phase: 'working' }, null)).toContain('Run `r-1`');
    expect(evidenceComment(run, 'evidence')).not.toContain('](');
  });
});
