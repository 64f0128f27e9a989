import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../../../src/config/config.js';
import { RUN_LABEL } from '../../../src/environment/docker.js';
import { DockerEnvironmentBuilder } from '../../../src/images/builder.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { startEngineProxy, type EngineProxy } from '../../support/engine-proxy.js';
import { itIf } from '../../support/skip.js';

/**
 * Faults, third round: a Docker engine that hangs (it answers pings only) at a run's end. The test calls
 * were bounded; the builder's were not: the run's release (its leases listed and removed), GC's image
 * listing, an image removal, a build's inspections and a tool call's image check waited for ever, and
 * with them the run, which had written its result but never gave its worker slot back. Each is now
 * given up after the engine-call bound (AGENTICFIX_ENGINE_CALL_TIMEOUT_S, 1 s here). The app reaches the engine through a
 * proxy the test hangs; the shared engine is untouched.
 */

const engine = await needDocker();
const OWNER = 1000;
const CALL_MS = 1000;
const cfg = {
  ...loadConfig({}).sandbox,
  memoryBytes: 128 * 1024 * 1024,
  pidsLimit: 64,
  engineCallTimeoutMs: CALL_MS,
  buildTimeoutMs: 3000,
  // The build reaches the engine's build endpoint (the build network is bounded the same way).
  buildNetwork: { mode: 'unrestricted' as const },
};

/** Settles within `ms`, or fails saying what did not happen (never a hang up to jest's limit). */
const within = <T>(what: string, p: Promise<T>, ms: number): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not within ${ms / 1000} s: ${what}`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
};
const failure = (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (err: unknown) => (err instanceof Error ? err.message : String(err)),
  );

itIf(engine)(
  "a run's end on an engine that hangs: release, GC, image removal, an image check and a build end within the engine-call bound",
  async () => {
    const dirs = ['wt', 'proxy'].map((n) => mkdtempSync(path.join(tmpdir(), `agenticfix-hang-${n}-`)));
    const [wt, proxyDir] = dirs as [string, string];
    writeFileSync(path.join(wt, '.git'), `gitdir: ${wt}.git\n`);
    if (process.getuid?.() === 0) execFileSync('chown', ['-R', `${OWNER}:${OWNER}`, wt]);
    const run = `hang-release-${process.pid}`;
    let proxy: EngineProxy | undefined;
    try {
      proxy = await startEngineProxy(proxyDir, { hangOn: /^GET \S*\/version /, afterMs: 0 });
      const proxied = new Docker({ socketPath: proxy.host.slice('unix://'.length) });
      const builder = new DockerEnvironmentBuilder(proxied, cfg);
      // The run's warm container, started while the engine is well.
      const call = { argv: ['true'], worktree: wt, timeoutMs: 30_000, maxOutputBytes: 4096 };
      expect(await builder.runSandboxFor(BASE_IMAGE, run).run(call)).toMatchObject({ status: 'passed' });

      // The engine hangs: from now on only its pings are answered.
      proxy.arm();
      void proxied.version().catch(() => undefined);
      await new Promise((r) => setTimeout(r, 200));

      // Each ends within a few bounds (was: never).
      const bound = 4 * CALL_MS + 2000;
      expect(await within('the run released', failure(builder.release(run)), bound)).toMatch(
        /did not answer a listing of the run's image leases within 1 s/,
      );
      expect(await within('GC', failure(builder.gc({ runId: run })), bound)).toMatch(
        /did not answer a listing of images within 1 s/,
      );
      // A tool call asks whether its image is still there: an engine error, not "gone" (the call then fails).
      expect(await within('an image check', builder.sandboxFor(BASE_IMAGE, run).available(), bound)).toBe(
        true,
      );
      expect(await within('an image removal', builder.removeImage(`agenticfix-env:${run}`), bound)).toBe(
        false,
      );
      const build = await within(
        'a build',
        builder.build({ dockerfile: `FROM ${BASE_IMAGE}\n`, worktree: wt, runId: run }),
        cfg.buildTimeoutMs + bound,
      );
      expect(build).toMatchObject({ success: false, engine_gone: true });
    } finally {
      await proxy?.close();
      // What the hung engine kept: removed through the real engine, as the sweep does.
      const docker = new Docker();
      for (const c of await docker.listContainers({ all: true, filters: { label: [`${RUN_LABEL}=${run}`] } }))
        await docker.getContainer(c.Id).remove({ force: true });
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  },
  60_000,
);
