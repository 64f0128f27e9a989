import { execa, type ResultPromise } from 'execa';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { childAppEnv, type ChildRole } from '../../src/cli/app-env.js';
import type { RunningApp } from '../../src/app.js';
import type { Config } from '../../src/config/config.js';
import type { GitHubEmulator } from '../../src/emulator/github.js';
import { APP_ID, PRIVATE_KEY, startEmulatedApp } from './app.js';

export const CLI = fileURLToPath(new URL('../../dist/cli/index.js', import.meta.url));

/** Polls `check` every 100 ms (the checks ask Docker and the run store) until it holds or `ms` ran out. */
export async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  ms: number,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * `agenticfix serve` or `worker` from dist/ (build it first) as the app of `emu`, home `home`, in its own
 * process so a test can kill it; `out` is what it printed so far.
 */
export function startChild(
  emu: GitHubEmulator,
  role: ChildRole,
  home: string,
  modelUrl: string,
  overrides: Record<string, string> = {},
): { child: ResultPromise; out: () => string } {
  mkdirSync(home, { recursive: true });
  const env = childAppEnv(
    { ...role, home, githubUrl: emu.url, appId: APP_ID, privateKey: PRIVATE_KEY, modelUrl },
    overrides,
  );
  const child = execa('node', [CLI, role.role], { cwd: home, extendEnv: false, reject: false, env });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  return { child, out: () => out };
}

/** The app in this process on the Docker sandbox, the scripted model at `modelUrl`, taking emu's webhooks. */
export async function startDockerApp(
  emu: GitHubEmulator,
  config: Config,
  modelUrl: string,
  modelName: string,
): Promise<RunningApp> {
  const model = { kind: 'url' as const, baseUrl: modelUrl, name: modelName };
  const app = await startEmulatedApp(emu, { config, model, sandbox: 'docker' });
  emu.setWebhookUrl(app.url);
  return app;
}

/** A loopback port free a moment ago (bound, then closed), for a child to listen on. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}
