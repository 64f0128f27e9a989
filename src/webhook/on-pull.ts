import type { z } from 'zod';
import type { Feedback } from '../store/feedback.js';
import { admit, revisionRun, type RevisionTrigger, type Target } from '../revision/admission.js';
import { checksFeedback, mentionFeedback, reviewFeedback } from '../revision/feedback.js';
import { reply, start, type Delivery } from './delivery.js';
import type { CHECKED, REVIEW_COMMENTED, REVIEWED } from './payloads.js';
import { canWrite } from './permission.js';

/**
 * Revisions of the app's pull requests: a writer's `/agenticfix revise`, review or mention, or the pull
 * request's failing checks. Each handler has its trigger admitted first (revision/admission.ts), then
 * reads its feedback, then starts the run; a newer trigger supersedes an active run of the same issue.
 */

/** The admitted revision's target; a refusal is said to whoever asked (when there is something to say). */
export async function admitted(
  d: Delivery<unknown>,
  a: { owner: string; repo: string; pr: number; trigger: RevisionTrigger },
  reply: (body: string) => Promise<unknown>,
): Promise<Target | null> {
  const admission = await admit(d.gh, d.deps.store, d.deps.config, a);
  if (admission.ok) return admission.target;
  if (admission.reply) await reply(admission.reply);
  return null;
}

/** Starts the admitted revision, unless its feedback asks for nothing (null). */
export async function startRevision(
  d: Delivery<{ installation: { id: number } }>,
  t: Target,
  feedback: Feedback | null,
): Promise<void> {
  if (feedback) await start(d, revisionRun(t, feedback, d.payload.installation.id));
}

/** Replies on the pull request itself (its reviewers are writers: no outsider pacing). */
const onPull = (d: Delivery<unknown>, owner: string, repo: string, pr: number) => async (body: string) =>
  reply(d, { owner, repo, issue: pr }, body);

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
  const { repository: r, sender, review, pull_request: pr } = d.payload;
  const owner = r.owner.login;
  if (!(await fromWriterOnOwnPull(d, owner, r.name, pr.number, sender.login))) return;
  const a = { owner, repo: r.name, pr: pr.number, trigger: 'review' } as const;
  const t = await admitted(d, a, onPull(d, owner, r.name, pr.number));
  if (!t) return;
  // Only a writer's words reach the model (one permission look-up per author, cached for this delivery).
  const writer = (login: string) => canWrite(d.gh, owner, r.name, login);
  await startRevision(d, t, await reviewFeedback(d.gh, t, { ...review, user: sender.login }, writer));
}

/** A review comment mentioning the app on its pull request, from a writer, revises it when the repository allows. */
export async function onMention(d: Delivery<z.infer<typeof REVIEW_COMMENTED>>): Promise<void> {
  const { repository: r, sender, comment, pull_request: pr } = d.payload;
  const owner = r.owner.login;
  if (!(await fromWriterOnOwnPull(d, owner, r.name, pr.number, sender.login))) return;
  const a = { owner, repo: r.name, pr: pr.number, trigger: 'mention' } as const;
  const t = await admitted(d, a, onPull(d, owner, r.name, pr.number));
  if (t) await startRevision(d, t, await mentionFeedback(d.gh, t, comment, sender.login));
}

/** A completed check suite on the app's pull request (`ci_feedback.enabled`): its failing runs start a revision. */
export async function onChecks(d: Delivery<z.infer<typeof CHECKED>>): Promise<void> {
  const { repository: r, check_suite: suite } = d.payload;
  const owner = r.owner.login;
  let pr: number | undefined;
  for (const p of suite.pull_requests)
    if ((await d.deps.store.issueForPr(owner, r.name, p.number)) !== null) {
      pr = p.number;
      break;
    }
  if (pr === undefined) return;
  const t = await admitted(d, { owner, repo: r.name, pr, trigger: 'checks' }, onPull(d, owner, r.name, pr));
  if (!t) return;
  const ignored = (why: string) =>
    d.log.info({ delivery: d.id, suite: suite.id }, `check suite ignored: ${why}`);
  const a = { suite, ignored };
  await startRevision(d, t, await checksFeedback(d.gh, d.deps.store, d.deps.config, t, a));
}
