import { randomUUID } from 'node:crypto';
import type { Logger } from 'probot';
import type { Config } from '../config/config.js';
import { editComment, postComment, type GitHub, type IssueRef } from '../publish/github.js';
import type { PageRun } from '../publish/render.js';
import { renderStatus, runPageUrl, StatusComment, type StatusState } from '../publish/status.js';
import { PageEvents } from './page-events.js';
import { withMarker } from '../trace/marker.js';
import type { RunRecord, RunStore } from '../store/store.js';
import { nextTry } from './pending.js';
import { deliverDue, statusWrite } from './writes.js';

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

  /** The run's status comment (one per run in this process; a worker edits the one `serve` posted). */
  status(run: RunRecord): StatusComment {
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

  /** A comment of the run, marked as its `kind` (one of each per run and place: trace/marker.ts). */
  async comment(run: RunRecord, gh: GitHub, ref: IssueRef, kind: string, body: string): Promise<void> {
    await this.o.store.addComment(run.id, await postComment(gh, ref, body, { mark: { run: run.id, kind } }));
  }

  /** A final comment: posted now or, when GitHub fails, kept in the store until it lands (deliverWrites). */
  async tell(run: RunRecord, gh: GitHub, ref: IssueRef, kind: string, text: string): Promise<void> {
    const body = withMarker(text, { run: run.id, kind });
    let id: number;
    try {
      id = await postComment(gh, ref, body);
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
    if (run.status_comment_id === null) return;
    const body = renderStatus(
      run.id,
      run.base_commit,
      { phase: 'interrupted', detail },
      this.linked(run).page,
    );
    await editComment(gh, refOf(run), run.status_comment_id, body).then(
      () => this.o.store.removeWrite(statusWrite(run)),
      (e: unknown) => this.keep(run, e, { id: statusWrite(run), comment_id: run.status_comment_id, body }),
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
