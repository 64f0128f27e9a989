import { z } from 'zod';
import type { Config } from '../config/config.js';
import type { GitHub } from '../publish/github.js';
import type { Feedback, ReviewComment } from '../store/feedback.js';
import type { RunStore } from '../store/store.js';
import { capMiddle } from '../trace/cap.js';
import type { Target } from './admission.js';

/**
 * Reading a revision's feedback from GitHub once it is admitted: the review with its comments and the
 * writers' earlier threads, a mention, or the failing runs of a check suite. Every text read here is
 * untrusted and reaches the model only as the feedback of the person or check app that gave it.
 */

/** A review comment as the REST API and webhooks render it. */
export const GH_REVIEW_COMMENT = z.object({
  id: z.number().int(),
  body: z.string(),
  user: z.object({ login: z.string() }).nullable(),
  path: z.string(),
  line: z.number().int().nullish(), // null: outdated
  diff_hunk: z.string(),
  in_reply_to_id: z.number().int().nullish(),
  pull_request_review_id: z.number().int().nullish(),
});
type GhReviewComment = z.infer<typeof GH_REVIEW_COMMENT>;

/** As a revision keeps it: `id` is the thread's first comment, where a reply goes. */
const feedbackComment = (c: GhReviewComment, resolved: Set<number>): ReviewComment => ({
  id: c.in_reply_to_id ?? c.id,
  resolved: resolved.has(c.in_reply_to_id ?? c.id),
  path: c.path,
  line: c.line ?? null,
  diff_hunk: c.diff_hunk,
  body: c.body,
  user: c.user?.login ?? 'ghost',
  outdated: (c.line ?? null) === null,
});

// Whether a thread is resolved is only in the GraphQL API. A thread is known by its first comment (what
// the REST API's in_reply_to_id names), so one comment of each is read; the threads are read page by page.
const THREADS_QUERY = `query ($owner: String!, $repo: String!, $pr: Int!, $after: String) {
  repository(owner: $owner, name: $repo) {
    pullRequest(number: $pr) {
      reviewThreads(first: 100, after: $after) {
        nodes { isResolved comments(first: 1) { nodes { databaseId } } }
        pageInfo { hasNextPage endCursor }
      }
    }
  }
}`;
const THREADS = z.object({
  repository: z.object({
    pullRequest: z
      .object({
        reviewThreads: z.object({
          nodes: z.array(
            z.object({
              isResolved: z.boolean(),
              comments: z.object({ nodes: z.array(z.object({ databaseId: z.number().int().nullable() })) }),
            }),
          ),
          pageInfo: z.object({ hasNextPage: z.boolean(), endCursor: z.string().nullable() }),
        }),
      })
      .nullable(),
  }),
});

/** Pages of review threads read at most: 5,000 threads, far past what a pull request holds. */
const MAX_THREAD_PAGES = 50;

/** First comments of the pull request's resolved review threads, every page; none when GraphQL cannot say. */
export async function resolvedThreads(
  gh: GitHub,
  owner: string,
  repo: string,
  pr: number,
): Promise<Set<number>> {
  const resolved = new Set<number>();
  try {
    let after: string | null = null;
    for (let page = 0; page < MAX_THREAD_PAGES; page++) {
      const data = THREADS.parse(await gh.graphql(THREADS_QUERY, { owner, repo, pr, after }));
      const threads = data.repository.pullRequest?.reviewThreads;
      for (const t of threads?.nodes ?? [])
        if (t.isResolved) for (const c of t.comments.nodes) resolved.add(c.databaseId ?? -1);
      if (!threads?.pageInfo.hasNextPage || !threads.pageInfo.endCursor) break;
      after = threads.pageInfo.endCursor;
    }
    return resolved;
  } catch {
    return new Set();
  }
}

/**
 * A review that requested changes: its own comments, and earlier threads for context, of which only
 * writers' reach the model (anyone can comment on a public pull request).
 */
export async function reviewFeedback(
  gh: GitHub,
  t: Target,
  review: { id: number; body?: string | null | undefined; user: string },
  isWriter: (login: string) => Promise<boolean>,
): Promise<Feedback> {
  const [all, resolved] = await Promise.all([
    gh.paginate(gh.rest.pulls.listReviewComments, {
      owner: t.owner,
      repo: t.repo,
      pull_number: t.pr,
      per_page: 100,
    }),
    resolvedThreads(gh, t.owner, t.repo, t.pr),
  ]);
  const comments = all.map((c) => GH_REVIEW_COMMENT.parse(c));
  const own = comments.filter((c) => c.pull_request_review_id === review.id);
  const others = comments.filter((c) => c.pull_request_review_id !== review.id && !c.in_reply_to_id);
  const writers = await Promise.all(others.map((c) => (c.user ? isWriter(c.user.login) : false)));
  const threads = others.filter((_, i) => writers[i]);
  return {
    kind: 'review',
    user: review.user,
    review_id: review.id,
    body: review.body ?? '',
    comments: own.map((c) => feedbackComment(c, resolved)),
    threads: threads.map((c) => feedbackComment(c, resolved)),
    left_out: others.length - threads.length,
  };
}

/**
 * A review comment that mentions the app. One in a review that requests changes is left to that
 * review's event when reviews start revisions too (null).
 */
export async function mentionFeedback(
  gh: GitHub,
  t: Target,
  comment: GhReviewComment,
  user: string,
): Promise<Feedback | null> {
  if (comment.pull_request_review_id && t.rc.revise_on.includes('changes_requested')) {
    const { data: review } = await gh.rest.pulls.getReview({
      owner: t.owner,
      repo: t.repo,
      pull_number: t.pr,
      review_id: comment.pull_request_review_id,
    });
    if (review.state === 'CHANGES_REQUESTED') return null;
  }
  const resolved = await resolvedThreads(gh, t.owner, t.repo, t.pr);
  return { kind: 'mention', user, comment: feedbackComment(comment, resolved) };
}

/** A check run as the checks API lists it. */
const GH_CHECK_RUN = z.object({
  id: z.number().int(),
  name: z.string(),
  status: z.string(),
  conclusion: z.string().nullable(),
  output: z.object({ summary: z.string().nullish(), text: z.string().nullish() }),
  check_suite: z.object({ id: z.number().int() }).nullable(),
  app: z.object({ slug: z.string().optional() }).nullable(),
});
const CHECK_RUNS = z.array(GH_CHECK_RUN);

/** Check run conclusions that ask for a fix (neutral, skipped and stale do not). */
const FAILING = new Set(['failure', 'timed_out', 'cancelled', 'action_required', 'startup_failure']);
/** Check suite conclusions that no failing run can have. */
const PASSED = new Set(['success', 'neutral', 'skipped']);
const OUTPUT_TAIL_CHARS = 3000;
const SUMMARY_KEEP = 1000; // characters kept at each end of a check run's summary
const MAX_ANNOTATIONS = 50;
/**
 * Pages of 100 check runs read per listing (a suite's, a commit's). Any app with `checks:write` can put
 * thousands of runs on the pull request's head, each with about 128 KB of output: past these pages runs
 * are counted (GitHub's total_count), never read.
 */
const MAX_CHECK_RUN_PAGES = 3;
/** Failing runs of the suite told to the model (an annotations request each); the rest are counted. */
const MAX_FAILING_RUNS = 10;
/** Ignored failing runs named in the evidence; the rest are counted. */
const MAX_IGNORED_NAMED = 20;

interface ListedRun {
  id: number;
  name: string;
  conclusion: string;
  suite: number | null;
  app: string;
  summary: string;
  output_tail: string;
}

/**
 * The first MAX_CHECK_RUN_PAGES pages of a check run listing, each page cut down as it arrives: output
 * is kept (capped) only for the first `keep` failing runs of `suite`, so a page's text is not held.
 * `total`: the listing's total_count, with the runs past the cap.
 */
async function firstCheckRuns(
  pages: AsyncIterable<{ data: unknown }>,
  a: { suite: number; keep: number },
): Promise<{ runs: ListedRun[]; total: number }> {
  const runs: ListedRun[] = [];
  let total = 0;
  let page = 0;
  let kept = 0;
  for await (const res of pages) {
    const count = (res.data as { total_count?: unknown }).total_count;
    for (const c of CHECK_RUNS.parse(res.data)) {
      const suite = c.check_suite?.id ?? null;
      const detail = suite === a.suite && FAILING.has(c.conclusion ?? '') && kept++ < a.keep;
      runs.push({
        id: c.id,
        name: c.name,
        conclusion: c.conclusion ?? '',
        suite,
        app: c.app?.slug ?? 'unknown',
        summary: detail ? capMiddle(c.output.summary ?? '', SUMMARY_KEEP) : '',
        output_tail: detail ? (c.output.text ?? '').slice(-OUTPUT_TAIL_CHARS) : '',
      });
    }
    total = Math.max(total, typeof count === 'number' ? count : 0, runs.length);
    if (++page >= MAX_CHECK_RUN_PAGES) break;
  }
  return { runs, total };
}

/** The one check app trusted without being named: GitHub Actions runs the repository's own workflows. */
const DEFAULT_CHECK_APPS = ['github-actions'];

/**
 * Check apps whose failing runs may start a revision: the repository's `ci_feedback.apps`, else the
 * operator's AGENTICFIX_CHECK_APPS, else GitHub Actions only. Nothing is inferred from where an app has
 * reported before: any app with `checks:write` can report anywhere, so reporting proves no trust.
 */
function checkApps(t: Target, operatorApps: string[] | null): Set<string> {
  return new Set(t.rc.ci_feedback.apps ?? operatorApps ?? DEFAULT_CHECK_APPS);
}

/** Why an app's failing runs were ignored, and how a maintainer allows it. */
export function notAllowed(slug: string): string {
  return `its app is not an allowed check app (allow it with \`ci_feedback.apps: [${slug}]\` in the repository config, or the operator's AGENTICFIX_CHECK_APPS)`;
}

/** A completed check suite as its webhook names it. */
export interface Suite {
  id: number;
  head_sha: string;
  head_branch: string | null;
  conclusion?: string | null | undefined;
  app?: { slug?: string | undefined } | null | undefined;
}

/**
 * The failing runs of a completed check suite on the pull request's head. Only that suite's runs are
 * read, only when it ran on the pull request's own branch in this repository (a fork's pull request on
 * the same commit has no head branch here), and only when its app is allowed: anyone with
 * `checks:write`, or a fork's workflows, can put failing runs on the same commit, and their text would
 * become the model's instructions. The other failing runs on the commit are named as ignored, never
 * shown to the model. Null, with `ignored` told why where it matters: nothing to revise.
 */
export async function checksFeedback(
  gh: GitHub,
  store: RunStore,
  config: Pick<Config, 'app'>,
  t: Target,
  a: { suite: Suite; ignored: (why: string) => void },
): Promise<Feedback | null> {
  const { suite } = a;
  const head = t.pull.sha;
  if (suite.head_sha !== head) return null; // checks of an older commit
  // A suite concludes from its runs: one that succeeded has no failing run to read.
  if (PASSED.has(suite.conclusion ?? '')) return null;
  if (suite.head_branch !== t.pull.ref || t.pull.repo !== `${t.owner}/${t.repo}`) {
    a.ignored('not the pull request’s own branch in this repository');
    return null;
  }
  const allowed = checkApps(t, config.app.checkApps);
  // Most webhook payloads name the suite's app by slug; where one does not, the suite itself does.
  const slug =
    suite.app?.slug ??
    (await gh.rest.checks.getSuite({ owner: t.owner, repo: t.repo, check_suite_id: suite.id })).data.app
      ?.slug;
  if (!slug || !allowed.has(slug)) {
    a.ignored(notAllowed(slug ?? 'unknown'));
    return null;
  }
  const seen = await store.forPr(t.owner, t.repo, t.pr);
  if (seen.some((run) => run.trigger === 'checks' && run.head_commit === head)) return null;
  const [owner, repo] = [t.owner, t.repo];
  const own = await firstCheckRuns(
    gh.paginate.iterator(gh.rest.checks.listForSuite, {
      owner,
      repo,
      check_suite_id: suite.id,
      per_page: 100,
    }),
    { suite: suite.id, keep: MAX_FAILING_RUNS },
  );
  const failing = own.runs.filter((c) => c.suite === suite.id && FAILING.has(c.conclusion));
  if (failing.length === 0) {
    if (own.total > own.runs.length) a.ignored(`no failing run in its first ${own.runs.length} check runs`);
    return null;
  }
  // The commit's other failing runs are only named: read once the suite has failed, never their text.
  const all = await firstCheckRuns(
    gh.paginate.iterator(gh.rest.checks.listForRef, { owner, repo, ref: head, per_page: 100 }),
    { suite: suite.id, keep: 0 },
  );
  const others = all.runs
    .filter((c) => c.suite !== suite.id && FAILING.has(c.conclusion))
    .map((c) => ({
      name: c.name,
      app: c.app,
      why: allowed.has(c.app)
        ? 'another check suite, not the one that triggered this revision'
        : notAllowed(c.app),
    }));
  const shown = failing.slice(0, MAX_FAILING_RUNS);
  const runs = await Promise.all(
    shown.map(async (c) => {
      const notes = await gh.rest.checks.listAnnotations({
        owner,
        repo,
        check_run_id: c.id,
        per_page: MAX_ANNOTATIONS,
      });
      return {
        id: c.id,
        name: c.name,
        conclusion: c.conclusion,
        summary: c.summary,
        annotations: notes.data.map((n) => ({
          path: n.path,
          line: n.start_line,
          message: capMiddle(n.message ?? '', SUMMARY_KEEP / 4),
        })),
        output_tail: c.output_tail,
      };
    }),
  );
  return {
    kind: 'checks',
    user: slug,
    head_sha: head,
    suite_id: suite.id,
    runs,
    // The suite's runs not shown: failing past MAX_FAILING_RUNS, or past the pages read (unknown).
    left_out: failing.length - shown.length + (own.total - own.runs.length),
    ignored: others.slice(0, MAX_IGNORED_NAMED),
    ignored_more: others.length - Math.min(others.length, MAX_IGNORED_NAMED) + (all.total - all.runs.length),
  };
}
