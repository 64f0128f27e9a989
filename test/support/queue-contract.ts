import type { QueueHooks, RunQueue } from '../../src/queue/queue.js';
import type { StopRequest } from '../../src/queue/stop.js';
import { SqliteRunStore } from '../../src/store/sqlite-store.js';
import type { NewRun, RunRecord, RunStore, RunUpdate } from '../../src/store/store.js';

/**
 * The run queue contract: one suite that the in-process queue and the BullMQ queue (with one worker)
 * both pass (test/services/queue/queue.test.ts).
 */
export interface QueueBackend {
  /**
   * A queue over `store` whose runs run `concurrency` at a time, at most `installationLimit` of one
   * installation (0: no limit); `close` stops it with no grace.
   */
  make(
    store: RunStore,
    hooks: QueueHooks,
    concurrency: number,
    installationLimit?: number,
  ): Promise<{ queue: RunQueue; close(): Promise<void> }>;
  /**
   * What `close` leaves of a running run: `interrupted` in one process; `queued` across workers, where
   * a stopping worker hands it back for another.
   */
  stopped: 'interrupted' | 'queued';
}

let n = 0;
export const newRun = (issue: number): NewRun => ({
  owner: 'acme',
  repo: 'calc',
  issue,
  installation_id: 1,
  trigger: 'label',
  triggered_by: 'alice',
  delivery_id: `d${process.pid}-${n++}-${Math.random()}`,
  base_commit: 'a'.repeat(40),
});

/** Records the run's delivery as the endpoint would, then the run: workers run only such runs. */
export async function recordedRun(store: RunStore, input: NewRun): Promise<RunRecord> {
  await store.claimDeliveries([
    { id: input.delivery_id, event: 'issues', body: input.delivery_id, sha256: null },
  ]);
  return store.createRun(input);
}

/** A job that runs until released or aborted, recording what it saw. */
export class Jobs implements QueueHooks {
  started: string[] = [];
  finished: RunRecord[] = [];
  queued: string[] = [];
  maxParallel = 0;
  /** The most runs of one issue running at once. */
  maxPerIssue = 0;
  private running = 0;
  private readonly perIssue = new Map<number, number>();
  private release = new Map<string, (u: RunUpdate) => void>();

  execute(run: RunRecord, signal: AbortSignal): Promise<RunUpdate> {
    this.started.push(run.id);
    this.maxParallel = Math.max(this.maxParallel, ++this.running);
    const mine = (this.perIssue.get(run.issue) ?? 0) + 1;
    this.perIssue.set(run.issue, mine);
    this.maxPerIssue = Math.max(this.maxPerIssue, mine);
    return new Promise<RunUpdate>((resolve) => {
      const done = (u: RunUpdate) => {
        this.running--;
        this.perIssue.set(run.issue, this.perIssue.get(run.issue)! - 1);
        resolve(u);
      };
      this.release.set(run.id, done);
      signal.addEventListener('abort', () =>
        setTimeout(() => done({ state: 'done', stop_reason: 'cancelled' }), 5),
      );
    });
  }
  onQueued(run: RunRecord) {
    this.queued.push(run.id);
  }
  onFinished(run: RunRecord) {
    this.finished.push(run);
  }
  finish(id: string, u: RunUpdate = { state: 'done' }) {
    this.release.get(id)!(u);
  }
}

export async function until(what: string, check: () => boolean | Promise<boolean>, ms = 10_000) {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`not reached in time: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const settle = () => new Promise((r) => setTimeout(r, 300));

/**
 * Hooks whose runs run three parts, each held until released (or stopped: the queue closing),
 * counting how many run at once; `run` may hold a run of its own instead (another installation's).
 */
function heldParts(run?: (run: RunRecord, hold: () => Promise<void>) => Promise<boolean>) {
  const release: (() => void)[] = [];
  const hold = (signal: AbortSignal) =>
    new Promise<void>((resolve) => {
      release.push(resolve);
      signal.addEventListener('abort', () => resolve(), { once: true });
    });
  const h = {
    ran: [] as number[],
    now: 0,
    most: 0,
    hooks: {
      async execute(r, signal, parts) {
        if (!(await run?.(r, () => hold(signal)))) await parts.run(r, 3, signal);
        return { state: 'done' };
      },
      async executePart(_run, n, signal) {
        h.ran.push(n);
        h.most = Math.max(h.most, ++h.now);
        await hold(signal);
        h.now--;
      },
    } satisfies QueueHooks,
    /** Releases what is held until `done` says the runs are over. */
    async releaseUntil(done: () => Promise<boolean>) {
      while (!(await done())) {
        release.splice(0).forEach((f) => f());
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
  return h;
}

export function runQueueContract(backend: QueueBackend): void {
  let store: RunStore;
  let closeQueue: (() => Promise<void>) | null;
  const make = async (hooks: QueueHooks, concurrency: number, installationLimit = 0) => {
    const made = await backend.make(store, hooks, concurrency, installationLimit);
    closeQueue = made.close;
    return made.queue;
  };
  const stateOf = async (id: string) => (await store.get(id))!.state;
  beforeEach(() => {
    store = new SqliteRunStore(':memory:');
    closeQueue = null;
  });
  afterEach(async () => {
    await closeQueue?.();
    await store.close();
  });

  it('runs at most `concurrency` runs at once and starts the next when one ends', async () => {
    const jobs = new Jobs();
    const q = await make(jobs, 2);
    const runs: RunRecord[] = [];
    for (const i of [1, 2, 3]) runs.push(await recordedRun(store, newRun(i)));
    for (const r of runs) await q.enqueue(r);
    await until('two started', () => jobs.started.length === 2);
    await settle();
    expect([...jobs.started].sort()).toEqual([runs[0]!.id, runs[1]!.id].sort());
    expect(await stateOf(runs[2]!.id)).toBe('queued');
    expect(await stateOf(runs[0]!.id)).toBe('running');
    jobs.finish(runs[0]!.id);
    await until('the third started', () => jobs.started.length === 3);
    jobs.finish(runs[1]!.id);
    jobs.finish(runs[2]!.id, { state: 'failed', error: 'boom' });
    await q.idle();
    expect(jobs.maxParallel).toBe(2);
    expect(await store.get(runs[2]!.id)).toMatchObject({ state: 'failed', error: 'boom' });
    expect((await store.get(runs[0]!.id))!.finished_at).not.toBeNull();
    expect(jobs.queued).toEqual(runs.map((r) => r.id));
  });

  // Issue 41, item 2: a run's attempts are parts run through the queue, each in a slot of its own.
  it("runs a run's parts to their end; a cancel stops the running ones and drops those not started", async () => {
    const ran: number[] = [];
    const stopped: number[] = [];
    let hold = false;
    const q = await make(
      {
        async execute(run, signal, parts) {
          await parts.run(run, 3, signal);
          return { state: 'done' };
        },
        async executePart(_run, n, signal) {
          ran.push(n);
          if (!hold) return;
          await new Promise<void>((resolve) =>
            signal.addEventListener('abort', () => (stopped.push(n), resolve()), { once: true }),
          );
        },
      },
      2,
    );
    const whole = await recordedRun(store, newRun(1));
    await q.enqueue(whole);
    await q.idle();
    expect(await stateOf(whole.id)).toBe('done');
    expect([...ran].sort()).toEqual([1, 2, 3]);

    ran.length = 0;
    hold = true;
    const held = await recordedRun(store, newRun(2));
    await q.enqueue(held);
    await until('two parts running, one in each slot', () => ran.length === 2);
    await settle();
    await q.cancel('acme', 'calc', 2, 'bob');
    await q.idle();
    await settle();
    expect(await stateOf(held.id)).toBe('cancelled');
    expect([...ran].sort()).toEqual([1, 2]);
    expect([...stopped].sort()).toEqual([1, 2]); // every part that ran was stopped
    // and the one waiting for a slot never ran
  });

  // A run's parts (its attempts) use the queue's free slots at once, and no more of them: embedded, they
  // ran one after another, so a run of three attempts took three times as long on a queue with room.
  it.each([1, 2])(
    "a run's parts run at once in the queue's free slots, never more than its concurrency (%i)",
    async (concurrency) => {
      const parts = heldParts();
      const q = await make(parts.hooks, concurrency);
      const run = await recordedRun(store, newRun(1));
      await q.enqueue(run);
      await until(`${concurrency} part(s) running`, () => parts.now === concurrency);
      await settle(); // the third waits for a slot
      expect(parts.now).toBe(concurrency);
      await parts.releaseUntil(async () => (await stateOf(run.id)) === 'done');
      expect([...parts.ran].sort()).toEqual([1, 2, 3]);
      expect(parts.most).toBe(concurrency);
    },
  );

  it("holds an installation to its limit while other installations' runs go on", async () => {
    const jobs = new Jobs();
    const q = await make(jobs, 3, 1);
    const [a1, a2] = [await recordedRun(store, newRun(1)), await recordedRun(store, newRun(2))];
    const b = await recordedRun(store, { ...newRun(3), installation_id: 2 });
    for (const r of [a1, a2, b]) await q.enqueue(r);
    await until('a1 and b started', () => jobs.started.length === 2);
    await settle();
    expect([...jobs.started].sort()).toEqual([a1.id, b.id].sort()); // a free slot of the queue stays free
    expect(await stateOf(a2.id)).toBe('queued');
    jobs.finish(a1.id);
    await until('a2 started', () => jobs.started.length === 3);
    jobs.finish(a2.id);
    jobs.finish(b.id);
    await q.idle();
    expect(await stateOf(a2.id)).toBe('done');
  });

  // A run's parts (its attempts) count against its installation's limit: each part waits for a slot of
  // its installation like a run; a part no slot was free for, the run's own job runs itself. An
  // installation asking for many attempts used to fill every worker slot while another installation's
  // run waited.
  it.each([1, 2])(
    "a run's parts take slots of its installation (limit %i): another installation's run goes on, and every part runs once",
    async (limit) => {
      let otherStarted = false;
      const parts = heldParts(async (run, hold) => {
        if (run.installation_id !== 2) return false;
        otherStarted = true;
        await hold();
        return true;
      });
      const q = await make(parts.hooks, 3, limit);
      const a = await recordedRun(store, newRun(1));
      await q.enqueue(a);
      // As many parts as the installation has slots run at once (the run's slot runs the first).
      await until(`${limit} part(s) running`, () => parts.now === limit);
      await settle(); // a part with no slot free waits
      const b = await recordedRun(store, { ...newRun(2), installation_id: 2 });
      await q.enqueue(b);
      await until("the other installation's run started", () => otherStarted);
      await settle();
      expect(parts.most).toBe(limit);
      const over = async () => (await stateOf(a.id)) === 'done' && (await stateOf(b.id)) === 'done';
      await parts.releaseUntil(over);
      expect([...parts.ran].sort()).toEqual([1, 2, 3]);
      expect(parts.most).toBe(limit);
    },
  );

  it('a new trigger aborts the running run of the issue, then starts after it stopped', async () => {
    const jobs = new Jobs();
    const q = await make(jobs, 2);
    const first = await recordedRun(store, newRun(5));
    await q.enqueue(first);
    await until('the first started', () => jobs.started.length === 1);
    const second = await recordedRun(store, newRun(5));
    await q.enqueue(second);
    await until('the second started', () => jobs.started.length === 2);
    expect(jobs.started).toEqual([first.id, second.id]);
    expect(jobs.maxPerIssue).toBe(1); // never two active runs for one issue
    expect(await store.get(first.id)).toMatchObject({ state: 'superseded', superseded_by: second.id });
    jobs.finish(second.id);
    await q.idle();
    expect(await stateOf(second.id)).toBe('done');
    expect(jobs.finished.map((r) => r.state)).toEqual(['superseded', 'done']);
  });

  it('a queued run that is superseded before it starts never runs', async () => {
    const jobs = new Jobs();
    const q = await make(jobs, 1);
    const busy = await recordedRun(store, newRun(1));
    await q.enqueue(busy);
    await until('the busy one started', () => jobs.started.length === 1);
    const a = await recordedRun(store, newRun(2));
    const b = await recordedRun(store, newRun(2));
    await q.enqueue(a);
    await q.enqueue(b);
    await until('a superseded', async () => (await stateOf(a.id)) === 'superseded');
    expect(await store.get(a.id)).toMatchObject({ superseded_by: b.id });
    jobs.finish(busy.id);
    await until('b started', () => jobs.started.length === 2);
    jobs.finish(b.id);
    await q.idle();
    expect(jobs.started).toEqual([busy.id, b.id]);
  });

  // Issue 37: a run recorded `queued` but never enqueued (its enqueue failed) waited forever.
  it('reconcile runs a queued run that was never enqueued, unless a newer run of its issue is active', async () => {
    const jobs = new Jobs();
    const q = await make(jobs, 2);
    const lost = await recordedRun(store, newRun(7));
    const older = await recordedRun(store, newRun(8));
    const newer = await recordedRun(store, newRun(8));
    await q.enqueue(newer);
    await until('the newer started', () => jobs.started.length === 1);
    await q.reconcile();
    await until('the lost one started', () => jobs.started.length === 2);
    await until('the older superseded', async () => (await stateOf(older.id)) === 'superseded');
    expect(jobs.started).toEqual([newer.id, lost.id]);
    expect(await store.get(older.id)).toMatchObject({ superseded_by: newer.id });
    jobs.finish(newer.id);
    jobs.finish(lost.id);
    await q.idle();
    expect(await stateOf(lost.id)).toBe('done');
    expect(await stateOf(newer.id)).toBe('done');
  });

  it('cancel aborts the running run with a reason the job can read', async () => {
    const reasons: unknown[] = [];
    let started = false;
    const hooks: QueueHooks = {
      execute: (_run, signal) =>
        new Promise((resolve) => {
          started = true;
          signal.addEventListener('abort', () => {
            reasons.push(signal.reason);
            resolve({ state: 'done' });
          });
        }),
    };
    const q = await make(hooks, 1);
    const run = await recordedRun(store, newRun(3));
    await q.enqueue(run);
    await until('started', () => started);
    expect(await q.cancel('acme', 'calc', 4, 'bob')).toBeNull(); // another issue: nothing to cancel
    expect((await q.cancel('acme', 'calc', 3, 'bob'))?.id).toBe(run.id);
    await q.idle();
    expect(reasons).toEqual([{ kind: 'cancelled', by: 'bob' } satisfies StopRequest]);
    expect(await store.get(run.id)).toMatchObject({ state: 'cancelled', stop_reason: 'cancelled' });
    expect(await q.cancel('acme', 'calc', 3, 'bob')).toBeNull();
  });

  it('cancel drops a queued run before it starts', async () => {
    const jobs = new Jobs();
    const q = await make(jobs, 1);
    const busy = await recordedRun(store, newRun(1));
    await q.enqueue(busy);
    await until('the busy one started', () => jobs.started.length === 1);
    const waiting = await recordedRun(store, newRun(2));
    await q.enqueue(waiting);
    expect((await q.cancel('acme', 'calc', 2, 'bob'))?.id).toBe(waiting.id);
    await until('recorded', async () => (await stateOf(waiting.id)) === 'cancelled');
    jobs.finish(busy.id);
    await q.idle();
    await settle();
    expect(jobs.started).toEqual([busy.id]);
  });

  it('enqueueing the same run twice (a redelivered webhook) runs it once', async () => {
    const jobs = new Jobs();
    const q = await make(jobs, 2);
    const run = await recordedRun(store, newRun(9));
    await q.enqueue(run);
    await q.enqueue(run);
    await until('started', () => jobs.started.length === 1);
    await q.enqueue(run);
    await settle();
    expect(jobs.started).toEqual([run.id]);
    expect(jobs.queued).toEqual([run.id]);
    jobs.finish(run.id);
    await q.idle();
    expect(await stateOf(run.id)).toBe('done');
  });

  it('a job that throws ends failed with its error', async () => {
    const q = await make({ execute: async () => Promise.reject(new Error('API down')) }, 1);
    const run = await recordedRun(store, newRun(1));
    await q.enqueue(run);
    await q.idle();
    expect(await store.get(run.id)).toMatchObject({ state: 'failed', error: 'API down' });
  });

  it('a failure to record the end of a run is reported, not thrown, and the queue goes on', async () => {
    const errors: unknown[] = [];
    const hooks: QueueHooks = {
      execute: async () => ({ state: 'done' }),
      onFinished: (run) => {
        if (run.issue === 1) throw new Error('status comment store broke');
      },
      onError: (_run, err) => errors.push(err),
    };
    const q = await make(hooks, 1);
    const a = await recordedRun(store, newRun(1));
    const b = await recordedRun(store, newRun(2));
    await q.enqueue(a);
    await q.enqueue(b);
    await q.idle();
    await until('reported', () => errors.length === 1);
    expect(errors).toEqual([new Error('status comment store broke')]);
    expect(await store.get(b.id)).toMatchObject({ state: 'done' });
  });

  it('stopping without grace aborts running runs, which end interrupted or are handed back', async () => {
    const jobs = new Jobs();
    const q = await make(jobs, 1);
    const a = await recordedRun(store, newRun(1));
    await q.enqueue(a);
    await until('started', () => jobs.started.length === 1);
    await closeQueue!();
    closeQueue = null;
    expect(await store.get(a.id)).toMatchObject(
      backend.stopped === 'interrupted'
        ? { state: 'interrupted', stop_reason: 'shutdown' }
        : { state: 'queued', finished_at: null, error: 'handed back by a stopping worker' },
    );
  });
}
