import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { hostname } from 'node:os';
import Database from 'better-sqlite3';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { INSTANCE_STALE_MS, RunStore, StoreInUseError, type NewRun } from '../src/queue/store.js';

const newRun = (over: Partial<NewRun> = {}): NewRun => ({
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

describe('RunStore', () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'store-'));
    file = path.join(dir, 'db', 'runs.sqlite');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('creates, updates and lists runs; survives reopening', () => {
    const store = new RunStore(file);
    const run = store.createRun(newRun({ model: 'm1', token_budget: 5000 }));
    expect(run).toMatchObject({
      state: 'queued',
      model: 'm1',
      token_budget: 5000,
      comment_ids: [],
      pr_number: null,
    });
    store.update(run.id, {
      state: 'running',
      started_at: 'now',
      verdict: 'verified',
      tokens: 1234,
      pr_number: 3,
    });
    store.addComment(run.id, 11);
    store.addComment(run.id, 12);
    store.close();

    const again = new RunStore(file);
    expect(again.get(run.id)).toMatchObject({
      state: 'running',
      verdict: 'verified',
      tokens: 1234,
      pr_number: 3,
      comment_ids: [11, 12],
    });
    expect(again.issueForPr('acme', 'calc', 3)).toBe(7);
    expect(again.issueForPr('acme', 'calc', 4)).toBeNull();
    again.close();
  });

  it("lists an issue's runs newest first", () => {
    const store = new RunStore(file);
    const a = store.createRun(newRun());
    const b = store.createRun(newRun());
    store.createRun(newRun({ issue: 8 }));
    expect(store.forIssue('acme', 'calc', 7).map((r) => r.id)).toEqual([b.id, a.id]);
    store.close();
  });

  it('claims a delivery once; a released claim can be taken again; one run per delivery', () => {
    const store = new RunStore(file);
    expect(store.claimDelivery('d1', 'issues', {}, 'h1')).toBe('new');
    expect(store.claimDelivery('d1', 'issues', {}, 'h1')).toBe('seen'); // GitHub's redeliver: same id, same body
    store.releaseDelivery('d1');
    expect(store.claimDelivery('d1', 'issues', {}, 'h1')).toBe('new');
    store.createRun(newRun({ delivery_id: 'd1' }));
    expect(() => store.createRun(newRun({ delivery_id: 'd1' }))).toThrow(/UNIQUE/);
    expect(store.list()).toHaveLength(1);
    store.close();
  });

  it('keeps an acknowledged delivery with its payload until its intake is done, across a reopen', () => {
    const store = new RunStore(file);
    store.claimDelivery('a', 'issues', { action: 'labeled', n: 1 }, 'ha');
    store.claimDelivery('b', 'issue_comment', { action: 'created', n: 2 }, 'hb');
    store.finishDelivery('a');
    store.close();
    const reopened = new RunStore(file);
    expect(reopened.pendingDeliveries()).toEqual([
      { id: 'b', event: 'issue_comment', payload: { action: 'created', n: 2 }, body_sha256: 'hb' },
    ]);
    expect(reopened.claimDelivery('a', 'issues', {}, 'ha')).toBe('seen'); // done deliveries stay claimed
    reopened.close();
  });

  it('after a crash marks queued and running runs interrupted and returns them', () => {
    const store = new RunStore(file);
    const queued = store.createRun(newRun());
    const running = store.createRun(newRun({ issue: 8 }));
    store.update(running.id, { state: 'running', status_comment_id: 99 });
    const done = store.createRun(newRun({ issue: 9 }));
    store.update(done.id, { state: 'done' });
    // The process dies here: no close(), no final updates.

    const restarted = new RunStore(file);
    const interrupted = restarted.markInterrupted();
    expect(interrupted.map((r) => r.id).sort()).toEqual([queued.id, running.id].sort());
    expect(interrupted.find((r) => r.id === running.id)).toMatchObject({
      state: 'interrupted',
      stop_reason: 'interrupted',
      status_comment_id: 99,
    });
    expect(restarted.get(done.id)!.state).toBe('done');
    expect(restarted.markInterrupted()).toEqual([]);
    restarted.close();
    store.close();
  });

  it('takes a signed body in once: the same body under new delivery ids is a replay, across a reopen', () => {
    const store = new RunStore(file);
    expect(store.claimDelivery('d1', 'issues', { n: 1 }, 'same-body')).toBe('new');
    expect(store.claimDelivery('d2', 'issues', { n: 1 }, 'same-body')).toBe('replay');
    store.close();
    const reopened = new RunStore(file);
    expect(reopened.claimDelivery('d3', 'issues', { n: 1 }, 'same-body')).toBe('replay');
    expect(reopened.claimDelivery('d1', 'issues', { n: 1 }, 'same-body')).toBe('seen');
    // Deliveries recorded before bodies were hashed (null) never collide with each other.
    expect(reopened.claimDelivery('old1', 'issues', {}, null)).toBe('new');
    expect(reopened.claimDelivery('old2', 'issues', {}, null)).toBe('new');
    reopened.close();
  });

  it('one instance per store: a live holder refuses a second, a gone one does not hold a restart up', async () => {
    const first = new RunStore(file);
    first.acquireInstance();
    const run = first.createRun(newRun());
    const second = new RunStore(file);
    expect(() => second.acquireInstance()).toThrow(StoreInUseError);
    expect(() => second.acquireInstance()).toThrow(
      /another AgenticFix instance \(pid \d+ on .*\) serves the run store/,
    );
    expect(second.heartbeat()).toBe(false);
    expect(first.heartbeat()).toBe(true);
    first.close(); // a clean stop gives the store up
    second.acquireInstance();
    expect(run.instance_id).toMatch(/^[0-9a-f-]{36}$/); // each run names the instance that created it
    expect(second.createRun(newRun()).instance_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(second.list().map((r) => r.instance_id)[1]).not.toBe(run.instance_id);
    second.close();

    const db = new Database(file);
    const holder = (pid: number, host: string, heartbeatAgoMs: number, startedAgoMs = heartbeatAgoMs) =>
      db
        .prepare(
          `INSERT OR REPLACE INTO instance (id, owner, host, pid, started_at, heartbeat_at) VALUES (1, 'x', ?, ?, ?, ?)`,
        )
        .run(
          host,
          pid,
          new Date(Date.now() - startedAgoMs).toISOString(),
          new Date(Date.now() - heartbeatAgoMs).toISOString(),
        );
    const attempt = () => {
      const s = new RunStore(file);
      try {
        s.acquireInstance();
        return 'acquired';
      } catch (err) {
        return err instanceof StoreInUseError ? 'refused' : String(err);
      } finally {
        s.close();
      }
    };
    // A crashed process on this host: its pid is gone, so the claim lapses at once.
    const dead = execa('true');
    await dead;
    holder(dead.pid!, hostname(), 0);
    expect(attempt()).toBe('acquired');
    // A live process on this host (pid 1 always is) keeps it; so does a fresh heartbeat from another host.
    holder(1, hostname(), 0);
    expect(attempt()).toBe('refused');
    holder(process.pid + 1, 'other-host', 1000);
    expect(attempt()).toBe('refused');
    // ... until its heartbeat is older than INSTANCE_STALE_MS (a crash elsewhere, a hang).
    holder(1, 'other-host', INSTANCE_STALE_MS + 1000);
    expect(attempt()).toBe('acquired');
    // Our own pid from before this process started: a restarted container (pid 1 again).
    holder(process.pid, hostname(), 0, performance.now() + 5000);
    expect(attempt()).toBe('acquired');
    db.close();
  });

  it('people without write access get one reply per issue per interval, durably', () => {
    const store = new RunStore(file);
    const hour = 3600_000;
    expect(store.claimOutsiderReply('acme', 'calc', 7, hour)).toBe(true);
    expect(store.claimOutsiderReply('acme', 'calc', 7, hour)).toBe(false);
    expect(store.claimOutsiderReply('acme', 'calc', 8, hour)).toBe(true); // another issue
    store.close();
    const reopened = new RunStore(file);
    expect(reopened.claimOutsiderReply('acme', 'calc', 7, hour)).toBe(false); // a restart resets nothing
    expect(reopened.claimOutsiderReply('acme', 'calc', 7, 0)).toBe(true); // the interval has passed
    reopened.close();
  });

  it('migrates the schema once and records its version', () => {
    new RunStore(file).close();
    new RunStore(file).close();
    const db = new Database(file);
    expect(db.pragma('user_version', { simple: true })).toBe(5);
    db.close();
  });

  test('a claimed delivery survives the process being killed right after the claim', async () => {
    // The real store (from dist/) in another process, SIGKILLed as soon as claimDelivery returned:
    // what the webhook's 200 promises must already be on disk, not in a buffer of the dead process.
    const store = path.join(fileURLToPath(new URL('..', import.meta.url)), 'dist/queue/store.js');
    const script = `
      import { RunStore } from ${JSON.stringify(store)};
      const s = new RunStore(${JSON.stringify(file)});
      const claim = s.claimDelivery('d-crash', 'issues', { n: 1 }, 'f'.repeat(64));
      process.stdout.write(claim + '\\n');
      process.kill(process.pid, 'SIGKILL');`;
    const child = await execa(process.execPath, ['--input-type=module', '-e', script], { reject: false });
    expect(child.signal).toBe('SIGKILL');
    expect(child.stdout).toBe('new');
    const s = new RunStore(file);
    expect(s.pendingDeliveries()).toEqual([
      { id: 'd-crash', event: 'issues', payload: { n: 1 }, body_sha256: 'f'.repeat(64) },
    ]);
    expect(s.claimDelivery('d-other', 'issues', { n: 1 }, 'f'.repeat(64))).toBe('replay');
    s.close();
  });
});
