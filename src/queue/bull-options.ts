import type { OutageLogger } from '../trace/outage.js';

/** The distributed queue's options (bullmq.ts): serve's and each worker's. */

export interface BullQueueOptions {
  redisUrl: string;
  /** The queue's name: one per deployment (and per test). Its Redis keys all start with it. */
  name: string;
  /** Where Redis outages (one line each, and one on recovery) and a worker's drain are logged. */
  log?: OutageLogger;
}

/** Infrastructure failures (the job threw: GitHub or the engine unreachable, ...) retried with backoff. */
export interface RetryOptions {
  /** Attempts after the first. */
  retries: number;
  /** The first wait; each next one doubles. */
  baseMs: number;
}

export interface RunWorkerOptions extends BullQueueOptions {
  /** Runs this worker runs at once. */
  concurrency: number;
  /** Names this worker in the store (`worker` column); `host:pid` by default. */
  id?: string;
  /** How long a silent worker keeps its jobs (and issues) before they count as stalled. */
  lockMs?: number;
  /** A stalled run is put back once (true) or recorded interrupted at once (false). */
  requeueStalled?: boolean;
  /** Runs of one installation running at once across all workers; 0: no limit. */
  installationLimit?: number;
  /** Errors of the queue itself (Redis unreachable, a lock renewal that failed). */
  onQueueError?: (err: Error) => void;
}
