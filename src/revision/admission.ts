import type { OperatorLimits, RepoConfig } from '../config/repo-config.js';
import { loadRepoConfig } from '../config/repo-file.js';
import type { GitHub } from '../publish/github.js';
import type { Feedback } from '../store/feedback.js';
import type { NewRun, RunRecord, RunStore } from '../store/store.js';

/** What starts a revision: a writer's command, a review, a mention, or the pull request's failing checks. */
export type RevisionTrigger = 'revise' | 'review' | 'mention' | 'checks';

/** A pull request's head: its commit, its branch and the repository that branch is in (null: deleted). */
export interface PullHead {
  sha: string;
  ref: string;
  repo: string | null;
}

/** A revision that may start: the pull request, the run that opened it, the revisions since, its config. */
export interface Target {
  owner: string;
  repo: string;
  pr: number;
  trigger: RevisionTrigger;
  origin: RunRecord;
  earlier: RunRecord[];
  rc: RepoConfig;
  pull: PullHead;
}

/** Admitted, or refused with what to tell the person who asked (null: nobody to tell, or nothing to say). */
export type Admission = { ok: true; target: Target } | { ok: false; reply: string | null };

const REVISE_ON = { revise: 'command', review: 'changes_requested', mention: 'mention' } as const;

/**
 * Whether revision N of the app's pull request `pr` may start, within the repository's `revise_on`,
 * `max_revisions` and `ci_feedback` (read at the base commit of the run that opened it), on an open
 * pull request. The feedback is read only after this, so a refused trigger costs no more requests.
 */
export async function admit(
  gh: GitHub,
  store: RunStore,
  limits: OperatorLimits,
  a: { owner: string; repo: string; pr: number; trigger: RevisionTrigger },
): Promise<Admission> {
  const no = (reply: string | null): Admission => ({ ok: false, reply });
  const runs = await store.forPr(a.owner, a.repo, a.pr); // newest first
  const origin = runs.find((run) => run.revision === null);
  if (!origin) return no(null); // not a pull request the app opened
  const earlier = runs.slice(0, runs.indexOf(origin)); // revisions since that run
  const rc = await loadRepoConfig(gh, a.owner, a.repo, origin.base_commit, limits);
  // Said to people who asked; a CI failure on every push would repeat it to nobody in particular.
  if (!rc.ok) return no(a.trigger === 'checks' ? null : `${rc.error}\n\nNo revision was started.`);
  if (a.trigger === 'checks') {
    const ci = rc.config.ci_feedback;
    if (!ci.enabled || earlier.filter((run) => run.trigger === 'checks').length >= ci.max_rounds)
      return no(null);
  } else if (!rc.config.revise_on.includes(REVISE_ON[a.trigger]))
    return no(
      a.trigger === 'revise'
        ? 'Revising on request is not enabled here: `revise_on` in `.github/agenticfix.yml` does not include `command`. Nothing was started.'
        : null,
    );
  if (earlier.length >= rc.config.max_revisions)
    return no(
      `This pull request has had ${earlier.length} revisions, the limit (\`max_revisions: ${rc.config.max_revisions}\`). Nothing was started; \`/agenticfix rerun\` on the issue starts over.`,
    );
  const { data: pull } = await gh.rest.pulls.get({ owner: a.owner, repo: a.repo, pull_number: a.pr });
  if (pull.state !== 'open') return no('This pull request is closed; nothing was started.');
  const head = { sha: pull.head.sha, ref: pull.head.ref, repo: pull.head.repo?.full_name ?? null };
  return { ok: true, target: { ...a, origin, earlier, rc: rc.config, pull: head } };
}

/**
 * The run of an admitted revision: pinned to the pull request's head (maintainers' commits included),
 * judged against the base of the run that opened it, working on the issue as that run saw it.
 */
export function revisionRun(
  t: Target,
  feedback: Feedback,
  installationId: number,
): Omit<NewRun, 'delivery_id'> {
  const { origin } = t;
  return {
    owner: t.owner,
    repo: t.repo,
    issue: origin.issue,
    installation_id: installationId,
    trigger: t.trigger,
    triggered_by: feedback.user,
    base_commit: origin.base_commit,
    issue_title: origin.issue_title,
    issue_body: origin.issue_body,
    issue_updated_at: origin.issue_updated_at,
    pr_number: t.pr,
    revision: t.earlier.length + 1,
    head_commit: t.pull.sha,
    feedback,
    // One status comment on the pull request, edited in place revision after revision.
    status_comment_id: t.earlier.find((run) => run.status_comment_id !== null)?.status_comment_id ?? null,
  };
}
