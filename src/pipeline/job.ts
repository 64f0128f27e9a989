import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'probot';
import type { Config } from '../config/config.js';
import { patchFiles } from '../patch/patch.js';
import { editComment, issueGone, postComment, type GitHub, type IssueRef } from '../publish/github.js';
import {
  branchFor,
  branchHead,
  runBranch,
  commitOnto,
  pushCommit,
  pushPatch,
  tokenAuth,
  updatePrSection,
  upsertDraftPr,
} from '../publish/pr.js';
import {
  blockedPathsNote,
  ciBlockedNote,
  ciFlagNote,
  collapsed,
  configComment,
  evidenceComment,
  feedbackNotes,
  prBody,
  prTitle,
  revisionAsker,
  revisionComment,
  revisionsSection,
  supersededNote,
  traceComment,
  unverifiedComment,
} from '../publish/render.js';
import { renderStatus, StatusComment, type StatusState } from '../publish/status.js';
import type { QueueHooks } from '../queue/queue.js';
import type { RunRecord, RunStore, RunUpdate } from '../queue/store.js';
import type { JudgeOptions, VerificationReport } from '../verify/types.js';
import { code, inert } from '../verify/untrusted.js';
import {
  fetchFile,
  loadRepoConfig,
  REPO_CONFIG_PATH,
  repoLimits,
  type RepoConfig,
} from '../config/repo-config.js';
import { matchingPattern } from '../config/path-patterns.js';
import { isLent } from '../environment/lending.js';
import { capMiddle } from '../trace/cap.js';
import { metrics } from '../trace/metrics.js';
import { RunTrace } from '../trace/trace.js';
import { GitWorkspaceManager } from '../workspace/manager.js';
import { freeBytes, mebibytes } from './disk.js';
import { nextTry, pendingFields, PUBLISH_ATTEMPTS, readPending } from './pending.js';
import { deliverDue, statusWrite } from './writes.js';
import { addressedThreads, previousSummary, revisionContext } from '../revision/prompt.js';
import type { IssueText, RepairResult } from '../agent/types.js';
import type { ModelSpec, RepairOptions, RepairProgress } from './types.js';

/** The app's run job: repository config → runRepair → judge → publish, reporting progress on the issue. */

/** The pipeline stages a job calls; the real ones by default, injectable so app tests stay fast. */
/** A build longer than this is named on the status comment (it would otherwise look like a stuck run). */
const LONG_BUILD_MS = 60_000;

/** What the status comment shows of a repair's progress. */
export function progressStatus(p: RepairProgress): StatusState {
  if (p.phase === 'done') return { phase: 'verifying' };
  return {
    phase: p.phase,
    step: p.step,
    tokensUsed: p.tokens_used,
    tokenBudget: p.token_budget,
    lastTest: p.last_test,
    ...(p.build && p.build.elapsed_ms >= LONG_BUILD_MS
      ? {
          detail: `Building the test environment for ${Math.round(p.build.elapsed_ms / 60_000)} min: ${code(p.build.step)}`,
        }
      : {}),
  };
}

export interface JobDeps {
  repair(opts: RepairOptions): Promise<RepairResult>;
  judge(opts: JudgeOptions): Promise<VerificationReport>;
  renderEvidence(report: VerificationReport): Promise<string> | string;
}

/** Loaded on first use so that the app's handlers do not pull in the whole pipeline. */
export const REAL_JOB_DEPS: JobDeps = {
  repair: async (o) => (await import('./repair.js')).runRepair(o),
  judge: async (o) => (await import('../verify/judge.js')).judge(o),
  renderEvidence: async (r) => (await import('../verify/markdown.js')).renderMarkdown(r),
};

/** Paths the app never pushes: changing workflows needs a permission the app does not hold, by design. */
const NEVER_PUSHED = ['.github/workflows'];

export interface JobRunnerOptions {
  config: Config;
  store: RunStore;
  /** An installation-authenticated client. */
  auth(installationId: number): Promise<GitHub>;
  deps?: JobDeps;
  /** How the model is reached; the model name from the repository config or a rerun command overrides its name. */
  model?: ModelSpec;
  sandbox?: 'docker' | 'local';
  log?: Pick<Logger, 'info' | 'warn' | 'error'>;
}

export class JobRunner implements QueueHooks {
  private readonly statuses = new Map<string, StatusComment>();
  private readonly finishing = new Set<Promise<void>>();
  private resuming: Promise<void> | null = null;
  private delivering: Promise<void> | null = null;
  private readonly deps: JobDeps;
  private readonly workspaces: GitWorkspaceManager;

  constructor(private readonly o: JobRunnerOptions) {
    this.deps = o.deps ?? REAL_JOB_DEPS;
    this.workspaces = new GitWorkspaceManager({
      cacheDir: o.config.cacheDir,
      worktreeDir: o.config.worktreeDir,
    });
  }

  onQueued(run: RunRecord): void {
    this.status(run).update({ phase: 'queued' });
  }

  /**
   * Posts a queued run's status comment and waits until it is recorded, so the worker that takes the
   * run (another process) edits this comment rather than posting its own.
   */
  async announceQueued(run: RunRecord): Promise<void> {
    const status = this.status(run);
    status.update({ phase: 'queued' });
    await status.settled();
    this.statuses.delete(run.id);
  }

  onError(run: RunRecord, err: unknown): void {
    this.o.log?.error({ err, run: run.id }, 'the queue could not record or hand on a run');
  }

  onFinished(run: RunRecord): void {
    metrics.runsEnded.inc({ state: run.state, verdict: run.verdict ?? 'none' });
    this.o.log?.info(
      {
        run: run.id,
        state: run.state,
        verdict: run.verdict,
        stop_reason: run.stop_reason,
        tokens: run.tokens,
      },
      'run ended',
    );
    const status = this.status(run);
    const ending = endingFor(run);
    const p = (async () => {
      if (ending) await this.finalStatus(run, status, ending);
      await status.settled();
    })()
      .catch((e) => this.o.log?.warn({ err: e, run: run.id }, 'final status update failed'))
      .finally(() => {
        this.statuses.delete(run.id);
        this.finishing.delete(p);
      });
    this.finishing.add(p);
  }

  /** Resolves when every finished run's last status edit has landed and no publishing is being resumed. */
  async settled(): Promise<void> {
    while (this.finishing.size > 0) await Promise.all([...this.finishing]);
    await this.resuming?.catch(() => undefined); // its errors are its caller's
    await this.delivering?.catch(() => undefined);
  }

  /** Whether the run behind an engine label (a run's, or its judge's `<id>-verify`) is over. */
  async isFinished(label: string): Promise<boolean> {
    const run = await this.o.store.get(label.replace(/-verify$/, ''));
    return run !== null && run.state !== 'queued' && run.state !== 'running';
  }

  /**
   * Tells an issue that its run was interrupted (edits the status comment, then comments): `why` the
   * app restarted, or the worker running it stopped.
   */
  async reportInterrupted(run: RunRecord, why = 'the app restarted'): Promise<void> {
    const gh = await this.o.auth(run.installation_id);
    const ref = refOf(run);
    if (run.status_comment_id !== null) {
      const body = renderStatus(run.id, run.base_commit, {
        phase: 'interrupted',
        detail: `Interrupted: ${why}.`,
      });
      await editComment(gh, ref, run.status_comment_id, body).then(
        () => this.o.store.removeWrite(statusWrite(run)),
        (e: unknown) => this.keep(run, e, { id: statusWrite(run), comment_id: run.status_comment_id, body }),
      );
    }
    await this.tell(
      run,
      gh,
      ref,
      `AgenticFix run \`${run.id}\` was interrupted because ${why} before it finished. Nothing was published. Comment \`/agenticfix rerun\` to start again.`,
    );
  }

  async execute(run: RunRecord, signal: AbortSignal): Promise<RunUpdate> {
    const log = { run: run.id, repo: `${run.owner}/${run.repo}`, issue: run.issue, trigger: run.trigger };
    this.o.log?.info(log, 'run started');
    try {
      const fields = await this.work(run, signal);
      this.o.log?.info({ ...log, state: fields.state, error: fields.error }, 'run work done');
      return fields;
    } catch (err) {
      // Whatever failed (a full disk, the store, GitHub), the run leaves its record and gives its space back.
      await this.salvage(run, err);
      throw err;
    }
  }

  private async work(run: RunRecord, signal: AbortSignal): Promise<RunUpdate> {
    const { config, store } = this.o;
    const status = this.status(run);
    const gh = await this.o.auth(run.installation_id);
    const ref = refOf(run);
    status.update({ phase: 'preparing_workspace' });
    // An issue deleted or transferred while the run was queued has nobody left to read its result.
    const gone = await issueGone(gh, ref);
    if (gone) return { state: 'failed', error: `${gone}; the run stopped before it started` };
    const free = await freeBytes([config.worktreeDir, config.runsDir]);
    if (free < config.app.minFreeBytes) {
      const error = `only ${mebibytes(free)} MB are free for worktrees and run directories, and a run needs ${mebibytes(config.app.minFreeBytes)} MB (AGENTICFIX_MIN_FREE_MB). Comment \`/agenticfix rerun\` once the operator has freed space.`;
      return this.failWith(error, 'Not enough disk space');
    }

    // The issue as it was when the run was triggered: an edit made after the label is never read.
    if (run.issue_title === null || run.issue_body === null) {
      const error = 'this run has no snapshot of the issue (recorded by an older version of the app).';
      return this.failWith(error, 'Cannot run');
    }
    const issue: IssueText = { title: run.issue_title, body: run.issue_body, number: run.issue };
    const [repo, loaded] = await Promise.all([
      gh.rest.repos.get({ owner: run.owner, repo: run.repo }),
      loadRepoConfig(gh, run.owner, run.repo, run.base_commit, config),
    ]);
    if (!loaded.ok) return this.failWith(loaded.error, 'Configuration error');
    const rc = loaded.config;
    let dockerfile: string | undefined;
    if (rc.dockerfile) {
      const file = await fetchFile(
        gh,
        run.owner,
        run.repo,
        rc.dockerfile,
        run.base_commit,
        config.limits.maxFileBytes,
      );
      if (!file.ok || file.text === null) {
        const error = `${REPO_CONFIG_PATH}: the maintainer Dockerfile: ${file.ok ? `\`${rc.dockerfile}\` does not exist at ${run.base_commit.slice(0, 12)}.` : file.error}`;
        return this.failWith(error, 'Configuration error');
      }
      dockerfile = file.text;
    }

    const modelName = run.model ?? rc.model ?? null;
    const budgets = {
      tokens: run.token_budget ?? rc.budgets.tokens ?? config.budgets.tokens,
      requests: rc.budgets.requests ?? config.budgets.requests,
      toolCalls: rc.budgets.tool_calls ?? config.budgets.toolCalls,
      timeMs: rc.budgets.time_s !== undefined ? rc.budgets.time_s * 1000 : config.budgets.timeMs,
    };
    const { spec, runConfig: modelConfig } = this.modelFor(modelName);
    const runConfig = { ...modelConfig, limits: repoLimits(modelConfig.limits, rc) };
    const remote = repo.data.clone_url;
    // Fetched once with the installation token (private repositories), unless the pinned commit is
    // already there; every later stage finds it in the cache and needs no credentials.
    const { token } = (await gh.auth({ type: 'installation' })) as { token: string };
    // A revision starts from the pull request's head and is told what it changed and what to change.
    const start = run.head_commit ?? run.base_commit;
    await this.workspaces.mirror(remote, tokenAuth(token), start);
    if (run.revision !== null && run.pr_number !== null && run.feedback !== null) {
      const earlier = (await store.forPr(run.owner, run.repo, run.pr_number)).filter(
        (r) => r.created_at < run.created_at,
      );
      issue.revision = revisionContext({
        revision: run.revision,
        pr: run.pr_number,
        summary: previousSummary(earlier),
        diff: await this.workspaces.diff(remote, run.base_commit, start),
        feedback: run.feedback,
      });
    }

    let phase = '';
    const result = await this.deps.repair({
      config: runConfig,
      remote,
      baseCommit: start,
      issue,
      testArgv: rc.test,
      protectedPaths: [...NEVER_PUSHED, ...rc.protected_paths],
      ...(rc.guidance_file ? { guidanceFiles: [rc.guidance_file] } : {}),
      model: spec,
      sandbox: this.o.sandbox ?? 'docker',
      dockerfile,
      runId: run.id,
      budgets,
      signal,
      onProgress: (p) => {
        if (p.phase !== phase) this.o.log?.info({ run: run.id, phase: (phase = p.phase) }, 'run phase');
        status.update(progressStatus(p));
      },
    });
    observeRepair(result);
    await store.update(run.id, {
      stop_reason: result.stop_reason,
      tokens: result.tokens.total,
      patch_path: result.patch_path,
      run_dir: result.run_dir,
    });
    if (signal.aborted) return {};
    if (run.revision !== null)
      return this.revise({ run, gh, ref, status, result, rc, remote, dockerfile, signal });

    status.update({
      phase: 'verifying',
      step: result.requests,
      tokensUsed: result.tokens.total,
      tokenBudget: budgets.tokens,
    });
    const report = await this.verify(run, result, remote, rc, dockerfile, signal);
    await store.update(run.id, { verdict: report.verdict });
    if (signal.aborted) return {};

    const modelLabel = result.model_name ?? modelName ?? config.model.name ?? 'default';
    try {
      return await this.publish({
        run,
        gh,
        ref,
        status,
        result,
        report,
        rc,
        issueTitle: issue.title,
        budgets,
        modelLabel,
        defaultBranch: repo.data.default_branch,
        remote,
        dockerfile,
      });
    } catch (e) {
      // Publishing waits and is tried again (resumePublishing); the model is not run again.
      const { patch, ...kept } = result;
      const pending = pendingFields({
        result: kept,
        patch,
        report,
        budgets,
        model_label: modelLabel,
        default_branch: repo.data.default_branch,
        remote,
        dockerfile: dockerfile ?? null,
        attempts: 1,
        next_at: nextTry(1, config.app.publishRetryBaseMs),
      });
      return { ...pending, state: 'publish_pending', error: capMiddle(`publishing failed: ${message(e)}`) };
    }
  }

  /**
   * Publishes the runs waiting to (`publish_pending`) whose next try is due: at start-up and
   * periodically. After PUBLISH_ATTEMPTS the run fails and the issue gets the patch. Kept writes go
   * first: a kept "publishing pending" status must not land over the "Done" of its publication.
   */
  async resumePublishing(): Promise<void> {
    this.resuming ??= (async () => {
      await this.deliverWrites();
      for (const run of await this.o.store.list('publish_pending')) await this.republish(run);
    })().finally(() => (this.resuming = null));
    await this.resuming;
  }

  private async republish(run: RunRecord): Promise<void> {
    const { config, store } = this.o;
    const read = readPending(run);
    if (read.ok && Date.parse(read.pending.next_at) > Date.now()) return;
    const gh = await this.o.auth(run.installation_id);
    const ref = refOf(run);
    const ended = (fields: RunUpdate) =>
      store.update(run.id, { finished_at: new Date().toISOString(), publish: null, ...fields });
    if (!read.ok) return void (await ended({ state: 'failed', error: read.error }));
    const { pending, result } = read;
    const loaded = await loadRepoConfig(gh, run.owner, run.repo, run.base_commit, config);
    if (!loaded.ok) return void (await ended({ state: 'failed', error: loaded.error }));
    try {
      // This machine's mirror may lack the base commit (another one ran the run): fetched with the token.
      const { token } = (await gh.auth({ type: 'installation' })) as { token: string };
      await this.workspaces.mirror(pending.remote, tokenAuth(token), run.base_commit);
      const fields = await this.publish({
        run,
        gh,
        ref,
        status: this.status(run),
        result,
        report: pending.report,
        rc: loaded.config,
        issueTitle: run.issue_title ?? '',
        budgets: pending.budgets,
        modelLabel: pending.model_label,
        defaultBranch: pending.default_branch,
        remote: pending.remote,
        dockerfile: pending.dockerfile ?? undefined,
      });
      await ended({ error: null, ...fields });
      this.statuses.delete(run.id);
    } catch (e) {
      const error = capMiddle(`publishing failed: ${message(e)}`);
      const attempts = pending.attempts + 1;
      if (attempts <= PUBLISH_ATTEMPTS) {
        const next = { ...pending, attempts, next_at: nextTry(attempts, config.app.publishRetryBaseMs) };
        await store.update(run.id, { ...pendingFields(next), error });
        return;
      }
      // The run's patch stays in its run directory (on the machine that ran it); the issue is told, with the patch attached.
      await this.tell(
        run,
        gh,
        ref,
        `## AgenticFix: publishing failed\n\n${error}\n\nThe patch is kept with the run (\`${result.patch_path}\`).\n\n${collapsed('Candidate patch', result.patch, 50_000, 'diff')}`,
      );
      this.onFinished(await ended({ state: 'failed', error }));
    }
  }

  private async verify(
    run: RunRecord,
    result: RepairResult,
    remote: string,
    rc: RepoConfig,
    maintainerDockerfile: string | undefined,
    signal: AbortSignal,
    cumulative?: string,
  ): Promise<VerificationReport> {
    // The judge itself answers empty_patch, and build_failed when there is no usable Dockerfile.
    const dockerfile = result.dockerfile ?? maintainerDockerfile ?? '';
    return this.deps.judge({
      config: { ...this.o.config, limits: repoLimits(this.o.config.limits, rc) },
      suiteMs: result.suite_ms,
      remote,
      baseCommit: run.base_commit,
      patch: cumulative ?? result.patch,
      dockerfile,
      testArgv: rc.test,
      rebuild: rc.verify.rebuild,
      runId: `${run.id}-verify`,
      signal,
    });
  }

  private async publish(a: {
    run: RunRecord;
    gh: GitHub;
    ref: IssueRef;
    status: StatusComment;
    result: RepairResult;
    report: VerificationReport;
    rc: RepoConfig;
    issueTitle: string;
    budgets: Record<string, number>;
    modelLabel: string;
    defaultBranch: string;
    remote: string;
    dockerfile: string | undefined;
  }): Promise<RunUpdate> {
    const { run, gh, ref, status, result, report, rc } = a;
    // Nothing is pushed or opened for an issue that went while the run worked.
    const gone = await issueGone(gh, ref);
    if (gone)
      return {
        state: 'failed',
        error: `${gone}; nothing was published (the patch is kept with the run: ${result.patch_path})`,
      };
    const evidence = await this.deps.renderEvidence(report);
    const files = patchFiles(result.patch);
    const blocked = files.filter((f) => matchingPattern(f, [...NEVER_PUSHED, ...rc.protected_paths]));
    const ci = files.filter((f) => matchingPattern(f, rc.ci_entry_points.paths));
    const ciBlocked = rc.ci_entry_points.policy === 'block' && ci.length > 0;
    const wantPr = report.verdict === 'verified' || rc.publish_unverified;
    if (!wantPr || blocked.length > 0 || ciBlocked || !result.patch.trim()) {
      const notes = [blocked.length > 0 && blockedPathsNote(blocked), ciBlocked && ciBlockedNote(ci)].filter(
        (n): n is string => typeof n === 'string',
      );
      const why = notes.length > 0 ? notes.join('\n\n') : undefined;
      await this.comment(run, gh, ref, unverifiedComment({ run, result, report, evidence, why }));
      await this.finalStatus(run, status, {
        phase: endPhase(report),
        detail: `Verdict \`${report.verdict}\`: ${inert(report.reason)}\n\nNo pull request was opened.`,
      });
      return { state: 'done' };
    }

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
    const pushed =
      reused !== null && run.pushed_commit !== null
        ? { ok: true as const, commit: run.pushed_commit, branch: reused }
        : await pushPatch({
            gh,
            workspaces: this.workspaces,
            cloneUrl: a.remote,
            baseCommit: run.base_commit,
            patch: result.patch,
            branch: wanted,
            message: `${prTitle({ number: run.issue, title: a.issueTitle })}\n\nFixes #${run.issue}\nAgenticFix run ${run.id}`,
            runId: run.id,
          });
    if (!pushed.ok) throw new Error(pushed.error);
    await this.o.store.update(run.id, { pushed_commit: pushed.commit });
    // The issue's latest earlier pull request stays as it is (its commits may be a maintainer's or
    // revisions): the new one links it.
    const earlier =
      (await this.o.store.forIssue(run.owner, run.repo, run.issue)).find(
        (r) => r.id !== run.id && r.revision === null && r.pr_number !== null,
      )?.pr_number ?? null;
    const pr = await upsertDraftPr(gh, {
      owner: run.owner,
      repo: run.repo,
      branch: pushed.branch,
      base: a.defaultBranch,
      title: prTitle({ number: run.issue, title: a.issueTitle }),
      body: prBody({ issue: run.issue, run, result, report, earlier }),
    });
    await this.o.store.update(run.id, { pr_number: pr.number });
    if (earlier !== null && earlier !== pr.number)
      await this.comment(run, gh, { ...ref, issue: earlier }, supersededNote(run, pr.number));
    // The maintainer who started the run is asked to review the draft it opened.
    if (pr.created)
      await gh.rest.pulls
        .requestReviewers({
          owner: run.owner,
          repo: run.repo,
          pull_number: pr.number,
          reviewers: [run.triggered_by],
        })
        .catch((e: unknown) => this.o.log?.warn({ err: e, run: run.id }, 'could not request a review'));
    const prRef = { ...ref, issue: pr.number };
    const events = existsSync(result.trace_path) ? readFileSync(result.trace_path, 'utf8') : '';
    await this.comment(run, gh, prRef, evidenceComment(run, evidence, ci.length > 0 ? [ciFlagNote(ci)] : []));
    await this.comment(run, gh, prRef, traceComment(run, result, events));
    await this.comment(
      run,
      gh,
      prRef,
      configComment({
        run,
        result,
        model: a.modelLabel,
        budgets: a.budgets,
        testArgv: rc.test,
        dockerfileSource: a.dockerfile
          ? `maintainer Dockerfile ${code(rc.dockerfile ?? '')}`
          : 'Dockerfile written by the agent',
        buildNetwork: {
          proxy: this.o.config.sandbox.buildNetwork.proxy !== undefined,
          ca: this.o.config.sandbox.buildNetwork.caFile !== undefined,
        },
      }),
    );
    await this.finalStatus(run, status, {
      phase: 'done',
      detail: `Verdict \`${report.verdict}\`: ${inert(report.reason)}\n\nDraft pull request #${pr.number} ${pr.created ? 'opened' : 'updated'}.`,
      links: [{ label: `Pull request #${pr.number}`, url: pr.url }],
    });
    return { state: 'done', pr_number: pr.number };
  }

  /**
   * A revision: its change is committed on the pull request's head, the judge verifies the pull
   * request's whole change against the original base, and only a verified revision is pushed, as a
   * fast-forward (a branch that moved meanwhile is never overwritten: the revision stops and says so).
   */
  private async revise(a: {
    run: RunRecord;
    gh: GitHub;
    ref: IssueRef;
    status: StatusComment;
    result: RepairResult;
    rc: RepoConfig;
    remote: string;
    dockerfile: string | undefined;
    signal: AbortSignal;
  }): Promise<RunUpdate> {
    const { run, gh, ref, status, result, rc } = a;
    const head = run.head_commit!;
    const n = run.revision!;
    const notPushed = async (report: VerificationReport | null, why?: string) => {
      const evidence = report ? await this.deps.renderEvidence(report) : '';
      const notes = feedbackNotes(run.feedback);
      await this.tell(run, gh, ref, unverifiedComment({ run, result, report, evidence, why, notes }));
      const said = why ?? `Verdict \`${report?.verdict}\`: ${report?.reason}`;
      await this.finalStatus(run, status, {
        phase: endPhase(report),
        detail: `Revision ${n}: ${inert(said)} Nothing was pushed.`,
      });
      return { state: 'done' } satisfies RunUpdate;
    };
    if (!result.patch.trim()) return notPushed(null, 'The revision changed nothing.');
    const files = patchFiles(result.patch);
    const blocked = files.filter((f) => matchingPattern(f, [...NEVER_PUSHED, ...rc.protected_paths]));
    const ci = files.filter((f) => matchingPattern(f, rc.ci_entry_points.paths));
    if (blocked.length > 0) return notPushed(null, blockedPathsNote(blocked));
    if (rc.ci_entry_points.policy === 'block' && ci.length > 0) return notPushed(null, ciBlockedNote(ci));

    // The pull request's own branch (a rerun's pull request has one named after its run).
    const { data: pull } = await gh.rest.pulls.get({
      owner: run.owner,
      repo: run.repo,
      pull_number: run.pr_number!,
    });
    const branch = pull.head.ref;
    // Commits the change on `parent` and has the judge verify base + the pull request's whole change
    // (the commit's tree: maintainers' commits included).
    const judged = async (parent: string) => {
      const made = await commitOnto({
        workspaces: this.workspaces,
        cloneUrl: a.remote,
        runId: run.id,
        parent,
        patch: result.patch,
        diffFrom: run.base_commit,
        message: `Revision ${n} for #${run.issue}\n\nAsked for by ${revisionAsker(run)} on #${run.pr_number}\nAgenticFix run ${run.id}`,
      });
      if (!made.ok) return made;
      status.update({ phase: 'verifying', step: result.requests, tokensUsed: result.tokens.total });
      const report = await this.verify(run, result, a.remote, rc, a.dockerfile, a.signal, made.diff);
      await this.o.store.update(run.id, { verdict: report.verdict });
      return { ...made, parent, report };
    };
    // Only while the branch is still at the commit's parent.
    const push = (commit: string, from: string) =>
      pushCommit({
        gh,
        workspaces: this.workspaces,
        cloneUrl: a.remote,
        runId: run.id,
        commit,
        branch,
        mode: { from },
      });
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

    let made = await judged(head);
    if (!made.ok) return notPushed(null, `The revision could not be committed: ${made.error}`);
    if (a.signal.aborted) return {};
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
      await this.workspaces.mirror(a.remote, tokenAuth(token));
      const rebased = await judged(moved);
      if (!rebased.ok)
        return notPushed(made.report, why(`the change does not apply there (${rebased.error}).`));
      if (a.signal.aborted) return {};
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
    await this.o.store.update(run.id, { pushed_commit: made.commit });
    const evidence = await this.deps.renderEvidence(report);
    await this.comment(
      run,
      gh,
      ref,
      revisionComment(run, made.commit, made.parent, evidence, [
        ...(ci.length > 0 ? [ciFlagNote(ci)] : []),
        ...feedbackNotes(run.feedback),
      ]),
    );
    // Each inline comment the revision addressed gets a short reply in its thread.
    for (const c of addressedThreads(run.feedback))
      await gh.rest.pulls.createReplyForReviewComment({
        owner: run.owner,
        repo: run.repo,
        pull_number: run.pr_number!,
        comment_id: c.id,
        body: `Addressed in ${made.commit} (revision ${n}).`,
      });
    // The description lists the revisions, so it says what the branch now holds.
    const revisions = (await this.o.store.forPr(run.owner, run.repo, run.pr_number!))
      .filter((r) => r.revision !== null && r.pushed_commit !== null)
      .reverse();
    await updatePrSection(gh, {
      owner: run.owner,
      repo: run.repo,
      pull_number: run.pr_number!,
      section: revisionsSection(revisions),
    }).catch((e: unknown) =>
      this.o.log?.warn({ err: e, run: run.id }, 'could not update the PR description'),
    );
    await this.finalStatus(run, status, {
      phase: 'done',
      detail: `Revision ${n}: verdict \`${report.verdict}\`: ${inert(report.reason)}\n\nCommit ${made.commit} pushed to \`${branch}\`.`,
    });
    return { state: 'done' };
  }

  /**
   * After a run's job threw: its worktrees are removed (a failed run's are kept only while the disk
   * has AGENTICFIX_MIN_FREE_MB free) and a result.json is written where none is.
   */
  private async salvage(run: RunRecord, err: unknown): Promise<void> {
    const { config } = this.o;
    const fail = (e: unknown) => this.o.log?.error({ err: e, run: run.id }, 'could not tidy up a failed run');
    const spare =
      config.app.keepFailedWorktrees &&
      (await freeBytes([config.worktreeDir]).catch(() => 0)) >= config.app.minFreeBytes;
    if (!spare) {
      const mine = (p: string) => path.basename(p) === run.id || path.basename(p).startsWith(`${run.id}-`);
      // Every worktree of this run (its own, its judge's), whatever its age, unless lent right now.
      await this.workspaces
        .removeOlderThan(-Infinity, async (p) => !mine(p) || (await isLent(p)))
        .catch(fail);
    }
    try {
      const trace = new RunTrace(run.id, config.runsDir);
      if (existsSync(trace.resultPath)) return;
      const at = new Date().toISOString();
      trace.writeResult({
        run_id: run.id,
        stop_reason: 'fatal',
        success: false,
        started_at: run.started_at ?? at,
        finished_at: at,
        counts: {},
        artifacts: [],
        error: err instanceof Error ? err.message : String(err),
      });
    } catch (e) {
      fail(e);
    }
  }

  /**
   * A run refused before anything ran: the issue learns why from the status comment's final edit
   * (onFinished), its one report (a comment of its own as well said the same thing twice).
   */
  private failWith(error: string, title: string): RunUpdate {
    return { state: 'failed', error: `${title}; nothing was run. ${error}` };
  }

  private async comment(run: RunRecord, gh: GitHub, ref: IssueRef, body: string): Promise<void> {
    await this.o.store.addComment(run.id, await postComment(gh, ref, body));
  }

  /** A final comment: posted now or, when GitHub fails, kept in the store until it lands (deliverWrites). */
  private async tell(run: RunRecord, gh: GitHub, ref: IssueRef, body: string): Promise<void> {
    let id: number;
    try {
      id = await postComment(gh, ref, body);
    } catch (e) {
      return this.keep(run, e, { id: `${run.id}:${randomUUID()}`, comment_id: null, body }, ref);
    }
    await this.o.store.addComment(run.id, id);
  }

  /** A run's last status: edited now or, when GitHub fails, kept in the store until it lands. */
  private async finalStatus(run: RunRecord, status: StatusComment, state: StatusState): Promise<void> {
    if (await status.final(state)) return this.o.store.removeWrite(statusWrite(run));
    const body = renderStatus(run.id, run.base_commit, state);
    await this.keep(run, 'the status edit failed', { id: statusWrite(run), comment_id: status.id, body });
  }

  private async keep(
    run: RunRecord,
    err: unknown,
    w: { id: string; comment_id: number | null; body: string },
    ref = refOf(run),
  ): Promise<void> {
    this.o.log?.warn({ err, run: run.id }, 'a GitHub write failed: it is kept and tried again');
    await this.o.store.queueWrite({
      ...w,
      run_id: run.id,
      installation_id: run.installation_id,
      ...ref,
      next_at: nextTry(1, this.o.config.app.publishRetryBaseMs),
    });
  }

  /** Makes the kept GitHub writes that are due (writes.ts); one pass at a time. */
  async deliverWrites(): Promise<void> {
    this.delivering ??= deliverDue({
      store: this.o.store,
      auth: this.o.auth,
      retryBaseMs: this.o.config.app.publishRetryBaseMs,
      log: this.o.log,
    }).finally(() => (this.delivering = null));
    await this.delivering;
  }

  private modelFor(name: string | null): { spec: ModelSpec; runConfig: Config } {
    const spec = this.o.model ?? { kind: 'openai' };
    if (!name) return { spec, runConfig: this.o.config };
    if (spec.kind === 'url') return { spec: { ...spec, name }, runConfig: this.o.config };
    return { spec, runConfig: { ...this.o.config, model: { ...this.o.config.model, name } } };
  }

  private status(run: RunRecord): StatusComment {
    let s = this.statuses.get(run.id);
    if (!s) {
      s = new StatusComment({
        gh: () => this.o.auth(run.installation_id),
        ref: refOf(run),
        runId: run.id,
        baseCommit: run.base_commit,
        intervalMs: this.o.config.app.statusEditIntervalMs,
        commentId: run.status_comment_id,
        onCreated: async (id) => {
          await this.o.store.update(run.id, { status_comment_id: id });
        },
        onError: (e) => this.o.log?.warn({ err: e, run: run.id }, 'status comment update failed'),
      });
      this.statuses.set(run.id, s);
    }
    return s;
  }
}

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** A repair's figures for /metrics: its time, each phase's and its tokens. */
function observeRepair(result: RepairResult): void {
  metrics.runSeconds.observe({ stop_reason: result.stop_reason }, result.duration_ms / 1000);
  for (const [phase, ms] of Object.entries(result.phases_ms))
    metrics.phaseSeconds.observe({ phase }, ms / 1000);
  for (const kind of ['prompt', 'completion', 'cached'] as const)
    metrics.tokens.inc({ kind }, result.tokens[kind]);
}

/** Where a run reports: its issue, or for a revision the pull request it revises. */
const refOf = (run: RunRecord): IssueRef => ({
  owner: run.owner,
  repo: run.repo,
  issue: run.revision !== null && run.pr_number !== null ? run.pr_number : run.issue,
});

/** The status a judged run ends on: an infrastructure error is no verdict on the patch. */
const endPhase = (report: VerificationReport | null): StatusState['phase'] =>
  report?.verdict === 'infra_error' ? 'infra_error' : 'done';

function endingFor(run: RunRecord): StatusState | null {
  switch (run.state) {
    case 'superseded':
      return { phase: 'superseded', detail: `A newer run (\`${run.superseded_by}\`) replaced this one.` };
    case 'cancelled':
      return { phase: 'cancelled', detail: 'Cancelled by a `/agenticfix cancel` comment.' };
    case 'interrupted':
      return {
        phase: 'interrupted',
        detail: 'The app shut down before the run finished. Comment `/agenticfix rerun` to start again.',
      };
    case 'failed':
      return { phase: 'failed', detail: inert(capMiddle(run.error ?? 'unknown')) };
    case 'publish_pending':
      return {
        phase: 'publish_pending',
        detail: `Verdict \`${run.verdict}\`. ${inert(capMiddle(run.error ?? 'Publishing failed', 500))}: it is tried again later; the model is not run again.`,
      };
    default:
      return null;
  }
}
