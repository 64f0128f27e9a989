import { throttling } from '@octokit/plugin-throttling';
import { ProbotOctokit } from 'probot';
import type { Config } from '../config/config.js';
import { markerText, readMarker, unmarked, withMarker, type Marker } from '../trace/marker.js';
import { dropCopies, LATE_LANDING_TIMEOUTS, marked, placeOf, type Place, type Requester } from './landed.js';
import { fitBody, GITHUB_BODY_LIMIT } from './render.js';
import { besideTheJob, NOTIFYING_BURST, pacer, WRITE_BURST } from './pacing.js';

/** The installation-authenticated client every handler and job uses. */
export type GitHub = InstanceType<typeof ProbotOctokit>;

export interface IssueRef {
  owner: string;
  repo: string;
  issue: number;
}

/**
 * Probot's client with GitHub's limits kept by one request hook of ours instead of Probot's retry and
 * throttling plugins: each of their Bottleneck limiters yields through several timers, ~4.5 ms a hop and
 * three hops a request (15 ms against 1 ms for the request itself, measured against the emulator).
 * Writes are paced per installation as GitHub asks once more than a few come together, 5xx answers are
 * retried with back-off, secondary rate limits after Retry-After and primary ones after the reset; the
 * pacing and the back-off unit are configurable so tests against the emulator stay fast. `scrub`
 * rewrites every `body` sent (comments, pull request descriptions, replies): the one way out to GitHub.
 */
export function appOctokit(config: Config, scrub?: { text(s: string): string }): typeof ProbotOctokit {
  const paced = githubLimits({
    baseMs: config.app.githubRetryBaseMs,
    intervalMs: config.app.githubWriteIntervalMs,
    timeoutMs: config.app.githubTimeoutMs,
    scrub,
  });
  return ProbotOctokit.plugin(paced).defaults((options: Record<string, unknown>) => ({
    ...options,
    auth: authAt(options.auth, options.baseUrl),
    retry: { enabled: false },
    throttle: { ...(options.throttle as object), enabled: false },
  }));
}

/**
 * Probot gives the app's auth a request without the base URL: a token asked for with `auth()` before
 * any request had cached one went to api.github.com, not the configured GitHub (Enterprise Server).
 */
function authAt(auth: unknown, baseUrl: unknown): unknown {
  const request = (auth as { request?: { defaults(o: { baseUrl: string }): unknown } } | undefined)?.request;
  if (typeof baseUrl !== 'string' || !request) return auth;
  return { ...(auth as object), request: request.defaults({ baseUrl }) };
}

/** Statuses a retry cannot change (the retry plugin's list); 403 and 429 are retried only as rate limits. */
const FINAL_STATUSES = [400, 401, 403, 404, 410, 422, 451];
const RETRIES = { server: 3, secondary: 3, primary: 2 };

/** Time this process spent holding writes back for GitHub's pacing (the benchmark reports it). */
let spacingWaitMs = 0;
export const githubSpacingWaitMs = (): number => spacingWaitMs;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface RequestOptions {
  method: string;
  url: string;
  body?: unknown;
  request?: { signal?: AbortSignal };
}
interface FailedRequest {
  name?: string;
  status?: number;
  message?: string;
  /** The request that failed, its URL filled in: a nested one (the token request) when it differs. */
  request?: { url?: string };
  /** Absent when GitHub never answered: Octokit reports a DNS or connection failure as status 500. */
  response?: { headers?: Record<string, string | undefined> };
}
interface HookedOctokit {
  hook: {
    wrap(
      name: 'request',
      fn: (request: (o: RequestOptions) => Promise<unknown>, o: RequestOptions) => Promise<unknown>,
    ): void;
  };
  request: Requester['request'] & { endpoint: { parse(o: RequestOptions): { url: string } } };
  log: { warn(msg: string): void };
}

/**
 * How long to wait before retrying `err` (the `attempt`th retry), or null when it is not retried. A
 * 403 or 429 is a rate limit as GitHub documents them: `retry-after` seconds when it says so, else until
 * `x-ratelimit-reset` when no requests remain, else a minute when the message names a secondary limit.
 */
function retryAfter(err: FailedRequest, attempt: number, baseMs: number): number | null {
  const status = err.status ?? 0;
  const headers = err.response?.headers ?? {};
  if (status === 403 || status === 429) {
    const after = Number(headers['retry-after']);
    if (headers['retry-after'] !== undefined && after >= 0)
      return attempt < RETRIES.secondary ? after * baseMs : null;
    if (headers['x-ratelimit-remaining'] === '0') {
      if (attempt >= RETRIES.primary) return null;
      const reset = Number(headers['x-ratelimit-reset']) * 1000;
      return Math.max(Math.ceil((reset - Date.now()) / 1000) + 1, 0) * baseMs;
    }
    if (/\bsecondary rate\b/i.test(err.message ?? ''))
      return attempt < RETRIES.secondary ? 60 * baseMs : null;
    return null;
  }
  if (status >= 400 && !FINAL_STATUSES.includes(status) && attempt < RETRIES.server)
    return (attempt + 1) ** 2 * baseMs;
  return null;
}

/** A failed try GitHub may still have carried out: no answer (timed out, connection lost) or a 5xx. */
const mayHaveLanded = (err: FailedRequest): boolean => !err.response || (err.status ?? 0) >= 500;

/**
 * The request hook: pacing per installation, then the request with its retries. Each try is cut off
 * after `timeoutMs` (an answer that never comes would hold a run forever) and retried as a 5xx is.
 * A marked POST (trace/marker.ts) whose try may have landed is looked for before it is sent again
 * (landed.ts): what landed is answered as the POST's own result; once it is settled, copies of it that
 * landed late are deleted.
 */
function githubLimits(o: {
  baseMs: number;
  intervalMs: number;
  timeoutMs: number;
  scrub?: { text(s: string): string };
}) {
  const pacers = new Map<string, { write: ReturnType<typeof pacer>; notify: ReturnType<typeof pacer> }>();
  return (octokit: unknown, options: { auth?: { installationId?: number | string } }) => {
    const gh = octokit as HookedOctokit;
    const key = String(options.auth?.installationId ?? 'app');
    gh.hook.wrap('request', async (request, req) => {
      if (o.scrub && typeof req.body === 'string') req.body = o.scrub.text(req.body);
      const path = new URL(req.url, 'http://github.test').pathname;
      const write = req.method !== 'GET' && req.method !== 'HEAD' && !isTokenRequest(req.method, path);
      if (write) {
        let p = pacers.get(key);
        if (!p)
          pacers.set(
            key,
            (p = {
              write: pacer(o.intervalMs, WRITE_BURST),
              notify: pacer(3 * o.intervalMs, NOTIFYING_BURST),
            }),
          );
        const spaced = (ms: number) => ((spacingWaitMs += ms), sleep(ms));
        if (besideTheJob(req.method, path)) {
          // Never notifying: only the write pacing applies, and it takes a free slot only.
          for (let wait; (wait = p.write(Date.now(), true)) > 0;) await spaced(wait);
        } else {
          const now = Date.now();
          const wait = Math.max(p.write(now), throttling.triggersNotification(path) ? p.notify(now) : 0);
          if (wait > 0) await spaced(wait);
        }
      }
      const url = gh.request.endpoint.parse(req).url; // the template filled in, as sent
      const own = req.request?.signal; // the caller's
      const sentTo = new URL(url, 'http://github.test');
      const mark = req.method === 'POST' && typeof req.body === 'string' ? readMarker(req.body) : null;
      const place = mark ? placeOf(sentTo.pathname) : null;
      let uncertain: number | null = null; // when the last try that may have landed was sent
      /** Waits out late landings of the tries that may have landed, then deletes their copies. */
      const settle = async (keep: number) => {
        if (uncertain === null || !place || !mark) return;
        await sleep(uncertain + LATE_LANDING_TIMEOUTS * o.timeoutMs - Date.now());
        await dropCopies(gh, sentTo.origin, place, mark, keep).then(
          (n) =>
            n > 0 && gh.log.warn(`${n} late cop${n > 1 ? 'ies' : 'y'} of POST ${sentTo.pathname} deleted`),
          (e: Error) =>
            gh.log.warn(`could not look for late copies of POST ${sentTo.pathname}: ${e.message}`),
        );
      };
      for (let attempt = 0; ; attempt++) {
        const sentAt = Date.now();
        // Cleared once the try ends: AbortSignal.timeout fires at its deadline whatever became of the
        // request, so each request left a timer, an abort and a DOMException for 30 s later, which
        // the webhook endpoint met in the middle of a later burst's answers.
        const timeout = new AbortController();
        const timer = setTimeout(
          () => timeout.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')),
          o.timeoutMs,
        );
        try {
          // Hooks pass options on by reference (before-after-hook binds them): set in place, per try.
          const signal = own ? AbortSignal.any([own, timeout.signal]) : timeout.signal;
          req.request = { ...req.request, signal };
          const res = (await request(req)) as { data: { id: number } };
          clearTimeout(timer);
          await settle(res.data.id);
          return res;
        } catch (e) {
          clearTimeout(timer);
          const err = e as FailedRequest;
          // A nested request (the installation token) was retried by its own hook: one retry layer.
          if (err.name === 'AbortError' || (err.request?.url && err.request.url !== url)) throw e;
          const wait = retryAfter(err, attempt, o.baseMs);
          const sent = `${req.method} ${new URL(url, 'http://github.test').pathname}`;
          const what = err.response
            ? `GitHub answered ${err.status} to ${sent}`
            : `GitHub could not be reached for ${sent}`;
          if (wait === null) {
            // What the run's error and its status line say: who answered what to which call, after how
            // many tries (GitHub's own words stay in the message, where callers look for them).
            const tries = attempt > 0 ? ` after ${attempt + 1} tries` : '';
            if (e instanceof Error) e.message = `${what}${tries}: ${e.message}`;
            throw e;
          }
          gh.log.warn(`${what}${err.response ? '' : ` (${err.message})`}; retrying in ${wait} ms`);
          await sleep(wait);
          if (!place || !mark || !mayHaveLanded(err)) continue;
          uncertain = sentAt;
          // GitHub's clock and ours may differ: comments touched from well before the first try are read.
          const since = new Date(sentAt - 10 * 60_000);
          const found = await marked(gh, sentTo.origin, place, mark, since).catch((le: Error) => {
            gh.log.warn(`could not look for what POST ${sentTo.pathname} left: ${le.message}`);
            return [];
          });
          if (found[0]) {
            await settle(found[0].id);
            return { status: 201, url, headers: {}, data: found[0] };
          }
        }
      }
    });
  };
}

/** Requests for tokens are the client's own authentication, not writes to pace. */
function isTokenRequest(method: string, path: string): boolean {
  return method === 'POST' && /^\/app\/installations\/[^/]+\/access_tokens$/.test(path);
}

/** True for GitHub's 422 "body is too long" (the limit is counted differently from JS string length). */
function isTooLong(err: unknown): boolean {
  const e = err as { status?: number; message?: string };
  return e?.status === 422 && /too long|maximum is \d+ characters/i.test(e.message ?? '');
}

/**
 * Posts or edits with a body; on 422 too-long the body is shortened and sent again. Its marker stays
 * at its end: the text before it is what is cut.
 */
async function withBody<T>(body: string, send: (body: string) => Promise<T>): Promise<T> {
  const mark = readMarker(body);
  const tail = mark ? `\n\n${markerText(mark)}` : '';
  let text = fitBody(unmarked(body), GITHUB_BODY_LIMIT - tail.length);
  for (let limit = GITHUB_BODY_LIMIT; ;) {
    try {
      return await send(text + tail);
    } catch (e) {
      if (!isTooLong(e) || limit < 4000) throw e;
      limit = Math.floor(Math.min(limit, text.length + tail.length) * 0.8);
      text = fitBody(text, limit - tail.length);
    }
  }
}

/**
 * The app's comment on the issue that carries `mark` (the oldest), or null: a write an earlier try or an
 * earlier process made, whose id was never recorded. Anyone else's comment with the marker is ignored.
 */
export function landedComment(gh: GitHub, ref: IssueRef, mark: Marker): Promise<number | null> {
  return landedAt(gh, `/repos/${ref.owner}/${ref.repo}/issues/${ref.issue}/comments`, mark);
}

/** The same for the app's reply in the review thread of comment `inReplyTo` on pull request `ref.issue`. */
export function landedReply(
  gh: GitHub,
  ref: IssueRef,
  inReplyTo: number,
  mark: Marker,
): Promise<number | null> {
  return landedAt(
    gh,
    `/repos/${ref.owner}/${ref.repo}/pulls/${ref.issue}/comments/${inReplyTo}/replies`,
    mark,
  );
}

/** The app's write carrying `mark` where a POST to `postPath` writes (landed.ts placeOf), or null. */
async function landedAt(gh: GitHub, postPath: string, mark: Marker): Promise<number | null> {
  const place = placeOf(postPath) as Place;
  const origin = new URL(gh.request.endpoint.DEFAULTS.baseUrl).origin;
  const [landed] = await marked(gh as unknown as Requester, origin, place, mark);
  return landed?.id ?? null;
}

/**
 * Posts a comment ended by its marker (`mark`, or the one `body` has). `look`: the write may have been
 * made already (a kept write whose POST failed): the app's comment with its marker is reused if there is one.
 */
export async function postComment(
  gh: GitHub,
  ref: IssueRef,
  body: string,
  o: { mark?: Marker; look?: boolean } = {},
): Promise<number> {
  if (o.mark) body = withMarker(body, o.mark);
  const mark = readMarker(body);
  if (o.look && mark) {
    const landed = await landedComment(gh, ref, mark);
    if (landed !== null) return landed;
  }
  const res = await withBody(body, (b) =>
    gh.rest.issues.createComment({ owner: ref.owner, repo: ref.repo, issue_number: ref.issue, body: b }),
  );
  return res.data.id;
}

export async function editComment(gh: GitHub, ref: IssueRef, commentId: number, body: string): Promise<void> {
  await withBody(body, (b) =>
    gh.rest.issues.updateComment({ owner: ref.owner, repo: ref.repo, comment_id: commentId, body: b }),
  );
}

/** GitHub's answer for what is gone (410) or out of the app's sight (404), as Octokit reports it. */
export const isGone = (err: unknown): boolean =>
  [404, 410].includes((err as { status?: number })?.status ?? 0);

/** A 403 or 429 that is one of GitHub's rate limits (a later try passes), as GitHub documents them. */
export function isRateLimit(err: unknown): boolean {
  const e = err as FailedRequest | undefined;
  if (e?.status === 429) return true;
  if (e?.status !== 403) return false;
  const headers = e.response?.headers ?? {};
  return (
    headers['retry-after'] !== undefined ||
    headers['x-ratelimit-remaining'] === '0' ||
    /\brate limit/i.test(e.message ?? '')
  );
}

/**
 * An answer no later try changes: a 4xx that is no rate limit (the issue locked, deleted or transferred,
 * the comment deleted, the app uninstalled).
 */
export function isRefusal(err: unknown): boolean {
  const status = (err as { status?: unknown } | undefined)?.status;
  return typeof status === 'number' && status >= 400 && status < 500 && !isRateLimit(err);
}

/**
 * Why a run can no longer report on its issue (or pull request): deleted (410), out of the app's sight
 * (404: transferred to a repository it is not installed on, or deleted), transferred (GitHub's 301,
 * which the client follows, leads to another repository's issue), or locked (GitHub answers 403 to the
 * app's comments there: only collaborators speak in a locked conversation); null while it is there.
 */
export async function issueGone(gh: GitHub, ref: IssueRef): Promise<string | null> {
  try {
    const { data } = await gh.rest.issues.get({ owner: ref.owner, repo: ref.repo, issue_number: ref.issue });
    const here = `/repos/${ref.owner}/${ref.repo}`.toLowerCase();
    if (data.number !== ref.issue || !data.repository_url.toLowerCase().endsWith(here))
      return `issue #${ref.issue} was transferred (to ${data.html_url})`;
    if (data.locked) {
      const reason = data.active_lock_reason ? ` as ${data.active_lock_reason}` : '';
      return `issue #${ref.issue} is locked${reason}: GitHub refuses the app's comments there; unlock it to let the app report`;
    }
    return null;
  } catch (e) {
    if (!isGone(e)) throw e;
    const status = (e as { status: number }).status;
    const what = status === 410 ? 'was deleted' : 'was deleted or transferred out of the app’s sight';
    return `issue #${ref.issue} ${what} (${(e as Error).message})`;
  }
}
