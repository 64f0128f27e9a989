import { UnrecoverableError, type Job } from 'bullmq';
import { storeUnreachable } from '../store/patient.js';
import { FIXED_COLUMNS, isActive, ownerOf, RUN_ROW, type RunRecord, type RunStore } from '../store/store.js';
import { finishRun, orphanEnd, RetryRun, UnrecordedEnd, type QueueHooks } from './queue.js';

/**
 * Runs of the distributed queue whose job is over or gone while the store still has them queued or
 * running (bullmq.ts): how a worker fails such a job, and how serve ends such a run.
 */

/** BullMQ's failedReason for a job that stalled more often than maxStalledCount allows. */
export const STALLED_REASON = 'job stalled more than allowable limit';
/** Job states in which a worker holds the run or one will take it. */
export const LIVE: ReadonlySet<string> = new Set([
  'active',
  'waiting',
  'delayed',
  'prioritized',
  'waiting-children',
]);

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** A run's end a worker could not record, kept with its job (it crossed Redis: parsed). */
const KEPT_END = RUN_ROW.omit(
  Object.fromEntries(FIXED_COLUMNS.map((k) => [k, true])) as { [K in (typeof FIXED_COLUMNS)[number]]: true },
).partial();

/**
 * What fails the job of a run whose state the store would not take (the job never completes with its
 * run left `running`): a run that ended keeps its end with the job, for serve's reconcile to record,
 * and is not run again; one that could not start or go back to the queue is tried again while
 * attempts are left. Other failures (BullMQ's DelayedError, RetryRun) go on as they are.
 */
export async function jobFailure(job: Job, err: unknown): Promise<never> {
  if (err instanceof UnrecordedEnd) {
    await job.updateData({ ...(job.data as object), end: err.fields }).catch(() => undefined);
    throw new UnrecoverableError(err.message);
  }
  if (!(err instanceof RetryRun) && storeUnreachable(err))
    throw new Error(`the store was unreachable: ${message(err)}`);
  throw err;
}

/** Why a run whose job is over (or gone) was left queued or running: said on its issue. */
function orphanCause(run: RunRecord, job: Job | undefined): string {
  const worker = `its worker${run.worker ? ` (${run.worker})` : ''}`;
  if (!job) return 'its job was lost from the queue (Redis restarted without it, or it was removed)';
  if (job.failedReason === STALLED_REASON) return `${worker} stopped`;
  if (job.failedReason) return `${worker} gave it up: ${job.failedReason}`;
  return `${worker} ended its job without recording its end`;
}

export type OrphanHooks = Pick<QueueHooks, 'onFinished' | 'onError'> & {
  /** A run whose worker died or whose job was lost: recorded `interrupted`; its issue should be told. */
  onInterrupted?(run: RunRecord): void;
};

/**
 * Ends a run whose job is over or gone, once read again (its worker may have recorded its end since):
 * with the end its worker could not record (kept with the job), else orphanEnd with the cause, its
 * issue told of an interruption. Null when the run was over already, had a newer owner, or the store
 * would not take it.
 */
export async function endOrphan(
  store: RunStore,
  hooks: OrphanHooks,
  runId: string,
  job: () => Promise<Job | undefined>,
): Promise<RunRecord | null> {
  try {
    const run = await store.get(runId);
    if (!run || !isActive(run.state)) return null;
    const found = await job();
    const kept = KEPT_END.safeParse((found?.data as { end?: unknown } | undefined)?.end);
    if (kept.success && kept.data.state) {
      await finishRun(store, hooks, run, kept.data, []);
      return run;
    }
    // Compare-and-set: a worker that took the run up since it was read keeps it.
    const final = await store.updateIf(run.id, ownerOf(run), orphanEnd(run, orphanCause(run, found)));
    if (final?.state === 'interrupted') hooks.onInterrupted?.(final);
    return final;
  } catch (err) {
    hooks.onError?.({ id: runId } as RunRecord, err);
    return null;
  }
}
