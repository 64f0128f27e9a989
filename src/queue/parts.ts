import type { RunRecord } from '../store/store.js';

/**
 * A run's parts (its attempts, pipeline/attempts.ts) as work of their own, spread over the slots the
 * queue has free: in one process over the embedded queue's (slottedParts, local.ts), across workers as
 * jobs of the distributed queue (bull-parts.ts). The run's own job starts them and waits for their end;
 * what each part found is in the store, never in the queue.
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

/** A part waiting in the embedded queue's line for a slot, as a distributed part's job waits for a worker. */
export interface QueuedPart {
  /** Its run (whose installation's slots it takes). */
  run: RunRecord;
  /** Runs it in the slot the queue gave it; resolves at its end, never rejects. */
  start(): Promise<void>;
}

/** The slots of the embedded queue (LocalRunQueue), as its runs' parts ask for them. */
export interface PartSlots {
  /** Puts a part in the queue's line: the queue starts it once a slot of its own and of its installation is free. */
  offer(part: QueuedPart): void;
  /** Takes a part out of the line; false when the queue has started it (or it is no longer there). */
  withdraw(part: QueuedPart): boolean;
}

/**
 * Parts in one process, with the semantics of the distributed ones (bull-parts.ts): each part but the
 * first waits in the queue's line for a slot of its own; the run's own slot runs the first, then every
 * part no slot was free for by then, so a run never waits for a slot it holds. A part failing is the
 * hook's to record.
 */
export const slottedParts = (slots: PartSlots, execute: ExecutePart): PartJobs => ({
  async run(run, count, signal) {
    const started: Promise<void>[] = [];
    const runPart = (n: number) => execute(run, n, signal, null).catch(() => undefined);
    const waiting = new Map<number, QueuedPart>();
    for (let n = 2; n <= count && !signal.aborted; n++) {
      const start = () => {
        const end = runPart(n);
        started.push(end);
        return end;
      };
      waiting.set(n, { run, start });
    }
    // A stop drops the parts not started: they are never run.
    const drop = () => waiting.forEach((part) => slots.withdraw(part));
    signal.addEventListener('abort', drop, { once: true });
    try {
      waiting.forEach((part) => slots.offer(part));
      if (!signal.aborted) await runPart(1);
      for (const [n, part] of waiting) if (!signal.aborted && slots.withdraw(part)) await runPart(n);
      await Promise.all(started);
    } finally {
      signal.removeEventListener('abort', drop);
    }
  },
});
