import type { Logger } from 'probot';
import type { IssueText, RepairResult } from '../agent/types.js';
import type { Config } from '../config/config.js';
import { REPO_CONFIG_PATH, repoLimits, type RepoConfig } from '../config/repo-config.js';
import { fetchFile, loadRepoConfig } from '../config/repo-file.js';
import { issueGone, type GitHub, type IssueRef } from '../publish/github.js';
import { tokenAuth } from '../publish/pr.js';
import type { StatusComment } from '../publish/status.js';
import type { RunRecord, RunStore, RunUpdate } from '../store/store.js';
import { previousSummary, revisionContext } from '../revision/prompt.js';
import type { prepareWorktrees } from '../verify/judge.js';
import type { JudgeOptions, Parts, VerificationReport } from '../verify/types.js';
import type { Worktree } from '../workspace/types.js';
import { freeBytes, mebibytes } from './disk.js';
import { attemptModel, runModels } from './attempt-model.js';
import { costRefusal } from './pricing.js';
import type { Reporter } from './reporter.js';
import { refOf } from './reporter.js';
import type { Budgets, ModelSpec, RepairOptions } from './types.js';

/** The pipeline stages a job calls; the real ones by default, injectable so app tests stay fast. */
export interface JobDeps {
  repair(opts: RepairOptions): Promise<RepairResult>;
  judge(opts: JudgeOptions): Promise<VerificationReport>;
  renderEvidence(report: VerificationReport): Promise<string> | string;
  /** Checks out the judge's cell worktrees ahead (verify's prepareWorktrees); without it the judge makes them. */
  prepareJudge?(o: Parameters<typeof prepareWorktrees>[0]): Promise<Worktree[]>;
}

/** What every run's steps share: settings, the store, the process's parts, the stages and the reporter. */
export interface Services extends Parts {
  config: Config;
  store: RunStore;
  deps: JobDeps;
  reporter: Reporter;
  log?: Pick<Logger, 'info' | 'warn' | 'error'> | undefined;
}

/** One run's facts, gathered once before its first step and read by every step after it. */
export interface RunContext {
  s: Services;
  run: RunRecord;
  gh: GitHub;
  ref: IssueRef;
  status: StatusComment;
  /** The repository's config at the run's base commit. */
  rc: RepoConfig;
  remote: string;
  defaultBranch: string;
  /** The maintainer's Dockerfile (repository config `dockerfile`), when there is one. */
  dockerfile: string | undefined;
  issueTitle: string;
  budgets: Budgets;
  /** The model as the comments name it, until the repair says which one answered. */
  model: string;
  signal: AbortSignal;
  /**
   * Publishing again (resume.ts) after a try that failed or whose process died: its comments may have
   * landed unrecorded, so each is looked for by its marker before it is posted.
   */
  resumed?: boolean;
}

/** What only the repair step needs besides the context. */
export interface RepairInputs {
  issue: IssueText;
  spec: ModelSpec;
  runConfig: Config;
  /** Where the repair starts: the base commit, or a revision's pull request head. */
  start: string;
}

/** A run refused before anything ran: the status comment's final edit says why (its one report). */
const refused = (title: string, error: string): { refused: RunUpdate } => ({
  refused: { state: 'failed', error: `${title}; nothing was run. ${error}` },
});

/**
 * Gathers a run's context: the issue still there, disk to work on, the issue's snapshot, the
 * repository's config and Dockerfile, budgets and model, and the base commit in the mirror (fetched
 * once with the installation token). A revision is also told what its pull request changed so far and
 * what to change.
 */
export async function prepare(
  s: Services,
  run: RunRecord,
  a: { gh: GitHub; signal: AbortSignal; model: ModelSpec | undefined },
): Promise<{ context: RunContext; inputs: RepairInputs } | { refused: RunUpdate }> {
  const { config } = s;
  const { gh } = a;
  const ref = refOf(run);
  // The reads go out together and are judged in this order, as if made one after another: the first
  // refusal (or failure) in it is the one reported.
  const [issueRead, diskRead, repoRead, configRead, tokenRead] = await Promise.allSettled([
    issueGone(gh, ref),
    freeBytes([config.worktreeDir, config.runsDir]),
    gh.rest.repos.get({ owner: run.owner, repo: run.repo }),
    loadRepoConfig(gh, run.owner, run.repo, run.base_commit, config),
    gh.auth({ type: 'installation' }) as Promise<{ token: string }>,
  ]);
  // An issue deleted or transferred while the run was queued has nobody left to read its result.
  const gone = settled(issueRead);
  if (gone) return { refused: { state: 'failed', error: `${gone}; the run stopped before it started` } };
  const free = settled(diskRead);
  if (free < config.app.minFreeBytes)
    return refused(
      'Not enough disk space',
      `only ${mebibytes(free)} MB are free for worktrees and run directories, and a run needs ${mebibytes(config.app.minFreeBytes)} MB (AGENTICFIX_MIN_FREE_MB). Comment \`/agenticfix rerun\` once the operator has freed space.`,
    );
  // The issue as it was when the run was triggered: an edit made after the label is never read.
  if (run.issue_title === null || run.issue_body === null)
    return refused(
      'Cannot run',
      'this run has no snapshot of the issue (recorded by an older version of the app).',
    );
  const issue: IssueText = { title: run.issue_title, body: run.issue_body, number: run.issue };
  const repo = settled(repoRead);
  const loaded = settled(configRead);
  if (!loaded.ok) return refused('Configuration error', loaded.error);
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
    if (!file.ok || file.text === null)
      return refused(
        'Configuration error',
        `${REPO_CONFIG_PATH}: the maintainer Dockerfile: ${file.ok ? `\`${rc.dockerfile}\` does not exist at ${run.base_commit.slice(0, 12)}.` : file.error}`,
      );
    dockerfile = file.text;
  }

  const modelName = attemptModel(1, run, rc);
  const { spec, runConfig: modelConfig } = modelFor(config, a.model, modelName);
  // Each attempt's model is priced on its own: every one the run may use needs a price under a limit.
  for (const name of runModels(run, rc)) {
    const m = modelFor(config, a.model, name);
    const unpriced = costRefusal(m.spec, m.runConfig.model, rc.max_cost_usd);
    if (unpriced) return refused('Cannot run', unpriced);
  }
  const remote = repo.data.clone_url;
  const { token } = settled(tokenRead);
  const start = run.head_commit ?? run.base_commit;
  await s.workspaces.mirror(remote, tokenAuth(token), start);
  if (run.revision !== null && run.pr_number !== null && run.feedback !== null) {
    const earlier = (await s.store.forPr(run.owner, run.repo, run.pr_number)).filter(
      (r) => r.created_at < run.created_at,
    );
    issue.revision = revisionContext({
      revision: run.revision,
      pr: run.pr_number,
      summary: await previousSummary(s.store, earlier),
      diff: await s.workspaces.diff(remote, run.base_commit, start, config.limits.revisionMaxDiffBytes),
      feedback: run.feedback,
    });
  }
  return {
    context: {
      s,
      run,
      gh,
      ref,
      status: s.reporter.status(run),
      rc,
      remote,
      defaultBranch: repo.data.default_branch,
      dockerfile,
      issueTitle: issue.title,
      budgets: {
        tokens: run.token_budget ?? rc.budgets.tokens ?? config.budgets.tokens,
        requests: rc.budgets.requests ?? config.budgets.requests,
        toolCalls: rc.budgets.tool_calls ?? config.budgets.toolCalls,
        timeMs: rc.budgets.time_s !== undefined ? rc.budgets.time_s * 1000 : config.budgets.timeMs,
        costUsd: rc.max_cost_usd,
      },
      model: modelName ?? config.model.name ?? 'default',
      signal: a.signal,
    },
    inputs: { issue, spec, runConfig: { ...modelConfig, limits: repoLimits(modelConfig.limits, rc) }, start },
  };
}

/** A read's value, or its failure thrown. */
function settled<T>(r: PromiseSettledResult<T>): T {
  if (r.status === 'rejected') throw r.reason;
  return r.value;
}

/** The model a run (or an attempt) uses: the repository config's or a rerun command's name over the operator's. */
export function modelFor(
  config: Config,
  model: ModelSpec | undefined,
  name: string | null,
): { spec: ModelSpec; runConfig: Config } {
  const spec = model ?? { kind: 'openai' };
  if (!name) return { spec, runConfig: config };
  if (spec.kind === 'url') return { spec: { ...spec, name }, runConfig: config };
  return { spec, runConfig: { ...config, model: { ...config.model, name } } };
}
