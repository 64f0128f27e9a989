import { fileURLToPath } from 'node:url';
import { startSetupServer, type SetupServer } from '../../../src/cli/setup-server.js';
import { itHasConnectionLimits, LIMITS } from '../../support/connections.js';

/**
 * Red team: `agenticfix setup` (and serve before the app is registered) listens on HOST:PORT, often
 * reachable, for as long as the operator takes, with no connection cap and Node's 60 s header deadline
 * checked every 30 s: anyone who reaches it could hold idle connections until the process's file
 * descriptors ran out, and the operator's own browser could no longer open the page. It now has
 * serve's limits (limitedServer).
 */

const PACKAGE_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

let server: SetupServer;
let port: number;

beforeAll(async () => {
  server = await startSetupServer({
    host: '127.0.0.1',
    port: 0,
    packageDir: PACKAGE_ROOT,
    env: {},
    trustProxy: false,
    save: () => {},
    limits: LIMITS,
  });
  port = Number(new URL(server.url).port);
});
afterAll(async () => {
  await server?.close();
});

itHasConnectionLimits({
  port: () => port,
  path: '/probot',
  what: "the operator's page",
  served: async () => {
    const res = await fetch(server.url);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('Register the GitHub App');
  },
});
