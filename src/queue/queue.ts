import {
  AFTER_VERDICT,
  isActive,
  ownerOf,
  type RunRecord,
  type RunStore,
  type RunUpdate,
} from '../store/store.js';
import { storeUnreachable } from '../store/patient.js';
import type { ExecutePart, PartJobs } from './parts.js';
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
 * (LocalRunQueue, local.ts) or across workers on many machines (BullRunQueue, bullmq.ts); one contract
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

/** An error's message, or what was thrown. */
export const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

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
  /** Where the run's parts run: over the queue's free slots (the run's own, and others as they free up). */
  parts: PartJobs;
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
  o: ExecuteOptions,
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
    fields = await hooks.execute(run, signal, o.parts);
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
