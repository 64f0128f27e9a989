import { createHmac } from 'node:crypto';
import { Agent, request } from 'node:http';
import { loadConfig } from '../../../src/config/config.js';
import { registry } from '../../../src/trace/metrics.js';
import type { WebhookServer } from '../../../src/webhook/server.js';
import { SECRET } from '../../support/app.js';
import { heldBodyBytes, startEndpoint, unfinished, type Endpoint } from '../../support/webhook-endpoint.js';

/**
 * Issue 35, items 4 and 6: what reaches the webhook endpoint before its signature is checked holds no
 * memory beyond a ceiling (unsigned bodies are not read at all; slow ones end at a deadline; all bodies
 * together stay under a cap), and made-up event names do not become metric labels.
 */

const MiB = 1024 * 1024;
const INFLIGHT = 8 * MiB;

describe('webhook intake before the signature', () => {
  let endpoint: Endpoint;
  let server: WebhookServer;
  let port: number;
  beforeAll(async () => {
    endpoint = await startEndpoint('intake-', {
      maxBytes: 25_000_000,
      inflightBytes: INFLIGHT,
      bodyTimeoutMs: 1500,
      routes: async (req, res) => {
        if (req.url !== '/metrics') return false;
        res.end(await registry.metrics());
        return true;
      },
    });
    ({ server, port } = endpoint);
  });
  afterAll(async () => endpoint?.close());

  const within = async <T>(p: Promise<T>, ms: number, what: string): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer: ${what}`)), ms);
    });
    try {
      return await Promise.race([p, late]);
    } finally {
      clearTimeout(timer); // a deadline left armed keeps the worker alive (the leak check fails the suite)
    }
  };

  it('40 unsigned, unfinished 24 MB bodies are refused (401) before their bodies are read: nothing is held', async () => {
    const held: number[] = [];
    const conns = Array.from({ length: 40 }, () => unfinished(port, 24_000_000, 64 * 1024, {}));
    held.push(await heldBodyBytes());
    const answers = await within(
      Promise.all(conns.map((c) => c.answer)),
      10_000,
      'unsigned bodies are still being read',
    );
    held.push(await heldBodyBytes());
    expect(answers.map((a) => a.statusCode)).toEqual(Array(40).fill(401));
    expect(held).toEqual([0, 0]);
    for (const c of conns) c.req.destroy();
  });

  it('40 slow bodies with a signature header: together they never hold more than the cap; the rest get 503, the slow ones 408', async () => {
    const signature = `sha256=${'0'.repeat(64)}`;
    const conns = Array.from({ length: 40 }, () =>
      unfinished(port, 24_000_000, 0, { 'x-hub-signature-256': signature }),
    );
    let most = 0;
    // Each sends 1 MiB: 40 MiB in all against a cap of 8 MiB.
    for (let round = 0; round < 4; round++) {
      for (const c of conns) if (!c.req.destroyed) c.req.write(Buffer.alloc(256 * 1024, 0x20));
      await new Promise((r) => setTimeout(r, 50));
      most = Math.max(most, await heldBodyBytes());
    }
    const statuses = (
      await within(Promise.all(conns.map((c) => c.answer)), 15_000, 'slow bodies never refused')
    ).map((a) => a.statusCode);
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(INFLIGHT);
    expect(statuses.filter((s) => s === 503).length).toBeGreaterThan(0);
    expect(statuses.filter((s) => s === 408).length).toBeGreaterThan(0);
    expect(statuses.every((s) => s === 503 || s === 408)).toBe(true);
    for (const c of conns) c.req.destroy();
    expect(await heldBodyBytes()).toBe(0);
  });

  it('a signed delivery still goes through, and its bytes are released', async () => {
    const body = JSON.stringify({ action: 'opened' });
    const res = await fetch(server.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'issues',
        'x-github-delivery': 'signed-1',
        'x-hub-signature-256': `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`,
      },
      body,
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, outcome: 'ignored' });
    expect(await heldBodyBytes()).toBe(0);
  });

  it('20,000 posts with made-up X-GitHub-Event headers do not grow /metrics', async () => {
    const lines = async () => (await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).split('\n');
    const before = await lines();
    const agent = new Agent({ keepAlive: true, maxSockets: 50 });
    const post = (i: number) =>
      new Promise<number>((resolve, reject) => {
        const req = request(
          {
            agent,
            host: '127.0.0.1',
            port,
            method: 'POST',
            path: '/api/github/webhooks',
            headers: { 'x-github-event': `made-up-${i}`, 'content-length': '2' },
          },
          (res) => {
            res.resume();
            res.once('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.once('error', reject);
        req.end('{}');
      });
    for (let i = 0; i < 20_000; i += 200)
      expect(new Set(await Promise.all(Array.from({ length: 200 }, (_, j) => post(i + j))))).toEqual(
        new Set([401]),
      );
    agent.destroy();
    const after = await lines();
    const deliveries = after.filter((l) => l.startsWith('agenticfix_webhook_deliveries_total{'));
    expect(deliveries.some((l) => l.includes('made-up'))).toBe(false);
    expect(deliveries.find((l) => l.includes('event="other",outcome="refused"'))).toMatch(/ 20000$/);
    // Bounded, not one series per name (it was 20,000 lines more): the refused line, and the odd process
    // series (a GC kind seen for the first time) that appear on their own.
    expect(after.length).toBeLessThanOrEqual(before.length + 20);
  }, 120_000);

  it("the per-body default is no larger than GitHub's own 25 MB cap", () => {
    expect(loadConfig({}).app.webhookMaxBytes).toBeLessThanOrEqual(25_000_000);
  });
});
