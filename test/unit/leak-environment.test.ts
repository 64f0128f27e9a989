import { once } from 'node:events';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import LeakCheckEnvironment, { GRACE_MS } from '../support/leak-environment.mjs';

// The environment every suite runs in (jest.config.js): a suite that leaves something keeping its
// worker alive fails, naming it, instead of jest force-exiting the worker at the end of the run.
const environment = () =>
  new LeakCheckEnvironment(
    { projectConfig: { testEnvironmentOptions: {}, globals: {} }, globalConfig: {} },
    { console, docblockPragmas: {}, testPath: 'a.test.ts' },
  );

interface Project {
  displayName: string;
  testEnvironment: string;
  testEnvironmentOptions?: { containers?: boolean };
}

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

  it('runs every project, and checks containers in those that use the engine', async () => {
    const config = (await import(pathToFileURL(path.resolve('jest.config.js')).href)) as {
      default: { projects: Project[] };
    };
    const projects = config.default.projects;
    expect(projects.map((p) => p.displayName)).toEqual(['unit', 'app', 'cli', 'docker', 'services']);
    for (const p of projects)
      expect([p.displayName, p.testEnvironment]).toEqual([
        p.displayName,
        '<rootDir>/test/support/leak-environment.mjs',
      ]);
    expect(projects.filter((p) => p.testEnvironmentOptions?.containers).map((p) => p.displayName)).toEqual([
      'docker',
      'services',
    ]);
  });

  it('names the tests that failed before a leak (jest then reports only the leak)', async () => {
    const env = environment();
    await env.setup();
    const root = { name: 'ROOT_DESCRIBE_BLOCK' };
    const test = {
      name: 'closes it',
      parent: { name: 'a server', parent: root },
      errors: [[new Error('boom\nat x')]],
    };
    env.handleTestEvent({ name: 'test_done', test });
    env.handleTestEvent({ name: 'test_done', test: { ...test, name: 'passes', errors: [] } });
    env.handleTestEvent({ name: 'hook_failure', hook: { type: 'afterAll' }, error: new Error('bang') });
    const server = net.createServer().listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const error = await env.teardown().then(
        () => null,
        (e: Error) => e.message,
      );
      expect(error?.split('\n').slice(-3)).toEqual([
        'jest reports this instead of the tests, which failed before it:',
        '  a server › closes it: boom',
        '  afterAll hook: bang',
      ]);
    } finally {
      server.close();
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
