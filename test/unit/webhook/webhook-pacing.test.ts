import { jest } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';
import { RoutingBacklog } from '../../../src/webhook/backlog.js';
import { DeliveryRecorder } from '../../../src/webhook/recorder.js';

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

  describe("on jest's clock: how loaded the machine is must not decide what counts as quiet", () => {
    beforeEach(() => jest.useFakeTimers());
    afterEach(() => jest.useRealTimers());

    /** A backlog and what it routed, in order; `deliver` is one request arriving and then added. */
    const watched = (backlog = new RoutingBacklog()) => {
      const routed: (string | number)[] = [];
      const deliver = (name: string | number) => {
        backlog.arrived();
        backlog.add(async () => void routed.push(name));
      };
      return { backlog, routed, deliver };
    };

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
      backlog.arrived(); // a burst under way: its first delivery is not alone
      for (let i = 0; i < 6; i++) {
        backlog.arrived();
        backlog.add(route(i));
        await jest.advanceTimersByTimeAsync(5);
      }
      expect(routed).toEqual([]); // a request arrived within the last 20 ms each time
      await jest.advanceTimersByTimeAsync(1000);
      await backlog.idle();
      expect(routed).toEqual([0, 1, 2, 3, 4, 5]);
      expect(most).toBe(2);
    });

    test('by default, a burst arriving in batches 10 ms apart is routed only after its last batch', async () => {
      // A burst reaches the event loop one batch per turn; routing started between batches competes
      // with answering the rest of the same burst.
      const backlog = new RoutingBacklog();
      const routedAt: number[] = [];
      const t0 = performance.now();
      for (let batch = 0; batch < 10; batch++) {
        // As the endpoint sees a batch: its requests arrive, then are recorded together and added.
        for (let i = 0; i < 20; i++) backlog.arrived();
        for (let i = 0; i < 20; i++) backlog.add(async () => void routedAt.push(performance.now() - t0));
        await jest.advanceTimersByTimeAsync(10);
      }
      expect(routedAt).toEqual([]);
      await jest.advanceTimersByTimeAsync(1000);
      expect(routedAt).toHaveLength(200);
      expect(Math.min(...routedAt)).toBeGreaterThan(90);
    });

    test('a delivery alone since the last quiet gap is routed at once; one in a burst waits for quiet', async () => {
      // The quiet window protects a burst's answers; a lone label would only wait 50 ms for nothing.
      const { backlog, routed, deliver } = watched();
      deliver('first');
      await jest.advanceTimersByTimeAsync(0);
      expect(routed).toEqual(['first']);
      // 50 ms without a request is a quiet gap: the next one is alone again.
      await jest.advanceTimersByTimeAsync(50);
      deliver('second');
      await jest.advanceTimersByTimeAsync(0);
      expect(routed).toEqual(['first', 'second']);
      // A request 10 ms before it: part of a burst, routed 50 ms after the last request.
      await jest.advanceTimersByTimeAsync(60);
      backlog.arrived();
      await jest.advanceTimersByTimeAsync(10);
      deliver('in a burst');
      await jest.advanceTimersByTimeAsync(49);
      expect(routed).toEqual(['first', 'second']);
      await jest.advanceTimersByTimeAsync(1);
      expect(routed).toEqual(['first', 'second', 'in a burst']);
    });

    test("a burst whose first delivery was added alone routes only that one before the burst's quiet", async () => {
      const { routed, deliver } = watched();
      deliver(0);
      await jest.advanceTimersByTimeAsync(2);
      for (let i = 1; i < 100; i++) deliver(i);
      await jest.advanceTimersByTimeAsync(49);
      expect(routed).toEqual([0]);
      await jest.advanceTimersByTimeAsync(1);
      expect(routed).toHaveLength(100);
    });

    test('a steady stream of requests does not hold the oldest delivery past maxHold', async () => {
      const { backlog, routed, deliver } = watched(new RoutingBacklog(20, 60, 2));
      backlog.arrived(); // the stream was under way
      deliver('oldest');
      for (let ms = 0; ms < 55; ms += 5) {
        backlog.arrived();
        await jest.advanceTimersByTimeAsync(5);
      }
      expect(routed).toEqual([]);
      backlog.arrived();
      await jest.advanceTimersByTimeAsync(5);
      expect(routed).toEqual(['oldest']);
    });
  });
});
