import { jest } from '@jest/globals';
import { createHmac, randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { metrics, registry } from '../../../src/trace/metrics.js';
import type { WebhookServer } from '../../../src/webhook/server.js';
import { SECRET } from '../../support/app.js';
import { startEndpoint, type Endpoint } from '../../support/webhook-endpoint.js';

/**
 * Issue 40 (acknowledgement p99 at 200 concurrent): what answering a delivery costs the event loop.
 * The answer goes out as one chunk with its length, and the endpoint's metrics are figures handed
 * to prom-client at scrape, not a labelled `inc`/`set` for each delivery and body chunk.
 */
describe('what an acknowledgement costs', () => {
  let endpoint: Endpoint;
  let server: WebhookServer;
  beforeAll(async () => {
    endpoint = await startEndpoint('answer-cost-', {
      maxBytes: 1_000_000,
      inflightBytes: 8_000_000,
      bodyTimeoutMs: 5000,
    });
    server = endpoint.server;
  });
  afterAll(async () => endpoint?.close());

  const signed = (i: number) => {
    const body = JSON.stringify({ action: 'labeled', issue: { number: i } });
    return {
      body,
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'issues',
        'x-github-delivery': randomUUID(),
        'x-hub-signature-256': `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`,
      },
    };
  };

  it('an answer is its head and body with their length, not chunked encoding', async () => {
    const url = new URL(server.url);
    const { body, headers } = signed(1);
    const head = [`POST ${url.pathname} HTTP/1.1`, `host: ${url.host}`, 'connection: close'];
    for (const [k, v] of Object.entries(headers)) head.push(`${k}: ${v}`);
    head.push(`content-length: ${Buffer.byteLength(body)}`);
    // Connection: close, so the answer is all the bytes until the server ends the connection.
    const raw = await new Promise<string>((resolve, reject) => {
      const chunks: Buffer[] = [];
      const socket = connect(Number(url.port), url.hostname, () =>
        socket.end(`${head.join('\r\n')}\r\n\r\n${body}`),
      );
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('end', () => resolve(Buffer.concat(chunks).toString('latin1')));
      socket.on('error', reject);
    });
    const [answerHead, answerBody] = raw.split('\r\n\r\n');
    expect(answerHead).toMatch(/^HTTP\/1\.1 200 /);
    expect(answerHead).not.toMatch(/transfer-encoding/i);
    expect(answerBody).toBe('{"ok":true,"outcome":"new"}');
    expect(answerHead).toMatch(new RegExp(`\r\ncontent-length: ${answerBody!.length}(\r\n|$)`, 'i'));
  });

  it('20 deliveries at once arm no body deadline each: one timer serves them all', async () => {
    const armed = jest.spyOn(globalThis, 'setTimeout');
    try {
      const statuses = await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const { body, headers } = signed(200 + i);
          return (await fetch(server.url, { method: 'POST', headers, body })).status;
        }),
      );
      expect(statuses).toEqual(Array(20).fill(200));
      // The body deadline (5 s here); the endpoint's other timers (routing's quiet wait) are not per delivery.
      expect(armed.mock.calls.filter(([, ms]) => ms === 5000).length).toBeLessThanOrEqual(1);
    } finally {
      armed.mockRestore();
    }
    await server.idle();
  });

  it('20 deliveries make no labelled inc or set; a scrape shows all of them and the bodies released', async () => {
    const scrape = async () => {
      const lines = (await registry.metrics()).split('\n');
      const n = lines.find((l) =>
        l.startsWith('agenticfix_webhook_deliveries_total{event="issues",outcome="new"}'),
      );
      const held = lines.find((l) => l.startsWith('agenticfix_webhook_body_bytes '));
      return { n: Number(n?.split(' ')[1] ?? 0), held: Number(held?.split(' ')[1]) };
    };
    const before = await scrape();
    const inc = jest.spyOn(metrics.deliveries, 'inc');
    const set = jest.spyOn(metrics.webhookBodyBytes, 'set');
    try {
      const statuses = await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const { body, headers } = signed(100 + i);
          return (await fetch(server.url, { method: 'POST', headers, body })).status;
        }),
      );
      expect(statuses).toEqual(Array(20).fill(200));
      await server.idle();
      expect(inc).not.toHaveBeenCalled();
      expect(set).not.toHaveBeenCalled();
    } finally {
      inc.mockRestore();
      set.mockRestore();
    }
    expect(await scrape()).toEqual({ n: before.n + 20, held: 0 });
    // Counted once: a second scrape adds nothing.
    expect((await scrape()).n).toBe(before.n + 20);
  });
});
