import type { RunRecord } from '../store/store.js';

/**
 * A run's parts (its attempts, pipeline/attempts.ts) as work of their own: in one process one after
 * another (inlineParts), across workers as jobs of the distributed queue (bull-parts.ts). The run's own
 * job starts them and waits for their end; what each part found is in the store, never in the queue.
 */
export interface PartJobs {
  /**
   * Runs parts 1..count of `run`, each to its end; resolves once every part has ended or been dropped.
   * `signal` (the run's) stops them all: a part not started is dropped (never run), a running one gets
   * the signal's reason.
   */
  run(run: RunRecord, count: number, signal: AbortSignal): Promise<void>;
}

/** Runs part `n` of a run to its end, its outcome recorded in the store; `worker` names where it ran. */
export type ExecutePart = (
  run: RunRecord,
  n: number,
  signal: AbortSignal,
  worker: string | null,
) => Promise<void>;

/** Parts one after another in this process (the embedded queue); a part that throws is the hook's to report. */
export const inlineParts = (execute: ExecutePart, worker: string | null = null): PartJobs => ({
  async run(run, count, signal) {
    for (let n = 1; n <= count && !signal.aborted; n++)
      await execute(run, n, signal, worker).catch(() => undefined);
  },
});
