import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  HOSTILE,
  OWNER,
  REPO,
  signIn,
  signInFlow,
  startWebFixture,
  type WebFixture,
} from '../../support/web.js';
import { renderMarkdown } from '../../../src/web/render.js';
import { safeNext, webRoutes } from '../../../src/web/routes.js';
import { MAX_LIVE_PER_PERSON } from '../../../src/web/live.js';
import { GitHubUsers, siteOf } from '../../../src/web/github-user.js';
import type { RunStore } from '../../../src/store/store.js';
import { waitFor } from '../../support/app.js';
import { evidenceComment } from '../../../src/publish/render.js';
import { renderStatus, runPageUrl } from '../../../src/publish/status.js';
import type { RunRecord } from '../../../src/store/store.js';

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

  // Red team (after issue 35): each open live stream looks at the store every poll, and one reader (any
  // GitHub account, for a public repository) could open as many as they liked: thousands keep serve's event
  // loop and store busy with nothing else. Past MAX_LIVE_PER_PERSON a person gets 429 until they close one.
  it('40 live streams from one reader: the first MAX_LIVE_PER_PERSON are served, the rest get 429; a closed one frees a place', async () => {
    const open = (cookie: string) => {
      const url = new URL(`${f.site}/runs/${run}/live?after=0`);
      const req = request({
        agent: false,
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        headers: { cookie },
      });
      req.on('error', () => {});
      const status = new Promise<number>((resolve) =>
        req.once('response', (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        }),
      );
      req.end();
      return { req, status };
    };
    const cookie = await signIn(f.site, 'reader-ray');
    const streams = [];
    for (let i = 0; i < 40; i++) {
      streams.push(open(cookie));
      await streams.at(-1)!.status; // one after another: which are served is then certain
    }
    const statuses = await Promise.all(streams.map((s) => s.status));
    expect(statuses.filter((s) => s === 200)).toHaveLength(MAX_LIVE_PER_PERSON); // was 40
    expect(statuses.filter((s) => s === 429)).toHaveLength(40 - MAX_LIVE_PER_PERSON);
    // Another person is not held back by this one.
    const other = open(await signIn(f.site, 'writer-wu'));
    expect(await other.status).toBe(200);
    other.req.destroy();
    streams[0]!.req.destroy();
    await waitFor(async () => {
      const again = open(cookie);
      const ok = (await again.status) === 200;
      again.req.destroy();
      return ok;
    });
    for (const s of streams) s.req.destroy();
  });

  it('a writer sees the cancel button; a POST without its CSRF token is refused, with it the run is cancelled', async () => {
    const cookie = await signIn(f.site, 'writer-wu');
    const html = await (await get(`/runs/${run}`, cookie)).text();
    expect(html).toContain('Cancel this run');
    // A reply without usage: its tokens are marked as estimated (issue 35, item 5).
    expect(html).toMatch(/120 \(estimated\)/);
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

describe('sign-in (issue 35, item 3)', () => {
  let f: WebFixture;
  beforeAll(async () => {
    f = await startWebFixture();
  });
  afterAll(() => f?.close());

  it('`next` stays on this site: `/%09/evil.example/phish` and its kin go to the run list', async () => {
    const { location } = await signInFlow(f.site, 'reader-ray', '/\t/evil.example/phish');
    expect(location).toBe('/runs');
    for (const next of [
      '/\t/evil.example/phish',
      '/\n/evil.example',
      '/ /evil.example',
      '/\\evil.example',
      '//evil.example',
      '/\u00a0/evil.example',
      'https://evil.example/',
      'evil.example',
      '/runs/\u0000',
    ])
      expect(safeNext(next)).toBe('/runs');
    for (const next of ['/runs', '/runs/r-1?after=3', '/runs?repo=a%2Fb&state=failed'])
      expect(safeNext(next)).toBe(next);
  });

  it("a callback URL from someone else's sign-in does not sign a fresh browser in (the state is bound to the browser)", async () => {
    // The attacker starts a sign-in as themselves and stops before GitHub's redirect back is followed.
    const start = await fetch(`${f.site}/login?login=outsider-olga&next=/runs`, { redirect: 'manual' });
    const authorize = start.headers.get('location')!;
    const back = await fetch(authorize, { redirect: 'manual' });
    const callback = back.headers.get('location')!;
    expect(callback).toMatch(/\/login\/callback\?.*code=/);
    // The victim's browser is sent there (a link, an image): no session, no cookie.
    const victim = await fetch(callback, { redirect: 'manual' });
    expect(victim.status).toBe(400);
    expect(victim.headers.getSetCookie().filter((c) => c.startsWith('agenticfix_session='))).toEqual([]);
    // The browser that started it, with its state cookie, is signed in; the state cookie is cleared.
    const stateCookie = start.headers.getSetCookie().find((c) => c.startsWith('agenticfix_signin='))!;
    expect(stateCookie).toMatch(/HttpOnly/);
    expect(stateCookie).toMatch(/Max-Age=\d+/);
    const own = await fetch(callback, {
      redirect: 'manual',
      headers: { cookie: stateCookie.split(';')[0]! },
    });
    expect(own.status).toBe(303);
    const set = own.headers.getSetCookie();
    expect(set.some((c) => c.startsWith('agenticfix_session='))).toBe(true);
    expect(set.some((c) => /^agenticfix_signin=;.*Max-Age=0/.test(c))).toBe(true);
  });

  it('cookies are Secure when the request came over https: X-Forwarded-Proto only from a trusted proxy', async () => {
    const cookieOf = async (trustProxy: boolean, headers: Record<string, string>) => {
      const routes = webRoutes({
        store: {} as RunStore,
        queue: { cancel: async () => null },
        client: { id: 'id', secret: 'secret' },
        publicUrl: null,
        trustProxy,
      });
      const server = createServer((req, res) => void routes(req, res));
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const { port } = server.address() as AddressInfo;
      const res = await fetch(`http://127.0.0.1:${port}/login`, { redirect: 'manual', headers });
      server.close();
      return res.headers.getSetCookie().join('\n');
    };
    expect(await cookieOf(true, { 'x-forwarded-proto': 'https' })).toMatch(/; Secure/);
    expect(await cookieOf(true, {})).not.toMatch(/Secure/);
    // Without the setting, anyone could send the header: it is not believed.
    expect(await cookieOf(false, { 'x-forwarded-proto': 'https' })).not.toMatch(/Secure/);
  });

  it('rendered Markdown links only to http(s) or relative addresses', () => {
    const out = String(
      renderMarkdown(
        '[a](https://ok.example/x) [b](docs/a.md) [c](/runs) [d](mailto:x@evil.example) ' +
          '[e](javascript:alert(1)) [f](data:text/html,x) [g](tel:123) [h](vbscript:x) [i](#top)',
      ),
    );
    const hrefs = [...out.matchAll(/href="([^"]*)"/g)].map((m) => m[1]);
    expect(hrefs).toEqual(['https://ok.example/x', 'docs/a.md', '/runs', '#top']);
  });
});

// Issue 39, item 5: the OAuth web flow through @octokit/oauth-methods, which knows GitHub's sign-in sites.
describe('the sign-in site', () => {
  const url = (api: string) =>
    new URL(
      new GitHubUsers(siteOf(api), { id: 'Iv1.abc', secret: 's' }).authorizeUrl('https://r/cb', 'st', 'ann'),
    );
  it.each([
    ['https://api.github.com', 'https://github.com'],
    ['https://ghe.example/api/v3', 'https://ghe.example'],
    // GitHub Enterprise Cloud with data residency: the API at api.<tenant>.ghe.com, sign-in at <tenant>.ghe.com.
    ['https://api.acme.ghe.com', 'https://acme.ghe.com'],
  ])('an API at %s signs people in at %s', (api, web) => {
    const u = url(api);
    expect(`${u.origin}${u.pathname}`).toBe(`${web}/login/oauth/authorize`);
    expect(Object.fromEntries(u.searchParams)).toMatchObject({
      client_id: 'Iv1.abc',
      redirect_uri: 'https://r/cb',
      state: 'st',
      login: 'ann',
    });
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
