import { jest } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';
import { RoutingBacklog } from '../../../src/webhook/backlog.js';
import { DeliveryRecorder } from '../../../src/webhook/recorder.js';

const tick = () => new Promise((r) => setTimeout(r, 1));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the webhook endpoint paces its work behind its answers', () => {
  test('deliveries recorded in the same moment share one transaction, each answered with its own claim', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'recorder-'));
    const store = new SqliteRunStore(path.join(dir, 'runs.db'));
    const batches: number[] = [];
    const claimDeliveries = store.claimDeliveries.bind(store);
    store.claimDeliveries = (batch) => (batches.push(batch.length), claimDeliveries(batch));
    const recorder = new DeliveryRecorder(store);
    const d = (id: string, sha256: string) => ({ id, event: 'issues', body: '{}', sha256 });
    const claims = await Promise.all(
      [d('a', 'h1'), d('b', 'h2'), d('c', 'h1'), d('a', 'h1')].map((x) => recorder.record(x)),
    );
    expect(claims).toEqual(['new', 'new', 'replay', 'seen']);
    expect(batches).toEqual([4]);
    expect(await recorder.record(d('e', 'h3'))).toBe('new');
    expect(batches).toEqual([4, 1]);
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('routing holds back while requests keep arriving, then runs at most `concurrency` at once', async () => {
    const backlog = new RoutingBacklog(20, 10_000, 2);
    let active = 0;
    let most = 0;
    const routed: number[] = [];
    const route = (i: number) => async () => {
      most = Math.max(most, ++active);
      await sleep(5);
      active--;
      routed.push(i);
    };
    for (let i = 0; i < 6; i++) {
      backlog.arrived();
      backlog.add(route(i));
      await tick();
    }
    expect(routed).toEqual([]); // a request arrived within the last 20 ms each time
    await backlog.idle();
    expect(routed).toEqual([0, 1, 2, 3, 4, 5]);
    expect(most).toBe(2);
  });

  test('by default, a burst arriving in batches 10 ms apart is routed only after its last batch', async () => {
    // A burst reaches the event loop one batch per turn; routing started between batches competes with
    // answering the rest of the same burst.
    // The batches' spacing must not depend on how loaded the machine is: the clock is jest's.
    jest.useFakeTimers();
    try {
      const backlog = new RoutingBacklog();
      const routedAt: number[] = [];
      const t0 = performance.now();
      for (let batch = 0; batch < 10; batch++) {
        for (let i = 0; i < 20; i++) {
          backlog.arrived();
          backlog.add(async () => void routedAt.push(performance.now() - t0));
        }
        await jest.advanceTimersByTimeAsync(10);
      }
      expect(routedAt).toEqual([]);
      await jest.advanceTimersByTimeAsync(1000);
      expect(routedAt).toHaveLength(200);
      expect(Math.min(...routedAt)).toBeGreaterThan(90);
    } finally {
      jest.useRealTimers();
    }
  });

  test('a steady stream of requests does not hold the oldest delivery past maxHold', async () => {
    const backlog = new RoutingBacklog(20, 60, 2);
    let routedAt = 0;
    const t0 = performance.now();
    backlog.arrived();
    backlog.add(async () => void (routedAt = performance.now() - t0));
    while (performance.now() - t0 < 300 && routedAt === 0) {
      backlog.arrived();
      await sleep(5);
    }
    expect(routedAt).toBeGreaterThanOrEqual(55);
    expect(routedAt).toBeLessThan(250);
    await backlog.idle();
  });
});
