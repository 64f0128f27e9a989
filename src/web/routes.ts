import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RunQueue } from '../queue/queue.js';
import type { RunRecord, RunState, RunStore } from '../store/store.js';
import { asset } from './assets.js';
import { GitHubUsers, SignedOut, siteOf, type Access } from './github-user.js';
import type { Html } from './html.js';
import { notice, page } from './layout.js';
import { isActive, RUN_STATES } from '../store/store.js';
import { EVENTS_LIMIT, LiveStreams } from './live.js';
import { runList } from './list-page.js';
import { runBody } from './run-page.js';
import { attemptBody, attemptEntries, attemptsSection, type AttemptEntry } from './attempts-page.js';
import { COOKIE, cookie, SIGN_IN_COOKIE, sameToken, Sessions, type Session } from './sessions.js';

/**
 * The run pages on serve's port: /runs (the list), /runs/<id> (a run), /runs/<id>/live (server-sent
 * events while it goes), POST /runs/<id>/cancel (writers), and the sign-in with GitHub (/login,
 * /login/callback, POST /logout). Every run page needs a session, and shows a run only to people
 * GitHub lets read its repository; a run of a repository they cannot read is "not found", as GitHub does.
 */

export interface WebOptions {
  store: RunStore;
  queue: Pick<RunQueue, 'cancel'>;
  /** The GitHub API base (GitHub Enterprise, the emulator); api.github.com by default. */
  githubApi?: string;
  /** The app's OAuth client; without one the pages say that sign-in is not set up. */
  client: { id: string; secret: string } | null;
  /** serve's public address (AGENTICFIX_PUBLIC_URL), else the request's Host. */
  publicUrl: string | null;
  /** A TLS proxy in front sets X-Forwarded-Proto (AGENTICFIX_TRUST_PROXY): believe it. */
  trustProxy?: boolean;
  /** How often a live page's run is looked at in the store. */
  pollMs?: number;
  log?: { warn(o: object, msg: string): void };
}

export interface WebRoutes {
  (req: IncomingMessage, res: ServerResponse): Promise<boolean>;
  /** Ends the live streams (the server cannot close while they are open). */
  close(): void;
}

/** Runs a page of the list reads from the store (fewer show when some are not the reader's). */
const LIST_PAGE = 50;
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

export function webRoutes(o: WebOptions): WebRoutes {
  const site = siteOf(o.githubApi);
  const users = o.client ? new GitHubUsers(site, o.client) : null;
  const sessions = new Sessions();
  const streams = new LiveStreams({
    store: o.store,
    pollMs: o.pollMs ?? 1000,
    headers: SECURITY_HEADERS,
    log: o.log,
  });

  const send = (
    res: ServerResponse,
    status: number,
    body: Html | string,
    type = 'text/html; charset=utf-8',
  ) => void res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': type }).end(String(body));
  const redirect = (res: ServerResponse, to: string, headers: Record<string, string> = {}) =>
    void res.writeHead(303, { ...SECURITY_HEADERS, location: to, ...headers }).end();
  const base = (req: IncomingMessage) => o.publicUrl ?? `http://${req.headers.host ?? 'localhost'}`;
  /** The browser came over https: to serve itself, through the trusted proxy, or at an https public URL. */
  const secure = (req: IncomingMessage) =>
    ('encrypted' in req.socket && req.socket.encrypted === true) ||
    (o.trustProxy === true && forwardedProto(req) === 'https') ||
    base(req).startsWith('https:');
  const flags = (req: IncomingMessage) => `HttpOnly; SameSite=Lax${secure(req) ? '; Secure' : ''}`;

  /** The person's access to the run's repository; `none` for a run they may not see. */
  async function accessTo(s: Session, run: RunRecord): Promise<Access> {
    try {
      return await sessions.access(s, `${run.owner}/${run.repo}`, () =>
        users!.access(s.token, run.owner, run.repo),
      );
    } catch (err) {
      if (err instanceof SignedOut) sessions.end(s);
      else o.log?.warn({ err, run: run.id }, 'could not ask GitHub about a repository');
      return 'none';
    }
  }

  /** A run, or an attempt of one (`<run>-a<n>`, known to its run: attempts-page.ts) with its siblings. */
  async function find(id: string): Promise<Found | null> {
    const parent = /^(.+)-a\d+$/.exec(id)?.[1];
    const run = parent ? await o.store.get(parent) : null;
    if (run) {
      const siblings = await attemptEntries(o.store, run);
      const entry = siblings.find((e) => e.run_id === id);
      if (entry) return { run, attempt: { entry, siblings } };
    }
    const found = await o.store.get(id);
    return found && { run: found };
  }

  /** The run (or attempt) and the person's access, or null when it was answered (not found, sign-in needed). */
  async function readable(req: IncomingMessage, res: ServerResponse, id: string, s: Session) {
    const found = await find(id);
    const access = found ? await accessTo(s, found.run) : 'none';
    if (!found || access === 'none') {
      send(
        res,
        404,
        notice('Not found', 'There is no such run, or you cannot read its repository.', s.login),
      );
      return null;
    }
    return { ...found, access };
  }

  async function body({ run, attempt }: Found, access: Access, s: Session): Promise<Html> {
    if (attempt) {
      const events = await o.store.events(attempt.entry.run_id, 0, EVENTS_LIMIT);
      return attemptBody({ run, ...attempt, events, githubUrl: site.web });
    }
    const [events, revisions, attempts] = await Promise.all([
      o.store.events(run.id, 0, EVENTS_LIMIT),
      run.pr_number !== null ? o.store.forPr(run.owner, run.repo, run.pr_number) : Promise.resolve([]),
      attemptEntries(o.store, run),
    ]);
    return runBody({
      run,
      events,
      revisions: revisions.length > 1 ? [...revisions].reverse() : [],
      attempts: attemptsSection(attempts),
      viewer: { writer: access === 'write', csrf: s.csrf },
      githubUrl: site.web,
    });
  }

  async function list(req: IncomingMessage, res: ServerResponse, s: Session, query: URLSearchParams) {
    const repo = query.get('repo') ?? '';
    const state = (RUN_STATES as readonly string[]).includes(query.get('state') ?? '')
      ? query.get('state')!
      : '';
    const [owner, name] = repo.includes('/') ? repo.split('/', 2) : [undefined, undefined];
    const pageNo = Math.min(Math.max(1, Number.parseInt(query.get('page') ?? '1', 10) || 1), 10_000);
    // One more than a page: whether there is an older page.
    const runs = await o.store.recent({
      owner,
      repo: name,
      state: (state || undefined) as RunState | undefined,
      limit: LIST_PAGE + 1,
      offset: (pageNo - 1) * LIST_PAGE,
    });
    const visible: RunRecord[] = [];
    for (const r of runs.slice(0, LIST_PAGE)) if ((await accessTo(s, r)) !== 'none') visible.push(r);
    const repos = [...new Set(visible.map((r) => `${r.owner}/${r.repo}`))].sort();
    if (repo && !repos.includes(repo)) repos.push(repo);
    send(
      res,
      200,
      page({
        title: 'Runs',
        user: s.login,
        csrf: s.csrf,
        body: runList(visible, { repo, state }, repos, { page: pageNo, older: runs.length > LIST_PAGE }),
      }),
    );
  }

  async function cancel(
    req: IncomingMessage,
    res: ServerResponse,
    run: RunRecord,
    access: Access,
    s: Session,
  ) {
    const form = new URLSearchParams(await readSmall(req));
    if (!sameToken(form.get('csrf') ?? undefined, s.csrf) || !sameOrigin(req, base(req)))
      return send(
        res,
        403,
        notice('Refused', 'The form is stale or came from elsewhere; reload the page.', s.login),
      );
    if (access !== 'write')
      return send(res, 403, notice('Refused', 'Only people with write access may cancel a run.', s.login));
    // As `/agenticfix cancel` does: the queue stops the issue's active run.
    if (isActive(run.state)) await o.queue.cancel(run.owner, run.repo, run.issue, s.login);
    redirect(res, `/runs/${encodeURIComponent(run.id)}`);
  }

  async function login(req: IncomingMessage, res: ServerResponse, query: URLSearchParams) {
    const next = safeNext(query.get('next'));
    const state = sessions.start(next);
    // The state is bound to this browser: a callback URL from someone else's sign-in does not sign it in.
    redirect(
      res,
      users!.authorizeUrl(`${base(req)}/login/callback`, state, query.get('login') ?? undefined),
      {
        'set-cookie': `${SIGN_IN_COOKIE}=${state}; Path=/login/callback; Max-Age=${SIGN_IN_MAX_AGE_S}; ${flags(req)}`,
      },
    );
  }

  async function callback(req: IncomingMessage, res: ServerResponse, query: URLSearchParams) {
    const state = query.get('state') ?? '';
    const mine = sameToken(cookie(req, SIGN_IN_COOKIE), state);
    const next = mine ? sessions.finish(state) : null;
    const code = query.get('code');
    if (next === null || !code)
      return send(
        res,
        400,
        notice('Sign-in failed', 'The sign-in expired or was not started here; try again.'),
      );
    let signed: { token: string; login: string };
    try {
      signed = await users!.signIn(code, `${base(req)}/login/callback`);
    } catch (err) {
      o.log?.warn({ err }, 'sign-in with GitHub failed');
      return send(res, 502, notice('Sign-in failed', 'GitHub did not accept the sign-in; try again.'));
    }
    const s = sessions.create(signed.login, signed.token);
    res.setHeader('set-cookie', [
      `${COOKIE}=${s.id}; Path=/; ${flags(req)}`,
      `${SIGN_IN_COOKIE}=; Path=/login/callback; Max-Age=0; ${flags(req)}`,
    ]);
    redirect(res, next);
  }

  const routes = (async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://local');
    const path = url.pathname;
    const got = asset(path);
    if (got && req.method === 'GET') return (void send(res, 200, got.body, got.type), true);
    if (
      path !== '/' &&
      path !== '/login' &&
      path !== '/login/callback' &&
      path !== '/logout' &&
      !path.startsWith('/runs')
    )
      return false;
    if (!users)
      return (
        void send(
          res,
          503,
          notice(
            'Sign-in is not set up',
            "Run pages need CLIENT_ID and CLIENT_SECRET (the GitHub App's OAuth client).",
          ),
        ),
        true
      );
    if (path === '/login' && req.method === 'GET')
      return (void (await login(req, res, url.searchParams)), true);
    if (path === '/login/callback' && req.method === 'GET')
      return (void (await callback(req, res, url.searchParams)), true);
    const s = sessions.of(req);
    if (path === '/logout' && req.method === 'POST') {
      const form = new URLSearchParams(await readSmall(req));
      if (s && sameToken(form.get('csrf') ?? undefined, s.csrf)) sessions.end(s);
      return (void redirect(res, '/runs'), true);
    }
    if (!s) {
      // Nothing of any run without a session: pages send the browser to sign in, the rest get a 401.
      if (req.method === 'GET' && !/\/(live|body)$/.test(path))
        return (void redirect(res, `/login?next=${encodeURIComponent(path + url.search)}`), true);
      return (void send(res, 401, 'sign in first', 'text/plain; charset=utf-8'), true);
    }
    if (path === '/' || path === '/runs' || path === '/runs/') {
      if (req.method !== 'GET') return false;
      return (void (await list(req, res, s, url.searchParams)), true);
    }
    const m = /^\/runs\/([A-Za-z0-9_.-]+)(?:\/(live|body|cancel))?$/.exec(path);
    if (!m) return false;
    const [, id, sub] = m;
    const found = await readable(req, res, id!, s);
    if (!found) return true;
    const { run, attempt, access } = found;
    // An attempt is cancelled with its run, on the run's page.
    if (sub === 'cancel' && req.method === 'POST' && !attempt) await cancel(req, res, run, access, s);
    else if (req.method !== 'GET') return false;
    else if (sub === 'live') {
      if (!streams.start(res, s.login, run, Number(url.searchParams.get('after')) || 0, id))
        send(res, 429, 'too many live run pages open; close one', 'text/plain; charset=utf-8');
    } else if (sub === 'body') send(res, 200, await body(found, access, s));
    else {
      const title = attempt ? `Attempt ${attempt.entry.n} of run ${run.id}` : `Run ${run.id}`;
      send(res, 200, page({ title, user: s.login, csrf: s.csrf, body: await body(found, access, s) }));
    }
    return true;
  }) as WebRoutes;
  routes.close = () => streams.close();
  return routes;
}

/** What a run page shows: a run, or one of its attempts. */
interface Found {
  run: RunRecord;
  attempt?: { entry: AttemptEntry; siblings: AttemptEntry[] };
}

/** How long a sign-in may take between /login and GitHub's redirect back (its state cookie lives so long). */
const SIGN_IN_MAX_AGE_S = 600;

/** Longest `next` kept for a sign-in (it is held until GitHub sends the browser back); run addresses are short. */
const MAX_NEXT = 1024;

/**
 * A path on this site to go to after signing in; anything else (or anything longer than MAX_NEXT) is the run list. Browsers drop tabs and
 * newlines from a Location and read `\` as `/`, so `/\t/evil.example` would leave the site: a path
 * with any control character, whitespace or backslash, or starting `//`, is refused.
 */
export function safeNext(next: string | null): string {
  if (!next || !next.startsWith('/') || next.startsWith('//') || next.length > MAX_NEXT) return '/runs';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0020\u007f-\u00a0\\]/.test(next)) return '/runs';
  return new URL(next, 'http://site.invalid').origin === 'http://site.invalid' ? next : '/runs';
}

/** The scheme the trusted proxy says the browser used (its first value). */
export const forwardedProto = (req: IncomingMessage): string | undefined => {
  const v = req.headers['x-forwarded-proto'];
  return (Array.isArray(v) ? v[0] : v)?.split(',')[0]?.trim().toLowerCase();
};

/** A POST from our own pages: its Origin (browsers send it with forms) is this site, when given. */
function sameOrigin(req: IncomingMessage, base: string): boolean {
  const origin = req.headers.origin;
  return origin === undefined || origin === new URL(base).origin || origin === `http://${req.headers.host}`;
}

/** A small form body (at most 4 KiB). */
async function readSmall(req: IncomingMessage): Promise<string> {
  let text = '';
  for await (const chunk of req) {
    text += String(chunk);
    if (text.length > 4096) throw new Error('form too large');
  }
  return text;
}
