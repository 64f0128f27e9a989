import type { RepairResult } from '../agent/types.js';
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
import { endPhase, judgeRun, pushPolicy } from './policy.js';

/**
 * A revision: its change is committed on the pull request's head, the judge verifies the pull
 * request's whole change against the original base, and only a verified revision is pushed, as a
 * fast-forward (a branch that moved meanwhile is never overwritten: the revision stops and says so).
 */
export async function pushRevision(c: RunContext, result: RepairResult): Promise<RunUpdate> {
  const { run, gh, ref, rc, status } = c;
  const { store, reporter, deps, workspaces } = c.s;
  const n = run.revision!;
  const pr = run.pr_number!;
  const notPushed = async (report: VerificationReport | null, why?: string) => {
    const evidence = report ? await deps.renderEvidence(report) : '';
    const notes = feedbackNotes(run.feedback);
    await reporter.tell(
      run,
      gh,
      ref,
      'unverified',
      unverifiedComment({ run, result, report, evidence, why, notes }),
    );
    const said = why ?? `Verdict \`${report?.verdict}\`: ${report?.reason}`;
    await reporter.finalStatus(run, {
      phase: endPhase(report),
      detail: `Revision ${n}: ${inert(said)} Nothing was pushed.`,
    });
    return { state: 'done' } satisfies RunUpdate;
  };
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
    const made = await commitOnto({
      workspaces,
      cloneUrl: c.remote,
      runId: run.id,
      parent,
      patch: result.patch,
      diffFrom: run.base_commit,
      message: `Revision ${n} for #${run.issue}\n\nAsked for by ${revisionAsker(run)} on #${pr}\nAgenticFix run ${run.id}`,
    });
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
  // Only while the branch is still at the commit's parent.
  const push = (commit: string, from: string) =>
    pushCommit({ gh, workspaces, cloneUrl: c.remote, runId: run.id, commit, branch, mode: { from } });
  /** After a refused push, what the branch says: deleted or not moved (a reason to stop), or its new head. */
  const refused = async (error: string, parent: string): Promise<{ why: string } | { moved: string }> => {
    const now = await branchHead(gh, { owner: run.owner, repo: run.repo, branch });
    if (now === null)
      return {
        why: `The branch \`${branch}\` was deleted while the revision ran (GitHub closes its pull request with it), and the app does not make it again.`,
      };
    if (now === parent) return { why: `The push to \`${branch}\` failed: ${error}` };
    return { moved: now };
  };

  let made = await judged(run.head_commit!);
  if (!made.ok) return notPushed(null, `The revision could not be committed: ${made.error}`);
  if (c.signal.aborted) return {};
  if (made.report.verdict !== 'verified') return notPushed(made.report);
  let pushed = await push(made.commit, made.parent);
  if (!pushed.ok) {
    // The branch moved while the revision ran: the change is replayed on its new head and judged
    // again, once; a change that no longer applies stops there. Nobody's commit is overwritten.
    const found = await refused(pushed.error, made.parent);
    if ('why' in found) return notPushed(made.report, found.why);
    const { moved } = found;
    const why = (detail: string) =>
      `The branch moved to ${moved} while the revision ran, and the app never overwrites a commit: ${detail} Comment \`/agenticfix revise\` again to revise the new head.`;
    const { token } = (await gh.auth({ type: 'installation' })) as { token: string };
    await workspaces.mirror(c.remote, tokenAuth(token));
    const rebased = await judged(moved);
    if (!rebased.ok)
      return notPushed(made.report, why(`the change does not apply there (${rebased.error}).`));
    if (c.signal.aborted) return {};
    made = rebased;
    if (made.report.verdict !== 'verified')
      return notPushed(made.report, why('on it, the judge did not verify the change.'));
    pushed = await push(made.commit, made.parent);
    if (!pushed.ok) {
      const again = await refused(pushed.error, made.parent);
      return notPushed(made.report, 'why' in again ? again.why : why(pushed.error));
    }
  }
  const report = made.report;
  await store.update(run.id, { pushed_commit: made.commit });
  const evidence = await deps.renderEvidence(report);
  await reporter.comment(
    run,
    gh,
    ref,
    'revision',
    revisionComment(run, made.commit, made.parent, evidence, [
      ...(ci.length > 0 ? [ciFlagNote(ci)] : []),
      ...feedbackNotes(run.feedback),
    ]),
  );
  // Each inline comment the revision addressed gets a short reply in its thread.
  for (const t of addressedThreads(run.feedback))
    await gh.rest.pulls.createReplyForReviewComment({
      owner: run.owner,
      repo: run.repo,
      pull_number: pr,
      comment_id: t.id,
      body: withMarker(`Addressed in ${made.commit} (revision ${n}).`, {
        run: run.id,
        kind: `reply-${t.id}`,
      }),
    });
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
    detail: `Revision ${n}: verdict \`${report.verdict}\`: ${inert(report.reason)}\n\nCommit ${made.commit} pushed to \`${branch}\`.`,
  });
  return { state: 'done' };
}
