import { createHmac } from 'node:crypto';
import { request, type ClientRequest, type IncomingMessage } from 'node:http';
import { registry } from '../../../src/trace/metrics.js';
import type { WebhookServer } from '../../../src/webhook/server.js';
import { SECRET } from '../../support/app.js';
import { startEndpoint, type Endpoint } from '../../support/webhook-endpoint.js';

/**
 * Red team (after issue 35): the cap on webhook bytes in flight is shared by every connection, and a
 * signature header of the right shape is all it takes to be read. A visitor who keeps the cap filled with
 * slow bodies (any `sha256=` and 64 hex digits) made every delivery of GitHub's get 503 for as long as they
 * kept it up: GitHub does not redeliver on its own, so labelled issues were lost. A body that arrives
 * needs room: the slowest body read for longer than a second gives it up.
 */

const MiB = 1024 * 1024;
const INFLIGHT = 4 * MiB;

const bodyBytes = async () =>
  (await registry.getSingleMetric('agenticfix_webhook_body_bytes')?.get())?.values[0]?.value ?? 0;

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

  /** A body that declares 24 MB, sends `sent` bytes and then nothing more. */
  function slow(sent: number): { req: ClientRequest; answer: Promise<IncomingMessage> } {
    const req = request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/api/github/webhooks',
      headers: {
        'content-type': 'application/json',
        'content-length': '24000000',
        'x-github-event': 'issues',
        'x-github-delivery': 'slow',
        'x-hub-signature-256': `sha256=${'0'.repeat(64)}`,
      },
    });
    req.on('error', () => {}); // the server closes what it refused
    const answer = new Promise<IncomingMessage>((resolve) => req.once('response', resolve));
    req.write(Buffer.alloc(sent, 0x20));
    return { req, answer };
  }

  it("five slow bodies fill the cap and stay: GitHub's signed delivery after them is still taken, and the cap holds", async () => {
    const conns = Array.from({ length: 5 }, () => slow(MiB));
    const refused: number[] = [];
    for (const c of conns) void c.answer.then((a) => refused.push(a.statusCode ?? 0));
    const deadline = Date.now() + 10_000;
    while ((await bodyBytes()) < INFLIGHT - 64 * 1024 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(await bodyBytes()).toBeGreaterThanOrEqual(INFLIGHT - 64 * 1024); // the cap is full
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
    expect(await bodyBytes()).toBeLessThanOrEqual(INFLIGHT);
    // The one that gave up its room was told so; the other three are still being read.
    const until503 = Date.now() + 3000;
    while (refused.length < 2 && Date.now() < until503) await new Promise((r) => setTimeout(r, 20));
    expect(refused).toEqual([503, 503]);
    for (const c of conns) c.req.destroy();
    const until = Date.now() + 5000;
    while ((await bodyBytes()) > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(await bodyBytes()).toBe(0);
  });
});
