import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { interruptionCause } from '../../../src/pipeline/reporter.js';
import { LocalRunQueue } from '../../../src/queue/local.js';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';
import type { RunRecord, RunUpdate } from '../../../src/store/store.js';
import { needService, serviceUrl } from '../../support/services.js';
import { describeIf } from '../../support/skip.js';
import { childWorkerRun, startBull } from '../../support/bull.js';
import { Jobs, newRun, recordedRun, runQueueContract, until } from '../../support/queue-contract.js';

describe('LocalRunQueue', () => {
  describe('contract', () =>
    runQueueContract({
      async make(store, hooks, concurrency, installationLimit) {
        const queue = new LocalRunQueue(store, concurrency, hooks, { installationLimit });
        return { queue, close: () => queue.close() };
      },
      stopped: 'interrupted',
    }));

  it('close ends queued runs interrupted too and refuses new ones', async () => {
    const store = new SqliteRunStore(':memory:');
    const jobs = new Jobs();
    const q = new LocalRunQueue(store, 1, jobs);
    const a = await recordedRun(store, newRun(1));
    const b = await recordedRun(store, newRun(2));
    await q.enqueue(a);
    await q.enqueue(b);
    await until('a started', () => jobs.started.length === 1);
    await q.close();
    expect((await store.get(a.id))!.state).toBe('interrupted');
    expect((await store.get(b.id))!.state).toBe('interrupted');
    const late = await recordedRun(store, newRun(3));
    await expect(q.enqueue(late)).rejects.toThrow(/closed/);
    await store.close();
  });

  // As a draining worker takes no more part jobs: a part still waiting when serve stops is its run's to
  // run in its own slot, never started in a slot freed meanwhile.
  it("close drains a run's parts: one still waiting runs in its run's slot, not in a freed one", async () => {
    const store = new SqliteRunStore(':memory:');
    const release = new Map<number, () => void>();
    const ran: number[] = [];
    const q = new LocalRunQueue(store, 2, {
      async execute(run, signal, parts) {
        await parts.run(run, 3, signal);
        return { state: 'done' };
      },
      async executePart(_run, n) {
        ran.push(n);
        await new Promise<void>((resolve) => release.set(n, resolve));
      },
    });
    const run = await recordedRun(store, newRun(1));
    await q.enqueue(run);
    await until('parts 1 and 2 running', () => ran.length === 2);
    const closed = q.close(10_000);
    release.get(2)!(); // a slot frees: part 3 stays in line
    await new Promise((r) => setTimeout(r, 200));
    expect([...ran].sort()).toEqual([1, 2]);
    release.get(1)!(); // the run's own slot takes it
    await until('part 3 running', () => ran.length === 3);
    release.get(3)!();
    await closed;
    expect(await store.get(run.id)).toMatchObject({ state: 'done' });
    await store.close();
  });

  // Issue 38, item 3: SIGTERM to serve interrupted its run at once, with no drain.
  it('close drains: a running run finishing within the drain time is done; one that does not is interrupted', async () => {
    const store = new SqliteRunStore(':memory:');
    const jobs = new Jobs();
    const q = new LocalRunQueue(store, 2, jobs);
    const [a, b] = [await recordedRun(store, newRun(1)), await recordedRun(store, newRun(2))];
    await q.enqueue(a);
    await q.enqueue(b);
    await until('both started', () => jobs.started.length === 2);
    setTimeout(() => jobs.finish(a.id, { state: 'done' }), 200);
    const started = Date.now();
    await q.close(1000);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(await store.get(a.id)).toMatchObject({ state: 'done' });
    expect(await store.get(b.id)).toMatchObject({ state: 'interrupted', stop_reason: 'shutdown' });
    await store.close();
  });

  // Issue 31: a store that would not take a run's end (a full disk) left it `running` forever. Issue 37:
  // a run with no job is interrupted with its cause (its issue told), or publish_pending once judged.
  it('an end the store refuses is retried, then recorded by reconcile; a running run with no job is interrupted', async () => {
    const store = new SqliteRunStore(':memory:');
    let refuse = 0; // the next updates that fail
    const updateIf = store.updateIf.bind(store);
    store.updateIf = async (id, owner, u) => {
      if (u.finished_at && refuse > 0) {
        refuse--;
        throw new Error('database or disk is full');
      }
      return updateIf(id, owner, u);
    };
    const jobs = new Jobs();
    const q = new LocalRunQueue(store, 1, jobs, { recordRetryMs: [1, 1] });
    // One refusal: the retry records it.
    refuse = 1;
    const a = await store.createRun(newRun(1));
    await q.enqueue(a);
    await until('a started', () => jobs.started.length === 1);
    jobs.finish(a.id, { state: 'done' });
    await q.idle();
    expect((await store.get(a.id))!.state).toBe('done');
    // More refusals than retries: still running, until reconcile records the end as it was.
    refuse = 3;
    const b = await store.createRun(newRun(2));
    await q.enqueue(b);
    await until('b started', () => jobs.started.length === 2);
    jobs.finish(b.id, { state: 'done' });
    await q.idle();
    expect((await store.get(b.id))!.state).toBe('running');
    const lost = await store.update((await store.createRun(newRun(3))).id, { state: 'running' });
    const judged = await store.update((await store.createRun(newRun(4))).id, {
      state: 'running',
      verdict: 'verified',
      publish: '{}',
    });
    expect((await q.reconcile()).map((r) => r.id)).toEqual([b.id, lost.id, judged.id]);
    expect((await store.get(b.id))!.state).toBe('done');
    expect(await store.get(lost.id)).toMatchObject({
      state: 'interrupted',
      stop_reason: 'interrupted',
      error: 'its job was lost: its end was never recorded',
      finished_at: expect.any(String),
    });
    expect(await store.get(judged.id)).toMatchObject({ state: 'publish_pending', finished_at: null });
    expect(jobs.finished.map((r) => r.state)).toEqual(['done', 'done', 'interrupted', 'publish_pending']);
    await q.close();
    await store.close();
  });

  it('matches issues case-insensitively, as GitHub does', async () => {
    const store = new SqliteRunStore(':memory:');
    const jobs = new Jobs();
    const q = new LocalRunQueue(store, 1, jobs);
    const run = await recordedRun(store, newRun(3));
    await q.enqueue(run);
    await until('started', () => jobs.started.length === 1);
    expect((await q.cancel('ACME', 'calc', 3, 'bob'))?.id).toBe(run.id);
    await q.idle();
    await store.close();
  });
});

const redis = serviceUrl('AGENTICFIX_TEST_REDIS_URL');

describeIf(needService('AGENTICFIX_TEST_REDIS_URL'))('BullRunQueue with RunWorker', () => {
  const redisUrl = redis?.toString() ?? '';

  describe('contract (one worker)', () =>
    runQueueContract({
      async make(store, hooks, concurrency, installationLimit) {
        const workers = [{ hooks, concurrency, installationLimit }];
        const bull = await startBull(store, { redisUrl, hooks, workers });
        return { queue: bull.queue, close: () => bull.close() };
      },
      stopped: 'queued',
    }));

  // Issue 24, item 5: a worker ran any run record it found, minting a token for its installation.
  it('a worker refuses a run with no recorded delivery: failed in the store, never executed', async () => {
    const store = new SqliteRunStore(':memory:');
    const jobs = new Jobs();
    const bull = await startBull(store, { redisUrl, workers: [{ hooks: jobs }] });
    const { queue } = bull;
    const forged = await store.createRun(newRun(1)); // written straight into the store
    const real = await recordedRun(store, newRun(2));
    await queue.enqueue(forged);
    await queue.enqueue(real);
    await until('the real one started', () => jobs.started.length === 1);
    jobs.finish(real.id);
    await queue.idle();
    expect(jobs.started).toEqual([real.id]);
    expect(jobs.finished.map((r) => r.id)).toEqual([real.id]); // no hook heard of the forged one
    expect(await store.get(forged.id)).toMatchObject({
      state: 'failed',
      error: expect.stringContaining(`no recorded webhook delivery \`${forged.delivery_id}\``),
    });
    await bull.close();
    await store.close();
  });

  it('workers share the queue: each within its concurrency, every run recorded with its worker', async () => {
    const store = new SqliteRunStore(':memory:');
    const [jobsA, jobsB] = [new Jobs(), new Jobs()];
    const bull = await startBull(store, {
      redisUrl,
      hooks: new Jobs(),
      workers: [
        { hooks: jobsA, concurrency: 1, id: 'worker-a' },
        { hooks: jobsB, concurrency: 2, id: 'worker-b' },
      ],
    });
    const { queue, workers } = bull;
    const runs = [];
    for (const i of [1, 2, 3, 4, 5]) runs.push(await recordedRun(store, newRun(i)));
    for (const r of runs) await queue.enqueue(r);
    await until('three running', () => jobsA.started.length + jobsB.started.length === 3);
    await new Promise((r) => setTimeout(r, 300));
    expect([jobsA.started.length, jobsB.started.length]).toEqual([1, 2]); // the rest wait for a free slot
    while (jobsA.started.length + jobsB.started.length < 5 || workers.some((w) => w.running > 0)) {
      for (const jobs of [jobsA, jobsB]) for (const id of jobs.started) jobs.finish(id);
      await new Promise((r) => setTimeout(r, 50));
    }
    await queue.idle();
    expect(jobsA.maxParallel).toBe(1);
    expect(jobsB.maxParallel).toBe(2);
    const recorded = await store.list();
    expect(recorded.map((r) => r.state)).toEqual(['done', 'done', 'done', 'done', 'done']);
    for (const r of recorded) expect(r.worker).toBe(jobsA.started.includes(r.id) ? 'worker-a' : 'worker-b');
    await bull.close();
    await store.close();
  });

  it("holds one installation to its limit across workers while other installations' runs go on", async () => {
    const store = new SqliteRunStore(':memory:');
    const running = new Map<number, number>(); // by installation
    const most = new Map<number, number>();
    const release: (() => void)[] = [];
    const hooks = {
      execute: (run: RunRecord) =>
        new Promise<RunUpdate>((resolve) => {
          const now = (running.get(run.installation_id) ?? 0) + 1;
          running.set(run.installation_id, now);
          most.set(run.installation_id, Math.max(most.get(run.installation_id) ?? 0, now));
          release.push(() => {
            running.set(run.installation_id, running.get(run.installation_id)! - 1);
            resolve({ state: 'done' });
          });
        }),
    };
    const bull = await startBull(store, {
      redisUrl,
      workers: ['a', 'b'].map((id) => ({ hooks, concurrency: 2, id, installationLimit: 2 })),
    });
    const { queue } = bull;
    for (const i of [1, 2, 3, 4])
      await queue.enqueue(await recordedRun(store, { ...newRun(i), installation_id: 7 }));
    await queue.enqueue(await recordedRun(store, { ...newRun(5), installation_id: 8 }));
    await until('two of installation 7 and the one of 8 running', () => release.length === 3);
    await new Promise((r) => setTimeout(r, 1000)); // a free worker slot stays free
    expect(release).toHaveLength(3);
    expect(Object.fromEntries(running)).toEqual({ 7: 2, 8: 1 });
    while ((await store.list('done')).length < 5) {
      release.splice(0).forEach((f) => f());
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(Object.fromEntries(most)).toEqual({ 7: 2, 8: 1 });
    await bull.close();
    await store.close();
  });

  it('a stopping worker takes no more runs and lets running ones finish within its grace period', async () => {
    const store = new SqliteRunStore(':memory:');
    const jobs = new Jobs();
    const {
      queue,
      workers: [worker],
    } = await startBull(store, { redisUrl, workers: [{ hooks: jobs }] });
    const [a, b] = [await recordedRun(store, newRun(1)), await recordedRun(store, newRun(2))];
    await queue.enqueue(a);
    await queue.enqueue(b);
    await until('a started', () => jobs.started.length === 1);
    const closing = worker!.close(10_000);
    setTimeout(() => jobs.finish(a.id), 300);
    await closing;
    expect(await store.get(a.id)).toMatchObject({ state: 'done' }); // finished within the grace period
    expect(await store.get(b.id)).toMatchObject({ state: 'queued' }); // left for another worker
    expect(jobs.started).toEqual([a.id]);
    await queue.close();
    await store.close();
  });

  it.each([
    [2, { state: 'done', error: null }],
    [1, { state: 'failed', error: 'engine down (2)' }],
  ])('tries a run whose job threw again with backoff (%i retries)', async (retries, final) => {
    const store = new SqliteRunStore(':memory:');
    const attempts: { at: number; state: string }[] = [];
    const hooks = {
      async execute(run: RunRecord): Promise<RunUpdate> {
        attempts.push({ at: Date.now(), state: (await store.get(run.id))!.state });
        if (attempts.length < 3) throw new Error(`engine down (${attempts.length})`);
        return { state: 'done' };
      },
    };
    const bull = await startBull(store, { redisUrl, retry: { retries, baseMs: 200 }, workers: [{ hooks }] });
    const run = await recordedRun(store, newRun(1));
    await bull.queue.enqueue(run);
    await until('the run to end', async () => (await store.get(run.id))!.finished_at !== null);
    expect(await store.get(run.id)).toMatchObject(final);
    expect(attempts).toHaveLength(retries + 1);
    expect(attempts.every((a) => a.state === 'running')).toBe(true);
    // Exponential backoff: 200 ms, then 400 ms.
    expect(attempts[1]!.at - attempts[0]!.at).toBeGreaterThanOrEqual(200);
    if (retries === 2) expect(attempts[2]!.at - attempts[1]!.at).toBeGreaterThanOrEqual(400);
    await bull.close();
    await store.close();
  });

  it('a starting serve enqueues runs recorded but never enqueued, and ends runs no job holds', async () => {
    const store = new SqliteRunStore(':memory:');
    const jobs = new Jobs();
    const recorded = await recordedRun(store, newRun(1)); // serve stopped before enqueueing it
    const orphan = await store.update((await recordedRun(store, newRun(2))).id, { state: 'running' });
    const interrupted: string[] = [];
    const bull = await startBull(store, {
      redisUrl,
      hooks: { onInterrupted: (r) => interrupted.push(r.id) },
      workers: [{ hooks: jobs }],
    });
    expect(await store.get(orphan.id)).toMatchObject({ state: 'interrupted' });
    expect(interrupted).toEqual([orphan.id]);
    await until('the recorded run started', () => jobs.started.includes(recorded.id));
    jobs.finish(recorded.id);
    await bull.queue.idle();
    await bull.close();
    await store.close();
  });

  it("does not hold the intake on a run's announcement; its job is added once the announcement settled", async () => {
    const store = new SqliteRunStore(':memory:');
    const jobs = new Jobs();
    const announced = new Map<string, (ok: boolean) => void>();
    const errors: string[] = [];
    const bull = await startBull(store, {
      redisUrl,
      hooks: {
        // GitHub's pacing holding a status comment back: settles when the test says so.
        onQueued: (run) =>
          new Promise<void>((resolve, reject) =>
            announced.set(run.id, (ok) => (ok ? resolve() : reject(new Error('GitHub said no')))),
          ),
        onError: (run) => errors.push(run.id),
      },
      workers: [{ hooks: jobs, concurrency: 2 }],
    });
    const { queue } = bull;
    const [a, b] = [await recordedRun(store, newRun(1)), await recordedRun(store, newRun(2))];
    await queue.enqueue(a); // resolves with the announcement still pending
    await queue.enqueue(b);
    expect([...announced.keys()]).toEqual([a.id, b.id]);
    await new Promise((r) => setTimeout(r, 300));
    expect(jobs.started).toEqual([]); // no job before its announcement
    announced.get(a.id)!(true);
    await until('a started', () => jobs.started.includes(a.id));
    announced.get(b.id)!(false); // a failed announcement is reported, and the run still runs
    await until('b started', () => jobs.started.includes(b.id));
    expect(errors).toEqual([b.id]);
    jobs.finish(a.id);
    jobs.finish(b.id);
    await queue.idle();
    await bull.close();
    await store.close();
  });

  describe('a worker killed mid-run', () => {
    const dist = path.join(fileURLToPath(new URL('../../..', import.meta.url)), 'dist');
    let dir: string;
    beforeEach(() => (dir = mkdtempSync(path.join(tmpdir(), 'stall-'))));
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    /**
     * A worker process (the built code) whose runs never end by themselves, or (`blockMs`) that first
     * blocks its event loop that long and then runs until aborted, saying so; also what it records as
     * a run's end, and its warnings.
     */
    const workerProcess = (file: string, name: string, blockMs = 0) =>
      execa(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `import { RunWorker } from ${JSON.stringify(path.join(dist, 'queue/bullmq.js'))};
           import { SqliteRunStore } from ${JSON.stringify(path.join(dist, 'store/sqlite-store.js'))};
           const store = new SqliteRunStore(${JSON.stringify(file)});
           const log = { info: () => {}, warn: (o, msg) => process.stdout.write('warn ' + msg + '\\n') };
           const hooks = { onFinished: (run) => process.stdout.write('finished ' + run.state + '\\n'), execute: (run, signal) => {
             process.stdout.write('started ' + run.id + '\\n');
             const until = Date.now() + ${blockMs};
             while (Date.now() < until);
             return new Promise((resolve) => signal.addEventListener('abort', () => {
               process.stdout.write('aborted ' + JSON.stringify(signal.reason) + '\\n');
               resolve({ state: 'done' });
             }));
           } };
           await new RunWorker(store, hooks, { redisUrl: ${JSON.stringify(redisUrl)}, name: ${JSON.stringify(name)}, concurrency: 1, id: 'doomed', lockMs: 1000, log }).start();`,
        ],
        { reject: false },
      );

    /** The run a workerProcess took. */
    const doomedRun = (blockMs = 0) =>
      childWorkerRun({
        redisUrl,
        dir,
        spawn: (file, name) => workerProcess(file, name, blockMs),
        took: (run) => `started ${run.id}`,
      });

    /**
     * A worker process (the built code) that drains on SIGTERM for `drainMs`, logging as JSON lines; its
     * runs end `finishMs` after the signal, or never by themselves.
     */
    const drainingWorker = (file: string, name: string, drainMs: number, finishMs: number | null) =>
      execa(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `import { RunWorker } from ${JSON.stringify(path.join(dist, 'queue/bullmq.js'))};
           import { SqliteRunStore } from ${JSON.stringify(path.join(dist, 'store/sqlite-store.js'))};
           const line = (level) => (obj, msg) => process.stdout.write(JSON.stringify({ level, ...obj, msg }) + '\\n');
           const log = { info: line('info'), warn: line('warn') };
           const store = new SqliteRunStore(${JSON.stringify(file)});
           let finish = () => {};
           const hooks = { execute: (run, signal) => {
             log.info({ run: run.id }, 'started');
             return new Promise((resolve) => {
               finish = () => resolve({ state: 'done' });
               signal.addEventListener('abort', () => resolve({}));
             });
           } };
           const worker = new RunWorker(store, hooks, { redisUrl: ${JSON.stringify(redisUrl)}, name: ${JSON.stringify(name)}, concurrency: 1, id: 'drainer', lockMs: 1000, log });
           await worker.start();
           process.once('SIGTERM', async () => {
             if (${finishMs} !== null) setTimeout(() => finish(), ${finishMs ?? 0});
             await worker.close(${drainMs});
             await store.close();
           });`,
        ],
        { reject: false },
      );

    it.each([
      ['finished within the drain time', 10_000, 300],
      ['handed back when the drain time is over', 300, null],
    ])('SIGTERM mid-run: the run is %s, never lost, and the log says which', async (_, drainMs, finishMs) => {
      const w = await childWorkerRun({
        redisUrl,
        dir,
        spawn: (file, name) => drainingWorker(file, name, drainMs, finishMs),
        took: () => '"msg":"started"',
      });
      const { store, child, run, survivor } = w;
      try {
        child.kill('SIGTERM');
        const exited = await child;
        expect(exited.exitCode).toBe(0);
        const said = w
          .out()
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as { msg: string; run?: string; runs?: string[] });
        expect(said[1]).toMatchObject({ msg: 'draining: no more runs taken', runs: [run.id] });
        if (finishMs !== null) {
          expect(said.map((l) => l.msg).slice(2)).toEqual(['drained']);
          expect(await store.get(run.id)).toMatchObject({ state: 'done', worker: 'drainer' });
          return;
        }
        expect(said.slice(2)).toEqual([
          expect.objectContaining({ msg: 'drain time over: handing the run back to the queue', run: run.id }),
          expect.objectContaining({ msg: 'run handed back', run: run.id, state: 'queued' }),
          expect.objectContaining({ msg: 'drained' }),
        ]);
        expect(await store.get(run.id)).toMatchObject({ state: 'queued', finished_at: null });
        // Another worker takes it up.
        await w.startSurvivor({ id: 'next' });
        await until('the next worker takes it', () => survivor.started.includes(run.id), 20_000);
        survivor.finish(run.id);
        await until('done', async () => (await store.get(run.id))!.state === 'done', 20_000);
        expect(await store.get(run.id)).toMatchObject({ worker: 'next' });
      } finally {
        await w.close();
      }
    });

    // Issue 37, item 7: the run's issue read "The app shut down" when a worker lost its lock (Redis killed).
    it('a worker blocked past its lock stops the run there, which ends interrupted once, saying why', async () => {
      const w = await doomedRun(4000);
      const { store, run, survivor, interrupted } = w;
      try {
        await w.startSurvivor({ id: 'survivor' }); // finds the job stalled while the child is blocked
        await until('the blocked worker to stop the run', () => w.out().includes('aborted'), 20_000);
        expect(w.out()).toContain('aborted {"kind":"lock_lost"}');
        await until('recorded', async () => (await store.get(run.id))!.finished_at !== null, 10_000);
        const final = (await store.get(run.id))!;
        expect(final).toMatchObject({ state: 'interrupted', worker: 'doomed' });
        // The worker's own end (it lost its hold on the run) or serve's (it stopped): never "The app shut down".
        expect(interruptionCause(final)).toMatch(
          /^Interrupted: its worker (lost its hold on the run in the queue \(Redis|\(doomed\) stopped)/,
        );
        expect(interrupted).toEqual([run.id]);
        expect(survivor.started).toEqual([]); // never run twice
      } finally {
        await w.close();
      }
    });

    // Issue 37, item 3: running@w1 → running@w2 → `interrupted` written by the thawed w1 → `done@w2`;
    // the sweep of w1 (the run looked over) then killed w2's judge container.
    it("a frozen worker thawed after another took its run over (requeue stalled) writes nothing: one end, the newer attempt's", async () => {
      const w = await doomedRun();
      const { store, child, run, survivor, interrupted } = w;
      try {
        expect(await store.get(run.id)).toMatchObject({ state: 'running', worker: 'doomed', attempt: 1 });
        child.kill('SIGSTOP');
        await w.startSurvivor({ id: 'survivor', requeueStalled: true });
        await until('the survivor takes it over', () => survivor.started.includes(run.id), 20_000);
        expect(await store.get(run.id)).toMatchObject({ state: 'running', worker: 'survivor', attempt: 2 });
        child.kill('SIGCONT');
        // Thawed, the child finds its lock lost, stops the run there and tries to record its end.
        await until('the child gives the run up', () => /finished|warn/.test(w.out()), 20_000);
        expect(w.out()).toContain('aborted {"kind":"lock_lost"}');
        expect(w.out()).not.toContain('finished');
        expect(w.out()).toContain(`warn run ${run.id} has a newer owner`);
        // Still the survivor's: a sweep asking whether the run is over hears no.
        expect(await store.get(run.id)).toMatchObject({
          state: 'running',
          worker: 'survivor',
          finished_at: null,
        });
        survivor.finish(run.id);
        await until('recorded', async () => (await store.get(run.id))!.state !== 'running', 20_000);
        expect(await store.get(run.id)).toMatchObject({ state: 'done', worker: 'survivor', attempt: 2 });
        expect(survivor.finished.map((r) => r.state)).toEqual(['done']);
        expect(interrupted).toEqual([]);
      } finally {
        await w.close();
      }
    });

    it.each([
      [false, 'interrupted'],
      [true, 'done'],
    ])('leaves its run recorded (requeue stalled: %s → %s)', async (requeueStalled, final) => {
      const w = await doomedRun();
      const { store, child, run, survivor, interrupted } = w;
      try {
        expect(await store.get(run.id)).toMatchObject({ state: 'running', worker: 'doomed' });
        child.kill('SIGKILL');
        await child;
        // A live worker notices the stall (its lock was not renewed).
        await w.startSurvivor({ id: 'survivor', requeueStalled });
        if (requeueStalled) {
          await until('the survivor takes it again', () => survivor.started.includes(run.id), 20_000);
          survivor.finish(run.id);
        }
        await until('recorded', async () => (await store.get(run.id))!.state === final, 20_000);
        if (!requeueStalled) {
          expect(await store.get(run.id)).toMatchObject({
            stop_reason: 'interrupted',
            error: 'its worker (doomed) stopped',
          });
          expect(interrupted).toEqual([run.id]);
        } else expect(await store.get(run.id)).toMatchObject({ worker: 'survivor' });
      } finally {
        await w.close();
      }
    });
  });
});
