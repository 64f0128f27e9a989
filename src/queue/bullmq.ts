import { hostname } from 'node:os';
import { DelayedError, Queue, QueueEvents, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import {
  executeRun,
  finishRun,
  issueRunsAround,
  HandedBack,
  NotOwner,
  RetryRun,
  type QueueHooks,
  type RunQueue,
} from './queue.js';
import { STOP_REQUEST, stoppedFields, type StopRequest } from './stop.js';
import { isActive, type RunRecord, type RunStore } from '../store/store.js';
import { endOrphan, jobFailure, LIVE, type OrphanHooks, STALLED_REASON } from './orphans.js';
import { OutageLog, type OutageLogger } from '../trace/outage.js';
import type { ExecutePart } from './parts.js';
import { CONNECTION_ERROR, Connections, keys, RELEASE, RENEW, STOP_TTL_MS } from './redis-keys.js';
import { BUSY_RETRY_MS, InstallationSlots } from './bull-slots.js';
import { BullParts, PART_JOB, processPart } from './bull-parts.js';
import type { BullQueueOptions, RetryOptions, RunWorkerOptions } from './bull-options.js';

/**
 * The run queue across machines: BullMQ on Redis, the job id being the run id. `serve` enqueues,
 * stops and watches (BullRunQueue); each `agenticfix worker` runs jobs (RunWorker). The run store
 * (PostgreSQL, shared) stays the one record of a run's state; Redis only carries work and signals:
 *
 * - one active run per issue across all workers: a worker holds the issue's lock key while it runs a
 *   run, and a job whose issue is busy waits as a delayed job; likewise for one of an installation's
 *   `installationLimit` slots (bull-slots.ts), which a run's parts running on jobs of their own
 *   (its attempts, bull-parts.ts) take too;
 * - stopping (supersede, cancel): the request is written under the run's stop key and announced on the
 *   stop channel, so it reaches the worker running it within a round trip, or is read when a worker
 *   takes the job; a job still waiting is removed and recorded at once;
 * - an infrastructure failure (the run's job threw) puts the run back to `queued` and BullMQ tries it
 *   again after an exponential backoff, up to `retry.retries` times;
 * - a worker that dies (no lock renewal) leaves a stalled job, which BullMQ fails, or puts back once
 *   when `requeueStalled`; the failure reaches serve, which records the run `interrupted`;
 * - a job never completes with its run unrecorded (orphans.ts): serve's reconcile ends such runs.
 */

const JOB_NAME = 'run';

/** Hooks serve gives the distributed queue; the work itself is the workers'. */
export type BullQueueHooks = OrphanHooks & {
  /** A run enters the queue; its job is added once this has settled (e.g. the status comment is recorded). */
  onQueued?(run: RunRecord): void | Promise<void>;
};

/** serve's side: enqueues, supersedes, cancels, and records runs whose worker died. */
export class BullRunQueue implements RunQueue {
  private readonly connections: Connections;
  private readonly redis: Redis;
  private readonly queue: Queue;
  private readonly events: QueueEvents;
  private readonly keys: ReturnType<typeof keys>;

  private readonly retry: RetryOptions;
  /** Runs being announced: their job is added once that settles (admit). */
  private readonly admitting = new Set<string>();
  private closed = false;

  constructor(
    private readonly store: RunStore,
    private readonly hooks: BullQueueHooks,
    o: BullQueueOptions & { retry?: RetryOptions },
  ) {
    this.retry = o.retry ?? { retries: 0, baseMs: 0 };
    const name = o.name;
    this.keys = keys(name);
    this.connections = new Connections(o.redisUrl, new OutageLog('redis', o.log));
    this.redis = this.connections.open();
    this.queue = new Queue(name, { connection: this.connections.open() });
    this.events = new QueueEvents(name, { connection: this.connections.open() });
    this.queue.on('error', (err) => this.connections.outage.failed(err));
    this.events.on('error', (err) => this.connections.outage.failed(err));
    this.events.on('failed', ({ jobId, failedReason }) => {
      if (failedReason === STALLED_REASON) void this.orphaned(jobId);
    });
  }

  /** Whether Redis answers (the health check). */
  async ping(): Promise<void> {
    await this.redis.ping();
  }

  /** Resolves once the stall watcher listens and what happened while no serve watched is reconciled. */
  async ready(): Promise<void> {
    await Promise.all([this.queue.waitUntilReady(), this.events.waitUntilReady()]);
    await this.reconcile();
  }

  /** Also enqueues runs recorded but never enqueued (serve stopped in between). */
  async reconcile(): Promise<RunRecord[]> {
    const ended: RunRecord[] = [];
    for (const run of [...(await this.store.list('queued')), ...(await this.store.list('running'))]) {
      if (this.admitting.has(run.id)) continue;
      const job = await this.queue.getJob(run.id);
      if (job && LIVE.has(await job.getState())) continue;
      if (!job && run.state === 'queued') await this.enqueue(run);
      else ended.push(...[await this.orphaned(run.id, job)].filter((r) => r !== null));
    }
    return ended;
  }

  async enqueue(run: RunRecord): Promise<void> {
    if (await this.queue.getJob(run.id)) return; // a redelivered webhook
    // Recorded after this one (deliveries taken in at once): the newest run wins, as in the order recorded.
    const { newer, older } = await issueRunsAround(this.store, run);
    if (newer)
      return finishRun(this.store, this.hooks, run, stoppedFields({ kind: 'superseded', by: newer.id }));
    for (const o of older) await this.stop(o, { kind: 'superseded', by: run.id });
    void this.admit(run);
  }

  /**
   * Announces the recorded run (its status comment, which GitHub's pacing can hold back for seconds in
   * a burst of labels), then adds its job, so the worker edits that comment rather than posting its
   * own. The intake does not wait for it: the run is recorded, and one not yet added when serve stops
   * is added by the next serve's `ready`. A stop meanwhile is read by the worker that takes the job.
   */
  private async admit(run: RunRecord): Promise<void> {
    this.admitting.add(run.id);
    try {
      await this.hooks.onQueued?.(run);
    } catch (err) {
      this.hooks.onError?.(run, err); // the worker posts the status comment itself
    }
    if (!this.closed) await this.add(run).catch((err: unknown) => this.hooks.onError?.(run, err));
    this.admitting.delete(run.id);
  }

  private async add(run: RunRecord): Promise<void> {
    await this.queue.add(
      JOB_NAME,
      { runId: run.id },
      {
        jobId: run.id,
        removeOnComplete: 1000,
        attempts: this.retry.retries + 1,
        backoff: { type: 'exponential', delay: this.retry.baseMs },
      },
    );
  }

  async cancel(owner: string, repo: string, issue: number, by: string): Promise<RunRecord | null> {
    const run = (await this.store.forIssue(owner, repo, issue)).find((r) => isActive(r.state)) ?? null;
    if (run) await this.stop(run, { kind: 'cancelled', by });
    return run;
  }

  async idle(): Promise<void> {
    while ((await this.store.list('queued')).length + (await this.store.list('running')).length > 0)
      await new Promise((r) => setTimeout(r, 50));
  }

  /** Stops watching; runs go on on their workers. */
  async close(): Promise<void> {
    this.closed = true;
    await this.events.close();
    await this.queue.close();
    this.connections.close();
  }

  private async stop(run: RunRecord, request: StopRequest): Promise<void> {
    await this.redis.set(this.keys.stop(run.id), JSON.stringify(request), 'PX', STOP_TTL_MS);
    await this.redis.publish(this.keys.channel, run.id);
    const job = await this.queue.getJob(run.id);
    if (!job || !['waiting', 'delayed', 'prioritized'].includes(await job.getState())) return;
    // A job a worker has just taken is locked and not removed: that worker reads the stop request.
    const removed = await job.remove().then(
      () => true,
      () => false,
    );
    if (removed)
      await finishRun(this.store, this.hooks, run, stoppedFields(request)).catch((err: unknown) =>
        this.hooks.onError?.(run, err),
      );
  }

  private orphaned(runId: string, job?: Job): Promise<RunRecord | null> {
    return endOrphan(this.store, this.hooks, runId, async () => job ?? (await this.queue.getJob(runId)));
  }
}

/** A worker's side: takes jobs, at most `concurrency` at a time, one per issue across all workers. */
export class RunWorker {
  readonly id: string;
  private readonly connections: Connections;
  private readonly redis: Redis;
  private readonly subscriber: Redis;
  private readonly worker: Worker;
  /** Where this worker's runs add their parts' jobs. */
  private readonly parts: Queue;
  private readonly keys: ReturnType<typeof keys>;
  private readonly active = new Map<string, AbortController>();
  private readonly lockMs: number;
  private readonly slots: InstallationSlots;
  private readonly log?: OutageLogger;

  constructor(
    private readonly store: RunStore,
    private readonly hooks: QueueHooks,
    o: RunWorkerOptions,
  ) {
    const name = o.name;
    this.id = o.id ?? `${hostname()}:${process.pid}`;
    this.keys = keys(name);
    this.lockMs = o.lockMs ?? 30_000;
    this.log = o.log;
    this.connections = new Connections(o.redisUrl, new OutageLog('redis', o.log));
    this.redis = this.connections.open();
    this.slots = new InstallationSlots(this.redis, this.keys, o.installationLimit ?? 0, this.lockMs);
    this.subscriber = this.connections.open();
    this.parts = new Queue(name, { connection: this.connections.open() });
    this.parts.on('error', (err) => this.connections.outage.failed(err));
    this.subscriber.on('message', (_channel: string, runId: string) => {
      const controller = this.active.get(runId);
      if (controller) void this.stopRequest(runId).then((req) => req && controller.abort(req));
    });
    this.worker = new Worker(
      name,
      (job, token) => this.process(job, token).catch((err) => jobFailure(job, err)),
      {
        connection: this.connections.open(),
        concurrency: o.concurrency,
        lockDuration: this.lockMs,
        stalledInterval: Math.max(500, this.lockMs / 2),
        maxStalledCount: o.requeueStalled ? 1 : 0,
        autorun: false,
      },
    );
    // This worker was silent too long (a blocked event loop): its jobs count as stalled elsewhere, so
    // their runs stop here rather than run twice.
    this.worker.on('lockRenewalFailed', (jobIds) => {
      for (const id of jobIds) this.active.get(id)?.abort({ kind: 'lock_lost' } satisfies StopRequest);
    });
    // Connection trouble (one line per outage) and lock renewals that failed: reported, never fatal
    // (BullMQ reconnects).
    this.worker.on('error', (err) =>
      CONNECTION_ERROR.test(err.message) ? this.connections.outage.failed(err) : o.onQueueError?.(err),
    );
  }

  /** Whether Redis answers (the health check). */
  async ping(): Promise<void> {
    await this.redis.ping();
  }

  /** Subscribes to stop requests, then starts taking jobs. */
  async start(): Promise<void> {
    await this.subscriber.subscribe(this.keys.channel);
    void this.worker.run();
    await this.worker.waitUntilReady();
  }

  /** Runs being run here. */
  get running(): number {
    return this.active.size;
  }

  /**
   * Drains: takes no more jobs and lets running ones finish for up to `drainMs`; those still running
   * then are stopped and handed back to the queue, where another worker takes them. Each step logged.
   */
  async close(drainMs = 0): Promise<void> {
    const closing = this.worker.close();
    const runs = [...this.active.keys()];
    if (runs.length > 0)
      this.log?.info({ worker: this.id, runs, drain_s: drainMs / 1000 }, 'draining: no more runs taken');
    const timer = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), drainMs).unref());
    const drained = await Promise.race([closing.then(() => true), timer]);
    if (!drained)
      for (const [run, c] of this.active) {
        this.log?.warn({ worker: this.id, run }, 'drain time over: handing the run back to the queue');
        c.abort({ kind: 'handback' } satisfies StopRequest);
      }
    await closing;
    await this.parts.close();
    if (runs.length > 0) this.log?.info({ worker: this.id }, 'drained');
    this.connections.close();
  }

  private async stopRequest(runId: string): Promise<StopRequest | null> {
    const raw = await this.redis.get(this.keys.stop(runId));
    return raw ? STOP_REQUEST.parse(JSON.parse(raw)) : null;
  }

  private async process(job: Job, token: string | undefined): Promise<void> {
    const [execute, worker, slots] = [this.executePart, this.id, this.slots];
    const stopRequest = (id: string) => this.stopRequest(id);
    if (job.name === PART_JOB)
      return processPart(job, token, {
        store: this.store,
        active: this.active,
        execute,
        worker,
        slots,
        stopRequest,
      });
    const run = await this.store.get(job.id!);
    if (!run || !isActive(run.state)) return; // recorded as over already
    const stop = await this.stopRequest(run.id);
    if (stop) return finishRun(this.store, this.hooks, run, stoppedFields(stop));
    // Whoever can write to Redis or the store could queue a run for any installation this worker holds
    // keys for: only a run from a delivery the endpoint recorded is run. A refused one is failed in the
    // store alone, without the hooks, which would mint a token to tell its issue.
    if (!(await this.store.deliveryRecorded(run.delivery_id))) {
      const error = `no recorded webhook delivery \`${run.delivery_id}\`: refused by worker ${this.id}`;
      await this.store.update(run.id, { state: 'failed', error, finished_at: new Date().toISOString() });
      this.hooks.onError?.(run, new Error(error));
      return;
    }

    const lock = this.keys.issue(run);
    const got = await this.redis.set(lock, run.id, 'PX', this.lockMs, 'NX');
    const issueFree = got === 'OK' || (await this.redis.get(lock)) === run.id;
    const slot = issueFree ? await slots.take(run, run.id) : null;
    if (!slot) {
      if (issueFree) await this.redis.eval(RELEASE, 1, lock, run.id);
      // Another run of this issue is active somewhere, or the installation's runs fill its slots:
      // wait, without holding a slot of this worker.
      await job.moveToDelayed(Date.now() + BUSY_RETRY_MS, token);
      throw new DelayedError();
    }
    const controller = new AbortController();
    this.active.set(run.id, controller);
    const renew = setInterval(
      () => void this.redis.eval(RENEW, 1, lock, run.id, this.lockMs).catch(() => undefined),
      this.lockMs / 3,
    );
    try {
      // A stop requested between the first look and the subscription taking this run.
      const late = await this.stopRequest(run.id);
      if (late) controller.abort(late);
      const retry = job.attemptsMade + 1 < (job.opts.attempts ?? 1);
      const parts = new BullParts({ queue: this.parts, redis: this.redis, keys: this.keys, execute, worker });
      await executeRun(this.store, this.hooks, run, controller.signal, {
        started: { worker: this.id },
        retry,
        parts,
      });
    } catch (err) {
      if (err instanceof RetryRun) {
        this.log?.warn({ run: run.id, state: 'queued', error: err.error }, 'run queued to be tried again');
        throw err; // BullMQ tries the job again after its backoff
      }
      // This worker stalled and another took the run over: its end and its issue are the newer attempt's.
      if (err instanceof NotOwner)
        return this.log?.warn({ worker: this.id, run: run.id, attempt: run.attempt + 1 }, err.message);
      if (err instanceof HandedBack) {
        await job.moveToDelayed(Date.now(), token);
        this.log?.info({ worker: this.id, run: run.id, state: 'queued' }, 'run handed back');
        throw new DelayedError();
      }
      this.hooks.onError?.(run, err);
      throw err;
    } finally {
      clearInterval(renew);
      this.active.delete(run.id);
      await this.redis.eval(RELEASE, 1, lock, run.id).catch(() => undefined);
      await slot();
      await this.redis.del(this.keys.stop(run.id)).catch(() => undefined);
    }
  }

  private readonly executePart: ExecutePart = async (...a) => this.hooks.executePart?.(...a);
}
