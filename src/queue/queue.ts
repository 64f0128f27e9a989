import type { RunRecord, RunState, RunStore, RunUpdate } from './store.js';

/**
 * Runs jobs with at most `concurrency` at a time and at most one active run per issue. A new run for
 * an issue supersedes the older one: a queued one is dropped, a running one is aborted (its signal
 * reaches runRepair, which stops the container) and the new run starts once the old one has stopped.
 */

/** Why a run's signal was aborted (`signal.reason`). */
export type StopRequest =
  { kind: 'superseded'; by: string } | { kind: 'cancelled'; by: string } | { kind: 'shutdown' };

export interface QueueHooks {
  /** Does the work; resolves with the run's final fields (state done or failed). Must honour `signal`. */
  execute(run: RunRecord, signal: AbortSignal): Promise<RunUpdate>;
  /** Called when a run enters the queue (e.g. to post the status comment). Errors are the hook's own. */
  onQueued?(run: RunRecord): void;
  /** Called when a run ends in any state, including ones dropped before they started. */
  onFinished?(run: RunRecord): void;
  /** Called when recording a run's end failed (e.g. the store is unwritable); the queue goes on. */
  onError?(run: RunRecord, err: unknown): void;
}

const issueKey = (r: Pick<RunRecord, 'owner' | 'repo' | 'issue'>): string =>
  `${r.owner}/${r.repo}#${r.issue}`.toLowerCase();

interface Active {
  run: RunRecord;
  controller: AbortController;
  done: Promise<void>;
}

export class RunQueue {
  private readonly pending: RunRecord[] = [];
  private readonly active = new Map<string, Active>(); // by issue key
  private readonly idleWaiters: (() => void)[] = [];
  /** Ends of dropped runs still being recorded. */
  private readonly dropping = new Set<Promise<void>>();
  private closed = false;

  constructor(
    private readonly store: RunStore,
    private readonly concurrency: number,
    private readonly hooks: QueueHooks,
  ) {}

  /** Queues a recorded run; an earlier queued or running run of the same issue is superseded. */
  enqueue(run: RunRecord): void {
    if (this.closed) throw new Error('queue is closed');
    if (
      this.pending.some((r) => r.id === run.id) ||
      [...this.active.values()].some((a) => a.run.id === run.id)
    )
      return;
    const key = issueKey(run);
    this.dropPending(key, { kind: 'superseded', by: run.id });
    this.active.get(key)?.controller.abort({ kind: 'superseded', by: run.id } satisfies StopRequest);
    this.pending.push(run);
    this.hooks.onQueued?.(run);
    this.pump();
  }

  /** Cancels the issue's queued or running run; returns it, or null when there was none. */
  cancel(owner: string, repo: string, issue: number, by: string): RunRecord | null {
    const key = issueKey({ owner, repo, issue });
    const stop: StopRequest = { kind: 'cancelled', by };
    const dropped = this.dropPending(key, stop);
    const running = this.active.get(key);
    if (running && !running.controller.signal.aborted) {
      running.controller.abort(stop);
      return running.run;
    }
    return dropped;
  }

  /** Resolves when nothing is queued or running and every dropped run's end is recorded. */
  async idle(): Promise<void> {
    if (this.pending.length > 0 || this.active.size > 0)
      await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    await Promise.all([...this.dropping]);
  }

  /** Stops accepting runs, aborts running ones (they end `interrupted`) and waits for them. */
  async close(): Promise<void> {
    this.closed = true;
    const dropped = this.pending
      .splice(0)
      .map((r) => this.drop(r, { state: 'interrupted', stop_reason: 'shutdown' }));
    for (const a of this.active.values()) a.controller.abort({ kind: 'shutdown' } satisfies StopRequest);
    await Promise.all([...dropped, ...[...this.active.values()].map((a) => a.done)]);
  }

  private dropPending(key: string, stop: StopRequest): RunRecord | null {
    const i = this.pending.findIndex((r) => issueKey(r) === key);
    if (i < 0) return null;
    const [run] = this.pending.splice(i, 1);
    void this.drop(run!, stoppedFields(stop));
    return run!;
  }

  private pump(): void {
    while (!this.closed && this.active.size < this.concurrency) {
      const i = this.pending.findIndex((r) => !this.active.has(issueKey(r)));
      if (i < 0) break;
      const [run] = this.pending.splice(i, 1);
      this.start(run!);
    }
    if (this.pending.length === 0 && this.active.size === 0) this.idleWaiters.splice(0).forEach((f) => f());
  }

  private start(queued: RunRecord): void {
    const controller = new AbortController();
    const key = issueKey(queued);
    let run = queued;
    const done = (async () => {
      run = await this.store.update(queued.id, { state: 'running', started_at: new Date().toISOString() });
      let fields: RunUpdate;
      try {
        fields = await this.hooks.execute(run, controller.signal);
      } catch (e) {
        fields = { state: 'failed', error: e instanceof Error ? e.message : String(e) };
      }
      if (controller.signal.aborted)
        fields = { ...fields, ...stoppedFields(controller.signal.reason as StopRequest) };
      await this.finish(run, fields);
    })()
      // A failure here must not become an unhandled rejection that stops the server.
      .catch((err: unknown) => this.hooks.onError?.(run, err))
      .finally(() => {
        this.active.delete(key);
        this.pump();
      });
    this.active.set(key, { run: queued, controller, done });
  }

  private async finish(run: RunRecord, fields: RunUpdate): Promise<void> {
    const final = await this.store.update(run.id, { finished_at: new Date().toISOString(), ...fields });
    this.hooks.onFinished?.(final);
  }

  /** Records the end of a run that never started; a failure goes to onError like any other. */
  private drop(run: RunRecord, fields: RunUpdate): Promise<void> {
    const done = this.finish(run, fields).catch((err: unknown) => this.hooks.onError?.(run, err));
    this.dropping.add(done);
    return done.finally(() => this.dropping.delete(done));
  }
}

function stoppedFields(stop: StopRequest): RunUpdate & { state: RunState } {
  switch (stop.kind) {
    case 'superseded':
      return { state: 'superseded', stop_reason: 'superseded', superseded_by: stop.by };
    case 'cancelled':
      return { state: 'cancelled', stop_reason: 'cancelled' };
    case 'shutdown':
      return { state: 'interrupted', stop_reason: 'shutdown' };
  }
}
