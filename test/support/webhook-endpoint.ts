import { rmSync } from 'node:fs';
import { request, type ClientRequest, type IncomingMessage } from 'node:http';
import path from 'node:path';
import { Probot } from 'probot';
import { SqliteRunStore } from '../../src/store/sqlite-store.js';
import { registry } from '../../src/trace/metrics.js';
import {
  listenForWebhooks,
  type WebhookServer,
  type WebhookServerOptions,
} from '../../src/webhook/server.js';
import { APP_ID, PRIVATE_KEY, quietLog, SECRET, tempDir } from './app.js';

export interface Endpoint {
  server: WebhookServer;
  store: SqliteRunStore;
  port: number;
  /** Closes the server and the store and removes the directory. */
  close(): Promise<void>;
}

type Limits = Pick<WebhookServerOptions, 'maxBytes' | 'inflightBytes' | 'bodyTimeoutMs'>;

/**
 * serve's webhook endpoint alone on a free loopback port: no handlers, a SQLite store of its own, the
 * test app's secret. `o` gives the intake limits and anything else the test is about.
 */
export async function startEndpoint(
  prefix: string,
  o: Limits & Partial<Omit<WebhookServerOptions, 'probot' | 'store' | keyof Limits>>,
): Promise<Endpoint> {
  const dir = tempDir(prefix);
  const store = new SqliteRunStore(path.join(dir, 'runs.db'));
  const server = await listenForWebhooks({
    probot: new Probot({ appId: APP_ID, privateKey: PRIVATE_KEY, secret: SECRET, log: quietLog }),
    register: () => {},
    store,
    webhookSecret: SECRET,
    port: 0,
    log: quietLog,
    ...o,
  });
  return {
    server,
    store,
    port: Number(new URL(server.url).port),
    close: async () => {
      await server.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Bytes of webhook bodies the endpoint holds now (its gauge on /metrics). */
export const heldBodyBytes = async (): Promise<number> =>
  (await registry.getSingleMetric('agenticfix_webhook_body_bytes')?.get())?.values[0]?.value ?? 0;

/**
 * A delivery to `port` that declares `declared` bytes, sends `sent` of them and then nothing more;
 * `headers` adds to (or replaces) an issues event's.
 */
export function unfinished(
  port: number,
  declared: number,
  sent: number,
  headers: Record<string, string> = {},
): { req: ClientRequest; answer: Promise<IncomingMessage> } {
  const req = request({
    host: '127.0.0.1',
    port,
    method: 'POST',
    path: '/api/github/webhooks',
    headers: {
      'content-type': 'application/json',
      'content-length': String(declared),
      'x-github-event': 'issues',
      'x-github-delivery': 'd-1',
      ...headers,
    },
  });
  req.on('error', () => {}); // the server closes what it refused
  const answer = new Promise<IncomingMessage>((resolve) => req.once('response', resolve));
  req.write(Buffer.alloc(sent, 0x20));
  return { req, answer };
}
