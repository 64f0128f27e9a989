import { z } from 'zod';
import type { RepairResult } from '../agent/types.js';
import type { RepoConfig } from '../config/repo-config.js';
import { usd } from '../config/prices.js';
import { patchFiles } from '../patch/patch.js';
import { runPageUrl, type StatusState } from '../publish/status.js';
import type { RunRecord, RunStore, RunUpdate } from '../store/store.js';
import { capMiddle } from '../trace/cap.js';
import type { VerificationReport } from '../verify/types.js';
import { code, inert } from '../verify/untrusted.js';
import { attemptModel } from './attempt-model.js';
import type { RunContext } from './context.js';
import { judgeRun, stopCause } from './policy.js';
import type { Budgets } from './types.js';
import { PENDING_PUBLISH } from './pending.js';
import type { PartJobs } from '../queue/parts.js';

/**
 * Several attempts of one run (repository `attempts`, `/agenticfix rerun attempts=N`): each is a job of
 * its own (a part of the run, side by side in the queue's free slots: in one process or on the workers),
 * a repair of its own (its own run id `<run>-a<n>`, worktree, sandbox and trace; attempts with the same
 * Dockerfile share its image, the builder keys images by content) judged on its own and recorded in the
 * store (RunStore.putAttempt). Among the verified ones the smallest patch is published (changed lines,
 * then files, then cost), once, by the run's job; none verified: no pull request, and the status
 * comment says each attempt's verdict. The cost limit holds for all attempts together (each records
 * its spend as it goes and reads the others'), and a cancel of the run stops them all.
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
  /** The worker that ran it (`worker` of the run store); null: the run's own process, or not run. */
  worker: z.string().nullable().optional(),
  /** Verified: what publishing it needs (pending.ts, JSON), kept until one is chosen. */
  publish: z.string().optional(),
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

/** What an attempt needs of the job: a repair under its own id, budgets and signal (in `ac`). */
export interface AttemptSteps {
  repair(
    ac: RunContext,
    a: {
      runId: string;
      /** The model the attempt asks for (null: the run's). */
      model: string | null;
      budgets: Budgets;
      status: (s: StatusState) => StatusState;
      /** What the attempt has spent so far, as the repair goes. */
      spent: (usd: number) => void;
    },
  ): Promise<RepairResult>;
  /** What publishing a verified attempt needs (pending.ts), as stored. */
  pending(ac: RunContext, result: RepairResult, report: VerificationReport): string;
}

/** What a published attempt adds to the pull request's evidence and the final status. */
export interface PublishExtra {
  evidence: string[];
  status: string;
}

type Publish = (result: RepairResult, report: VerificationReport, extra: PublishExtra) => Promise<RunUpdate>;

/**
 * The run's side: its attempts run as parts (in the embedded queue's free slots, distributed as jobs
 * spread over the workers: queue/parts.ts), each recording its outcome in the store; then the chosen
 * one is published, once, from what it stored.
 */
export async function runAttempts(
  c: RunContext,
  count: number,
  parts: PartJobs,
  publish: Publish,
): Promise<RunUpdate> {
  const { run, signal } = c;
  const limit = c.budgets.costUsd;
  await c.s.store.update(run.id, { attempts: null }); // a run taken up again starts its attempts afresh
  await parts.run(run, count, signal);
  const recorded = recordedAttempts((await c.s.store.get(run.id)) ?? { attempts: null });
  const attempts = Array.from({ length: count }, (_, i): Attempt => {
    const n = i + 1;
    const found = recorded.find((a) => a.n === n);
    // Its worker stopped mid-attempt (its job failed), or its job never ran (the run stopped first).
    if (found?.verdict === 'running')
      return { ...found, verdict: 'interrupted', reason: 'Its worker stopped before it ended.' };
    if (found) return found;
    const why = signal.aborted
      ? 'cancelled'
      : limit !== null && spentOn(recorded) >= limit
        ? 'cost_limit'
        : c.rc.attempts_policy === 'first_verified' && choose(recorded)
          ? 'first_verified'
          : 'lost';
    return notRun(n, attemptId(run.id, n), why, limit, modelOf(c, n));
  });
  const spent = spentOn(attempts);
  const totals: RunUpdate = {
    cost_usd: limit === null && attempts.every((a) => a.cost_usd === null) ? null : spent,
  };
  const chosen = signal.aborted ? null : choose(attempts);
  // What publishing the others needed is dropped with the choice.
  const final = attempts.map(({ publish: _, ...a }) => ({ ...a, published: a.n === chosen?.n }));
  await c.s.store.update(run.id, { attempts: JSON.stringify(final), ...totals });
  if (signal.aborted) return totals;
  if (!chosen) {
    await c.s.reporter.finalStatus(run, {
      phase: 'done',
      detail: [`No attempt was verified; no pull request was opened.`, ...lines(c, final)].join('\n'),
    });
    return { ...totals, state: 'done', verdict: final.find((a) => a.f2p !== null)?.verdict ?? null };
  }
  const read = PENDING_PUBLISH.safeParse(JSON.parse(chosen.publish ?? 'null'));
  if (!read.success)
    return { ...totals, state: 'failed', error: `attempt ${chosen.n}: its publishing record is unreadable` };
  const { patch, report, result: kept } = read.data;
  const result: RepairResult = { ...kept, patch };
  // The run's figures are the published attempt's, its cost that of all attempts.
  await c.s.store.update(run.id, {
    stop_reason: result.stop_reason,
    tokens: result.tokens.total,
    patch_path: result.patch_path,
    run_dir: result.run_dir,
  });
  // Its repair and report are also the run's (the run's page, a revision's summary of the change so far).
  c.s.reporter.pages.repaired(run.id, result);
  c.s.reporter.pages.verified(run.id, report);
  const fields = await publish(result, report, publishExtra(c, final));
  return { ...fields, ...totals };
}

/** Records attempt `n` as failed before it could be judged (its preparation refused, or it threw). */
export async function attemptFailed(
  store: RunStore,
  run: RunRecord,
  n: number,
  worker: string | null,
  error: string,
): Promise<void> {
  const failed = { ...notRun(n, attemptId(run.id, n), 'lost', null, null), verdict: 'infra_error' };
  await store.putAttempt(run.id, { ...failed, reason: capMiddle(error, 300), worker });
}

const spentOn = (attempts: readonly Attempt[]): number =>
  attempts.reduce((sum, a) => sum + (a.cost_usd ?? 0), 0);

/**
 * One attempt (a part of the run, on whichever worker took it): not started when the run was stopped,
 * the attempts spent the cost limit or (first_verified) one is verified; else repaired under its own id
 * with what the cost limit leaves, judged on its own, and recorded. While it runs, its spend is recorded
 * as it goes, and it stops once all attempts together reach the limit or another is verified first.
 */
export async function runAttempt(
  c: RunContext,
  n: number,
  worker: string | null,
  steps: AttemptSteps,
): Promise<void> {
  const { run, rc } = c;
  const count = attemptCount(run, rc);
  const id = attemptId(run.id, n);
  const limit = c.budgets.costUsd;
  const started = Date.now();
  const put = async (a: Attempt) => ATTEMPTS.parse(await c.s.store.putAttempt(run.id, { ...a, worker }));
  const going = (cost: number | null): Attempt => ({
    ...notRun(n, id, 'lost', limit, modelOf(c, n)),
    verdict: 'running',
    reason: 'Running.',
    cost_usd: cost,
    duration_ms: Date.now() - started,
  });
  const others = (all: readonly Attempt[]) => all.filter((a) => a.n !== n);
  const over = (all: readonly Attempt[]): 'cost_limit' | 'first_verified' | null =>
    limit !== null && spentOn(all) >= limit
      ? 'cost_limit'
      : rc.attempts_policy === 'first_verified' && choose(others(all))
        ? 'first_verified'
        : null;
  const before = await put(going(null));
  const stop = c.signal.aborted ? 'cancelled' : over(before);
  if (stop) return void (await put(notRun(n, id, stop, limit, modelOf(c, n))));
  const own = new AbortController();
  const ac: RunContext = { ...c, signal: AbortSignal.any([c.signal, own.signal]) };
  let recording = Promise.resolve();
  const spent = (usd: number) =>
    (recording = recording
      .then(() => put(going(usd)))
      .then(async (all) => {
        // Its own spend is held by its budget (what was left when it started): the cost limit stops it
        // here for what the others spent since.
        const why = over(all);
        const grew = spentOn(others(all)) > spentOn(others(before));
        if (why === 'first_verified' || (why === 'cost_limit' && grew)) own.abort(why);
        // The run ended elsewhere (its worker died and serve ended it, or it was taken up again).
        const now = await c.s.store.get(run.id);
        if (now?.state !== 'running' || now.attempt !== run.attempt) own.abort('run_over' satisfies StopWhy);
      })
      .catch(() => undefined)); // the next one, or the outcome, is recorded
  const header = (s: StatusState): StatusState => ({
    ...s,
    detail: [`Attempt ${n} of ${count}.`, s.detail].filter(Boolean).join('\n'),
  });
  const left = limit === null ? null : limit - spentOn(others(before));
  const result = await steps.repair(ac, {
    runId: id,
    model: attemptModel(n, run, rc),
    budgets: { ...c.budgets, costUsd: left },
    status: header,
    spent,
  });
  await recording;
  const stopped = own.signal.aborted && !c.signal.aborted ? (own.signal.reason as StopWhy) : null;
  const attempt = await judgeAttempt(ac, n, result, header, stopped, limit);
  const pending =
    attempt.report?.verdict === 'verified' ? steps.pending(ac, result, attempt.report) : undefined;
  await put({ ...attempt.outcome, ...(pending ? { publish: pending } : {}) });
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
  /** Why the attempt was stopped while it ran, if it was (the run's own stop is `c.signal`'s). */
  stopped: StopWhy | null,
  limit: number | null,
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
  if (stopped)
    return { outcome: { ...base, ...none, verdict: stopped, reason: STOPPED[stopped](limit) }, report: null };
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

/** Why an attempt stopped while it ran, for another attempt's sake. */
type StopWhy = 'cost_limit' | 'first_verified' | 'run_over';
const STOPPED: Record<StopWhy, (limit: number | null) => string> = {
  cost_limit: (limit) => `Stopped: the attempts together spent the cost limit (${usd(limit)}).`,
  first_verified: () => 'Stopped: another attempt was verified first (`attempts_policy: first_verified`).',
  run_over: () => 'Stopped: its run had ended (its worker stopped).',
};

function notRun(
  n: number,
  id: string,
  why: 'cancelled' | 'lost' | 'cost_limit' | 'first_verified',
  limit: number | null,
  /** The model it asks (or would have asked) for; null: not known (its preparation failed). */
  model: string | null,
): Attempt {
  const reason = {
    cancelled: 'Not started: the run was cancelled.',
    cost_limit: `Not started: the attempts before it spent the cost limit (${usd(limit)}).`,
    first_verified: 'Not started: an earlier attempt was verified (`attempts_policy: first_verified`).',
    lost: 'Not run: its job was lost (its worker stopped before it started).',
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
