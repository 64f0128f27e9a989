import { createHmac, randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { ServerResponse } from 'node:http';
import path from 'node:path';
import pino from 'pino';
import { Probot } from 'probot';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';
import type { Claim, DeliveryClaim } from '../../../src/store/store.js';
import { listenForWebhooks } from '../../../src/webhook/server.js';
import { APP_ID, PRIVATE_KEY, quietLog, SECRET, tempDir } from '../../support/app.js';

/**
 * Issue 40 (acknowledgement p99 at 200 concurrent): a burst recorded in one group commit is answered
 * in one turn, and no answer of it waits behind another delivery's log line (a synchronous write each):
 * the lines are written when the deliveries are routed, after the burst.
 */
test("a burst's answers are all written before any of its 'delivery taken' lines, which come with its routing", async () => {
  const N = 4;
  const dir = tempDir('answers-');
  const store = new SqliteRunStore(path.join(dir, 'runs.db'));
  // The store answers once all N are claimed, so that their answers come in one turn whatever the batches.
  const claim = store.claimDeliveries.bind(store);
  const held: { batch: readonly DeliveryClaim[]; resolve: (c: Claim[]) => void }[] = [];
  store.claimDeliveries = (batch) =>
    new Promise((resolve) => {
      held.push({ batch, resolve });
      if (held.reduce((n, h) => n + h.batch.length, 0) === N)
        for (const h of held) void claim(h.batch).then(h.resolve);
    });
  // Answers written so far: every ServerResponse's end.
  const realEnd = ServerResponse.prototype.end;
  let answered = 0;
  ServerResponse.prototype.end = function (this: ServerResponse, ...args: unknown[]) {
    answered++;
    return realEnd.apply(this, args as never);
  } as typeof realEnd;
  // Each line with the answers written when it was.
  const lines: { msg: string; answered: number }[] = [];
  const log = pino(
    { level: 'info' },
    { write: (l: string) => void lines.push({ msg: (JSON.parse(l) as { msg: string }).msg, answered }) },
  );
  const server = await listenForWebhooks({
    probot: new Probot({ appId: APP_ID, privateKey: PRIVATE_KEY, secret: SECRET, log: quietLog }),
    register: () => {},
    store,
    webhookSecret: SECRET,
    maxBytes: 1_000_000,
    inflightBytes: 8_000_000,
    bodyTimeoutMs: 5000,
    port: 0,
    log: log as never,
  });
  try {
    const deliver = async (i: number) => {
      const body = JSON.stringify({ action: 'labeled', issue: { number: i } });
      const res = await fetch(server.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-github-event': 'issues',
          'x-github-delivery': randomUUID(),
          'x-hub-signature-256': `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`,
        },
        body,
      });
      return [res.status, await res.json()];
    };
    expect(await Promise.all(Array.from({ length: N }, (_, i) => deliver(i + 1)))).toEqual(
      Array(N).fill([200, { ok: true, outcome: 'new' }]),
    );
    // Nothing is logged for them while the burst may go on: the lines come with their routing.
    await new Promise((r) => setImmediate(r));
    expect(lines.filter((l) => l.msg === 'delivery taken')).toEqual([]);
    await server.idle();
    const taken = lines.filter((l) => l.msg === 'delivery taken');
    expect(taken.map((l) => l.answered)).toEqual(Array(N).fill(N));
  } finally {
    ServerResponse.prototype.end = realEnd;
    await server.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
