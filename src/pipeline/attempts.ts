import { z } from 'zod';
import type { RepairResult } from '../agent/types.js';
import type { RepoConfig } from '../config/repo-config.js';
import { usd } from '../config/prices.js';
import { patchFiles } from '../patch/patch.js';
import { runPageUrl, type StatusState } from '../publish/status.js';
import type { RunRecord, RunUpdate } from '../store/store.js';
import { capMiddle } from '../trace/cap.js';
import type { VerificationReport } from '../verify/types.js';
import { code, inert } from '../verify/untrusted.js';
import { attemptModel } from './attempt-model.js';
import type { RunContext } from './context.js';
import { judgeRun, stopCause } from './policy.js';
import type { Budgets } from './types.js';

/**
 * Several attempts of one run (repository `attempts`, `/agenticfix rerun attempts=N`): each is a repair
 * of its own (its own run id `<run>-a<n>`, worktree, sandbox and trace; attempts with the same
 * Dockerfile share its image, the builder keys images by content) judged on its own. Among the verified
 * ones the smallest patch is published (changed lines, then files, then cost); none verified: no pull
 * request, and the status comment says each attempt's verdict. The cost limit holds for all attempts
 * together, and a cancel stops them all (they share the run's signal).
 */

/** One attempt's outcome as the run store keeps it (the run's `attempts` column, JSON). */
export const ATTEMPT = z.strictObject({
  n: z.number().int().min(1),
  run_id: z.string(),
  /** The judge's verdict; else why it has none (`empty_patch`, `cancelled`, `not_run`, the stop reason). */
  verdict: z.string(),
  reason: z.string(),
  stop_reason: z.string().nullable(),
  changed_lines: z.number().int(),
  changed_files: z.number().int(),
  /** Tests that failed on the base and pass with the patch; base-passing tests still passing. */
  f2p: z.number().int().nullable(),
  p2p: z.number().int().nullable(),
  cost_usd: z.number().nullable(),
  duration_ms: z.number(),
  published: z.boolean(),
  /** The model its requests asked for (repository `models`, attempt-model.ts); null in rows stored before it. */
  model: z.string().nullable().default(null),
});
export type Attempt = z.infer<typeof ATTEMPT>;
const ATTEMPTS = z.array(ATTEMPT);

/** A run's attempts as recorded (none: a run of one attempt). */
export const recordedAttempts = (run: Pick<RunRecord, 'attempts'>): Attempt[] =>
  run.attempts === null ? [] : ATTEMPTS.parse(JSON.parse(run.attempts));

export const attemptId = (runId: string, n: number): string => `${runId}-a${n}`;

/** The run an attempt's id (or its judge's, `-verify`) belongs to. */
export const runOfLabel = (label: string): string => label.replace(/-verify$/, '').replace(/-a\d+$/, '');

/** How many attempts a run makes: a rerun command's number over the repository's; a revision makes one. */
export const attemptCount = (run: RunRecord, rc: Pick<RepoConfig, 'attempts'>): number =>
  run.revision !== null ? 1 : (run.attempts_asked ?? rc.attempts);

/** Lines added or removed by a git patch (file headers are not changes). */
export function changedLines(patch: string): number {
  let n = 0;
  for (const line of patch.split('\n'))
    if (
      (line.startsWith('+') && !line.startsWith('+++ ')) ||
      (line.startsWith('-') && !line.startsWith('--- '))
    )
      n++;
  return n;
}

/** The attempt to publish: the smallest verified patch (changed lines, then files, then cost), or null. */
export function choose(attempts: readonly Attempt[]): Attempt | null {
  const verified = attempts.filter((a) => a.verdict === 'verified');
  verified.sort(
    (a, b) =>
      a.changed_lines - b.changed_lines ||
      a.changed_files - b.changed_files ||
      (a.cost_usd ?? Infinity) - (b.cost_usd ?? Infinity) ||
      a.n - b.n,
  );
  return verified[0] ?? null;
}

/** What the attempts need of the job: a repair under its own id and budgets, and publishing one. */
export interface AttemptSteps {
  repair(a: {
    runId: string;
    /** The model the attempt asks for (null: the run's). */
    model: string | null;
    budgets: Budgets;
    status: (s: StatusState) => StatusState;
  }): Promise<RepairResult>;
  publish(result: RepairResult, report: VerificationReport, extra: PublishExtra): Promise<RunUpdate>;
}

/** What a published attempt adds to the pull request's evidence and the final status. */
export interface PublishExtra {
  evidence: string[];
  status: string;
}

/** Runs the attempts one after another (see the module comment) and publishes the chosen one. */
export async function runAttempts(c: RunContext, count: number, steps: AttemptSteps): Promise<RunUpdate> {
  const { run, signal } = c;
  const limit = c.budgets.costUsd;
  const attempts: Attempt[] = [];
  const judged = new Map<number, { result: RepairResult; report: VerificationReport }>();
  const record = () => c.s.store.update(run.id, { attempts: JSON.stringify(attempts) });
  const spent = () => attempts.reduce((sum, a) => sum + (a.cost_usd ?? 0), 0);
  for (let n = 1; n <= count; n++) {
    const id = attemptId(run.id, n);
    const left = limit === null ? null : limit - spent();
    const stop = signal.aborted
      ? 'cancelled'
      : left !== null && left <= 0
        ? 'cost_limit'
        : c.rc.attempts_policy === 'first_verified' && choose(attempts)
          ? 'first_verified'
          : null;
    if (stop) {
      attempts.push(notRun(n, id, stop, limit, modelOf(c, n)));
      continue;
    }
    const header = (s: StatusState): StatusState => ({
      ...s,
      detail: [`Attempt ${n} of ${count}.`, ...lines(c, attempts), s.detail].filter(Boolean).join('\n'),
    });
    const result = await steps.repair({
      runId: id,
      model: attemptModel(n, run, c.rc),
      budgets: { ...c.budgets, costUsd: left },
      status: header,
    });
    const attempt = await judgeAttempt(c, n, result, header);
    attempts.push(attempt.outcome);
    if (attempt.report) judged.set(n, { result, report: attempt.report });
    await record();
  }
  const cost = limit === null && attempts.every((a) => a.cost_usd === null) ? null : spent();
  const totals: RunUpdate = { cost_usd: cost };
  const chosen = signal.aborted ? null : choose(attempts);
  if (chosen) chosen.published = true;
  await record();
  if (signal.aborted) return totals;
  if (!chosen) {
    const first = attempts.find((a) => judged.has(a.n));
    await c.s.reporter.finalStatus(run, {
      phase: 'done',
      detail: [`No attempt was verified; no pull request was opened.`, ...lines(c, attempts)].join('\n'),
    });
    return { ...totals, state: 'done', verdict: first?.verdict ?? null };
  }
  const { result, report } = judged.get(chosen.n)!;
  // The run's figures are the published attempt's, its cost that of all attempts.
  await c.s.store.update(run.id, {
    stop_reason: result.stop_reason,
    tokens: result.tokens.total,
    patch_path: result.patch_path,
    run_dir: result.run_dir,
    ...totals,
  });
  const fields = await steps.publish(result, report, publishExtra(c, attempts));
  return { ...fields, ...totals };
}

/** What the published attempt's pull request and final status say of all attempts (also when publishing is resumed). */
export function publishExtra(c: RunContext, attempts: readonly Attempt[]): PublishExtra {
  const chosen = attempts.find((a) => a.published);
  return {
    evidence: [attemptsTable(c, attempts)],
    status: [
      `Attempt ${chosen?.n} of ${attempts.length} published (the smallest verified patch).`,
      ...lines(c, attempts),
    ].join('\n'),
  };
}

/** Judges one attempt's patch, unless its agent left none or stopped for a reason that is no verdict. */
async function judgeAttempt(
  c: RunContext,
  n: number,
  result: RepairResult,
  header: (s: StatusState) => StatusState,
): Promise<{ outcome: Attempt; report: VerificationReport | null }> {
  const base = {
    n,
    run_id: result.run_id,
    stop_reason: result.stop_reason,
    changed_lines: changedLines(result.patch),
    changed_files: patchFiles(result.patch).length,
    cost_usd: result.cost_usd,
    duration_ms: result.duration_ms,
    published: false,
    model: modelOf(c, n),
  };
  const none = { f2p: null, p2p: null };
  if (c.signal.aborted)
    return { outcome: { ...base, ...none, verdict: 'cancelled', reason: 'Cancelled.' }, report: null };
  if (result.stop_reason === 'infra_error' || !result.patch.trim()) {
    const why = stopCause(result) ?? 'The agent finished without changing anything';
    const verdict = result.stop_reason === 'infra_error' ? 'infra_error' : 'empty_patch';
    return { outcome: { ...base, ...none, verdict, reason: capMiddle(why, 300) }, report: null };
  }
  c.status.update(header({ phase: 'verifying' }));
  const report = await judgeRun(c, result, undefined, result.run_id);
  const basePassed = report.cells.find((cell) => cell.name === 'base')?.counts.passed ?? null;
  return {
    outcome: {
      ...base,
      verdict: report.verdict,
      reason: capMiddle(report.reason, 300),
      f2p: report.evidence.reproduced.length,
      p2p: basePassed === null ? null : Math.max(0, basePassed - report.evidence.regressions.length),
    },
    report,
  };
}

function notRun(
  n: number,
  id: string,
  why: 'cancelled' | 'cost_limit' | 'first_verified',
  limit: number | null,
  model: string,
): Attempt {
  const reason = {
    cancelled: 'Not started: the run was cancelled.',
    cost_limit: `Not started: the attempts before it spent the cost limit (${usd(limit)}).`,
    first_verified: 'Not started: an earlier attempt was verified (`attempts_policy: first_verified`).',
  }[why];
  return {
    n,
    run_id: id,
    verdict: why === 'cancelled' ? 'cancelled' : 'not_run',
    reason,
    stop_reason: null,
    changed_lines: 0,
    changed_files: 0,
    f2p: null,
    p2p: null,
    cost_usd: null,
    duration_ms: 0,
    published: false,
    model,
  };
}

/** The model attempt n asks for, by name (the run's when the repository names none). */
const modelOf = (c: RunContext, n: number): string => attemptModel(n, c.run, c.rc) ?? c.model;

/** The attempt's own run page (src/web: its tool calls, diff and report, with its run and siblings). */
const pageLink = (c: RunContext, a: Attempt): string => {
  const url = runPageUrl(c.s.config.web.publicUrl, a.run_id);
  return url ? `[${a.run_id}](${url})` : `\`${a.run_id}\``;
};

/** One line per attempt for the status comment. */
function lines(c: RunContext, attempts: readonly Attempt[]): string[] {
  return attempts.map(
    (a) =>
      `- Attempt ${a.n} (${pageLink(c, a)}): \`${a.verdict}\`${a.published ? ' (published)' : ''}${a.model === null ? '' : `, model ${code(a.model)}`}, ${a.changed_lines} changed lines, ${usd(a.cost_usd)}. ${inert(a.reason)}`,
  );
}

/** The pull request's table of attempts: each one's verdict, test counts, size, cost, duration and page. */
export function attemptsTable(c: RunContext, attempts: readonly Attempt[]): string {
  const num = (v: number | null) => (v === null ? 'n/a' : String(v));
  return [
    `### Attempts (${attempts.length}, each judged on its own; the smallest verified patch is published)`,
    '',
    '| # | Verdict | Model | F2P | P2P | Size | Cost | Duration | Run |',
    '|---|---|---|---|---|---|---|---|---|',
    ...attempts.map(
      (a) =>
        `| ${a.n}${a.published ? ' (published)' : ''} | \`${a.verdict}\` | ${a.model === null ? 'n/a' : code(a.model, { cell: true })} | ${num(a.f2p)} | ${num(a.p2p)} | ${a.changed_lines} lines, ${a.changed_files} files | ${usd(a.cost_usd)} | ${(a.duration_ms / 1000).toFixed(1)} s | ${pageLink(c, a)} |`,
    ),
  ].join('\n');
}
