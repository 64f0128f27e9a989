import path from 'node:path';
import type { ResultPromise } from 'execa';
import { BullRunQueue, RunWorker, type BullQueueHooks } from '../../src/queue/bullmq.js';
import type { RetryOptions, RunWorkerOptions } from '../../src/queue/bull-options.js';
import type { QueueHooks } from '../../src/queue/queue.js';
import { SqliteRunStore } from '../../src/store/sqlite-store.js';
import type { RunRecord, RunStore } from '../../src/store/store.js';
import { Jobs, newRun, recordedRun, until } from './queue-contract.js';

/** A queue name of its own (queues share one Redis). */
const queueName = () => `test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;

/** A BullMQ queue (serve's side) and its workers over one store, under a name of their own. */
export interface Bull {
  name: string;
  queue: BullRunQueue;
  workers: RunWorker[];
  /** Closes the workers (no drain), then the queue; the store stays open. */
  close(): Promise<void>;
}

/** A worker's hooks and options (one run at a time and a 2 s lock unless said). */
export type WorkerSpec = Partial<Omit<RunWorkerOptions, 'redisUrl' | 'name'>> & { hooks: QueueHooks };

/** Starts the queue (`hooks`, `retry`) and the workers over `store`, ready. */
export async function startBull(
  store: RunStore,
  o: { redisUrl: string; hooks?: BullQueueHooks; retry?: RetryOptions; workers: WorkerSpec[] },
): Promise<Bull> {
  const name = queueName();
  const queue = new BullRunQueue(store, o.hooks ?? {}, {
    redisUrl: o.redisUrl,
    name,
    ...(o.retry && { retry: o.retry }),
  });
  const workers = o.workers.map(
    ({ hooks, ...w }) =>
      new RunWorker(store, hooks, { concurrency: 1, lockMs: 2000, ...w, redisUrl: o.redisUrl, name }),
  );
  await Promise.all([queue.ready(), ...workers.map((w) => w.start())]);
  return {
    name,
    queue,
    workers,
    async close() {
      await Promise.all(workers.map((w) => w.close(0)));
      await queue.close();
    },
  };
}

/**
 * A run taken by a worker in a child process (test/services/queue/queue.test.ts kills, freezes or stops
 * it), the BullMQ queue it came from, and a survivor worker in this process that may take it over.
 */
export interface ChildWorkerRun {
  store: SqliteRunStore;
  queue: BullRunQueue;
  /** The ids of runs the queue reported interrupted. */
  interrupted: string[];
  child: ResultPromise;
  /** What the child has printed so far. */
  out(): string;
  /** The run, enqueued and taken by the child. */
  run: RunRecord;
  /** The survivor's jobs (the survivor runs them until finished or aborted). */
  survivor: Jobs;
  /** Starts the survivor worker in this process (lock 1 s, one run at a time). */
  startSurvivor(o: { id: string; requeueStalled?: boolean }): Promise<RunWorker>;
  /** Kills the child and closes the survivor, the queue and the store (an open queue or worker keeps Redis connections that stop jest from exiting). */
  close(): Promise<void>;
}

export async function childWorkerRun(o: {
  redisUrl: string;
  /** Where the store's file goes (shared with the child). */
  dir: string;
  /** Starts the child worker on the store's file and the queue's name. */
  spawn: (file: string, name: string) => ResultPromise;
  /** The child's word that it took the run. */
  took: (run: RunRecord) => string;
}): Promise<ChildWorkerRun> {
  const file = path.join(o.dir, 'runs.sqlite');
  const store = new SqliteRunStore(file);
  const name = queueName();
  const interrupted: string[] = [];
  const queue = new BullRunQueue(
    store,
    { onInterrupted: (r) => interrupted.push(r.id) },
    { redisUrl: o.redisUrl, name },
  );
  const survivor = new Jobs();
  let worker: RunWorker | undefined;
  await queue.ready();
  const child = o.spawn(file, name);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const close = async () => {
    child.kill('SIGKILL');
    await child;
    await worker?.close(0);
    await queue.close();
    await store.close();
  };
  try {
    const run = await recordedRun(store, newRun(1));
    await queue.enqueue(run);
    await until('the child takes it', () => out.includes(o.took(run)), 20_000);
    return {
      store,
      queue,
      interrupted,
      child,
      out: () => out,
      run,
      survivor,
      async startSurvivor({ id, requeueStalled }) {
        worker = new RunWorker(store, survivor, {
          redisUrl: o.redisUrl,
          name,
          concurrency: 1,
          id,
          lockMs: 1000,
          ...(requeueStalled !== undefined && { requeueStalled }),
        });
        await worker.start();
        return worker;
      },
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}
