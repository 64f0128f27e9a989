import type { Probot } from 'probot';
import { z } from 'zod';
import type { Config } from '../config/config.js';
import { postComment, type GitHub, type IssueRef } from '../publish/github.js';
import { revisionAsker } from '../publish/render.js';
import type { RunQueue } from '../queue/queue.js';
import type { Feedback, ReviewComment } from '../queue/feedback.js';
import type { NewRun, RunRecord, RunStore } from '../queue/store.js';
import { capMiddle } from '../trace/cap.js';
import { parseCommand, USAGE, type Command } from './commands.js';
import type { Intake } from './intake.js';
import {
  CHECKED,
  COMMENTED,
  GH_REVIEW_COMMENT,
  eventTime,
  HANDLED,
  INSTALLED,
  INSTALLED_REPOS,
  LABELED,
  REVIEW_COMMENTED,
  REVIEWED,
  USER,
} from './payloads.js';
import { commandRefusal, loadRepoConfig, type RepoConfig } from './repo-config.js';

/**
 * Webhook handlers. The server records each delivery the app may act on (once: a redelivered or
 * replayed webhook never acts twice) and answers before anything else; then a handler validates the
 * payload and hands it to the intake. The intake checks permission, pins the base commit and enqueues;
 * the work itself happens in the queue. A delivery stays recorded with its payload until its intake is
 * done, so one acknowledged just before a crash is taken in at the next start.
 */

export interface AppDeps {
  config: Config;
  store: RunStore;
  queue: RunQueue;
  intake: Intake;
}

/** The installation client for a delivery's installation (from the webhook context, or after a restart). */
type Auth = (installationId: number) => Promise<GitHub>;

/** As a revision keeps it: `id` is the thread's first comment, where a reply goes. */
const feedbackComment = (c: z.infer<typeof GH_REVIEW_COMMENT>, resolved: Set<number>): ReviewComment => ({
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
const CHECK_SUITES = z.object({
  check_suites: z.array(z.object({ app: z.object({ slug: z.string().optional() }).nullable() })),
});

/** Check run conclusions that ask for a fix (neutral, skipped and stale do not). */
const FAILING = new Set(['failure', 'timed_out', 'cancelled', 'action_required', 'startup_failure']);
const OUTPUT_TAIL_CHARS = 3000;
const SUMMARY_KEEP = 1000; // characters kept at each end of a check run's summary
const MAX_ANNOTATIONS = 50;

/** A pull request's head: its commit, its branch and the repository that branch is in (null: deleted). */
interface PullHead {
  sha: string;
  ref: string;
  repo: string | null;
}

const isBot = (u: z.infer<typeof USER>): boolean => u.type === 'Bot' || u.login.endsWith('[bot]');

/** Whether `body` mentions `handle` (`@agenticfix`) as a whole word, not inside another handle or an address. */
export function mentions(body: string, handle: string): boolean {
  const escaped = handle.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(^|[^\\w@.-])${escaped}(?![\\w-])`, 'i').test(body);
}

const WRITE_ROLES = new Set(['admin', 'maintain', 'write']);

/**
 * Whether a delivery is one the app may act on, read from its raw body. GitHub puts `action` first, so
 * a look at the body's start answers without parsing it; any other layout is parsed.
 */
export function wanted(event: string, body: string): boolean {
  const action = Object.hasOwn(HANDLED, event) ? HANDLED[event] : undefined;
  if (!action) return false;
  const lead = /^\s*\{\s*"action"\s*:\s*"([a-z_]*)"/.exec(body.slice(0, 100));
  if (lead) return lead[1] === action;
  try {
    return (JSON.parse(body) as { action?: unknown }).action === action;
  } catch {
    return false;
  }
}

/** Answers per installation client: a client serves one delivery, so its sender is looked up once. */
const permissions = new WeakMap<GitHub, Map<string, Promise<boolean>>>();

function canWrite(gh: GitHub, owner: string, repo: string, username: string): Promise<boolean> {
  let known = permissions.get(gh);
  if (!known) permissions.set(gh, (known = new Map()));
  const key = `${owner}/${repo}/${username}`;
  let answer = known.get(key);
  if (!answer) known.set(key, (answer = lookUpWrite(gh, owner, repo, username)));
  return answer;
}

/** write, maintain or admin on the repository (role_name is exact; `permission` folds maintain into write). */
async function lookUpWrite(gh: GitHub, owner: string, repo: string, username: string): Promise<boolean> {
  try {
    const { data } = await gh.rest.repos.getCollaboratorPermissionLevel({ owner, repo, username });
    const role = (data as { role_name?: string }).role_name;
    return WRITE_ROLES.has(role ?? '') || WRITE_ROLES.has(data.permission);
  } catch (e) {
    if ((e as { status?: number }).status === 404) return false;
    throw e;
  }
}

/** Creates label `name` in the repository unless it is there (GitHub matches label names case-insensitively). */
async function ensureLabel(gh: GitHub, owner: string, repo: string, name: string): Promise<void> {
  const found = await gh.rest.issues.getLabel({ owner, repo, name }).then(
    () => true,
    (e: { status?: number }) => (e.status === 404 ? false : Promise.reject(e)),
  );
  if (found) return;
  await gh.rest.issues
    .createLabel({
      owner,
      repo,
      name,
      color: '5319e7',
      description: 'AgenticFix: a maintainer adds it to have the app fix the issue',
    })
    // Made meanwhile (another delivery, a person): what was wanted.
    .catch((e: { status?: number; response?: { data?: { errors?: { code?: string }[] } } }) => {
      if (e.status !== 422 || !e.response?.data?.errors?.some((x) => x.code === 'already_exists')) throw e;
    });
}

const politeNo = (login: string, what: string) =>
  `Thanks, @${login}! Only people with write access to this repository can ${what}, so nothing was started. A maintainer can do it for you.`;

export function createApp(deps: AppDeps) {
  const { config, store, queue, intake } = deps;

  /** The default branch's head right now: the commit a run is pinned to. */
  async function headOf(gh: GitHub, owner: string, repo: string, branch: string): Promise<string> {
    const { data } = await gh.rest.repos.getBranch({ owner, repo, branch });
    return data.commit.sha;
  }

  /**
   * Answers `login` on an issue. People without write access get at most one reply per issue per
   * AGENTICFIX_OUTSIDER_REPLY_INTERVAL_S (counted in the store, so a restart does not reset it): their
   * commands cannot make the app flood an issue.
   */
  async function replyTo(gh: GitHub, ref: IssueRef, login: string, body: string): Promise<void> {
    const writer = await canWrite(gh, ref.owner, ref.repo, login);
    if (
      !writer &&
      !(await store.claimOutsiderReply(ref.owner, ref.repo, ref.issue, config.app.outsiderReplyIntervalMs))
    )
      return;
    await postComment(gh, ref, body);
  }

  async function start(run: Omit<NewRun, 'delivery_id'>, deliveryId: string): Promise<RunRecord> {
    const created = await store.createRun({ ...run, delivery_id: deliveryId });
    await queue.enqueue(created);
    return created;
  }

  async function onLabeled(id: string, gh: GitHub, d: z.infer<typeof LABELED>): Promise<void> {
    const { repository: r, sender, issue, label, installation } = d;
    const owner = r.owner.login;
    const ref = { owner, repo: r.name, issue: issue.number };
    // The repository's config (which may rename the trigger label) is read only for a sender who may
    // start a run: nobody else's label event costs more than this one permission check.
    if (!(await canWrite(gh, owner, r.name, sender.login))) {
      if (label?.name === config.app.label)
        await replyTo(gh, ref, sender.login, politeNo(sender.login, 'start AgenticFix'));
      return;
    }
    const base = await headOf(gh, owner, r.name, r.default_branch);
    // An unreadable or invalid config falls back to the default label; the job then reports the error
    // on the issue.
    const rc = await loadRepoConfig(gh, owner, r.name, base, config);
    const wanted = (rc.ok && rc.config.label) || config.app.label;
    if (label?.name !== wanted) return;
    await start(
      {
        ...ref,
        installation_id: installation.id,
        trigger: 'label',
        triggered_by: sender.login,
        base_commit: base,
        issue_title: issue.title,
        issue_body: issue.body ?? '',
        issue_updated_at: issue.updated_at,
      },
      id,
    );
  }

  /**
   * The app installed (or given more repositories): each gets the trigger label when it lacks it, so
   * maintainers find it in the label list. One repository refusing (archived, say) stops no other.
   */
  async function onInstalled(gh: GitHub, repos: { full_name: string }[], log: Probot['log']): Promise<void> {
    for (const { full_name } of repos) {
      const [owner = '', repo = ''] = full_name.split('/');
      await ensureLabel(gh, owner, repo, config.app.label).catch((err: unknown) =>
        log.warn({ err, repository: full_name }, 'could not create the trigger label'),
      );
    }
  }

  async function onComment(id: string, gh: GitHub, d: z.infer<typeof COMMENTED>): Promise<void> {
    const { repository: r, sender, comment, issue, installation } = d;
    const parsed = parseCommand(comment.body);
    if (parsed.type === 'none') return;
    const owner = r.owner.login;
    // A command on the app's pull request is about the issue that PR fixes.
    const issueNumber = issue.pull_request
      ? await store.issueForPr(owner, r.name, issue.number)
      : issue.number;
    if (issueNumber === null) return; // someone else's pull request
    const reply = (body: string) =>
      replyTo(gh, { owner, repo: r.name, issue: issue.number }, sender.login, body);
    if (parsed.type === 'invalid')
      return void (await reply(`Sorry, I did not understand that: ${parsed.reason}.\n\n${USAGE}`));
    // 👀 only for a writer's command: anyone else's gets at most the rate-limited reply, never a write
    // of its own per comment.
    if (await canWrite(gh, owner, r.name, sender.login))
      await gh.rest.reactions.createForIssueComment({
        owner,
        repo: r.name,
        comment_id: comment.id,
        content: 'eyes',
      });
    if (parsed.command.kind === 'revise') {
      if (!(await canWrite(gh, owner, r.name, sender.login)))
        return void (await reply(politeNo(sender.login, 'revise this pull request')));
      if (!issue.pull_request)
        return void (await reply(
          '`/agenticfix revise` works on the pull request AgenticFix opened, not on the issue.',
        ));
      const { text } = parsed.command;
      await startRevision(id, gh, {
        owner,
        repo: r.name,
        pr: issue.number,
        installationId: installation.id,
        trigger: 'revise',
        feedback: async () => ({ kind: 'command', user: sender.login, text }),
        reply,
      });
      return;
    }
    const ref = { owner, repo: r.name, issue: issueNumber };
    await runCommand(id, gh, parsed.command, ref, sender.login, installation.id, r.default_branch, reply);
  }

  /** A review asking for changes on the app's pull request, from a writer, revises it when the repository allows. */
  async function onReview(id: string, gh: GitHub, d: z.infer<typeof REVIEWED>): Promise<void> {
    const { repository: r, sender, review, pull_request: pr, installation } = d;
    const owner = r.owner.login;
    if ((await store.issueForPr(owner, r.name, pr.number)) === null) return; // someone else's pull request
    if (!(await canWrite(gh, owner, r.name, sender.login))) return;
    await startRevision(id, gh, {
      owner,
      repo: r.name,
      pr: pr.number,
      installationId: installation.id,
      trigger: 'review',
      feedback: async () => {
        const [all, resolved] = await Promise.all([
          gh.paginate(gh.rest.pulls.listReviewComments, {
            owner,
            repo: r.name,
            pull_number: pr.number,
            per_page: 100,
          }),
          resolvedThreads(gh, owner, r.name, pr.number),
        ]);
        const comments = all.map((c) => GH_REVIEW_COMMENT.parse(c));
        const own = comments.filter((c) => c.pull_request_review_id === review.id);
        // Earlier threads give context, but only a writer's words reach the model: anyone can comment
        // on a public pull request (one permission look-up per author, cached for this delivery).
        const others = comments.filter((c) => c.pull_request_review_id !== review.id && !c.in_reply_to_id);
        const writers = await Promise.all(
          others.map((c) => (c.user ? canWrite(gh, owner, r.name, c.user.login) : false)),
        );
        const threads = others.filter((_, i) => writers[i]);
        return {
          kind: 'review',
          user: sender.login,
          review_id: review.id,
          body: review.body ?? '',
          comments: own.map((c) => feedbackComment(c, resolved)),
          threads: threads.map((c) => feedbackComment(c, resolved)),
          left_out: others.length - threads.length,
        };
      },
      reply: async (body) => void (await postComment(gh, { owner, repo: r.name, issue: pr.number }, body)),
    });
  }

  /**
   * A review comment mentioning the app on its pull request, from a writer, revises it when the
   * repository allows. A comment in a review that requests changes is left to that review's event
   * when reviews start revisions too.
   */
  async function onMention(id: string, gh: GitHub, d: z.infer<typeof REVIEW_COMMENTED>): Promise<void> {
    const { repository: r, sender, comment, pull_request: pr, installation } = d;
    const owner = r.owner.login;
    if ((await store.issueForPr(owner, r.name, pr.number)) === null) return;
    if (!(await canWrite(gh, owner, r.name, sender.login))) return;
    await startRevision(id, gh, {
      owner,
      repo: r.name,
      pr: pr.number,
      installationId: installation.id,
      trigger: 'mention',
      feedback: async (_pull, rc) => {
        if (comment.pull_request_review_id && rc.revise_on.includes('changes_requested')) {
          const { data: review } = await gh.rest.pulls.getReview({
            owner,
            repo: r.name,
            pull_number: pr.number,
            review_id: comment.pull_request_review_id,
          });
          if (review.state === 'CHANGES_REQUESTED') return null;
        }
        const resolved = await resolvedThreads(gh, owner, r.name, pr.number);
        return { kind: 'mention', user: sender.login, comment: feedbackComment(comment, resolved) };
      },
      reply: async (body) => void (await postComment(gh, { owner, repo: r.name, issue: pr.number }, body)),
    });
  }

  /**
   * Check apps whose failing runs may start a revision: the repository's `ci_feedback.apps`, else the
   * operator's AGENTICFIX_CHECK_APPS, else GitHub Actions and the apps that reported on the default
   * branch's head (the repository's own CI).
   */
  async function checkApps(gh: GitHub, owner: string, repo: string, rc: RepoConfig, base: string) {
    const listed = rc.ci_feedback.apps ?? config.app.checkApps;
    if (listed) return new Set(listed);
    const { data } = await gh.rest.checks.listSuitesForRef({ owner, repo, ref: base, per_page: 100 });
    const onBase = CHECK_SUITES.parse(data).check_suites.flatMap((c) => (c.app ? [c.app.slug] : []));
    return new Set(['github-actions', ...onBase]);
  }

  /**
   * A completed check suite on the app's pull request (`ci_feedback.enabled`): its failing runs start a
   * revision. Only that suite's runs are read, only when it ran on the pull request's head on the app's
   * own branch in this repository (a fork's pull request on the same commit has no head branch here),
   * and only when its app is allowed: anyone with `checks:write`, or a fork's workflows, can put failing
   * runs on the same commit, and their text would become the model's instructions. The other failing
   * runs on the commit are named in the evidence as ignored, never shown to the model.
   */
  async function onChecks(
    id: string,
    gh: GitHub,
    d: z.infer<typeof CHECKED>,
    log: Probot['log'],
  ): Promise<void> {
    const { repository: r, check_suite: suite, installation } = d;
    const owner = r.owner.login;
    let pr: (typeof suite.pull_requests)[number] | undefined;
    for (const p of suite.pull_requests)
      if ((await store.issueForPr(owner, r.name, p.number)) !== null) {
        pr = p;
        break;
      }
    if (!pr) return;
    const ignored = (why: string) =>
      log.info({ delivery: id, suite: suite.id }, `check suite ignored: ${why}`);
    await startRevision(id, gh, {
      owner,
      repo: r.name,
      pr: pr.number,
      installationId: installation.id,
      trigger: 'checks',
      feedback: async (pull, rc) => {
        const head = pull.sha;
        if (suite.head_sha !== head) return null; // checks of an older commit
        if (suite.head_branch !== pull.ref || pull.repo !== `${owner}/${r.name}`) {
          ignored('not the pull request’s own branch in this repository');
          return null;
        }
        const allowed = await checkApps(gh, owner, r.name, rc, r.default_branch);
        // Most webhook payloads name the suite's app by slug; where one does not, the suite itself does.
        const slug =
          suite.app?.slug ??
          (await gh.rest.checks.getSuite({ owner, repo: r.name, check_suite_id: suite.id })).data.app?.slug;
        if (!slug || !allowed.has(slug)) {
          ignored('its app is not an allowed check app');
          return null;
        }
        const seen = await store.forPr(owner, r.name, pr!.number);
        if (seen.some((run) => run.trigger === 'checks' && run.head_commit === head)) return null;
        // Every page: a suite or a commit can have more check runs than one page holds.
        const [own, all] = await Promise.all(
          [
            gh.paginate(gh.rest.checks.listForSuite, {
              owner,
              repo: r.name,
              check_suite_id: suite.id,
              per_page: 100,
            }),
            gh.paginate(gh.rest.checks.listForRef, { owner, repo: r.name, ref: head, per_page: 100 }),
          ].map(async (p) => CHECK_RUNS.parse(await p)),
        );
        const failing = own!.filter((c) => c.check_suite?.id === suite.id && FAILING.has(c.conclusion ?? ''));
        if (failing.length === 0) return null;
        const others = all!
          .filter((c) => c.check_suite?.id !== suite.id && FAILING.has(c.conclusion ?? ''))
          .map((c) => ({
            name: c.name,
            app: c.app?.slug ?? 'unknown',
            why: allowed.has(c.app?.slug ?? '')
              ? 'another check suite, not the one that triggered this revision'
              : 'its app is not an allowed check app',
          }));
        const runs = await Promise.all(
          failing.map(async (c) => {
            const notes = await gh.rest.checks.listAnnotations({
              owner,
              repo: r.name,
              check_run_id: c.id,
              per_page: MAX_ANNOTATIONS,
            });
            return {
              id: c.id,
              name: c.name,
              conclusion: c.conclusion ?? 'failure',
              summary: capMiddle(c.output.summary ?? '', SUMMARY_KEEP),
              annotations: notes.data.map((a) => ({
                path: a.path,
                line: a.start_line,
                message: capMiddle(a.message ?? '', SUMMARY_KEEP / 4),
              })),
              output_tail: (c.output.text ?? '').slice(-OUTPUT_TAIL_CHARS),
            };
          }),
        );
        return {
          kind: 'checks',
          user: slug,
          head_sha: head,
          suite_id: suite.id,
          runs,
          ignored: others,
        };
      },
      reply: async (body) => void (await postComment(gh, { owner, repo: r.name, issue: pr.number }, body)),
    });
  }

  /**
   * Starts revision N of the app's pull request `pr`: pinned to the PR's head (maintainers' commits
   * included), judged against the base of the run that opened it, within the repository's
   * `revise_on` and `max_revisions`. A newer trigger supersedes an active run of the same issue.
   */
  async function startRevision(
    deliveryId: string,
    gh: GitHub,
    a: {
      owner: string;
      repo: string;
      pr: number;
      installationId: number;
      trigger: 'revise' | 'review' | 'mention' | 'checks';
      /** Read once the revision may start, at the pull request's head; null: nothing to revise. */
      feedback: (pull: PullHead, rc: RepoConfig) => Promise<Feedback | null>;
      reply: (body: string) => Promise<unknown>;
    },
  ): Promise<void> {
    const runs = await store.forPr(a.owner, a.repo, a.pr); // newest first
    const origin = runs.find((run) => run.revision === null);
    if (!origin) return; // not a pull request the app opened
    const earlier = runs.slice(0, runs.indexOf(origin)); // revisions since that run
    const rc = await loadRepoConfig(gh, a.owner, a.repo, origin.base_commit, config);
    if (!rc.ok) {
      // Said to people who asked; a CI failure on every push would repeat it to nobody in particular.
      if (a.trigger !== 'checks') await a.reply(`${rc.error}\n\nNo revision was started.`);
      return;
    }
    if (a.trigger === 'checks') {
      const ci = rc.config.ci_feedback;
      if (!ci.enabled || earlier.filter((run) => run.trigger === 'checks').length >= ci.max_rounds) return;
    } else {
      const kind = ({ revise: 'command', review: 'changes_requested', mention: 'mention' } as const)[
        a.trigger
      ];
      if (!rc.config.revise_on.includes(kind)) {
        if (a.trigger === 'revise')
          await a.reply(
            `Revising on request is not enabled here: \`revise_on\` in \`.github/agenticfix.yml\` does not include \`command\`. Nothing was started.`,
          );
        return;
      }
    }
    if (earlier.length >= rc.config.max_revisions)
      return void (await a.reply(
        `This pull request has had ${earlier.length} revisions, the limit (\`max_revisions: ${rc.config.max_revisions}\`). Nothing was started; \`/agenticfix rerun\` on the issue starts over.`,
      ));
    const { data: pull } = await gh.rest.pulls.get({ owner: a.owner, repo: a.repo, pull_number: a.pr });
    if (pull.state !== 'open')
      return void (await a.reply('This pull request is closed; nothing was started.'));
    const feedback = await a.feedback(
      { sha: pull.head.sha, ref: pull.head.ref, repo: pull.head.repo?.full_name ?? null },
      rc.config,
    );
    if (!feedback) return;
    start(
      {
        owner: a.owner,
        repo: a.repo,
        issue: origin.issue,
        installation_id: a.installationId,
        trigger: a.trigger,
        triggered_by: feedback.user,
        base_commit: origin.base_commit,
        issue_title: origin.issue_title,
        issue_body: origin.issue_body,
        issue_updated_at: origin.issue_updated_at,
        pr_number: a.pr,
        revision: earlier.length + 1,
        head_commit: pull.head.sha,
        feedback,
        // One status comment on the pull request, edited in place revision after revision.
        status_comment_id: earlier.find((run) => run.status_comment_id !== null)?.status_comment_id ?? null,
      },
      deliveryId,
    );
  }

  /**
   * Validates a recorded delivery and hands it to the intake; one that asks nothing of the app (a bot, a
   * comment without a command, a payload of another shape) is marked done at once.
   */
  async function receive(
    id: string,
    event: string,
    payload: unknown,
    auth: Auth,
    log: Probot['log'],
  ): Promise<void> {
    const ignore = async (why?: unknown) => {
      if (why) log.warn({ err: why, delivery: id, event }, 'unexpected payload');
      await store.finishDelivery(id);
    };
    if (event === 'installation' || event === 'installation_repositories') {
      const p = (event === 'installation' ? INSTALLED : INSTALLED_REPOS).safeParse(payload);
      if (!p.success) return ignore(p.error);
      const repos = 'repositories_added' in p.data ? p.data.repositories_added : (p.data.repositories ?? []);
      return intake.run(id, async () => onInstalled(await auth(p.data.installation.id), repos, log));
    }
    // Deliveries are pruned after AGENTICFIX_DELIVERY_MAX_AGE_D: an older event may be a replay of one.
    const at = eventTime(event, payload);
    if (at === null || at < Date.now() - config.app.retention.deliveryMaxAgeMs) {
      log.warn({ delivery: id, event, event_time: at }, 'refused: event older than the delivery retention');
      return ignore();
    }
    if (event === 'pull_request_review') {
      const p = REVIEWED.safeParse(payload);
      if (!p.success) return ignore(p.error);
      const { sender, review } = p.data;
      if (isBot(sender) || review.state.toLowerCase() !== 'changes_requested') return ignore();
      return intake.run(id, async () => onReview(id, await auth(p.data.installation.id), p.data));
    } else if (event === 'pull_request_review_comment') {
      const p = REVIEW_COMMENTED.safeParse(payload);
      if (!p.success) return ignore(p.error);
      const { sender, comment } = p.data;
      if (isBot(sender) || !mentions(comment.body, config.app.mention)) return ignore();
      return intake.run(id, async () => onMention(id, await auth(p.data.installation.id), p.data));
    } else if (event === 'check_suite') {
      // CI apps are bots: here the sender is not a person asking, the repository's checks are.
      const p = CHECKED.safeParse(payload);
      if (!p.success) return ignore(p.error);
      if (p.data.check_suite.pull_requests.length === 0) return ignore();
      return intake.run(id, async () => onChecks(id, await auth(p.data.installation.id), p.data, log));
    } else if (event === 'issues') {
      const p = LABELED.safeParse(payload);
      if (!p.success) return ignore(p.error);
      if (isBot(p.data.sender) || !p.data.label) return ignore();
      return intake.run(id, async () => onLabeled(id, await auth(p.data.installation.id), p.data));
    } else {
      const p = COMMENTED.safeParse(payload);
      if (!p.success) return ignore(p.error);
      const { sender, comment } = p.data;
      if (
        isBot(sender) ||
        (comment.user && isBot(comment.user)) ||
        parseCommand(comment.body).type === 'none'
      )
        return ignore();
      return intake.run(id, async () => onComment(id, await auth(p.data.installation.id), p.data));
    }
  }

  return {
    /** The Probot app function: Probot routes each recorded delivery here after it was answered. */
    register(app: Probot): void {
      for (const [event, action] of Object.entries(HANDLED))
        app.on(`${event}.${action}` as 'issues.labeled', async (context) =>
          receive(context.id, event, context.payload, async () => context.octokit as GitHub, app.log),
        );
    },
    /** Takes in the deliveries a previous process acknowledged but did not finish. */
    async resume(auth: Auth, log: Probot['log']): Promise<number> {
      const pending = await store.pendingDeliveries();
      for (const d of pending)
        receive(d.id, d.event, d.payload, auth, log).catch((err: unknown) =>
          log.error({ err, delivery: d.id }, 'could not take in a delivery'),
        );
      return pending.length;
    },
  };

  async function runCommand(
    deliveryId: string,
    gh: GitHub,
    command: Command,
    ref: IssueRef,
    login: string,
    installationId: number,
    defaultBranch: string,
    reply: (body: string) => Promise<unknown>,
  ): Promise<void> {
    switch (command.kind) {
      case 'help':
        await reply(USAGE);
        return;
      case 'status':
        await reply(statusReply(await store.forIssue(ref.owner, ref.repo, ref.issue)));
        return;
      case 'cancel': {
        if (!(await canWrite(gh, ref.owner, ref.repo, login)))
          return void (await reply(politeNo(login, 'cancel a run')));
        const run = await queue.cancel(ref.owner, ref.repo, ref.issue, login);
        if (!run) await reply('There is no queued or running AgenticFix run for this issue.');
        return;
      }
      case 'rerun': {
        if (!(await canWrite(gh, ref.owner, ref.repo, login)))
          return void (await reply(politeNo(login, 'rerun AgenticFix')));
        const refused = commandRefusal(config, command);
        if (refused) return void (await reply(`${refused}; nothing started.`));
        // The issue as it reads now, when a maintainer asked for the run.
        const [base, { data: snapshot }] = await Promise.all([
          headOf(gh, ref.owner, ref.repo, defaultBranch),
          gh.rest.issues.get({ owner: ref.owner, repo: ref.repo, issue_number: ref.issue }),
        ]);
        await start(
          {
            ...ref,
            installation_id: installationId,
            trigger: 'rerun',
            triggered_by: login,
            base_commit: base,
            model: command.model ?? null,
            token_budget: command.budget ?? null,
            issue_title: snapshot.title,
            issue_body: snapshot.body ?? '',
            issue_updated_at: snapshot.updated_at,
          },
          deliveryId,
        );
        return;
      }
    }
  }
}

/** The latest run, then the revisions of the pull request the latest run on the issue opened. */
function statusReply(runs: RunRecord[]): string {
  const [run] = runs; // newest first
  if (!run) return 'AgenticFix has not run on this issue yet.';
  const origin = runs.findIndex((r) => r.revision === null);
  const revisions = runs.slice(0, origin < 0 ? runs.length : origin).reverse();
  const latest = latestLine(origin < 0 ? run : runs[origin]!);
  if (revisions.length === 0) return latest;
  const lines = revisions.map(
    (r) =>
      `- Revision ${r.revision} (\`${r.id}\`, by ${revisionAsker(r)}, from \`${(r.head_commit ?? '').slice(0, 12)}\`): state \`${r.state}\`` +
      (r.verdict ? `, verdict \`${r.verdict}\`` : '') +
      (r.pushed_commit ? `, pushed ${r.pushed_commit}` : ', nothing pushed'),
  );
  return `${latest}\n\nRevisions of pull request #${revisions[0]!.pr_number}:\n${lines.join('\n')}`;
}

function latestLine(run: RunRecord): string {
  const facts = [
    `state \`${run.state}\``,
    run.verdict && `verdict \`${run.verdict}\``,
    run.stop_reason && `stop reason \`${run.stop_reason}\``,
    run.tokens !== null && `${run.tokens} tokens`,
    run.pr_number !== null && `pull request #${run.pr_number}`,
  ].filter(Boolean);
  return `Latest AgenticFix run \`${run.id}\` (${run.trigger} by @${run.triggered_by}, base \`${run.base_commit.slice(0, 12)}\`): ${facts.join(', ')}.`;
}
