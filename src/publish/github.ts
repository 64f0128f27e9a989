import { ProbotOctokit } from 'probot';
import type { Config } from '../config/config.js';
import { fitBody, GITHUB_BODY_LIMIT } from './render.js';

/** The installation-authenticated client every handler and job uses. */
export type GitHub = InstanceType<typeof ProbotOctokit>;

export interface IssueRef {
  owner: string;
  repo: string;
  issue: number;
}

/**
 * Probot's client with its retry (5xx) and throttling plugins tuned: secondary rate limits are
 * retried after Retry-After (Probot's default only logs them), writes are paced as GitHub asks (1 s
 * apart, 3 s for writes that notify people) once more than a few come together, and both the pacing
 * and the back-off unit are configurable so tests against the emulator stay fast.
 */
export function appOctokit(config: Config): typeof ProbotOctokit {
  const base = config.app.githubRetryBaseMs;
  const interval = config.app.githubWriteIntervalMs;
  return ProbotOctokit.defaults((options: Record<string, unknown>) => ({
    ...options,
    retry: { ...(options.retry as object), retryAfterBaseValue: base },
    throttle: {
      ...(options.throttle as object),
      // In place of the plugin's groups, which space every write 1 s and every notifying write (comments,
      // PRs) 3 s apart even when a run makes only a handful.
      write: pacedGroup(interval, WRITE_BURST),
      notifications: pacedGroup(3 * interval, NOTIFYING_BURST),
      retryAfterBaseValue: base,
      onSecondaryRateLimit: (_after: number, _opts: unknown, _o: unknown, retryCount: number) =>
        retryCount < 3,
      onRateLimit: (_after: number, _opts: unknown, _o: unknown, retryCount: number) => retryCount < 2,
    },
  }));
}

/**
 * GitHub's spacing advice is for integrations making many writes; its hard limit is 80 content-creating
 * requests a minute. A run publishes a handful (status comment, PR, review request, evidence, trace,
 * configuration), so that many pass at once and only a longer stream is spaced: at most
 * NOTIFYING_BURST + 20 notifying writes in any minute.
 */
export const WRITE_BURST = 10;
export const NOTIFYING_BURST = 6;

/** Time this process spent holding writes back for GitHub's pacing (the benchmark reports it). */
let spacingWaitMs = 0;
export const githubSpacingWaitMs = (): number => spacingWaitMs;

/**
 * The generic cell rate algorithm (a token bucket kept as one timestamp): up to `burst` calls pass at
 * once, then one per `everyMs`. Returns how long the call made at `now` must wait; calls are served in
 * the order they ask.
 */
export function pacer(everyMs: number, burst: number): (now: number) => number {
  let due = 0; // when the bucket would be full again, had nothing more been asked
  const slack = (burst - 1) * everyMs;
  return (now) => {
    const wait = Math.max(0, due - slack - now);
    due = Math.max(due, now) + everyMs;
    return wait;
  };
}

/** A Bottleneck-Group-shaped limiter (what plugin-throttling calls) that paces jobs with `pacer`. */
function pacedGroup(everyMs: number, burst: number) {
  const pace = pacer(everyMs, burst);
  const limiter = {
    async schedule<A extends unknown[], R>(
      _opts: unknown,
      fn: (...args: A) => Promise<R>,
      ...args: A
    ): Promise<R> {
      const wait = pace(Date.now());
      if (wait > 0) {
        spacingWaitMs += wait;
        await new Promise((r) => setTimeout(r, wait));
      }
      return fn(...args);
    },
  };
  return { key: () => limiter };
}

/** True for GitHub's 422 "body is too long" (the limit is counted differently from JS string length). */
function isTooLong(err: unknown): boolean {
  const e = err as { status?: number; message?: string };
  return e?.status === 422 && /too long|maximum is \d+ characters/i.test(e.message ?? '');
}

/** Posts or edits with a body; on 422 too-long the body is shortened and sent again. */
async function withBody<T>(body: string, send: (body: string) => Promise<T>): Promise<T> {
  let text = fitBody(body);
  for (let limit = GITHUB_BODY_LIMIT; ;) {
    try {
      return await send(text);
    } catch (e) {
      if (!isTooLong(e) || limit < 4000) throw e;
      limit = Math.floor(Math.min(limit, text.length) * 0.8);
      text = fitBody(text, limit);
    }
  }
}

export async function postComment(gh: GitHub, ref: IssueRef, body: string): Promise<number> {
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
