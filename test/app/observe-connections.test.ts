import { listenObserve, observeRoutes } from '../../src/observe.js';
import { itHasConnectionLimits, LIMITS } from '../support/connections.js';

/**
 * Red team: a worker's own listener (/healthz, /ping, /metrics on AGENTICFIX_WORKER_PORT, often bound
 * where Prometheus can reach it) had no connection cap and Node's 60 s header deadline, checked every
 * 30 s: anyone who reaches it could hold idle connections until the worker's file descriptors ran out
 * (then no run, store or git call could open a file). It now has serve's limits (limitedServer).
 */

let listener: Awaited<ReturnType<typeof listenObserve>>;
let port: number;

beforeAll(async () => {
  listener = await listenObserve(observeRoutes({}, null), 0, '127.0.0.1', LIMITS);
  port = Number(new URL(listener.url).port);
});
afterAll(async () => {
  await listener?.close();
});

itHasConnectionLimits({
  port: () => port,
  path: '/healthz',
  what: '/healthz',
  served: async () => {
    const res = await fetch(`${listener.url}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: 'ok' });
  },
});
