import { DelayedError, type Job, type Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { RunRecord, RunStore } from '../store/store.js';
import { LIVE } from './orphans.js';
import type { ExecutePart, PartJobs } from './parts.js';
import { STOP_REQUEST, type StopRequest } from './stop.js';
import { type keys as queueKeys, STOP_TTL_MS } from './redis-keys.js';
import { BUSY_RETRY_MS, type InstallationSlots } from './bull-slots.js';

/**
 * A run's parts (its attempts) as jobs of the distributed queue (bullmq.ts), so that they spread over
 * the workers. The run's own job (on its worker, holding the issue) adds a job per part but the first,
 * runs the first itself, then waits for the others; a part no worker has taken by then (all busy, or
 * its installation's slots all held) it runs itself, so a run never waits for a slot its own job holds.
 * A part's job takes a slot of its installation like a run's (bull-slots.ts): an installation asking
 * for many attempts gets no more of the workers at once than its limit allows. A stop of the run (cancel, supersede,
 * a draining or stalled worker) is passed to each part's job under its own stop key: a running part
 * stops within a round trip, one not taken is removed, one taken later reads it. Each part records what
 * it found in the store (RunStore.putAttempt); a part whose worker died leaves no record, which the run
 * reads as such.
 */

export const PART_JOB = 'part';
const PART_DATA = z.strictObject({ runId: z.string(), n: z.number().int().min(1), take: z.number().int() });

/** A part's job id: its run, its number and the run's take-up (a run taken up again starts its parts afresh). */
export const partJobId = (run: RunRecord, n: number): string => `${run.id}-p${n}-t${run.attempt}`;

/** How often the run's job looks at its parts' jobs while it waits for them. */
const POLL_MS = 250;

interface PartsContext {
  queue: Queue;
  redis: Redis;
  keys: ReturnType<typeof queueKeys>;
  execute: ExecutePart;
  /** The worker running the run's job. */
  worker: string;
}

/** The run's side: starts its parts' jobs, runs what no other worker took, waits for all. */
export class BullParts implements PartJobs {
  constructor(private readonly o: PartsContext) {}

  async run(run: RunRecord, count: number, signal: AbortSignal): Promise<void> {
    const waiting = new Map<number, string>();
    for (let n = 2; n <= count && !signal.aborted; n++) {
      const jobId = partJobId(run, n);
      await this.o.queue.add(
        PART_JOB,
        { runId: run.id, n, take: run.attempt } satisfies z.infer<typeof PART_DATA>,
        { jobId, removeOnComplete: true, removeOnFail: true },
      );
      waiting.set(n, jobId);
    }
    const stop = () => void this.stopAll([...waiting.values()], signal.reason).catch(() => undefined);
    signal.addEventListener('abort', stop, { once: true });
    try {
      if (!signal.aborted) await this.o.execute(run, 1, signal, this.o.worker).catch(() => undefined);
      while (waiting.size > 0) {
        for (const [n, jobId] of [...waiting]) {
          const job = await this.o.queue.getJob(jobId);
          const state = job ? await job.getState() : 'gone';
          if (state === 'active') continue;
          // Not live: ended (its job removed on completion) or failed (its worker died).
          if (!LIVE.has(state)) waiting.delete(n);
          // Taken by no worker: run here, unless the run was stopped. A job a worker has just taken is
          // locked and not removed.
          else if (
            await job!.remove().then(
              () => true,
              () => false,
            )
          ) {
            waiting.delete(n);
            if (!signal.aborted) await this.o.execute(run, n, signal, this.o.worker).catch(() => undefined);
          }
        }
        if (waiting.size > 0) await new Promise((r) => setTimeout(r, POLL_MS));
      }
    } finally {
      signal.removeEventListener('abort', stop);
    }
  }

  private async stopAll(jobIds: string[], reason: unknown): Promise<void> {
    const read = STOP_REQUEST.safeParse(reason);
    const request: StopRequest = read.success ? read.data : { kind: 'shutdown' };
    for (const jobId of jobIds) {
      await this.o.redis.set(this.o.keys.stop(jobId), JSON.stringify(request), 'PX', STOP_TTL_MS);
      await this.o.redis.publish(this.o.keys.channel, jobId);
    }
  }
}

interface PartWorker {
  store: RunStore;
  execute: ExecutePart;
  worker: string;
  slots: InstallationSlots;
  /** The worker's running jobs' controllers, by job id: stop requests and lost locks reach them there. */
  active: Map<string, AbortController>;
  stopRequest(jobId: string): Promise<StopRequest | null>;
}

/**
 * A worker's side: runs a part's job, unless its run is over, was taken up again, or stopped it. With
 * its installation's slots all held, the job waits (delayed), where the run's job may take it over.
 */
export async function processPart(job: Job, token: string | undefined, w: PartWorker): Promise<void> {
  const { runId, n, take } = PART_DATA.parse(job.data);
  const run = await w.store.get(runId);
  if (!run || run.state !== 'running' || run.attempt !== take) return;
  const controller = new AbortController();
  w.active.set(job.id!, controller);
  try {
    if (await w.stopRequest(job.id!)) return; // the run's record says it was not run
    const slot = await w.slots.take(run, job.id!);
    if (!slot) {
      await job.moveToDelayed(Date.now() + BUSY_RETRY_MS, token);
      throw new DelayedError();
    }
    try {
      await w.execute(run, n, controller.signal, w.worker);
    } finally {
      await slot();
    }
  } finally {
    w.active.delete(job.id!);
  }
}
