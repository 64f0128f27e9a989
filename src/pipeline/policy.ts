import type { RepairResult } from '../agent/types.js';
import { matchingPattern } from '../config/path-patterns.js';
import { repoLimits, type RepoConfig } from '../config/repo-config.js';
import { patchFiles } from '../patch/patch.js';
import type { StatusState } from '../publish/status.js';
import { partsOf, type JudgeOptions, type VerificationReport } from '../verify/types.js';
import type { RunContext } from './context.js';

/** Paths the app never pushes: changing workflows needs a permission the app does not hold, by design. */
export const NEVER_PUSHED = ['.github/workflows'];

/**
 * The one push policy, for a new pull request and a revision alike: files under protected paths are
 * never pushed; files that are CI entry points are flagged, or block the push under `policy: block`.
 */
export function pushPolicy(
  rc: RepoConfig,
  patch: string,
): { blocked: string[]; ci: string[]; ciBlocked: boolean } {
  const files = patchFiles(patch);
  const blocked = files.filter((f) => matchingPattern(f, [...NEVER_PUSHED, ...rc.protected_paths]));
  const ci = files.filter((f) => matchingPattern(f, rc.ci_entry_points.paths));
  return { blocked, ci, ciBlocked: rc.ci_entry_points.policy === 'block' && ci.length > 0 };
}

/** The judge's own id for the patch of `label` (a run or one of its attempts). */
export const judgeRunId = (label: string): string => `${label}-verify`;

/**
 * The judge on a run's patch (or, for a revision, the pull request's whole change against the base).
 * The judge itself answers empty_patch, and build_failed when there is no usable Dockerfile.
 */
export async function judgeRun(
  c: RunContext,
  result: RepairResult,
  cumulative?: string,
  /** Whose patch it is: the run's, or one of its attempts' (attempts.ts). */
  label = c.run.id,
  afterward?: JudgeOptions['afterward'],
  worktrees?: JudgeOptions['worktrees'],
): Promise<VerificationReport> {
  const { config, deps } = c.s;
  const report = await deps.judge({
    ...partsOf(c.s),
    config: { ...config, limits: repoLimits(config.limits, c.rc) },
    suiteMs: result.suite_ms,
    remote: c.remote,
    baseCommit: c.run.base_commit,
    patch: cumulative ?? result.patch,
    dockerfile: result.dockerfile ?? c.dockerfile ?? '',
    testArgv: c.rc.test,
    rebuild: c.rc.verify.rebuild,
    runId: judgeRunId(label),
    signal: c.signal,
    afterward,
    worktrees,
  });
  c.s.reporter.pages.verified(label, report);
  return report;
}

/**
 * The run's patch judged, then `next` (publishing) given its report while the judge's worktrees and
 * image lease are given back beside it; resolves once both are done. `next` says when the giving back
 * starts (`beside`), at the latest when it ends: its processes, begun at the verdict, held up
 * publishing's first request and push by the time the event loop spent starting them.
 */
export async function judgedThen<T>(
  c: RunContext,
  result: RepairResult,
  next: (report: VerificationReport, beside: () => void) => Promise<T>,
  /** The cells' worktrees made while the agent worked (judge-ahead.ts). */
  worktrees?: JudgeOptions['worktrees'],
): Promise<T> {
  let start: () => Promise<void> = async () => {};
  let cleanup: Promise<void> | null = null;
  const beside = () => {
    if (cleanup) return;
    cleanup = start();
    cleanup.catch(() => undefined); // its failure is thrown where it is awaited, after `next`
  };
  try {
    const report = await judgeRun(c, result, undefined, c.run.id, (s) => (start = s), worktrees);
    return await next(report, beside);
  } finally {
    beside();
    await cleanup;
  }
}

/** The status a judged run ends on: an infrastructure error is no verdict on the patch. */
export const endPhase = (report: VerificationReport | null): StatusState['phase'] =>
  report?.verdict === 'infra_error' ? 'infra_error' : 'done';

/**
 * Why a run's agent did not finish its work, as said on the issue (null: it finished). The provider's
 * error is said as it came, its secrets redacted (repair.ts) and host details scrubbed (public.ts).
 */
export function stopCause(result: RepairResult): string | null {
  const { stop_reason: stop, error } = result;
  if (stop === 'completed') return null;
  if (stop === 'model_error') return `The model provider failed: ${error ?? 'no error given'}`;
  if (stop === 'infra_error') return `Infrastructure error: ${error ?? 'no error given'}`;
  return `The agent stopped (\`${stop}\`)${error ? `: ${error}` : ''}`;
}

/** What a run that left no change failed on: the judge never runs on an empty patch. */
export const emptyPatchError = (result: RepairResult): string =>
  `${stopCause(result) ?? 'The agent finished without changing anything'}. Nothing was published.`;
