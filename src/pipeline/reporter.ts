import { randomUUID } from 'node:crypto';
import type { Logger } from 'probot';
import type { Config } from '../config/config.js';
import { editComment, landedComment, postComment, type GitHub, type IssueRef } from '../publish/github.js';
import type { PageRun } from '../publish/render.js';
import { renderStatus, runPageUrl, StatusComment, type StatusState } from '../publish/status.js';
import { PageEvents } from './page-events.js';
import { withMarker } from '../trace/marker.js';
import type { RunRecord, RunStore } from '../store/store.js';
import { nextTry } from './pending.js';
import { deliverDue, statusWrite } from './writes.js';
import { capMiddle } from '../trace/cap.js';
import { inert } from '../verify/untrusted.js';

/** Where a run reports: its issue, or for a revision the pull request it revises. */
export const refOf = (run: RunRecord): IssueRef => ({
  owner: run.owner,
  repo: run.repo,
  issue: run.revision !== null && run.pr_number !== null ? run.pr_number : run.issue,
});

/**
 * What a run says on GitHub: its status comment, edited in place from queued to its end, and its
 * comments. A final status or a final comment is never dropped: when GitHub fails, it is kept in the
 * store and delivered later (writes.ts); an ordinary comment's failure is the caller's.
 */
export class Reporter {
  private readonly statuses = new Map<string, StatusComment>();
  /** When this process began: a run recorded before it was announced, if at all, by an earlier one. */
  private readonly since = Date.now();
  private delivering: Promise<void> | null = null;
  /** What the run pages read of the runs this process runs (page-events.ts). */
  readonly pages: PageEvents;

  constructor(
    private readonly o: {
      config: Config;
      store: RunStore;
      auth(installationId: number): Promise<GitHub>;
      log?: Pick<Logger, 'info' | 'warn' | 'error'> | undefined;
    },
  ) {
    this.pages = new PageEvents(o.store, o.log);
  }

  /**
   * The run's status comment (one per run in this process; a worker edits the one `serve` posted).
   * `announcing`: the run's first status, right after it was recorded. Any other first status (a worker's,
   * a restarted process's) may follow a POST that landed unrecorded: its marker is looked for first.
   */
  status(run: RunRecord, announcing = false): StatusComment {
    let s = this.statuses.get(run.id);
    if (!s) {
      s = new StatusComment({
        inherited: !announcing || Date.parse(run.created_at) < this.since,
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
        onState: (state) => this.pages.status(run.id, state),
        page: this.linked(run).page,
      });
      this.statuses.set(run.id, s);
    }
    return s;
  }

  /** The run with its page's address, which the comments link to (AGENTICFIX_PUBLIC_URL). */
  linked(run: RunRecord): PageRun {
    return { ...run, page: runPageUrl(this.o.config.web.publicUrl, run.id) };
  }

  /** Forgets a run's status comment once its last edit is made. */
  release(run: RunRecord): void {
    this.statuses.delete(run.id);
    this.pages.forget(run.id);
  }

  /**
   * A comment of the run, marked as its `kind` (one of each per run and place: trace/marker.ts).
   * `look`: an earlier try of this step (publishing again) may have posted it: it is reused if it landed.
   */
  async comment(
    run: RunRecord,
    gh: GitHub,
    ref: IssueRef,
    kind: string,
    body: string,
    look = false,
  ): Promise<void> {
    const id = await postComment(gh, ref, body, { mark: { run: run.id, kind }, look });
    await this.o.store.addComment(run.id, id);
  }

  /** A final comment: posted now or, when GitHub fails, kept in the store until it lands (deliverWrites). */
  async tell(
    run: RunRecord,
    gh: GitHub,
    ref: IssueRef,
    kind: string,
    text: string,
    look = false,
  ): Promise<void> {
    const body = withMarker(text, { run: run.id, kind });
    let id: number;
    try {
      id = await postComment(gh, ref, body, { look });
    } catch (e) {
      return this.keep(run, e, { id: `${run.id}:${randomUUID()}`, comment_id: null, body }, ref);
    }
    await this.o.store.addComment(run.id, id);
  }

  /** A run's last status: edited now or, when GitHub fails, kept in the store until it lands. */
  async finalStatus(run: RunRecord, state: StatusState): Promise<void> {
    const status = this.status(run);
    if (await status.final(state)) return this.o.store.removeWrite(statusWrite(run));
    const body = renderStatus(run.id, run.base_commit, state, this.linked(run).page);
    await this.keep(run, 'the status edit failed', { id: statusWrite(run), comment_id: status.id, body });
  }

  /** The last status of a run no process holds any more (`why`: the app restarted, its worker stopped). */
  async interrupted(run: RunRecord, gh: GitHub, detail: string): Promise<void> {
    const ref = refOf(run);
    // A status its process posted but died before recording is found by its marker and ended too.
    const id = run.status_comment_id ?? (await landedComment(gh, ref, { run: run.id, kind: 'status' }));
    if (id === null) return;
    if (run.status_comment_id === null) await this.o.store.update(run.id, { status_comment_id: id });
    const body = renderStatus(
      run.id,
      run.base_commit,
      { phase: 'interrupted', detail },
      this.linked(run).page,
    );
    await editComment(gh, ref, id, body).then(
      () => this.o.store.removeWrite(statusWrite(run)),
      (e: unknown) => this.keep(run, e, { id: statusWrite(run), comment_id: id, body }),
    );
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

  /** Resolves when no delivery of kept writes is going on. */
  async idle(): Promise<void> {
    await this.delivering?.catch(() => undefined); // its errors are its caller's
    await this.pages.flushed();
  }
}

/** What stopped an interrupted run, as its status says it: the recorded cause, or the app's shutdown. */
export function interruptionCause(run: Pick<RunRecord, 'error'>): string {
  if (!run.error) return 'The app shut down before the run finished.';
  return `Interrupted: ${inert(capMiddle(run.error, 500))}.`;
}

/** How a run is started again: a revision is asked for again on its pull request, a run on its issue. */
const startAgain = (run: Pick<RunRecord, 'revision'>): string =>
  run.revision !== null
    ? 'Comment `/agenticfix revise <what to change>` to ask for the revision again.'
    : 'Comment `/agenticfix rerun` to start again.';

/** What an interrupted run left on GitHub (its pushed commit, if any), and how to start it again. */
export function leftBehind(run: Pick<RunRecord, 'revision' | 'pushed_commit'>): string {
  const revision = run.revision !== null;
  const left =
    run.pushed_commit !== null
      ? `Its commit ${run.pushed_commit} was pushed${revision ? " to the pull request's branch" : ''}; nothing after it was published.`
      : revision
        ? 'Nothing was pushed to the pull request.'
        : 'Nothing was published.';
  return `${left} ${startAgain(run)}`;
}

/** The status a run's end shows, or null for an end that needs none (done: publishing said it). */
export function endingFor(run: RunRecord): StatusState | null {
  switch (run.state) {
    case 'superseded':
      return { phase: 'superseded', detail: `A newer run (\`${run.superseded_by}\`) replaced this one.` };
    case 'cancelled':
      return { phase: 'cancelled', detail: 'Cancelled by a `/agenticfix cancel` comment.' };
    case 'interrupted':
      return {
        phase: 'interrupted',
        detail: `${interruptionCause(run)} ${startAgain(run)}`,
      };
    case 'failed':
      return {
        phase: run.stop_reason === 'infra_error' ? 'infra_error' : 'failed',
        detail: inert(capMiddle(run.error ?? 'unknown')),
      };
    case 'publish_pending':
      return {
        phase: 'publish_pending',
        detail: `Verdict \`${run.verdict}\`. ${inert(capMiddle(run.error ?? 'Publishing failed', 500))}: it is tried again later; the model is not run again.`,
      };
    default:
      return null;
  }
}
