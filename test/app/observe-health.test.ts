import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { observeRoutes } from '../../src/observe.js';

/**
 * Red team (after issue 35): /healthz needs no sign-in (it is for load balancers and Prometheus), and
 * each request ran every check: a store read and a ping of the Docker engine, one new connection to the
 * engine's socket each. 200 requests at once were 200 engine pings: anyone who reaches serve's port
 * could have it hammer the engine that every run (and every other process on the host) uses. Requests
 * that come while a round of checks is under way share its answer: one round at a time, whatever comes.
 */

describe('/healthz under a flood', () => {
  it('200 requests at once run the checks once (one round at a time); the answer is the same for all', async () => {
    let pings = 0;
    // The engine answers only once all 200 requests have reached the server, so every one of them
    // comes while the first round is under way, however slowly a loaded machine delivers them.
    let arrived = 0;
    let allIn: () => void = () => undefined;
    const gate = new Promise<void>((r) => (allIn = r));
    const routes = observeRoutes(
      {
        docker: async () => {
          pings += 1;
          await gate;
        },
      },
      null,
    );
    const server = createServer((req, res) => {
      if (++arrived === 200) allIn();
      void routes(req, res);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    try {
      const answers = await Promise.all(
        Array.from({ length: 200 }, () => fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.json())),
      );
      expect(pings).toBe(1); // was 200
      for (const a of answers) expect(a).toMatchObject({ status: 'ok', checks: { docker: { ok: true } } });
      // A request after that round ended looks again: health is never remembered.
      const before = pings;
      await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(pings).toBe(before + 1);
    } finally {
      server.close();
    }
  });
});
