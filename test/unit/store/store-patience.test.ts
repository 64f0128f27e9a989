import { patientStore, storeUnreachable } from '../../../src/store/patient.js';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';
import { newRun } from '../../support/queue-contract.js';

/**
 * Issue 37, item 2: a run-state write failed at once when the store could not be reached. The embedded
 * store's outage is a file locked past its busy timeout (another process holding it); PostgreSQL's is
 * in store-outage.test.ts (a cluster of the test's own, killed and started again).
 */
describe('a patient store', () => {
  it('tells an unreachable store from a refused write', () => {
    const coded = (code: string, message = 'x') => Object.assign(new Error(message), { code });
    for (const e of [
      coded('SQLITE_BUSY'),
      coded('SQLITE_IOERR_WRITE'),
      coded('ECONNREFUSED'),
      coded('57P01'), // terminating connection due to administrator command
      coded('08006'),
      new Error('Connection terminated unexpectedly'),
    ])
      expect([e.message, storeUnreachable(e)]).toEqual([e.message, true]);
    for (const e of [
      coded('SQLITE_FULL'), // a full disk: the run's end is retried by the queue once space is back
      coded('SQLITE_CONSTRAINT_UNIQUE'),
      coded('23505'),
      new Error('unknown run r1'),
      'ECONNREFUSED',
    ])
      expect(storeUnreachable(e)).toBe(false);
  });

  it('waits out a locked SQLite store on a run-state write, logging the outage and its end; reads and refusals fail at once', async () => {
    const raw = new SqliteRunStore(':memory:');
    const lines: string[] = [];
    const log = {
      warn: (_: object, m: string) => lines.push(m),
      info: (_: object, m: string) => lines.push(m),
    };
    const store = patientStore(raw, { retryMs: 5000, service: 'sqlite', log });
    const run = await store.createRun(newRun(1));
    let busy = 2;
    const locked = () => Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
    const update = raw.update.bind(raw);
    raw.update = async (id, u) => {
      if (busy-- > 0) throw locked();
      return update(id, u);
    };
    expect(await store.update(run.id, { state: 'running' })).toMatchObject({ state: 'running' });
    expect(lines).toEqual(['sqlite unreachable', 'sqlite reachable again']);
    await expect(store.update('nope', { state: 'done' })).rejects.toThrow(/unknown run/);
    const get = raw.get.bind(raw);
    raw.get = async () => Promise.reject(locked());
    await expect(store.get(run.id)).rejects.toThrow(/locked/); // a read: not retried
    raw.get = get;
    // Past its patience the write fails, with the store's error.
    busy = 100;
    const patience = patientStore(raw, { retryMs: 300, service: 'sqlite' });
    await expect(patience.update(run.id, { state: 'done' })).rejects.toThrow(/locked/);
    await store.close();
  });
  // Issue 37 (faults left, item 4): a busy worker writes and reads many times during one outage; the
  // operator reads one line at its start and one at its end, not a line per failed call.
  it('logs one PostgreSQL outage as two lines, however many writes and reads fail during it', async () => {
    const raw = new SqliteRunStore(':memory:');
    const lines: string[] = [];
    const log = {
      warn: (_: object, m: string) => lines.push(m),
      info: (_: object, m: string) => lines.push(m),
    };
    const store = patientStore(raw, { retryMs: 10_000, service: 'postgresql', log });
    const runs = await Promise.all([1, 2, 3, 4].map((n) => store.createRun(newRun(n))));
    let down = true;
    const refused = () =>
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    for (const name of ['update', 'get'] as const) {
      const real = raw[name].bind(raw) as (...a: unknown[]) => Promise<unknown>;
      (raw as unknown as Record<string, unknown>)[name] = (...a: unknown[]) =>
        down ? Promise.reject(refused()) : real(...a);
    }
    const writes = runs.map((r) => store.update(r.id, { state: 'running' }));
    const reads = await Promise.all(runs.map((r) => store.get(r.id).catch((e: Error) => e.message)));
    expect(reads).toEqual(runs.map(() => 'connect ECONNREFUSED 127.0.0.1:5432'));
    await new Promise((r) => setTimeout(r, 1200)); // several tries of each write
    down = false;
    expect((await Promise.all(writes)).map((r) => r.state)).toEqual(runs.map(() => 'running'));
    expect(lines).toEqual(['postgresql unreachable', 'postgresql reachable again']);
    await raw.close();
  });
});
