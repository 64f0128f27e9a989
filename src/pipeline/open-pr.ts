import type { RepairResult } from '../agent/types.js';
import { existsSync, readFileSync } from 'node:fs';
import { issueGone } from '../publish/github.js';
import {
  branchFor,
  branchHead,
  commitOnto,
  pushPatch,
  runBranch,
  upsertDraftPr,
  type Commit,
} from '../publish/pr.js';
import {
  blockedPathsNote,
  ciBlockedNote,
  ciFlagNote,
  configComment,
  evidenceComment,
  prBody,
  prTitle,
  supersededNote,
  traceComment,
  unverifiedComment,
} from '../publish/render.js';
import type { RunUpdate } from '../store/store.js';
import type { VerificationReport } from '../verify/types.js';
import { code, inert } from '../verify/untrusted.js';
import type { RunContext } from './context.js';
import { endPhase, pushPolicy, stopCause } from './policy.js';
import { capMiddle } from '../trace/cap.js';
import type { PublishExtra } from './attempts.js';

/** What the judge's phase hands publishing (job.ts). */
export interface Handoff {
  /** The patch's commit, made while the judge ran (commitPatch). */
  made: Promise<Commit>;
  /**
   * Starts the giving back of the judge's worktrees and lease (policy.ts judgedThen): once the push
   * runs, or at once when nothing is pushed.
   */
  beside: () => void;
}

/**
 * Publishes a judged run: a verified patch (or an unverified one where the repository allows it) is
 * pushed to the issue's branch and opened as a draft pull request with its evidence, trace and
 * configuration; anything else is reported on the issue. Throws when pushing or opening fails: the run
 * then waits to be published again (resume.ts), without running the model again.
 */
export async function openPr(
  c: RunContext,
  result: RepairResult,
  report: VerificationReport,
  /** A run of several attempts: their table on the evidence, their lines on the status. */
  extra?: PublishExtra,
  handoff?: Handoff,
): Promise<RunUpdate> {
  const { run, gh, ref, rc } = c;
  const { store, reporter, deps, config } = c.s;
  // Publishing again, a comment an earlier try made is found by its marker, not posted twice.
  const comment = (to: typeof ref, kind: string, body: string) =>
    reporter.comment(run, gh, to, kind, body, c.resumed === true);
  // Nothing is pushed or opened for an issue that went while the run worked.
  const gone = await issueGone(gh, ref);
  if (gone)
    return {
      state: 'failed',
      error: `${gone}; nothing was published (the patch is kept with the run: ${result.patch_path})`,
    };
  const evidence = await deps.renderEvidence(report);
  const { blocked, ci, ciBlocked } = pushPolicy(rc, result.patch);
  // An agent that did not finish has its patch published only when the judge verified it.
  const stopped = stopCause(result);
  const wantPr = report.verdict === 'verified' || (rc.publish_unverified && stopped === null);
  if (!wantPr || blocked.length > 0 || ciBlocked || !result.patch.trim()) {
    handoff?.beside();
    const notes = [blocked.length > 0 && blockedPathsNote(blocked), ciBlocked && ciBlockedNote(ci)].filter(
      (n): n is string => typeof n === 'string',
    );
    const why = notes.length > 0 ? notes.join('\n\n') : undefined;
    await comment(ref, 'unverified', unverifiedComment({ run, result, report, evidence, why }));
    // A stop that is no verdict on the patch (the engine) stays an infrastructure error.
    if (stopped !== null && report.verdict !== 'infra_error')
      return {
        state: 'failed',
        error: capMiddle(
          `${stopped}. Verdict \`${report.verdict}\`: ${report.reason} No pull request was opened.`,
        ),
      };
    await reporter.finalStatus(run, {
      phase: endPhase(report),
      detail: `Verdict \`${report.verdict}\`: ${inert(report.reason)}\n\nNo pull request was opened.`,
    });
    return { state: 'done' };
  }

  const title = prTitle({ number: run.issue, title: c.issueTitle });
  const wanted = branchFor(run.issue);
  // A try after a failed one reuses the commit it pushed, on whichever name its branch got, while the
  // branch still holds it.
  let reused: string | null = null;
  if (run.pushed_commit !== null)
    for (const branch of [wanted, runBranch(wanted, run.id)]) {
      if ((await branchHead(gh, { owner: run.owner, repo: run.repo, branch })) === run.pushed_commit) {
        reused = branch;
        break;
      }
    }
  if (reused !== null) handoff?.beside();
  const pushed =
    reused !== null && run.pushed_commit !== null
      ? { ok: true as const, commit: run.pushed_commit, branch: reused }
      : await pushPatch({
          gh,
          workspaces: c.s.workspaces,
          cloneUrl: c.remote,
          baseCommit: run.base_commit,
          patch: result.patch,
          branch: wanted,
          message: commitMessage(c),
          runId: run.id,
          made: handoff?.made,
          pushing: handoff?.beside,
        });
  if (!pushed.ok) throw new Error(pushed.error);
  await store.update(run.id, { pushed_commit: pushed.commit });
  // The issue's latest earlier pull request stays as it is (its commits may be a maintainer's or
  // revisions): the new one links it.
  const earlier =
    (await store.forIssue(run.owner, run.repo, run.issue)).find(
      (r) => r.id !== run.id && r.revision === null && r.pr_number !== null,
    )?.pr_number ?? null;
  const pr = await upsertDraftPr(gh, {
    owner: run.owner,
    repo: run.repo,
    branch: pushed.branch,
    base: c.defaultBranch,
    title,
    body: prBody({ issue: run.issue, run, result, report, earlier }),
    fresh: reused === null,
  });
  await store.update(run.id, { pr_number: pr.number });
  if (earlier !== null && earlier !== pr.number)
    await comment({ ...ref, issue: earlier }, 'superseded', supersededNote(run, pr.number));
  // The maintainer who started the run is asked to review the draft it opened.
  if (pr.created)
    await gh.rest.pulls
      .requestReviewers({
        owner: run.owner,
        repo: run.repo,
        pull_number: pr.number,
        reviewers: [run.triggered_by],
      })
      .catch((e: unknown) => c.s.log?.warn({ err: e, run: run.id }, 'could not request a review'));
  const prRef = { ...ref, issue: pr.number };
  const events = existsSync(result.trace_path) ? readFileSync(result.trace_path, 'utf8') : '';
  await comment(
    prRef,
    'evidence',
    evidenceComment(run, evidence, [...(extra?.evidence ?? []), ...(ci.length > 0 ? [ciFlagNote(ci)] : [])]),
  );
  await comment(prRef, 'trace', traceComment(run, result, events));
  await comment(
    prRef,
    'config',
    configComment({
      run,
      result,
      model: result.model_name ?? c.model,
      budgets: c.budgets,
      testArgv: rc.test,
      dockerfileSource: c.dockerfile
        ? `maintainer Dockerfile ${code(rc.dockerfile ?? '')}`
        : 'Dockerfile written by the agent',
      buildNetwork: {
        proxy: config.sandbox.buildNetwork.proxy !== undefined,
        ca: config.sandbox.buildNetwork.caFile !== undefined,
      },
    }),
  );
  await reporter.finalStatus(run, {
    phase: 'done',
    detail: `Verdict \`${report.verdict}\`: ${inert(report.reason)}\n\nDraft pull request #${pr.number} ${pr.created ? 'opened' : 'updated'}.${extra ? `\n\n${extra.status}` : ''}`,
    links: [{ label: `Pull request #${pr.number}`, url: pr.url }],
  });
  return { state: 'done', pr_number: pr.number };
}

const commitMessage = (c: RunContext): string =>
  `${prTitle({ number: c.run.issue, title: c.issueTitle })}\n\nFixes #${c.run.issue}\nAgenticFix run ${c.run.id}`;

/**
 * The patch committed on the base commit in the mirror, as openPr pushes it: made while the judge runs,
 * so that publishing a verified patch only pushes. Nothing leaves the host before the verdict; a patch
 * that is not published leaves an unreferenced commit in the mirror, which git prunes.
 */
export function commitPatch(c: RunContext, result: RepairResult): Promise<Commit> {
  const made = commitOnto({
    workspaces: c.s.workspaces,
    cloneUrl: c.remote,
    runId: c.run.id,
    parent: c.run.base_commit,
    diffFrom: c.run.base_commit,
    patch: result.patch,
    message: commitMessage(c),
  });
  made.catch(() => undefined); // awaited (and its failure reported) by the push
  return made;
}
