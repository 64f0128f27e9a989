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
 * retried after Retry-After (Probot's default only logs them), writes are spaced as GitHub asks
 * (1 s, and 3 s for writes that notify people), and both the spacing and the back-off unit are
 * configurable so tests against the emulator stay fast.
 */
export function appOctokit(config: Config): typeof ProbotOctokit {
  const base = config.app.githubRetryBaseMs;
  const interval = config.app.githubWriteIntervalMs;
  return ProbotOctokit.defaults((options: Record<string, unknown>) => ({
    ...options,
    retry: { ...(options.retry as object), retryAfterBaseValue: base },
    throttle: {
      ...(options.throttle as object),
      // The plugin's own groups space writes 1 s and notifying writes (comments, PRs) 3 s apart.
      write: spacedGroup(interval),
      notifications: spacedGroup(3 * interval),
      retryAfterBaseValue: base,
      onSecondaryRateLimit: (_after: number, _opts: unknown, _o: unknown, retryCount: number) =>
        retryCount < 3,
      onRateLimit: (_after: number, _opts: unknown, _o: unknown, retryCount: number) => retryCount < 2,
    },
  }));
}

/** Time this process spent holding writes back for GitHub's spacing (the benchmark reports it). */
let spacingWaitMs = 0;
export const githubSpacingWaitMs = (): number => spacingWaitMs;

/** A Bottleneck-Group-shaped limiter (what plugin-throttling calls) that spaces jobs `minMs` apart. */
function spacedGroup(minMs: number) {
  let next = 0;
  const limiter = {
    async schedule<A extends unknown[], R>(
      _opts: unknown,
      fn: (...args: A) => Promise<R>,
      ...args: A
    ): Promise<R> {
      const now = Date.now();
      const at = Math.max(now, next);
      next = at + minMs;
      if (at > now) {
        spacingWaitMs += at - now;
        await new Promise((r) => setTimeout(r, at - now));
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
