import {
  AFTER_VERDICT,
  isActive,
  ownerOf,
  type RunRecord,
  type RunStore,
  type RunUpdate,
} from '../store/store.js';
import { storeUnreachable } from '../store/patient.js';
import { inlineParts, type ExecutePart, type PartJobs } from './parts.js';
import { stoppedFields, type StopRequest } from './stop.js';

/** The active runs of `run`'s issue recorded after it and before it: the newest run of an issue wins. */
export async function issueRunsAround(
  store: RunStore,
  run: RunRecord,
): Promise<{ newer: RunRecord | undefined; older: RunRecord[] }> {
  const runs = await store.forIssue(run.owner, run.repo, run.issue); // newest first
  const at = runs.findIndex((r) => r.id === run.id);
  return {
    newer: runs.slice(0, at).find((r) => isActive(r.state)),
    older: runs.slice(at + 1).filter((r) => isActive(r.state)),
  };
}

export interface QueueHooks {
  /**
   * Does the work; resolves with the run's final fields (state done or failed). Must honour `signal`.
   * `parts` runs the run's parts (its attempts) through executePart, wherever the queue runs them.
   */
  execute(run: RunRecord, signal: AbortSignal, parts: PartJobs): Promise<RunUpdate>;
  /** Runs one part of a run (PartJobs); records its outcome itself and never throws for its own failure. */
  executePart?: ExecutePart;
  /** Called when a run enters the queue (e.g. to post the status comment). Errors are the hook's own. */
  onQueued?(run: RunRecord): void;
  /** Called when a run ends in any state, including ones dropped before they started. */
  onFinished?(run: RunRecord): void;
  /**
   * Called when the queue's own bookkeeping of a run failed (recording its end: the store is unwritable;
   * distributed, announcing it or adding its job); the queue goes on.
   */
  onError?(run: RunRecord, err: unknown): void;
}

/**
 * Where recorded runs wait and run: at most one active run per issue, and a new run for an issue
 * supersedes the older one (a queued one is dropped, a running one is aborted: its signal reaches
 * runRepair, which stops the container) and starts once the old one has stopped. In one process
 * (LocalRunQueue, below) or across workers on many machines (BullRunQueue, bullmq.ts); one contract
 * suite (test/support/queue-contract.ts) for both.
 */
export interface RunQueue {
  /** Queues a recorded run; an earlier queued or running run of the same issue is superseded. */
  enqueue(run: RunRecord): Promise<void>;
  /** Cancels the issue's queued or running run; returns it, or null when there was none. */
  cancel(owner: string, repo: string, issue: number, by: string): Promise<RunRecord | null>;
  /** Resolves when nothing is queued or running. */
  idle(): Promise<void>;
  /**
   * Runs queued or running in the store with no live job (its end never recorded, its job lost or
   * failed: a store or Redis outage, a dead worker) are ended: `interrupted` with the cause, or
   * `publish_pending` when judged with a publishing record; returns them. Periodically (serve's upkeep).
   */
  reconcile(): Promise<RunRecord[]>;
  /**
   * Stops taking runs. LocalRunQueue ends queued ones `interrupted` and gives running ones `drainMs` to
   * finish before they are too; BullRunQueue leaves them to the workers.
   */
  close(drainMs?: number): Promise<void>;
}

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

export const issueKey = (r: Pick<RunRecord, 'owner' | 'repo' | 'issue'>): string =>
  `${r.owner}/${r.repo}#${r.issue}`.toLowerCase();

/** A run stopped by a draining worker (`handback`): recorded `queued` again, for the queue to hand on. */
export class HandedBack extends Error {
  constructor(readonly runId: string) {
    super(`run ${runId} handed back to the queue`);
    this.name = 'HandedBack';
  }
}

/**
 * The run is no longer as this worker read it (state, worker, attempt): another worker took it over
 * after this one stalled, or its end was recorded meanwhile. This worker's writes are dropped.
 */
export class NotOwner extends Error {
  constructor(readonly runId: string) {
    super(`run ${runId} has a newer owner: this worker's change was not recorded`);
    this.name = 'NotOwner';
  }
}

/** Sets `fields` while `run` is still as read (RunStore.updateIf), else throws NotOwner. */
async function ownUpdate(store: RunStore, run: RunRecord, fields: RunUpdate): Promise<RunRecord> {
  const updated = await store.updateIf(run.id, ownerOf(run), fields);
  if (!updated) throw new NotOwner(run.id);
  return updated;
}

/** An infrastructure failure (execute threw) that the queue will retry: the run went back to `queued`. */
export class RetryRun extends Error {
  constructor(readonly error: string) {
    super(`retried after an infrastructure failure: ${error}`);
    this.name = 'RetryRun';
  }
}

export interface ExecuteOptions {
  /** Fields recorded with `running` (e.g. the worker). */
  started?: RunUpdate;
  /** Whether a failure (execute threw) is tried again; then executeRun throws RetryRun. */
  retry?: boolean;
  /** Waits between tries of recording the end (RECORD_RETRY_MS). */
  recordRetryMs?: readonly number[];
  /** Where the run's parts run; one after another here by default. */
  parts?: PartJobs;
}

/**
 * Runs one queued run to its end, wherever it runs: recorded as running (its next attempt), executed,
 * its end recorded (a stop request read from `signal` decides the state) and reported. A throw from
 * execute is an infrastructure failure: the run fails, or with `retry` goes back to `queued` for another
 * attempt. Each write expects the run as this attempt left it: NotOwner when another took it over.
 */
export async function executeRun(
  store: RunStore,
  hooks: QueueHooks,
  queued: RunRecord,
  signal: AbortSignal,
  o: ExecuteOptions = {},
): Promise<void> {
  const run = await ownUpdate(store, queued, {
    state: 'running',
    started_at: new Date().toISOString(),
    error: null, // an earlier attempt's
    attempt: queued.attempt + 1,
    ...o.started,
  });
  let fields: RunUpdate;
  try {
    const parts = o.parts ?? inlineParts(async (...a) => hooks.executePart?.(...a));
    fields = await hooks.execute(run, signal, parts);
  } catch (e) {
    const error = message(e);
    if (o.retry && !signal.aborted) {
      await ownUpdate(store, run, { state: 'queued', error: `retrying after: ${error}` });
      throw new RetryRun(error);
    }
    fields = { state: 'failed', stop_reason: 'infra_error', error };
  }
  if (signal.aborted && (signal.reason as StopRequest).kind === 'handback') {
    await ownUpdate(store, run, { state: 'queued', error: 'handed back by a stopping worker' });
    throw new HandedBack(run.id);
  }
  if (signal.aborted) fields = { ...fields, ...stoppedFields(signal.reason as StopRequest) };
  await finishRun(store, hooks, run, fields, o.recordRetryMs);
}

/**
 * Waits between tries of recording a run's end: a store that cannot write (a full disk) often can again
 * once the run's worktree is given back. An unreachable store is waited out by the store itself.
 */
export const RECORD_RETRY_MS = [250, 1000, 4000, 15_000];

/** A run's end that the store would not take, after every retry; the queue tries again later. */
export class UnrecordedEnd extends Error {
  constructor(
    readonly run: RunRecord,
    readonly fields: RunUpdate,
    readonly why: unknown,
  ) {
    super(`the end of run ${run.id} could not be recorded: ${message(why)}`);
    this.name = 'UnrecordedEnd';
  }
}

/**
 * Records a run's end while `run` (as read) still owns it (retried after RECORD_RETRY_MS) and reports
 * it; throws UnrecordedEnd when the store cannot take it, NotOwner when the run is no longer so.
 */
export async function finishRun(
  store: RunStore,
  hooks: Pick<QueueHooks, 'onFinished'>,
  run: RunRecord,
  fields: RunUpdate,
  retryMs: readonly number[] = RECORD_RETRY_MS,
): Promise<void> {
  const end = { finished_at: new Date().toISOString(), ...fields };
  let final: RunRecord | null;
  for (let attempt = 0; ; attempt++) {
    try {
      final = await store.updateIf(run.id, ownerOf(run), end);
      break;
    } catch (err) {
      // An unreachable store was waited out already (store/patient.ts): no second round of waits.
      if (attempt >= retryMs.length || storeUnreachable(err)) throw new UnrecordedEnd(run, end, err);
      await new Promise((r) => setTimeout(r, retryMs[attempt]));
    }
  }
  if (!final) throw new NotOwner(run.id);
  hooks.onFinished?.(final);
}

/**
 * The end of a run no process holds any more (`why`: its worker stopped, its job was lost): `interrupted`,
 * unless it was judged and its publishing record stored: then `publish_pending`, and any serve
 * publishes it (resumePublishing).
 */
export const orphanEnd = (run: RunRecord, why: string): RunUpdate =>
  run.publish !== null
    ? { state: 'publish_pending', error: AFTER_VERDICT, finished_at: null }
    : { state: 'interrupted', stop_reason: 'interrupted', finished_at: new Date().toISOString(), error: why };

interface Active {
  run: RunRecord;
  controller: AbortController;
  done: Promise<void>;
}

export interface LocalQueueOptions {
  /** Runs of one installation at a time (0: no limit); their parts run within each run's slot. */
  installationLimit?: number;
  /** Waits between tries of recording a run's end. */
  recordRetryMs?: readonly number[];
}

/**
 * The queue of a single process: at most `concurrency` runs at a time, at most `installationLimit` of
 * one installation, so that one installation's burst leaves room for the others'.
 */
export class LocalRunQueue implements RunQueue {
  private readonly pending: RunRecord[] = [];
  private readonly active = new Map<string, Active>(); // by issue key
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

  async cancel(owner: string, repo: string, issue: number, by: string): Promise<RunRecord | null> {
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
    await Promise.all([...this.dropping.values()]);
  }

  /** Stops accepting runs, lets running ones finish for `drainMs`, then aborts them (they end `interrupted`). */
  async close(drainMs = 0): Promise<void> {
    this.closed = true;
    const dropped = this.pending
      .splice(0)
      .map((r) => this.drop(r, { state: 'interrupted', stop_reason: 'shutdown' }));
    const running = Promise.all([...this.active.values()].map((a) => a.done));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([running, new Promise((resolve) => (timer = setTimeout(resolve, drainMs)))]);
    clearTimeout(timer);
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
      const i = this.pending.findIndex((r) => !this.active.has(issueKey(r)) && this.installationFree(r));
      if (i < 0) break;
      const [run] = this.pending.splice(i, 1);
      this.start(run!);
    }
    if (this.pending.length === 0 && this.active.size === 0) this.idleWaiters.splice(0).forEach((f) => f());
  }

  private installationFree(run: RunRecord): boolean {
    if (this.installationLimit === 0) return true;
    let held = 0;
    for (const a of this.active.values()) if (a.run.installation_id === run.installation_id) held++;
    return held < this.installationLimit;
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
    const done = executeRun(this.store, this.hooks, run, controller.signal, {
      recordRetryMs: this.recordRetryMs,
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
