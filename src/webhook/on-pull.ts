import type { z } from 'zod';
import { postComment } from '../publish/github.js';
import type { Feedback } from '../store/feedback.js';
import { admit, revisionRun, type RevisionTrigger, type Target } from '../revision/admission.js';
import { checksFeedback, mentionFeedback, reviewFeedback } from '../revision/feedback.js';
import { start, type Delivery } from './delivery.js';
import type { CHECKED, REVIEW_COMMENTED, REVIEWED } from './payloads.js';
import { canWrite } from './permission.js';

/**
 * Revisions of the app's pull requests: a writer's `/agenticfix revise`, review or mention, or the pull
 * request's failing checks. Each is admitted first (revision/admission.ts), then its feedback is read,
 * then its run starts; a newer trigger supersedes an active run of the same issue.
 */
export async function revise(
  d: Delivery<unknown>,
  a: { owner: string; repo: string; pr: number; trigger: RevisionTrigger; installationId: number },
  reply: (body: string) => Promise<unknown>,
  feedback: (t: Target) => Promise<Feedback | null>,
): Promise<void> {
  const { owner, repo, pr, trigger } = a;
  const admitted = await admit(d.gh, d.deps.store, d.deps.config, { owner, repo, pr, trigger });
  if (!admitted.ok) return void (admitted.reply && (await reply(admitted.reply)));
  const f = await feedback(admitted.target);
  if (f) await start(d, revisionRun(admitted.target, f, a.installationId));
}

/** Replies on the pull request itself (its reviewers are writers: no outsider pacing). */
const onPull = (d: Delivery<unknown>, owner: string, repo: string, pr: number) => async (body: string) =>
  postComment(d.gh, { owner, repo, issue: pr }, body);

/** Whether the pull request is one the app opened and the sender may write: else the event is not for it. */
async function fromWriterOnOwnPull(
  d: Delivery<unknown>,
  owner: string,
  repo: string,
  pr: number,
  login: string,
) {
  return (
    (await d.deps.store.issueForPr(owner, repo, pr)) !== null && (await canWrite(d.gh, owner, repo, login))
  );
}

/** A review asking for changes on the app's pull request, from a writer, revises it when the repository allows. */
export async function onReview(d: Delivery<z.infer<typeof REVIEWED>>): Promise<void> {
  const { repository: r, sender, review, pull_request: pr, installation } = d.payload;
  const owner = r.owner.login;
  if (!(await fromWriterOnOwnPull(d, owner, r.name, pr.number, sender.login))) return;
  const a = {
    owner,
    repo: r.name,
    pr: pr.number,
    trigger: 'review',
    installationId: installation.id,
  } as const;
  await revise(d, a, onPull(d, owner, r.name, pr.number), (t) =>
    // Only a writer's words reach the model (one permission look-up per author, cached for this delivery).
    reviewFeedback(d.gh, t, { ...review, user: sender.login }, (login) =>
      canWrite(d.gh, owner, r.name, login),
    ),
  );
}

/** A review comment mentioning the app on its pull request, from a writer, revises it when the repository allows. */
export async function onMention(d: Delivery<z.infer<typeof REVIEW_COMMENTED>>): Promise<void> {
  const { repository: r, sender, comment, pull_request: pr, installation } = d.payload;
  const owner = r.owner.login;
  if (!(await fromWriterOnOwnPull(d, owner, r.name, pr.number, sender.login))) return;
  const a = {
    owner,
    repo: r.name,
    pr: pr.number,
    trigger: 'mention',
    installationId: installation.id,
  } as const;
  await revise(d, a, onPull(d, owner, r.name, pr.number), (t) =>
    mentionFeedback(d.gh, t, comment, sender.login),
  );
}

/** A completed check suite on the app's pull request (`ci_feedback.enabled`): its failing runs start a revision. */
export async function onChecks(d: Delivery<z.infer<typeof CHECKED>>): Promise<void> {
  const { repository: r, check_suite: suite, installation } = d.payload;
  const owner = r.owner.login;
  let pr: number | undefined;
  for (const p of suite.pull_requests)
    if ((await d.deps.store.issueForPr(owner, r.name, p.number)) !== null) {
      pr = p.number;
      break;
    }
  if (pr === undefined) return;
  const ignored = (why: string) =>
    d.log.info({ delivery: d.id, suite: suite.id }, `check suite ignored: ${why}`);
  const a = { owner, repo: r.name, pr, trigger: 'checks', installationId: installation.id } as const;
  await revise(d, a, onPull(d, owner, r.name, pr), (t) =>
    checksFeedback(d.gh, d.deps.store, d.deps.config, t, { suite, defaultBranch: r.default_branch, ignored }),
  );
}
