import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../../../src/config/config.js';
import { DockerSandbox, RUN_LABEL } from '../../../src/environment/docker.js';
import type { RunOutcome, RunRequest } from '../../../src/environment/types.js';
import { WarmSandbox } from '../../../src/environment/warm.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { startEngineProxy, type EngineProxy } from '../../support/engine-proxy.js';
import { itIf } from '../../support/skip.js';

/**
 * Faults, second round: a Docker engine that hangs (a deadlocked dockerd: it still answers its ping,
 * nothing else). The engine-gone check pings, so it saw nothing; a test call's wait or output stream,
 * its kill and its container's removal were awaited without a bound: the call, and with it the run, its
 * worker slot and the lock, waited for ever (cancelling did not help: it only sends a kill).
 * Now a call ends by its own deadline plus a bounded margin, marked as the engine's failure, so the run
 * stops as an infrastructure error; what is left in the engine is the sweep's. The app reaches the
 * engine through a proxy the test hangs; the shared engine is untouched.
 */

const engine = await needDocker();
const OWNER = 1000;
const cfg = { ...loadConfig({}).sandbox, memoryBytes: 128 * 1024 * 1024, pidsLimit: 64 };

/** Settles within `ms`, or fails saying what did not happen (never a hang up to jest's limit). */
const within = <T>(what: string, p: Promise<T>, ms: number): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not within ${ms / 1000} s: ${what}`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
};

function worktree(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-hang-'));
  writeFileSync(path.join(dir, '.git'), `gitdir: ${dir}.git\n`);
  if (process.getuid?.() === 0) execFileSync('chown', ['-R', `${OWNER}:${OWNER}`, dir]);
  return dir;
}

const req = (wt: string): RunRequest => ({
  argv: ['sh', '-c', 'echo started; sleep 300'],
  worktree: wt,
  timeoutMs: 1000,
  maxOutputBytes: 4096,
});

itIf(engine)(
  "an engine that hangs mid-call (it answers pings only): the call ends by its deadline, the engine's failure",
  async () => {
    const proxyDir = () => mkdtempSync(path.join(tmpdir(), 'agenticfix-hang-proxy-'));
    const dirs = [worktree(), worktree(), proxyDir(), proxyDir()];
    const runs = [`hang-warm-${process.pid}`, `hang-call-${process.pid}`];
    const proxies: EngineProxy[] = [];
    try {
      // The warm sandbox hangs in its exec's output stream; the per-call one in its container's wait.
      const [warmProxy, callProxy] = await Promise.all([
        startEngineProxy(dirs[2]!, { hangOn: /^POST \S*\/exec\/\w+\/start /, afterMs: 300 }),
        startEngineProxy(dirs[3]!, { hangOn: /^POST \S*\/containers\/\w+\/wait/, afterMs: 300 }),
      ]);
      proxies.push(warmProxy!, callProxy!);
      const through = (p: EngineProxy) => new Docker({ socketPath: p.host.slice('unix://'.length) });
      const warm = new WarmSandbox(through(warmProxy!), BASE_IMAGE, cfg, runs[0]);
      const call = new DockerSandbox(through(callProxy!), BASE_IMAGE, cfg, runs[1]);
      for (const p of proxies) p.arm();

      const outcomes: RunOutcome[] = await within(
        'both calls ended', // was: never
        Promise.all([warm.run(req(dirs[0]!)), call.run(req(dirs[1]!))]),
        40_000,
      );
      for (const o of outcomes) {
        expect(o).toMatchObject({ status: 'error', engine_gone: true });
        expect(o.detail).toMatch(
          /^infrastructure error: the Docker engine did not end the call within \d+ s of its deadline/,
        );
      }
      await within('the warm sandbox closed', warm.close(), 20_000);
    } finally {
      await Promise.all(proxies.map((p) => p.close()));
      // What the hung calls left: removed through the real engine, as the sweep does.
      const docker = new Docker();
      for (const run of runs)
        for (const c of await docker.listContainers({
          all: true,
          filters: { label: [`${RUN_LABEL}=${run}`] },
        }))
          await docker.getContainer(c.Id).remove({ force: true });
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  },
  60_000,
);
