import { hostname } from 'node:os';
import { execa } from 'execa';
import type { NewRun, RunStore } from '../../src/store/store.js';
import type { InstanceHolder } from '../../src/store/instance.js';
import { StoreTooNewError } from '../../src/store/schema.js';
import { MIGRATIONS, ownerOf } from '../../src/store/store.js';
import { INSTANCE_STALE_MS, StoreInUseError } from '../../src/store/instance.js';
import { buildInfo } from '../../src/config/version.js';

/**
 * The run store contract: one suite that every RunStore implementation passes (test/services/store/store.test.ts runs
 * it against SQLite and PostgreSQL).
 */
export interface StoreBackend {
  /** Gives the next test an empty store location of its own. */
  fresh(): Promise<void>;
  /** Opens (again) the current location, as a restarted process or another process would. */
  open(): Promise<RunStore>;
  /** Removes the current location. */
  cleanup(): Promise<void>;
  /** Writes the instance row directly, as another (possibly dead) process would have left it. */
  writeHolder(holder: InstanceHolder): Promise<void>;
  /** The store's schema version as recorded (a newer release may have set it), or sets it. */
  schemaVersion(set?: number): Promise<number>;
}

export const newRun = (over: Partial<NewRun> = {}): NewRun => ({
  owner: 'acme',
  repo: 'calc',
  issue: 7,
  installation_id: 1,
  trigger: 'label',
  triggered_by: 'alice',
  delivery_id: `d-${Math.random()}`,
  base_commit: 'a'.repeat(40),
  ...over,
});

/** One delivery through the batch API. */
export const claim = async (
  store: RunStore,
  id: string,
  event: string,
  payload: unknown,
  sha256: string | null,
) => (await store.claimDeliveries([{ id, event, body: JSON.stringify(payload), sha256 }]))[0];

export function runStoreContract(backend: StoreBackend): void {
  const open = () => backend.open();
  beforeEach(() => backend.fresh());
  afterEach(() => backend.cleanup());

  it('creates, updates and lists runs; survives reopening', async () => {
    const store = await open();
    const run = await store.createRun(newRun({ model: 'm1', token_budget: 5000 }));
    expect(run).toMatchObject({
      state: 'queued',
      model: 'm1',
      token_budget: 5000,
      comment_ids: [],
      pr_number: null,
      issue_title: null,
    });
    expect(run.cost_usd).toBeNull(); // unknown until the run has spent something with a priced model
    const updated = await store.update(run.id, {
      state: 'running',
      started_at: 'now',
      verdict: 'verified',
      tokens: 1234,
      cost_usd: 0.012345678901,
      pr_number: 3,
    });
    expect(updated).toMatchObject({ state: 'running', verdict: 'verified', tokens: 1234 });
    // Fractions of a cent exactly as written (a 32-bit REAL would round this one).
    expect(updated.cost_usd).toBe(0.012345678901);
    await store.addComment(run.id, 11);
    await store.addComment(run.id, 12);
    await store.close();

    const again = await open();
    expect(await again.get(run.id)).toMatchObject({
      state: 'running',
      verdict: 'verified',
      tokens: 1234,
      cost_usd: 0.012345678901,
      pr_number: 3,
      comment_ids: [11, 12],
    });
    expect(await again.get('r-none')).toBeNull();
    expect(await again.issueForPr('acme', 'calc', 3)).toBe(7);
    expect(await again.issueForPr('acme', 'calc', 4)).toBeNull();
    await again.close();
  });

  it('keeps GitHub ids past 32 bits exactly, and caps errors', async () => {
    const store = await open();
    const big = 2 ** 32 + 5;
    const run = await store.createRun(newRun({ installation_id: big, issue_body: 'body' }));
    await store.addComment(run.id, big + 1);
    const updated = await store.update(run.id, { status_comment_id: big + 2, error: 'x'.repeat(100_000) });
    expect(updated).toMatchObject({
      installation_id: big,
      comment_ids: [big + 1],
      status_comment_id: big + 2,
      issue_body: 'body',
    });
    expect(updated.error!.length).toBeLessThan(100_000);
    await store.close();
  });

  it('refuses an update of an unknown run or of a column that cannot change', async () => {
    const store = await open();
    await expect(store.update('r-none', { state: 'done' })).rejects.toThrow(/unknown run r-none/);
    const run = await store.createRun(newRun());
    await expect(
      store.update(run.id, { owner: 'evil' } as unknown as Parameters<RunStore['update']>[1]),
    ).rejects.toThrow(/not an updatable run column: owner/);
    await store.close();
  });

  // Issue 41, item 2: attempts on several workers each record their own outcome in the run's `attempts`;
  // a read-modify-write of the whole column lost one of two written at once.
  it("sets one attempt of a run's attempts at a time: concurrent writers from two connections lose none", async () => {
    const [store, other] = [await open(), await open()];
    const run = await store.createRun(newRun());
    const writes = [1, 2, 3, 4, 5, 6].map((n) =>
      (n % 2 ? store : other).putAttempt(run.id, { n: 7 - n, verdict: 'running' }),
    );
    await Promise.all(writes);
    const all = await store.putAttempt(run.id, { n: 2, verdict: 'verified', worker: 'w2' });
    expect(all.map((a) => [a.n, a.verdict])).toEqual([
      [1, 'running'],
      [2, 'verified'],
      [3, 'running'],
      [4, 'running'],
      [5, 'running'],
      [6, 'running'],
    ]);
    expect(JSON.parse((await other.get(run.id))!.attempts!)).toEqual(all);
    await expect(store.putAttempt('r-none', { n: 1 })).rejects.toThrow(/unknown run r-none/);
    await other.close();
    await store.close();
  });

  // Issue 37, item 3: a thawed worker wrote `interrupted` over the run a second worker had taken over.
  it('compare-and-set on (state, worker, attempt): a stale owner changes nothing, a current one does', async () => {
    const store = await open();
    const run = await store.createRun(newRun());
    expect(run).toMatchObject({ state: 'queued', worker: null, attempt: 0 });
    const w1 = await store.updateIf(run.id, ownerOf(run), { state: 'running', worker: 'w1', attempt: 1 });
    expect(w1).toMatchObject({ state: 'running', worker: 'w1', attempt: 1 });
    // A second start from the same read loses: only one worker owns attempt 1.
    expect(
      await store.updateIf(run.id, ownerOf(run), { state: 'running', worker: 'w9', attempt: 1 }),
    ).toBeNull();
    // w1 stalls; w2 takes the run over from what it read.
    const w2 = await store.updateIf(run.id, ownerOf(w1!), { state: 'running', worker: 'w2', attempt: 2 });
    expect(w2).toMatchObject({ worker: 'w2', attempt: 2 });
    // w1 thaws and records its end: refused, the run is w2's.
    const late = { state: 'interrupted', stop_reason: 'shutdown', finished_at: 'now' } as const;
    expect(await store.updateIf(run.id, ownerOf(w1!), late)).toBeNull();
    expect(await store.updateIf(run.id, { ...ownerOf(w2!), attempt: 1 }, late)).toBeNull();
    expect(await store.updateIf(run.id, { ...ownerOf(w2!), state: 'queued' }, late)).toBeNull();
    expect(await store.get(run.id)).toMatchObject({
      state: 'running',
      worker: 'w2',
      attempt: 2,
      finished_at: null,
    });
    const done = await store.updateIf(run.id, ownerOf(w2!), { state: 'done', finished_at: 'now' });
    expect(done).toMatchObject({ state: 'done', worker: 'w2', attempt: 2 });
    expect(await store.updateIf(run.id, ownerOf(done!), {})).toMatchObject({ state: 'done' });
    await expect(store.updateIf('r-none', ownerOf(run), { state: 'done' })).rejects.toThrow(
      /unknown run r-none/,
    );
    await store.close();
  });

  it("lists an issue's runs newest first, and runs by state oldest first", async () => {
    const store = await open();
    const a = await store.createRun(newRun());
    const b = await store.createRun(newRun());
    const c = await store.createRun(newRun({ issue: 8 }));
    await store.update(b.id, { state: 'done' });
    expect((await store.forIssue('acme', 'calc', 7)).map((r) => r.id)).toEqual([b.id, a.id]);
    expect((await store.list()).map((r) => r.id)).toEqual([a.id, b.id, c.id]);
    expect((await store.list('queued')).map((r) => r.id)).toEqual([a.id, c.id]);
    // Issue 38, item 6: the run list's pages (it stopped at 200 runs).
    const page = (limit: number, offset?: number) =>
      store.recent({ limit, offset }).then((l) => l.map((r) => r.id));
    expect(await page(2)).toEqual([c.id, b.id]);
    expect(await page(2, 2)).toEqual([a.id]);
    expect(
      await store.recent({ limit: 5, offset: 1, state: 'queued' }).then((l) => l.map((r) => r.id)),
    ).toEqual([a.id]);
    await store.close();
  });

  it('claims a delivery once; a released claim can be taken again; one run per delivery', async () => {
    const store = await open();
    expect(await claim(store, 'd1', 'issues', {}, 'h1')).toBe('new');
    expect(await claim(store, 'd1', 'issues', {}, 'h1')).toBe('seen'); // GitHub's redeliver: same id, same body
    await store.releaseDelivery('d1');
    expect(await claim(store, 'd1', 'issues', {}, 'h1')).toBe('new');
    await store.createRun(newRun({ delivery_id: 'd1' }));
    // Matched by message: SQLite's errors are not Error instances in every jest realm.
    await expect(store.createRun(newRun({ delivery_id: 'd1' }))).rejects.toHaveProperty(
      'message',
      expect.stringMatching(/runs.delivery/), // the unique index on runs.delivery_id
    );
    expect(await store.list()).toHaveLength(1);
    await store.close();
  });

  it('keeps an acknowledged delivery with its payload until its intake is done, across a reopen', async () => {
    const store = await open();
    await claim(store, 'a', 'issues', { action: 'labeled', n: 1 }, 'ha');
    await claim(store, 'b', 'issue_comment', { action: 'created', n: 2 }, 'hb');
    await store.finishDelivery('a');
    await store.close();
    const reopened = await open();
    expect(await reopened.pendingDeliveries()).toEqual([
      { id: 'b', event: 'issue_comment', payload: { action: 'created', n: 2 }, body_sha256: 'hb' },
    ]);
    expect(await claim(reopened, 'a', 'issues', {}, 'ha')).toBe('seen'); // done deliveries stay claimed
    // What a worker checks a run against: done or not, a recorded delivery stays recorded.
    expect(await reopened.deliveryRecorded('a')).toBe(true);
    expect(await reopened.deliveryRecorded('b')).toBe(true);
    expect(await reopened.deliveryRecorded('never')).toBe(false);
    await reopened.close();
  });

  it('prunes deliveries received before a time, done and with no run going on; others stay', async () => {
    const store = await open();
    for (const id of ['done', 'pending', 'queued', 'over'])
      await claim(store, id, 'issues', { id }, `h-${id}`);
    for (const id of ['done', 'queued', 'over']) await store.finishDelivery(id);
    await store.createRun(newRun({ delivery_id: 'queued' })); // a run still waiting for a worker
    const over = await store.createRun(newRun({ delivery_id: 'over', issue: 8 }));
    await store.update(over.id, { state: 'done' });
    expect(await store.pruneDeliveries(new Date(Date.now() - 3600_000).toISOString())).toBe(0);
    expect(await store.pruneDeliveries(new Date(Date.now() + 3600_000).toISOString())).toBe(2);
    expect(await store.deliveryRecorded('done')).toBe(false);
    expect(await store.deliveryRecorded('over')).toBe(false);
    expect(await store.deliveryRecorded('queued')).toBe(true); // its worker checks it
    expect((await store.pendingDeliveries()).map((d) => d.id)).toEqual(['pending']);
    // A pruned body is forgotten with it: only the webhook's freshness check stands between it and a replay.
    expect(await claim(store, 'other', 'issues', { id: 'done' }, 'h-done')).toBe('new');
    await store.close();
  });

  // A queued run lost nothing: the queue's reconcile runs it after the restart, as in distributed mode.
  it('after a crash marks running runs interrupted and returns them; queued ones stay queued', async () => {
    const store = await open();
    const queued = await store.createRun(newRun());
    const running = await store.createRun(newRun({ issue: 8 }));
    await store.update(running.id, { state: 'running', status_comment_id: 99 });
    const done = await store.createRun(newRun({ issue: 9 }));
    await store.update(done.id, { state: 'done' });
    // The process dies here: no close(), no final updates.

    const restarted = await open();
    const interrupted = await restarted.markInterrupted();
    expect(interrupted.map((r) => r.id)).toEqual([running.id]);
    expect((await restarted.get(queued.id))!.state).toBe('queued');
    expect(interrupted.find((r) => r.id === running.id)).toMatchObject({
      state: 'interrupted',
      stop_reason: 'interrupted',
      status_comment_id: 99,
      error: 'app restarted',
    });
    expect((await restarted.get(done.id))!.state).toBe('done');
    expect(await restarted.markInterrupted()).toEqual([]);
    await restarted.close();
    await store.close();
  });

  // Issue 37: a worker killed between its push and its pull request lost the verified patch.
  it('after a crash a judged run with its publishing record becomes publish_pending, not interrupted', async () => {
    const store = await open();
    const judged = await store.createRun(newRun({ issue: 10 }));
    await store.update(judged.id, { state: 'running', verdict: 'verified', publish: '{"attempts":0}' });

    const restarted = await open();
    const [left] = await restarted.markInterrupted();
    expect(left).toMatchObject({
      id: judged.id,
      state: 'publish_pending',
      verdict: 'verified',
      publish: '{"attempts":0}',
      finished_at: null,
    });
    expect(left!.error).toMatch(/publishing is resumed/);
    await restarted.close();
    await store.close();
  });

  // A revision's record is stored before its push (push-revision.ts): once it is, the revision is resumed.
  it('after a crash a revision with its publishing record (its commit maybe pushed) becomes publish_pending; one without is interrupted', async () => {
    const store = await open();
    const revision = (issue: number) =>
      store.createRun(
        newRun({ issue, trigger: 'revise', revision: 1, pr_number: issue + 1, head_commit: 'b'.repeat(40) }),
      );
    const pushed = await revision(11);
    await store.update(pushed.id, {
      state: 'running',
      verdict: 'verified',
      publish: '{"attempts":0}',
      pushed_commit: 'c'.repeat(40),
    });
    const working = await revision(13);
    await store.update(working.id, { state: 'running' });

    const restarted = await open();
    const left = await restarted.markInterrupted();
    expect(left.find((r) => r.id === pushed.id)).toMatchObject({
      state: 'publish_pending',
      revision: 1,
      pr_number: 12,
      pushed_commit: 'c'.repeat(40),
      publish: '{"attempts":0}',
    });
    expect(left.find((r) => r.id === working.id)).toMatchObject({
      state: 'interrupted',
      revision: 1,
      pushed_commit: null,
    });
    await restarted.close();
    await store.close();
  });

  it('records a batch in one go: a body twice in the batch is a replay the second time', async () => {
    const store = await open();
    const body = (n: number) => JSON.stringify({ n });
    expect(
      await store.claimDeliveries([
        { id: 'b1', event: 'issues', body: body(1), sha256: 's1' },
        { id: 'b2', event: 'issues', body: body(1), sha256: 's1' },
        { id: 'b3', event: 'issue_comment', body: body(3), sha256: 's3' },
      ]),
    ).toEqual(['new', 'replay', 'new']);
    expect((await store.pendingDeliveries()).map((d) => [d.id, d.payload])).toEqual([
      ['b1', { n: 1 }],
      ['b3', { n: 3 }],
    ]);
    await store.close();
  });

  it('takes a signed body in once: the same body under new delivery ids is a replay, across a reopen', async () => {
    const store = await open();
    expect(await claim(store, 'd1', 'issues', { n: 1 }, 'same-body')).toBe('new');
    expect(await claim(store, 'd2', 'issues', { n: 1 }, 'same-body')).toBe('replay');
    await store.close();
    const reopened = await open();
    expect(await claim(reopened, 'd3', 'issues', { n: 1 }, 'same-body')).toBe('replay');
    expect(await claim(reopened, 'd1', 'issues', { n: 1 }, 'same-body')).toBe('seen');
    // Deliveries recorded before bodies were hashed (null) never collide with each other.
    expect(await claim(reopened, 'old1', 'issues', {}, null)).toBe('new');
    expect(await claim(reopened, 'old2', 'issues', {}, null)).toBe('new');
    await reopened.close();
  });

  it('one instance per store: a live holder refuses a second; a clean stop gives the store up', async () => {
    const first = await open();
    await first.acquireInstance();
    const run = await first.createRun(newRun());
    const second = await open();
    await expect(second.acquireInstance()).rejects.toThrow(StoreInUseError);
    await expect(second.acquireInstance()).rejects.toThrow(
      /another AgenticFix instance \(pid \d+ on .*\) serves the run store/,
    );
    expect(await second.heartbeat()).toBe(false);
    expect(await first.heartbeat()).toBe(true);
    await first.close();
    await second.acquireInstance();
    expect(run.instance_id).toMatch(/^[0-9a-f-]{36}$/); // each run names the instance that created it
    expect((await second.createRun(newRun())).instance_id).toMatch(/^[0-9a-f-]{36}$/);
    expect((await second.list()).map((r) => r.instance_id)[1]).not.toBe(run.instance_id);
    await second.close();
  });

  it('a gone holder does not hold a restart up; a live one does until its heartbeat is stale', async () => {
    const holder = (pid: number, host: string, heartbeatAgoMs: number, startedAgoMs = heartbeatAgoMs) =>
      backend.writeHolder({
        owner: 'x',
        host,
        pid,
        started_at: new Date(Date.now() - startedAgoMs).toISOString(),
        heartbeat_at: new Date(Date.now() - heartbeatAgoMs).toISOString(),
      });
    const attempt = async () => {
      const s = await open();
      try {
        await s.acquireInstance();
        return 'acquired';
      } catch (err) {
        return err instanceof StoreInUseError ? 'refused' : String(err);
      } finally {
        await s.close();
      }
    };
    await (await open()).close(); // the store exists
    // A crashed process on this host: its pid is gone, so the claim lapses at once.
    const dead = execa('true');
    await dead;
    await holder(dead.pid!, hostname(), 0);
    expect(await attempt()).toBe('acquired');
    // A live process on this host (pid 1 always is) keeps it; so does a fresh heartbeat from another host.
    await holder(1, hostname(), 0);
    expect(await attempt()).toBe('refused');
    await holder(process.pid + 1, 'other-host', 1000);
    expect(await attempt()).toBe('refused');
    // ... until its heartbeat is older than INSTANCE_STALE_MS (a crash elsewhere, a hang).
    await holder(1, 'other-host', INSTANCE_STALE_MS + 1000);
    expect(await attempt()).toBe('acquired');
    // Our own pid from before this process started: a restarted container (pid 1 again).
    await holder(process.pid, hostname(), 0, performance.now() + 5000);
    expect(await attempt()).toBe('acquired');
  });

  it('people without write access get one reply per issue per interval, durably', async () => {
    const store = await open();
    const hour = 3600_000;
    expect(await store.claimOutsiderReply('acme', 'calc', 7, hour)).toBe(true);
    expect(await store.claimOutsiderReply('acme', 'calc', 7, hour)).toBe(false);
    expect(await store.claimOutsiderReply('acme', 'calc', 8, hour)).toBe(true); // another issue
    await store.close();
    const reopened = await open();
    expect(await reopened.claimOutsiderReply('acme', 'calc', 7, hour)).toBe(false); // a restart resets nothing
    expect(await reopened.claimOutsiderReply('acme', 'calc', 7, 0)).toBe(true); // the interval has passed
    await reopened.close();
  });

  it('keeps GitHub writes until they land: due ones oldest first, deferred, replaced by id, across a reopen', async () => {
    const store = await open();
    const write = (id: string, next_at: string, body = `body of ${id}`) => ({
      id,
      run_id: 'r1',
      installation_id: 2 ** 40, // GitHub ids outgrow 32 bits
      owner: 'acme',
      repo: 'calc',
      issue: 7,
      comment_id: id.endsWith(':status') ? 2 ** 40 + 1 : null,
      body,
      next_at,
    });
    await store.queueWrite(write('r1:status', '2026-01-01T00:00:02.000Z', 'pending'));
    await store.queueWrite(write('r1:c1', '2026-01-01T00:00:01.000Z'));
    await store.queueWrite(write('r1:c2', '2026-01-01T00:00:09.000Z'));
    expect((await store.dueWrites('2026-01-01T00:00:05.000Z')).map((w) => w.id)).toEqual([
      'r1:c1',
      'r1:status',
    ]);
    await store.deferWrite('r1:c1', '2026-01-01T00:01:00.000Z');
    await store.close();
    const reopened = await open();
    expect(await reopened.dueWrites('2026-01-01T00:00:05.000Z')).toEqual([
      { ...write('r1:status', '2026-01-01T00:00:02.000Z', 'pending'), attempts: 0 },
    ]);
    expect((await reopened.dueWrites('2026-01-01T00:01:00.000Z')).map((w) => [w.id, w.attempts])).toEqual([
      ['r1:status', 0],
      ['r1:c2', 0],
      ['r1:c1', 1],
    ]);
    // A newer final status replaces the queued one, its tries starting over.
    await reopened.deferWrite('r1:status', '2026-01-01T00:00:03.000Z');
    await reopened.queueWrite(write('r1:status', '2026-01-01T00:00:04.000Z', 'done'));
    expect(
      (await reopened.dueWrites('2026-01-01T00:00:04.000Z')).map((w) => [w.id, w.body, w.attempts]),
    ).toEqual([['r1:status', 'done', 0]]);
    await reopened.removeWrite('r1:status');
    expect((await reopened.dueWrites('2026-01-02T00:00:00.000Z')).map((w) => w.id)).toEqual([
      'r1:c2',
      'r1:c1',
    ]);
    await reopened.close();
  });

  it('lists recent runs newest first, filtered by repository and state, up to a limit', async () => {
    const store = await open();
    const a = await store.createRun(newRun());
    const b = await store.createRun(newRun({ repo: 'other' }));
    const c = await store.createRun(newRun());
    await store.update(c.id, { state: 'running' });
    expect((await store.recent({ limit: 10 })).map((r) => r.id)).toEqual([c.id, b.id, a.id]);
    expect((await store.recent({ limit: 2 })).map((r) => r.id)).toEqual([c.id, b.id]);
    expect((await store.recent({ owner: 'acme', repo: 'calc', limit: 10 })).map((r) => r.id)).toEqual([
      c.id,
      a.id,
    ]);
    expect((await store.recent({ state: 'queued', limit: 10 })).map((r) => r.id)).toEqual([b.id, a.id]);
    await store.close();
  });

  it("appends a run's events in order, numbered per run, read after a sequence number, across a reopen", async () => {
    const store = await open();
    const [a, b] = [await store.createRun(newRun()), await store.createRun(newRun())];
    const ev = (type: string, body: Record<string, unknown> = {}) => ({
      ts: '2026-01-01T00:00:00Z',
      type,
      body,
    });
    await store.appendEvents(a.id, [ev('run_start', { n: 1 }), ev('tool_start', { args: { path: 'x' } })]);
    await store.appendEvents(b.id, [ev('status', { phase: 'queued' })]);
    await store.appendEvents(a.id, [ev('stop')]);
    await store.appendEvents(a.id, []);
    await store.close();
    const reopened = await open();
    expect(await reopened.events(a.id, 0, 100)).toEqual([
      { run_id: a.id, seq: 1, ts: '2026-01-01T00:00:00Z', type: 'run_start', body: { n: 1 } },
      { run_id: a.id, seq: 2, ts: '2026-01-01T00:00:00Z', type: 'tool_start', body: { args: { path: 'x' } } },
      { run_id: a.id, seq: 3, ts: '2026-01-01T00:00:00Z', type: 'stop', body: {} },
    ]);
    expect((await reopened.events(a.id, 1, 1)).map((e) => e.seq)).toEqual([2]);
    expect((await reopened.events(b.id, 0, 100)).map((e) => [e.seq, e.type])).toEqual([[1, 'status']]);
    expect(await reopened.events('r-none', 0, 100)).toEqual([]);
    await reopened.close();
  });

  it('processes opening one new store at once both find it migrated', async () => {
    const stores = await Promise.all([open(), open(), open()]);
    const run = await stores[0]!.createRun(newRun());
    expect(await stores[2]!.get(run.id)).toMatchObject({ id: run.id });
    await Promise.all(stores.map((s) => s.close()));
  });

  it('refuses a store a newer release migrated, naming both versions, and leaves it as it was', async () => {
    const store = await open();
    const run = await store.createRun(newRun());
    await store.close();
    const newer = MIGRATIONS.length + 3;
    await backend.schemaVersion(newer);
    const refused = await open().then(
      (s) => s.close().then(() => null),
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(StoreTooNewError);
    expect((refused as Error).message).toMatch(
      new RegExp(
        `has schema version ${newer}, newer than this AgenticFix ${buildInfo().version.replace(/\./g, '\\.')} knows \\(schema version ${MIGRATIONS.length}\\)`,
      ),
    );
    expect(await backend.schemaVersion()).toBe(newer); // not rewritten to this release's
    await backend.schemaVersion(MIGRATIONS.length);
    const again = await open();
    expect(await again.get(run.id)).toMatchObject({ id: run.id });
    await again.close();
  });

  it('prunes runs over before a time with their events, kept writes and deliveries; others stay', async () => {
    const store = await open();
    const ids = ['d-old', 'd-going', 'd-new', 'd-pending'];
    for (const id of ids) await claim(store, id, 'issues', { id }, null);
    for (const id of ids) await store.finishDelivery(id);
    const [old, going, recent, pending] = await Promise.all(
      ids.map((delivery_id, i) => store.createRun(newRun({ delivery_id, issue: i + 1 }))),
    );
    await store.update(old!.id, { state: 'done', finished_at: '2026-01-01T00:00:00.000Z' });
    await store.update(going!.id, { state: 'running' });
    await store.update(recent!.id, { state: 'failed', finished_at: '2026-03-01T00:00:00.000Z' });
    await store.update(pending!.id, { state: 'publish_pending', finished_at: '2026-01-01T00:00:00.000Z' });
    for (const run of [old!, recent!]) {
      await store.appendEvents(run.id, [{ ts: '2026-01-01T00:00:00Z', type: 'stop', body: {} }]);
      // An attempt's events, under its own id (pipeline/attempts.ts), go with its run.
      await store.appendEvents(`${run.id}-a2`, [{ ts: '2026-01-01T00:00:00Z', type: 'stop', body: {} }]);
      await store.queueWrite({
        id: `${run.id}:status`,
        run_id: run.id,
        installation_id: 1,
        owner: 'acme',
        repo: 'calc',
        issue: run.issue,
        comment_id: null,
        body: 'x',
        next_at: '2099-01-01T00:00:00.000Z',
      });
    }
    expect(await store.pruneRuns('2026-02-01T00:00:00.000Z')).toBe(1);
    expect(await store.get(old!.id)).toBeNull();
    expect(await store.events(old!.id, 0, 10)).toEqual([]);
    expect(await store.events(`${old!.id}-a2`, 0, 10)).toEqual([]);
    expect(await store.events(`${recent!.id}-a2`, 0, 10)).toHaveLength(1);
    expect(await store.deliveryRecorded('d-old')).toBe(false);
    expect((await store.dueWrites('2100-01-01T00:00:00.000Z')).map((w) => w.run_id)).toEqual([recent!.id]);
    for (const run of [going!, recent!, pending!]) expect(await store.get(run.id)).not.toBeNull();
    expect(await store.events(recent!.id, 0, 10)).toHaveLength(1);
    expect(await store.deliveryRecorded('d-new')).toBe(true);
    expect(await store.pruneRuns('2026-02-01T00:00:00.000Z')).toBe(0);
    await store.close();
  });
}
