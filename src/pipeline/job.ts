import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'probot';
import type { RepairResult } from '../agent/types.js';
import type { Config } from '../config/config.js';
import { isLent } from '../environment/lending.js';
import type { GitHub } from '../publish/github.js';
import type { QueueHooks } from '../queue/queue.js';
import type { PartJobs } from '../queue/parts.js';
import { isActive, type RunRecord, type RunStore, type RunUpdate } from '../store/store.js';
import { capMiddle } from '../trace/cap.js';
import { metrics } from '../trace/metrics.js';
import { stopwatch } from '../trace/phases.js';
import { RunTrace } from '../trace/trace.js';
import {
  attemptCount,
  attemptFailed,
  runAttempt,
  runAttempts,
  runOfLabel,
  type AttemptSteps,
  type PublishExtra,
} from './attempts.js';
import { partsOf, type Parts, type VerificationReport } from '../verify/types.js';
import { modelFor, prepare } from './context.js';
import type { JobDeps, RunContext, RepairInputs, Services } from './context.js';
import { freeBytes } from './disk.js';
import { commitPatch, openPr, type Handoff } from './open-pr.js';
import { message, pendingFields, pendingOf, publishLater } from './pending.js';
import { emptyPatchError, judgedThen, NEVER_PUSHED, stopCause } from './policy.js';
import { judgeAhead, type JudgeAhead } from './judge-ahead.js';
import { earlierRevision, pushRevision } from './push-revision.js';
import { endingFor, leftBehind, Reporter, refOf } from './reporter.js';
import { republish } from './resume.js';
import { progressStatus } from './progress.js';
import type { ModelSpec } from './types.js';

/**
 * The app's run job, as a list of steps over one RunContext: prepare (context.ts) → repair → for a
 * revision, push it (push-revision.ts); else judge (policy.ts) → open the pull request (open-pr.ts),
 * or wait to publish again (resume.ts). The status comment and the run's comments go through the
 * Reporter (reporter.ts).
 */

export type { JobDeps };

/** Loaded on first use so that the app's handlers do not pull in the whole pipeline. */
export const REAL_JOB_DEPS: JobDeps = {
  repair: async (o) => (await import('./repair.js')).runRepair(o),
  judge: async (o) => (await import('../verify/judge.js')).judge(o),
  renderEvidence: async (r) => (await import('../verify/markdown.js')).renderMarkdown(r),
  prepareJudge: async (o) => (await import('../verify/judge.js')).prepareWorktrees(o),
};

export interface JobRunnerOptions extends Parts {
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
  private readonly finishing = new Set<Promise<void>>();
  private resuming: Promise<void> | null = null;
  private readonly s: Services;
  private readonly reporter: Reporter;

  constructor(private readonly o: JobRunnerOptions) {
    this.reporter = new Reporter(o);
    this.s = {
      config: o.config,
      store: o.store,
      ...partsOf(o),
      deps: o.deps ?? REAL_JOB_DEPS,
      reporter: this.reporter,
      log: o.log,
    };
  }

  onQueued(run: RunRecord): void {
    this.o.log?.info({ run: run.id, state: run.state, trigger: run.trigger }, 'run queued');
    this.reporter.status(run, true).update({ phase: 'queued' });
  }

  /**
   * Posts a queued run's status comment and waits until it is recorded, so the worker that takes the
   * run (another process) edits this comment rather than posting its own.
   */
  async announceQueued(run: RunRecord): Promise<void> {
    this.o.log?.info({ run: run.id, state: run.state, trigger: run.trigger }, 'run queued');
    const status = this.reporter.status(run, true);
    status.update({ phase: 'queued' });
    await status.settled();
    this.reporter.release(run);
  }

  onError(run: RunRecord, err: unknown): void {
    this.o.log?.error({ err, run: run.id }, 'the queue could not record or hand on a run');
  }

  onFinished(run: RunRecord): void {
    countEnded(run, run.stop_reason ?? 'none');
    const { id, state, verdict, stop_reason, tokens } = run;
    this.o.log?.info({ run: id, state, verdict, stop_reason, tokens }, 'run ended');
    const ending = endingFor(run);
    const p = (async () => {
      if (ending) await this.reporter.finalStatus(run, ending);
      await this.reporter.status(run).settled();
    })()
      .catch((e) => this.o.log?.warn({ err: e, run: run.id }, 'final status update failed'))
      .finally(() => {
        this.reporter.release(run);
        this.finishing.delete(p);
      });
    this.finishing.add(p);
  }

  /** Resolves when every finished run's last status edit has landed and no publishing is being resumed. */
  async settled(): Promise<void> {
    while (this.finishing.size > 0) await Promise.all([...this.finishing]);
    await this.resuming?.catch(() => undefined); // its errors are its caller's
    await this.reporter.idle();
  }

  /** Whether the run behind an engine label (a run's or an attempt's, or their judge's `-verify`) is over. */
  async isFinished(label: string): Promise<boolean> {
    const run = await this.o.store.get(runOfLabel(label));
    return run !== null && !isActive(run.state);
  }

  /**
   * Counts and logs a run found interrupted (`reason`: app_restarted, worker_died) and tells its issue
   * (edits the status comment, then comments) `why`: the app restarted, or the worker running it stopped.
   */
  async reportInterrupted(
    run: RunRecord,
    why = 'the app restarted',
    reason = 'app_restarted',
  ): Promise<void> {
    countEnded(run, reason);
    this.o.log?.warn({ run: run.id, state: run.state, reason, error: run.error }, 'run ended');
    const gh = await this.o.auth(run.installation_id);
    await this.reporter.interrupted(run, gh, `Interrupted: ${why}.`);
    const said = `AgenticFix run \`${run.id}\` was interrupted because ${why} before it finished. ${leftBehind(run)}`;
    await this.reporter.tell(run, gh, refOf(run), 'interrupted', said);
  }

  async execute(run: RunRecord, signal: AbortSignal, parts: PartJobs): Promise<RunUpdate> {
    const log = { run: run.id, repo: `${run.owner}/${run.repo}`, issue: run.issue, trigger: run.trigger };
    this.o.log?.info(log, 'run started');
    try {
      const fields = await this.work(this.reporter.linked(run), signal, parts);
      this.o.log?.info({ ...log, state: fields.state, error: fields.error }, 'run work done');
      return fields;
    } catch (err) {
      // Whatever failed (a full disk, the store, GitHub), the run leaves its record and gives its space back.
      await this.salvage(run, err);
      throw err;
    }
  }

  /** The steps of a run. */
  /**
   * One attempt of a run of several (attempts.ts), on whichever worker took it: prepared as the run
   * was, then repaired and judged on its own. Records its outcome, also when it fails; never throws.
   */
  async executePart(run: RunRecord, n: number, signal: AbortSignal, worker: string | null): Promise<void> {
    const linked = this.reporter.linked(run);
    try {
      const gh = await this.o.auth(run.installation_id);
      const prepared = await prepare(this.s, linked, { gh, signal, model: this.o.model });
      if ('refused' in prepared)
        return await attemptFailed(this.o.store, run, n, worker, prepared.refused.error ?? 'refused');
      const { context, inputs } = prepared;
      await runAttempt(context, n, worker, {
        repair: (ac, a) => this.repair(ac, inputs, a),
        pending: (ac, result, report) => JSON.stringify(pendingOf(ac, result, report, 0, new Date())),
      });
    } catch (err) {
      this.o.log?.error({ err, run: run.id, attempt: n }, 'attempt failed');
      await attemptFailed(this.o.store, run, n, worker, message(err)).catch(() => undefined);
    } finally {
      await this.reporter.status(linked).settled();
    }
  }

  private async work(run: RunRecord, signal: AbortSignal, parts: PartJobs): Promise<RunUpdate> {
    this.reporter.status(run).update({ phase: 'preparing_workspace' });
    const gh = await this.o.auth(run.installation_id);
    const prepared = await prepare(this.s, run, { gh, signal, model: this.o.model });
    if ('refused' in prepared) return prepared.refused;
    const c = prepared.context;
    // A revision an earlier attempt verified and recorded (its job put back): published as recorded.
    const earlier = earlierRevision(c);
    if (earlier) return earlier;
    const count = attemptCount(run, c.rc);
    if (count > 1)
      return runAttempts(c, count, parts, (result, report, extra) => this.publish(c, result, report, extra));
    const ahead = judgeAhead(c);
    try {
      return await this.judged(c, await this.repair(c, prepared.inputs, undefined, ahead), ahead);
    } finally {
      await ahead?.drop();
    }
  }

  /** A single repair's end: a revision pushed, else the patch judged and published. */
  private async judged(c: RunContext, result: RepairResult, ahead: JudgeAhead | null): Promise<RunUpdate> {
    const { run, signal } = c;
    if (signal.aborted) return {};
    // The engine went away under the agent: nothing it did stands, and the judge cannot run either.
    if (result.stop_reason === 'infra_error')
      return { state: 'failed', error: capMiddle(`${stopCause(result)}. Nothing was published.`) };
    if (run.revision !== null) return pushRevision(c, result);
    if (!result.patch.trim()) return { state: 'failed', error: capMiddle(emptyPatchError(result)) };
    c.status.update({
      phase: 'verifying',
      step: result.requests,
      tokensUsed: result.tokens.total,
      tokenBudget: c.budgets.tokens,
      costUsd: result.cost_usd,
      costBudget: c.budgets.costUsd,
    });
    this.o.log?.info({ run: run.id, phase: 'verifying' }, 'run phase');
    const judging = stopwatch();
    const made = commitPatch(c, result);
    return judgedThen(
      c,
      result,
      (report, beside) => {
        metrics.phaseSeconds.observe({ phase: 'judge' }, judging() / 1000);
        return this.publish(c, result, report, undefined, { made, beside });
      },
      ahead?.take,
    );
  }

  /** Stores what publishing needs with the verdict, then opens the pull request (or waits to try again). */
  private async publish(
    c: RunContext,
    result: RepairResult,
    report: VerificationReport,
    extra?: PublishExtra,
    handoff?: Handoff,
  ): Promise<RunUpdate> {
    const { run, signal } = c;
    const record = pendingOf(c, result, report, 0, new Date());
    // What publishing needs is stored with the verdict, before anything is pushed: a process that dies
    // from here on leaves a run that is published again (publish_pending), never a lost verified patch.
    await this.o.store.update(run.id, { verdict: report.verdict, ...pendingFields(record) });
    if (signal.aborted) return {};
    this.o.log?.info({ run: run.id, phase: 'publishing' }, 'run phase');
    const publishing = stopwatch();
    try {
      const opened = await openPr(c, result, report, extra, handoff);
      metrics.phaseSeconds.observe({ phase: 'publish' }, publishing() / 1000);
      if (opened.pr_number != null)
        metrics.labelToPr.observe((Date.now() - Date.parse(run.created_at)) / 1000);
      return { ...opened, publish: null };
    } catch (e) {
      // Publishing waits and is tried again (resumePublishing); the model is not run again.
      return publishLater(record, e, this.o.config.app.publishRetryBaseMs);
    }
  }

  /** The run's repair, or one attempt's (`as`: its own id, budgets, status lines and spend; its signal is `c`'s). */
  private async repair(
    c: RunContext,
    inputs: RepairInputs,
    as?: Parameters<AttemptSteps['repair']>[1],
    /** Begun once the agent works. */
    ahead?: JudgeAhead | null,
  ): Promise<RepairResult> {
    const { run, rc } = c;
    let phase = '';
    // An attempt of its own model (repository `models`) is priced and asked as that model.
    const model = as?.model ? modelFor(inputs.runConfig, this.o.model, as.model) : null;
    const id = as?.runId ?? run.id;
    let spent: number | null = null;
    const result = await this.s.deps.repair({
      ...partsOf(this.s),
      config: model?.runConfig ?? inputs.runConfig,
      remote: c.remote,
      baseCommit: inputs.start,
      issue: inputs.issue,
      testArgv: rc.test,
      protectedPaths: [...NEVER_PUSHED, ...rc.protected_paths],
      ...(rc.guidance_file ? { guidanceFiles: [rc.guidance_file] } : {}),
      model: model?.spec ?? inputs.spec,
      sandbox: this.o.sandbox ?? 'docker',
      dockerfile: c.dockerfile,
      runId: id,
      budgets: as?.budgets ?? c.budgets,
      signal: c.signal,
      // An attempt's events are its own, under its id, as its run directory is (its run page, src/web).
      onEvent: this.reporter.pages.trace(id),
      onProgress: (p) => {
        if (p.phase === 'working') ahead?.begin();
        // The repair's `done` is not the run's: the judge and publishing follow (logged by work()).
        if (p.phase !== phase && p.phase !== 'done')
          this.o.log?.info({ run: run.id, phase: (phase = p.phase) }, 'run phase');
        c.status.update(as ? as.status(progressStatus(p)) : progressStatus(p));
        if (as && p.cost_usd !== null && p.cost_usd !== spent) as.spent((spent = p.cost_usd));
      },
    });
    observeRepair(result, as?.model ?? c.model);
    this.reporter.pages.repaired(id, result);
    // An attempt's figures are kept with the attempts (attempts.ts).
    if (!as)
      await this.o.store.update(run.id, {
        stop_reason: result.stop_reason,
        tokens: result.tokens.total,
        cost_usd: result.cost_usd,
        patch_path: result.patch_path,
        run_dir: result.run_dir,
      });
    return result;
  }

  /**
   * Publishes the runs waiting to (`publish_pending`) whose next try is due: at start-up and
   * periodically. Kept writes go first: a kept "publishing pending" status must not land over the
   * "Done" of its publication.
   */
  async resumePublishing(): Promise<void> {
    this.resuming ??= (async () => {
      await this.reporter.deliverWrites();
      for (const run of await this.o.store.list('publish_pending'))
        await republish(this.s, this.reporter.linked(run), this.o.auth, (r) => this.onFinished(r));
    })().finally(() => (this.resuming = null));
    await this.resuming;
  }

  /** Makes the kept GitHub writes that are due (writes.ts); one pass at a time. */
  deliverWrites(): Promise<void> {
    return this.reporter.deliverWrites();
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
      await this.s.workspaces
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
}

/** A run's end for /metrics, with why it ended. */
function countEnded(run: RunRecord, reason: string): void {
  metrics.runsEnded.inc({ state: run.state, verdict: run.verdict ?? 'none', reason });
}

/** A repair's figures for /metrics: its time, each phase's, its tokens and its cost. */
function observeRepair(result: RepairResult, model: string): void {
  if (result.cost_usd !== null) metrics.cost.inc({ model }, result.cost_usd);
  metrics.runSeconds.observe({ stop_reason: result.stop_reason }, result.duration_ms / 1000);
  for (const [phase, ms] of Object.entries(result.phases_ms))
    metrics.phaseSeconds.observe({ phase }, ms / 1000);
  for (const kind of ['prompt', 'completion', 'cached'] as const)
    metrics.tokens.inc({ kind }, result.tokens[kind]);
}
