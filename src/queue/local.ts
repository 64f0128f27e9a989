import type { RunRecord, RunStore, RunUpdate } from '../store/store.js';
import { slottedParts, type ExecutePart, type PartSlots, type QueuedPart } from './parts.js';
import {
  executeRun,
  finishRun,
  issueKey,
  issueRunsAround,
  message,
  NotOwner,
  orphanEnd,
  RECORD_RETRY_MS,
  UnrecordedEnd,
  type QueueHooks,
  type RunQueue,
} from './queue.js';
import { stoppedFields, type StopRequest } from './stop.js';

interface Active {
  run: RunRecord;
  controller: AbortController;
  done: Promise<void>;
}

/** What waits for a slot, in the order it came: a run, or a part of a running run (its attempt). */
type Waiting = { run: RunRecord; part: null } | { run: RunRecord; part: QueuedPart };

export interface LocalQueueOptions {
  /** Runs and parts of one installation at a time (0: no limit). */
  installationLimit?: number;
  /** Waits between tries of recording a run's end. */
  recordRetryMs?: readonly number[];
}

/**
 * The queue of a single process: at most `concurrency` runs and parts (a run's attempts beyond its
 * first, slottedParts) at a time, at most `installationLimit` of one installation, so that one
 * installation's burst leaves room for the others'. As the distributed queue's jobs do, runs and parts
 * take the free slots in the order they came; a run runs its parts no slot was free for itself.
 */
export class LocalRunQueue implements RunQueue, PartSlots {
  private readonly line: Waiting[] = [];
  private readonly active = new Map<string, Active>(); // by issue key
  /** Parts running in slots of their own. */
  private readonly parts = new Set<QueuedPart>();
  private readonly idleWaiters: (() => void)[] = [];
  /** Ends of dropped runs still being recorded, by run id. */
  private readonly dropping = new Map<string, Promise<void>>();
  /** Ends the store would not take, by run id: reconcile() records them. */
  private readonly unrecorded = new Map<string, { run: RunRecord; fields: RunUpdate }>();
  private closed = false;
  private readonly installationLimit: number;
  private readonly recordRetryMs: readonly number[];

  constructor(
    private readonly store: RunStore,
    private readonly concurrency: number,
    private readonly hooks: QueueHooks,
    o: LocalQueueOptions = {},
  ) {
    this.installationLimit = o.installationLimit ?? 0;
    this.recordRetryMs = o.recordRetryMs ?? RECORD_RETRY_MS;
  }

  async enqueue(run: RunRecord): Promise<void> {
    if (this.closed) throw new Error('queue is closed');
    if (
      this.queued().some((r) => r.id === run.id) ||
      [...this.active.values()].some((a) => a.run.id === run.id)
    )
      return;
    const key = issueKey(run);
    this.dropQueued(key, { kind: 'superseded', by: run.id });
    this.active.get(key)?.controller.abort({ kind: 'superseded', by: run.id } satisfies StopRequest);
    this.line.push({ run, part: null });
    this.hooks.onQueued?.(run);
    this.pump();
  }

  async cancel(owner: string, repo: string, issue: number, by: string): Promise<RunRecord | null> {
    const key = issueKey({ owner, repo, issue });
    const stop: StopRequest = { kind: 'cancelled', by };
    const dropped = this.dropQueued(key, stop);
    const running = this.active.get(key);
    if (running && !running.controller.signal.aborted) {
      running.controller.abort(stop);
      return running.run;
    }
    return dropped;
  }

  /** Resolves when nothing is queued or running and every dropped run's end is recorded. */
  async idle(): Promise<void> {
    if (this.queued().length > 0 || this.active.size > 0)
      await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    await Promise.all([...this.dropping.values()]);
  }

  /**
   * Stops accepting runs, lets running ones finish for `drainMs`, then aborts them (they end `interrupted`).
   * Their parts still waiting are left to them, as a draining worker leaves them: each run runs its own.
   */
  async close(drainMs = 0): Promise<void> {
    this.closed = true;
    const queued = this.queued();
    this.line.splice(0, this.line.length, ...this.line.filter((w) => w.part));
    const dropped = queued.map((r) => this.drop(r, { state: 'interrupted', stop_reason: 'shutdown' }));
    const running = Promise.all([...this.active.values()].map((a) => a.done));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([running, new Promise((resolve) => (timer = setTimeout(resolve, drainMs)))]);
    clearTimeout(timer);
    for (const a of this.active.values()) a.controller.abort({ kind: 'shutdown' } satisfies StopRequest);
    await Promise.all([...dropped, ...[...this.active.values()].map((a) => a.done)]);
  }

  offer(part: QueuedPart): void {
    this.line.push({ run: part.run, part });
    this.pump();
  }

  withdraw(part: QueuedPart): boolean {
    const i = this.line.findIndex((w) => w.part === part);
    if (i >= 0) this.line.splice(i, 1);
    return i >= 0;
  }

  /** Runs waiting for a slot (not parts). */
  private queued(): RunRecord[] {
    return this.line.flatMap((w) => (w.part ? [] : [w.run]));
  }

  private dropQueued(key: string, stop: StopRequest): RunRecord | null {
    const i = this.line.findIndex((w) => !w.part && issueKey(w.run) === key);
    if (i < 0) return null;
    const [{ run }] = this.line.splice(i, 1) as [Waiting];
    void this.drop(run, stoppedFields(stop));
    return run;
  }

  /** Starts what waits, in the order it came, while slots are free; a run waits while its issue is active. */
  private pump(): void {
    while (!this.closed && this.active.size + this.parts.size < this.concurrency) {
      const i = this.line.findIndex(
        (w) => (w.part || !this.active.has(issueKey(w.run))) && this.installationFree(w.run),
      );
      if (i < 0) break;
      const [next] = this.line.splice(i, 1) as [Waiting];
      if (next.part) this.startPart(next.part);
      else this.start(next.run);
    }
    if (this.queued().length === 0 && this.active.size === 0) this.idleWaiters.splice(0).forEach((f) => f());
  }

  private installationFree(run: RunRecord): boolean {
    if (this.installationLimit === 0) return true;
    let held = 0;
    for (const r of [...[...this.active.values()].map((a) => a.run), ...[...this.parts].map((p) => p.run)])
      if (r.installation_id === run.installation_id) held++;
    return held < this.installationLimit;
  }

  /** A part in a slot of its own; its run waits for its end. */
  private startPart(part: QueuedPart): void {
    this.parts.add(part);
    void part.start().finally(() => {
      this.parts.delete(part);
      this.pump();
    });
  }

  /**
   * Runs that are `running` in the store with no live job here: ends the store would not take are
   * recorded now, and any other such run (its job lost) ends as orphanEnd says. Periodically.
   */
  async reconcile(): Promise<RunRecord[]> {
    const live = new Set([...this.active.values()].map((a) => a.run.id));
    const ended: RunRecord[] = [];
    for (const [id, end] of [...this.unrecorded]) {
      if (live.has(id)) continue;
      await finishRun(this.store, this.hooks, end.run, end.fields, []).then(
        () => (this.unrecorded.delete(id), ended.push(end.run)),
        (err: unknown) => this.hooks.onError?.(end.run, err),
      );
    }
    for (const run of await this.store.list('running')) {
      if (live.has(run.id) || this.unrecorded.has(run.id)) continue;
      const fields = orphanEnd(run, 'its job was lost: its end was never recorded');
      await finishRun(this.store, this.hooks, run, fields, []).then(
        () => ended.push(run),
        (err: unknown) => this.hooks.onError?.(run, err),
      );
    }
    // Recorded but never enqueued (its enqueue failed): run it, unless a newer run of its issue is active.
    for (const run of await this.store.list('queued')) {
      if (this.closed || this.dropping.has(run.id)) continue; // enqueue() skips one queued or running here
      const { newer } = await issueRunsAround(this.store, run);
      if (newer) await this.drop(run, stoppedFields({ kind: 'superseded', by: newer.id }));
      else await this.enqueue(run);
    }
    return ended;
  }

  private start(run: RunRecord): void {
    const controller = new AbortController();
    const key = issueKey(run);
    const execute: ExecutePart = async (...a) => this.hooks.executePart?.(...a);
    const done = executeRun(this.store, this.hooks, run, controller.signal, {
      recordRetryMs: this.recordRetryMs,
      parts: slottedParts(this, execute),
    })
      // A failure here must not become an unhandled rejection that stops the server. An end the store
      // would not take (nor the start: the run never ran) is kept for reconcile().
      .catch((err: unknown) => {
        if (err instanceof NotOwner) return; // ended meanwhile (by reconcile): nothing of it is this queue's
        this.unrecorded.set(
          run.id,
          err instanceof UnrecordedEnd
            ? { run: err.run, fields: err.fields } // as started: its owner
            : { run, fields: { state: 'failed', error: `the run could not start: ${message(err)}` } },
        );
        this.hooks.onError?.(run, err);
      })
      .finally(() => {
        this.active.delete(key);
        this.pump();
      });
    this.active.set(key, { run, controller, done });
  }

  /** Records the end of a run that never started; a failure goes to onError like any other. */
  private drop(run: RunRecord, fields: RunUpdate): Promise<void> {
    const done = finishRun(this.store, this.hooks, run, fields).catch((err: unknown) => {
      if (err instanceof NotOwner) return;
      if (err instanceof UnrecordedEnd) this.unrecorded.set(run.id, { run, fields: err.fields });
      this.hooks.onError?.(run, err);
    });
    this.dropping.set(run.id, done);
    return done.finally(() => this.dropping.delete(run.id));
  }
}
