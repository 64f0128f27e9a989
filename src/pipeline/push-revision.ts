import type { RepairResult } from '../agent/types.js';
import { isGone, landedReply } from '../publish/github.js';
import { branchHead, commitOnto, pushCommit, tokenAuth, updatePrSection } from '../publish/pr.js';
import {
  blockedPathsNote,
  ciBlockedNote,
  ciFlagNote,
  feedbackNotes,
  revisionAsker,
  revisionComment,
  revisionsSection,
  unverifiedComment,
} from '../publish/render.js';
import type { RunUpdate } from '../store/store.js';
import { addressedThreads } from '../revision/prompt.js';
import type { VerificationReport } from '../verify/types.js';
import { inert } from '../verify/untrusted.js';
import { withMarker } from '../trace/marker.js';
import type { RunContext } from './context.js';
import { pendingFields, pendingOf, publishLater, readPending, type RevisionPush } from './pending.js';
import { endPhase, judgeRun, pushPolicy } from './policy.js';

/**
 * A revision: its change is committed on the pull request's head, the judge verifies the pull
 * request's whole change against the original base, and only a verified revision is pushed, as a
 * fast-forward (a branch that moved meanwhile is never overwritten: the revision stops and says so).
 * The verified commit is stored with a publishing record before its push (pending.ts): a process
 * that dies from there on leaves a run that is published again (resumeRevision), never a revision
 * pushed and said to be lost.
 */
export async function pushRevision(c: RunContext, result: RepairResult): Promise<RunUpdate> {
  const { run, gh, rc, status } = c;
  const { store, workspaces, config } = c.s;
  const pr = run.pr_number!;
  const notPushed = (report: VerificationReport | null, why?: string) => stopped(c, result, report, why);
  if (!result.patch.trim()) return notPushed(null, 'The revision changed nothing.');
  const { blocked, ci, ciBlocked } = pushPolicy(rc, result.patch);
  if (blocked.length > 0) return notPushed(null, blockedPathsNote(blocked));
  if (ciBlocked) return notPushed(null, ciBlockedNote(ci));

  // The pull request's own branch (a rerun's pull request has one named after its run).
  const { data: pull } = await gh.rest.pulls.get({ owner: run.owner, repo: run.repo, pull_number: pr });
  const branch = pull.head.ref;
  // Commits the change on `parent` and has the judge verify base + the pull request's whole change
  // (the commit's tree: maintainers' commits included).
  const judged = async (parent: string) => {
    const made = await commitRevision(c, result.patch, parent);
    if (!made.ok) return made;
    status.update({
      phase: 'verifying',
      step: result.requests,
      tokensUsed: result.tokens.total,
      costUsd: result.cost_usd,
    });
    const report = await judgeRun(c, result, made.diff);
    await store.update(run.id, { verdict: report.verdict });
    return { ...made, parent, report };
  };
  /** The publishing record of a verified commit, due at once. */
  const record = (made: { commit: string; parent: string; report: VerificationReport }) => ({
    ...pendingOf(c, result, made.report, 0, new Date()),
    revision: { commit: made.commit, parent: made.parent, branch },
  });
  /**
   * Pushes only while the branch is still at the commit's parent. After a failed push, what the branch
   * says: deleted or not moved (a reason to stop), its new head, or that it holds the commit: a push
   * whose answer was lost after GitHub moved the branch landed all the same.
   */
  const push = async (made: {
    commit: string;
    parent: string;
    report: VerificationReport;
  }): Promise<{ landed: true } | { why: string } | { moved: string; error: string }> => {
    await store.update(run.id, pendingFields(record(made)));
    const pushed = await fastForward(c, made.commit, { branch, parent: made.parent });
    if (pushed.ok) return { landed: true };
    const now = await branchHead(gh, { owner: run.owner, repo: run.repo, branch });
    if (now === null) return { why: deletedNote(branch) };
    // A lease git found stale sent nothing; any other failure may have lost only its answer.
    if (!pushed.stale && (await holds(c, now, made.commit))) return { landed: true };
    if (now === made.parent) return { why: `The push to \`${branch}\` failed: ${pushed.error}` };
    return { moved: now, error: pushed.error };
  };

  let made = await judged(run.head_commit!);
  if (!made.ok) return notPushed(null, `The revision could not be committed: ${made.error}`);
  if (c.signal.aborted) return {};
  if (made.report.verdict !== 'verified') return notPushed(made.report);
  const found = await push(made);
  if ('why' in found) return notPushed(made.report, found.why);
  if ('moved' in found) {
    // The branch moved while the revision ran: the change is replayed on its new head and judged
    // again, once; a change that no longer applies stops there. Nobody's commit is overwritten.
    const { moved } = found;
    const why = (detail: string) =>
      `The branch moved to ${moved} while the revision ran, and the app never overwrites a commit: ${detail} ${REVISE_AGAIN}`;
    const { token } = (await gh.auth({ type: 'installation' })) as { token: string };
    await workspaces.mirror(c.remote, tokenAuth(token));
    const rebased = await judged(moved);
    if (!rebased.ok)
      return notPushed(made.report, why(`the change does not apply there (${rebased.error}).`));
    if (c.signal.aborted) return {};
    made = rebased;
    if (made.report.verdict !== 'verified')
      return notPushed(made.report, why('on it, the judge did not verify the change.'));
    const again = await push(made);
    if ('why' in again) return notPushed(made.report, again.why);
    if ('moved' in again) return notPushed(made.report, why(again.error));
  }
  try {
    return await landed(c, result, made.report, { commit: made.commit, parent: made.parent, branch });
  } catch (e) {
    // Pushed, not all said: as a first run's publishing, it waits and is tried again (resume.ts).
    return publishLater(record(made), e, config.app.publishRetryBaseMs);
  }
}

/**
 * Publishing a verified revision again (resume.ts), after a try that failed or a process that died
 * after storing its record: a commit already on the branch (or among the pull request's commits, a
 * maintainer's on top of it) is not pushed again; one not pushed is made again on the same parent (the
 * tree the judge verified) and pushed while the branch is still there; a branch that moved stops it.
 * Throws when GitHub fails: the run waits and is tried again.
 */
export async function resumeRevision(
  c: RunContext,
  result: RepairResult,
  report: VerificationReport,
  to: RevisionPush,
): Promise<RunUpdate> {
  const { run, gh } = c;
  const { store, workspaces } = c.s;
  const head = await branchHead(gh, { owner: run.owner, repo: run.repo, branch: to.branch });
  if (head !== null && (await holds(c, head, to.commit))) return landed(c, result, report, to);
  if (head !== to.parent)
    return stopped(
      c,
      result,
      report,
      head === null
        ? deletedNote(to.branch)
        : `The app stopped after the verdict, and the branch moved to ${head} meanwhile; the app never overwrites a commit. ${REVISE_AGAIN}`,
    );
  const { token } = (await gh.auth({ type: 'installation' })) as { token: string };
  await workspaces.mirror(c.remote, tokenAuth(token), to.parent);
  const made = await commitRevision(c, result.patch, to.parent);
  if (!made.ok) throw new Error(`the revision could not be committed again: ${made.error}`);
  const again = { ...to, commit: made.commit };
  // Recorded first: a process that dies after this push finds this commit on the branch.
  const pending = readPending(run);
  if (pending.ok) await store.update(run.id, pendingFields({ ...pending.pending, revision: again }));
  const pushed = await fastForward(c, made.commit, to);
  if (!pushed.ok) throw new Error(pushed.error);
  return landed(c, result, report, again);
}

/**
 * A revision an earlier attempt of this run verified and recorded before its push (its worker died and
 * its job was put back): published as recorded, the model not run again; null when there is none.
 */
export function earlierRevision(c: RunContext): Promise<RunUpdate> | null {
  const read = readPending(c.run);
  if (c.run.revision === null || !read.ok || !read.pending.revision) return null;
  const { pending, result } = read;
  return resumeRevision({ ...c, resumed: true }, result, pending.report, pending.revision!).catch(
    (e: unknown) => publishLater(pending, e, c.s.config.app.publishRetryBaseMs),
  );
}

const REVISE_AGAIN = 'Comment `/agenticfix revise` again to revise the new head.';

const deletedNote = (branch: string) =>
  `The branch \`${branch}\` was deleted while the revision ran (GitHub closes its pull request with it), and the app does not make it again.`;

/** The revision's change committed on `parent` in the mirror, as it is pushed. */
const commitRevision = (c: RunContext, patch: string, parent: string) =>
  commitOnto({
    workspaces: c.s.workspaces,
    cloneUrl: c.remote,
    runId: c.run.id,
    parent,
    patch,
    diffFrom: c.run.base_commit,
    message: `Revision ${c.run.revision} for #${c.run.issue}\n\nAsked for by ${revisionAsker(c.run)} on #${c.run.pr_number}\nAgenticFix run ${c.run.id}`,
  });

/** Pushes `commit` to `to.branch` only while the branch is still at `to.parent`. */
const fastForward = (c: RunContext, commit: string, to: Pick<RevisionPush, 'branch' | 'parent'>) =>
  pushCommit({
    gh: c.gh,
    workspaces: c.s.workspaces,
    cloneUrl: c.remote,
    runId: c.run.id,
    commit,
    branch: to.branch,
    mode: { from: to.parent },
  });

/**
 * Whether the branch at `head` holds `commit`: at it, or with it among its ancestors (a maintainer's
 * commits on top). One comparison answers it exactly whatever the pull request's length (its list of
 * commits stops at 250, and a commit past what was read would look absent: the revision said to be lost
 * while on the branch). A commit GitHub does not have (404) is not held; any other failure throws.
 */
async function holds(c: RunContext, head: string, commit: string): Promise<boolean> {
  if (head === commit) return true;
  try {
    const { data } = await c.gh.rest.repos.compareCommitsWithBasehead({
      owner: c.run.owner,
      repo: c.run.repo,
      basehead: `${commit}...${head}`,
      per_page: 1, // the status is all that is read
    });
    return data.status === 'ahead';
  } catch (e) {
    if (isGone(e)) return false;
    throw e;
  }
}

/** A revision that pushes nothing: the pull request is told why, with the candidate patch. */
async function stopped(
  c: RunContext,
  result: RepairResult,
  report: VerificationReport | null,
  why?: string,
): Promise<RunUpdate> {
  const { run, gh, ref } = c;
  const { reporter, deps } = c.s;
  const evidence = report ? await deps.renderEvidence(report) : '';
  const notes = feedbackNotes(run.feedback);
  await reporter.tell(
    run,
    gh,
    ref,
    'unverified',
    unverifiedComment({ run, result, report, evidence, why, notes }),
    c.resumed === true,
  );
  const said = why ?? `Verdict \`${report?.verdict}\`: ${report?.reason}`;
  await reporter.finalStatus(run, {
    phase: endPhase(report),
    detail: `Revision ${run.revision}: ${inert(said)} Nothing was pushed.`,
  });
  return { state: 'done', publish: null };
}

/**
 * What follows a revision's push: its commit recorded, its evidence on the pull request, a reply in
 * each inline thread it addressed, the description's list of revisions, the final status. Published
 * again (c.resumed), each comment and reply an earlier try made is found by its marker, not made twice.
 */
async function landed(
  c: RunContext,
  result: RepairResult,
  report: VerificationReport,
  to: RevisionPush,
): Promise<RunUpdate> {
  const { run, gh, ref, rc } = c;
  const { store, reporter, deps } = c.s;
  const n = run.revision!;
  const pr = run.pr_number!;
  const look = c.resumed === true;
  await store.update(run.id, { pushed_commit: to.commit });
  const { ci } = pushPolicy(rc, result.patch);
  const evidence = await deps.renderEvidence(report);
  await reporter.comment(
    run,
    gh,
    ref,
    'revision',
    revisionComment(run, to.commit, to.parent, evidence, [
      ...(ci.length > 0 ? [ciFlagNote(ci)] : []),
      ...feedbackNotes(run.feedback),
    ]),
    look,
  );
  // Each inline comment the revision addressed gets a short reply in its thread.
  for (const t of addressedThreads(run.feedback)) {
    const mark = { run: run.id, kind: `reply-${t.id}` };
    if (look && (await landedReply(gh, { ...ref, issue: pr }, t.id, mark)) !== null) continue;
    await gh.rest.pulls.createReplyForReviewComment({
      owner: run.owner,
      repo: run.repo,
      pull_number: pr,
      comment_id: t.id,
      body: withMarker(`Addressed in ${to.commit} (revision ${n}).`, mark),
    });
  }
  // The description lists the revisions, so it says what the branch now holds.
  const revisions = (await store.forPr(run.owner, run.repo, pr))
    .filter((r) => r.revision !== null && r.pushed_commit !== null)
    .reverse();
  await updatePrSection(gh, {
    owner: run.owner,
    repo: run.repo,
    pull_number: pr,
    section: revisionsSection(revisions),
  }).catch((e: unknown) => c.s.log?.warn({ err: e, run: run.id }, 'could not update the PR description'));
  await reporter.finalStatus(run, {
    phase: 'done',
    detail: `Revision ${n}: verdict \`${report.verdict}\`: ${inert(report.reason)}\n\nCommit ${to.commit} pushed to \`${to.branch}\`.`,
  });
  return { state: 'done', pushed_commit: to.commit, publish: null };
}
