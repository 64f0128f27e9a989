import { createHmac } from 'node:crypto';
import type { WebhookServer } from '../../../src/webhook/server.js';
import { SECRET } from '../../support/app.js';
import { heldBodyBytes, startEndpoint, unfinished, type Endpoint } from '../../support/webhook-endpoint.js';

/**
 * Red team (after issue 35): the cap on webhook bytes in flight is shared by every connection, and a
 * signature header of the right shape is all it takes to be read. A visitor who keeps the cap filled with
 * slow bodies (any `sha256=` and 64 hex digits) made every delivery of GitHub's get 503 for as long as they
 * kept it up: GitHub does not redeliver on its own, so labelled issues were lost. A body that arrives
 * needs room: the slowest body read for longer than a second gives it up.
 */

const MiB = 1024 * 1024;
const INFLIGHT = 4 * MiB;

describe('webhook bytes in flight: slow bodies do not keep deliveries out', () => {
  let endpoint: Endpoint;
  let server: WebhookServer;
  let port: number;
  beforeAll(async () => {
    endpoint = await startEndpoint('fair-', {
      maxBytes: 25_000_000,
      inflightBytes: INFLIGHT,
      bodyTimeoutMs: 30_000, // the default: the visitor need not hurry
    });
    ({ server, port } = endpoint);
  });
  afterAll(async () => endpoint?.close());

  it("five slow bodies fill the cap and stay: GitHub's signed delivery after them is still taken, and the cap holds", async () => {
    const conns = Array.from({ length: 5 }, () =>
      unfinished(port, 24_000_000, MiB, {
        'x-github-delivery': 'slow',
        'x-hub-signature-256': `sha256=${'0'.repeat(64)}`,
      }),
    );
    const refused: number[] = [];
    for (const c of conns) void c.answer.then((a) => refused.push(a.statusCode ?? 0));
    const deadline = Date.now() + 10_000;
    while ((await heldBodyBytes()) < INFLIGHT - 64 * 1024 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(await heldBodyBytes()).toBeGreaterThanOrEqual(INFLIGHT - 64 * 1024); // the cap is full
    await new Promise((r) => setTimeout(r, 1300)); // they keep it, well within the body deadline
    expect(refused).toEqual([503]); // the fifth found the cap full

    const body = JSON.stringify({ action: 'opened' });
    const res = await fetch(server.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'issues',
        'x-github-delivery': 'github-1',
        'x-hub-signature-256': `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`,
      },
      body,
    });
    expect(res.status).toBe(200); // was 503: "too many webhook bodies being received at once"
    expect(await res.json()).toEqual({ ok: true, outcome: 'ignored' });
    expect(await heldBodyBytes()).toBeLessThanOrEqual(INFLIGHT);
    // The one that gave up its room was told so; the other three are still being read.
    const until503 = Date.now() + 3000;
    while (refused.length < 2 && Date.now() < until503) await new Promise((r) => setTimeout(r, 20));
    expect(refused).toEqual([503, 503]);
    for (const c of conns) c.req.destroy();
    const until = Date.now() + 5000;
    while ((await heldBodyBytes()) > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(await heldBodyBytes()).toBe(0);
  });
});
