import { once } from 'node:events';
import net from 'node:net';
import LeakCheckEnvironment, { GRACE_MS } from '../support/leak-environment.mjs';

// The environment the unit and app suites run in (jest.config.js): a suite that leaves something keeping
// its worker alive fails, naming it, instead of jest force-exiting the worker at the end of the run.
const environment = () =>
  new LeakCheckEnvironment(
    { projectConfig: { testEnvironmentOptions: {}, globals: {} }, globalConfig: {} },
    { console, docblockPragmas: {}, testPath: 'a.test.ts' },
  );

describe('the leak check of each suite (test/support/leak-environment.mjs)', () => {
  it('fails a suite that leaves a server listening, naming it; passes one that closed it', async () => {
    const env = environment();
    await env.setup();
    const server = net.createServer().listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as net.AddressInfo;
    try {
      await expect(env.teardown()).rejects.toThrow(
        new RegExp(`1 × TCPServerWrap[^]*Server listening on .*"port":${port}`),
      );
    } finally {
      server.close();
    }
    const clean = environment();
    await clean.setup();
    await expect(clean.teardown()).resolves.toBeUndefined();
  });

  it('names where a timer left armed was set', async () => {
    const env = environment();
    await env.setup();
    const timer = (env.global.setTimeout as typeof setTimeout)(() => undefined, 60_000);
    try {
      await expect(env.teardown()).rejects.toThrow(
        /1 × Timeout[^]*timer set\n[^]*leak-environment\.test\.ts/,
      );
    } finally {
      clearTimeout(timer);
    }
  });

  it('what ends within the grace jest gives a worker is no leak', async () => {
    const env = environment();
    await env.setup();
    const server = net.createServer().listen(0, '127.0.0.1');
    await once(server, 'listening');
    setTimeout(() => server.close(), GRACE_MS / 5);
    await expect(env.teardown()).resolves.toBeUndefined();
  });
});
