import { rmSync } from 'node:fs';
import path from 'node:path';
import { Probot } from 'probot';
import { SqliteRunStore } from '../../src/store/sqlite-store.js';
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
