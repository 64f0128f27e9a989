import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Probot } from 'probot';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';
import { listenForWebhooks, type WebhookServer } from '../../../src/webhook/server.js';
import { APP_ID, PRIVATE_KEY, quietLog, SECRET, tempDir } from '../../support/app.js';

/**
 * Red team: serve's port set no connection cap and kept Node's 60 s header deadline (checked every 30 s).
 * Idle connections cost a visitor nothing and each holds a file descriptor: ~1,000 of them exhausted a
 * 1,024 soft limit, and then nothing (a delivery, the store, git) could open a file. Now past
 * AGENTICFIX_WEBHOOK_MAX_CONNECTIONS a new connection is closed unanswered, and one that has not sent
 * its headers within AGENTICFIX_WEBHOOK_HEADERS_TIMEOUT_S is answered 408 and closed.
 */

let dir: string;
let store: SqliteRunStore;
let server: WebhookServer;
let port: number;
const opened: net.Socket[] = [];

beforeAll(async () => {
  dir = tempDir('conns-');
  store = new SqliteRunStore(path.join(dir, 'runs.db'));
  server = await listenForWebhooks({
    probot: new Probot({ appId: APP_ID, privateKey: PRIVATE_KEY, secret: SECRET, log: quietLog }),
    register: () => {},
    store,
    webhookSecret: SECRET,
    maxBytes: 25_000_000,
    inflightBytes: 64 * 1024 * 1024,
    bodyTimeoutMs: 30_000,
    maxConnections: 3,
    headersTimeoutMs: 1000,
    port: 0,
    log: quietLog,
  });
  port = Number(new URL(server.url).port);
});
afterAll(async () => {
  for (const s of opened) s.destroy();
  await server?.close();
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A raw connection, with what the server sent on it and whether the server closed it. */
async function connect(): Promise<{ socket: net.Socket; got: () => string; closed: () => boolean }> {
  const socket = net.connect(port, '127.0.0.1');
  opened.push(socket);
  let got = '';
  let closed = false;
  socket.on('data', (d) => (got += d.toString()));
  socket.on('error', () => {});
  socket.on('close', () => (closed = true));
  await once(socket, 'connect');
  return { socket, got: () => got, closed: () => closed };
}

const until = async (ok: () => boolean, ms: number) => {
  for (const end = Date.now() + ms; !ok() && Date.now() < end;) await new Promise((r) => setTimeout(r, 50));
};

/** A signed delivery of an event the app ignores, as GitHub sends it; its status. */
async function deliver(): Promise<number> {
  const body = '{"zen":"Keep it logically awesome."}';
  const res = await fetch(server.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-github-event': 'ping',
      'x-github-delivery': 'ping-1',
      'x-hub-signature-256': `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`,
    },
    body,
  });
  await res.text();
  return res.status;
}

it('a connection that sends its headers slowly is answered 408 and closed at the header deadline', async () => {
  const slow = await connect();
  slow.socket.write('POST /api/github/webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n'); // and no more
  await until(slow.closed, 4000);
  expect(slow.closed()).toBe(true); // was: still open (Node's 60 s, checked every 30 s)
  expect(slow.got()).toMatch(/^HTTP\/1\.1 408/);
});

it('connections past the cap are closed unanswered; a signed delivery gets through once one closes', async () => {
  const idle = [await connect(), await connect(), await connect()];
  const extra = await connect();
  await until(extra.closed, 2000);
  expect(extra.closed()).toBe(true); // was: held open like the others
  expect(extra.got()).toBe('');
  expect(idle.some((c) => c.closed())).toBe(false);
  idle[0]!.socket.destroy();
  await until(idle[0]!.closed, 2000);
  expect(await deliver()).toBe(200);
});
