import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { RunStore, type NewRun } from '../src/queue/store.js';

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
    expect(store.claimDelivery('d1', 'issues', {})).toBe(true);
    expect(store.claimDelivery('d1', 'issues', {})).toBe(false);
    store.releaseDelivery('d1');
    expect(store.claimDelivery('d1', 'issues', {})).toBe(true);
    store.createRun(newRun({ delivery_id: 'd1' }));
    expect(() => store.createRun(newRun({ delivery_id: 'd1' }))).toThrow(/UNIQUE/);
    expect(store.list()).toHaveLength(1);
    store.close();
  });

  it('keeps an acknowledged delivery with its payload until its intake is done, across a reopen', () => {
    const store = new RunStore(file);
    store.claimDelivery('a', 'issues', { action: 'labeled', n: 1 });
    store.claimDelivery('b', 'issue_comment', { action: 'created', n: 2 });
    store.finishDelivery('a');
    store.close();
    const reopened = new RunStore(file);
    expect(reopened.pendingDeliveries()).toEqual([
      { id: 'b', event: 'issue_comment', payload: { action: 'created', n: 2 } },
    ]);
    expect(reopened.claimDelivery('a', 'issues', {})).toBe(false); // done deliveries stay claimed
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

  it('migrates the schema once and records its version', () => {
    new RunStore(file).close();
    new RunStore(file).close();
    const db = new Database(file);
    expect(db.pragma('user_version', { simple: true })).toBe(3);
    db.close();
  });
});
