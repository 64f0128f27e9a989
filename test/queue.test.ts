import { RunQueue, type QueueHooks, type StopRequest } from '../src/queue/queue.js';
import { SqliteRunStore } from '../src/queue/sqlite-store.js';
import type { NewRun, RunRecord, RunStore, RunUpdate } from '../src/queue/store.js';

let n = 0;
const newRun = (issue: number): NewRun => ({
  owner: 'acme',
  repo: 'calc',
  issue,
  installation_id: 1,
  trigger: 'label',
  triggered_by: 'alice',
  delivery_id: `d${n++}`,
  base_commit: 'a'.repeat(40),
});

/** A job that runs until released or aborted, recording what it saw. */
class Jobs implements QueueHooks {
  started: string[] = [];
  finished: RunRecord[] = [];
  queued: string[] = [];
  maxParallel = 0;
  private running = 0;
  private release = new Map<string, (u: RunUpdate) => void>();

  execute(run: RunRecord, signal: AbortSignal): Promise<RunUpdate> {
    this.started.push(run.id);
    this.maxParallel = Math.max(this.maxParallel, ++this.running);
    return new Promise<RunUpdate>((resolve) => {
      const done = (u: RunUpdate) => {
        this.running--;
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

const tick = () => new Promise((r) => setTimeout(r, 20));

describe('RunQueue', () => {
  let store: RunStore;
  beforeEach(() => (store = new SqliteRunStore(':memory:')));
  afterEach(() => store.close());

  it('runs at most `concurrency` runs at once and starts the next when one ends', async () => {
    const jobs = new Jobs();
    const q = new RunQueue(store, 2, jobs);
    const runs = await Promise.all([1, 2, 3].map((i) => store.createRun(newRun(i))));
    runs.forEach((r) => q.enqueue(r));
    await tick();
    expect(jobs.started).toEqual([runs[0]!.id, runs[1]!.id]);
    expect((await store.get(runs[2]!.id))!.state).toBe('queued');
    expect((await store.get(runs[0]!.id))!.state).toBe('running');
    jobs.finish(runs[0]!.id);
    await tick();
    expect(jobs.started).toEqual(runs.map((r) => r.id));
    jobs.finish(runs[1]!.id);
    jobs.finish(runs[2]!.id, { state: 'failed', error: 'boom' });
    await q.idle();
    expect(jobs.maxParallel).toBe(2);
    expect(await store.get(runs[2]!.id)).toMatchObject({ state: 'failed', error: 'boom' });
    expect((await store.get(runs[0]!.id))!.finished_at).not.toBeNull();
    expect(jobs.queued).toEqual(runs.map((r) => r.id));
  });

  it('a new trigger aborts the running run of the issue, then starts after it stopped', async () => {
    const jobs = new Jobs();
    const q = new RunQueue(store, 2, jobs);
    const first = await store.createRun(newRun(5));
    q.enqueue(first);
    await tick();
    const second = await store.createRun(newRun(5));
    q.enqueue(second);
    expect(jobs.started).toEqual([first.id]); // never two active runs for one issue
    await tick();
    expect(jobs.started).toEqual([first.id, second.id]);
    expect(await store.get(first.id)).toMatchObject({ state: 'superseded', superseded_by: second.id });
    jobs.finish(second.id);
    await q.idle();
    expect((await store.get(second.id))!.state).toBe('done');
    expect(jobs.finished.map((r) => r.state)).toEqual(['superseded', 'done']);
  });

  it('a queued run that is superseded before it starts never runs', async () => {
    const jobs = new Jobs();
    const q = new RunQueue(store, 1, jobs);
    const busy = await store.createRun(newRun(1));
    const a = await store.createRun(newRun(2));
    const b = await store.createRun(newRun(2));
    q.enqueue(busy);
    q.enqueue(a);
    q.enqueue(b);
    await tick();
    expect(await store.get(a.id)).toMatchObject({ state: 'superseded', superseded_by: b.id });
    jobs.finish(busy.id);
    await tick();
    jobs.finish(b.id);
    await q.idle();
    expect(jobs.started).toEqual([busy.id, b.id]);
  });

  it('cancel aborts the running run with a reason the job can read', async () => {
    const reasons: unknown[] = [];
    const hooks: QueueHooks = {
      execute: (_run, signal) =>
        new Promise((resolve) =>
          signal.addEventListener('abort', () => {
            reasons.push(signal.reason);
            resolve({ state: 'done' });
          }),
        ),
    };
    const q = new RunQueue(store, 1, hooks);
    const run = await store.createRun(newRun(3));
    q.enqueue(run);
    await tick();
    expect(q.cancel('acme', 'calc', 4, 'bob')).toBeNull(); // another issue: nothing to cancel
    expect(q.cancel('ACME', 'calc', 3, 'bob')?.id).toBe(run.id);
    await q.idle();
    expect(reasons).toEqual([{ kind: 'cancelled', by: 'bob' } satisfies StopRequest]);
    expect(await store.get(run.id)).toMatchObject({ state: 'cancelled', stop_reason: 'cancelled' });
    expect(q.cancel('acme', 'calc', 3, 'bob')).toBeNull();
  });

  it('enqueueing the same run twice (a redelivered webhook) runs it once', async () => {
    const jobs = new Jobs();
    const q = new RunQueue(store, 2, jobs);
    const run = await store.createRun(newRun(9));
    q.enqueue(run);
    q.enqueue(run);
    await tick();
    q.enqueue(run);
    expect(jobs.started).toEqual([run.id]);
    jobs.finish(run.id);
    await q.idle();
    expect((await store.get(run.id))!.state).toBe('done');
  });

  it('a job that throws ends failed with its error', async () => {
    const q = new RunQueue(store, 1, { execute: async () => Promise.reject(new Error('API down')) });
    const run = await store.createRun(newRun(1));
    q.enqueue(run);
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
    const q = new RunQueue(store, 1, hooks);
    const a = await store.createRun(newRun(1));
    const b = await store.createRun(newRun(2));
    q.enqueue(a);
    q.enqueue(b);
    await q.idle();
    expect(errors).toEqual([new Error('status comment store broke')]);
    expect(await store.get(b.id)).toMatchObject({ state: 'done' });
  });

  it('close aborts running runs as interrupted and refuses new ones', async () => {
    const jobs = new Jobs();
    const q = new RunQueue(store, 1, jobs);
    const a = await store.createRun(newRun(1));
    const b = await store.createRun(newRun(2));
    q.enqueue(a);
    q.enqueue(b);
    await tick();
    await q.close();
    expect((await store.get(a.id))!.state).toBe('interrupted');
    expect((await store.get(b.id))!.state).toBe('interrupted');
    const late = await store.createRun(newRun(3));
    expect(() => q.enqueue(late)).toThrow(/closed/);
  });
});
