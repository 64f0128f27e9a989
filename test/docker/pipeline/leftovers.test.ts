import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { ConfigError, loadConfig, type Config } from '../../../src/config/config.js';
import { DEADLINE_LABEL, DockerSandbox, hostPath, OWNER_LABEL } from '../../../src/environment/docker.js';
import { processOwner } from '../../../src/environment/lending.js';
import { sweepContainers } from '../../../src/environment/startup.js';
import { prepareHost } from '../../../src/pipeline/startup.js';
import { startApp } from '../../../src/app.js';
import { APP_ID, PRIVATE_KEY, quietLog, SECRET } from '../../support/app.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { tempDir } from '../../support/git-fixtures.js';
import { compose } from '../../../src/cli/compose.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const engine = await needDocker();
const d = describeIf(engine);
const docker = new Docker();
const asRoot = process.getuid?.() === 0;
const runId = `leftovers-${process.pid}-${Date.now()}`;

let tmp: { dir: string; cleanup: () => Promise<void> };
let config: Config;

/** This test's containers only: the engine is shared. */
const ours = (run: string) =>
  docker.listContainers({ all: true, filters: { label: [`agenticfix.run=${run}`] } });

/**
 * A separate process that runs one container through the real DockerSandbox (from dist/), as a run
 * would, and waits for it: the parent SIGKILLs it mid-run, as the OOM killer or `kill -9` would.
 */
function sandboxChild(run: string, worktree: string, argv: string[], timeoutMs: number): ChildProcess {
  const script = `
    import Docker from 'dockerode';
    import { loadConfig } from ${JSON.stringify(path.join(ROOT, 'dist/config/config.js'))};
    import { DockerSandbox } from ${JSON.stringify(path.join(ROOT, 'dist/environment/docker.js'))};
    const sandbox = new DockerSandbox(new Docker(), process.env.IMAGE, loadConfig({}).sandbox, process.env.RUN);
    await sandbox.run({ argv: JSON.parse(process.env.ARGV), worktree: process.env.WT, timeoutMs: Number(process.env.TIMEOUT), maxOutputBytes: 4096 });
  `;
  return spawn(process.execPath, ['--input-type=module', '-e', script], {
    cwd: ROOT,
    stdio: 'ignore',
    env: {
      ...process.env,
      IMAGE: BASE_IMAGE,
      RUN: run,
      WT: worktree,
      ARGV: JSON.stringify(argv),
      TIMEOUT: String(timeoutMs),
    },
  });
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const kill9 = async (child: ChildProcess) => {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited; // reaped: its pid is gone, not a zombie
};

/** uid of every entry under `dir`, the directory included. */
const owners = (dir: string) =>
  new Set(
    [dir, ...readdirSync(dir, { recursive: true }).map((r) => path.join(dir, String(r)))].map(
      (p) => statSync(p).uid,
    ),
  );

beforeAll(async () => {
  tmp = await tempDir('agenticfix-leftovers-');
  config = loadConfig(
    { AGENTICFIX_HOME: path.join(tmp.dir, 'home'), AGENTICFIX_BASE_IMAGE: BASE_IMAGE },
    tmp.dir,
  );
  mkdirSync(config.worktreeDir, { recursive: true });
}, 180_000);

afterAll(async () => {
  if (engine.ok)
    for (const run of [runId, `${runId}-deadline`, `${runId}-finished`])
      for (const c of await ours(run))
        await docker
          .getContainer(c.Id)
          .remove({ force: true })
          .catch(() => undefined);
  await tmp.cleanup();
});

d('a killed app leaves nothing running (real engine, SIGKILLed child process)', () => {
  it('the start-up cleanup removes the orphaned container and hands the worktree back', async () => {
    const wt = path.join(config.worktreeDir, 'run-killed');
    mkdirSync(path.join(wt, 'src'), { recursive: true });
    writeFileSync(path.join(wt, 'src', 'a.py'), 'print(1)\n');
    const child = sandboxChild(runId, wt, ['sleep', '100000'], 600_000);
    const [c] = await until('the test container', async () => {
      const list = await ours(runId);
      return list.some((x) => x.State === 'running') ? list : undefined;
    });
    expect(c!.Labels[OWNER_LABEL]).toBe(processOwner(child.pid));
    expect(Number(c!.Labels[DEADLINE_LABEL])).toBeGreaterThan(Date.now() + 500_000);
    // The root-owned worktree is lent to nobody while the container runs.
    if (asRoot) expect(owners(wt)).toEqual(new Set([65534]));
    // A live run's container is left alone by a sweep (another process starting meanwhile).
    expect(await sweepContainers(docker)).not.toContain(c!.Id);

    await kill9(child);
    // The attack as it was done: the app is gone, the container keeps running, the worktree stays lent.
    await new Promise((r) => setTimeout(r, 1000));
    expect((await docker.getContainer(c!.Id).inspect()).State.Running).toBe(true);
    if (asRoot) expect(statSync(wt).uid).toBe(65534);

    const cleanup = await prepareHost({ config, workspaces: compose(config).workspaces, docker: true });
    expect(cleanup.containers).toContain(c!.Id);
    expect(await ours(runId)).toHaveLength(0);
    if (asRoot) {
      expect(cleanup.restored_worktrees).toEqual([wt]);
      expect(owners(wt)).toEqual(new Set([0]));
    }
    expect(readdirSync(config.worktreeDir).filter((n) => n.endsWith('.lent.json'))).toEqual([]);
  }, 120_000);

  it('a container whose in-container deadline passes ends on its own, without the app', async () => {
    const run = `${runId}-deadline`;
    const wt = path.join(config.worktreeDir, 'run-deadline');
    mkdirSync(wt, { recursive: true });
    // 1 s of host timeout: the container's own deadline is 5 s later.
    const child = sandboxChild(run, wt, ['sleep', '100000'], 1000);
    const [c] = await until('the test container', async () => {
      const list = await ours(run);
      return list.some((x) => x.State === 'running') ? list : undefined;
    });
    await kill9(child);
    const state = await until(
      'the container to end by itself',
      async () => {
        const s = (await docker.getContainer(c!.Id).inspect()).State;
        return s.Running ? undefined : s;
      },
      30_000,
    );
    expect(state.ExitCode).toBe(137); // `timeout -s KILL` as PID 1
    expect(Date.parse(state.FinishedAt) - Date.parse(state.StartedAt)).toBeLessThan(20_000);
    expect(await sweepContainers(docker)).toContain(c!.Id); // its owner is dead
    expect(await ours(run)).toHaveLength(0);
    await prepareHost({ config, workspaces: compose(config).workspaces, docker: true }); // hands the worktree back
    if (asRoot) expect(statSync(wt).uid).toBe(0);
  }, 120_000);
});

d('containers of runs the store knows are over', () => {
  it('are removed even while their owner lives; running ones are not', async () => {
    const run = `${runId}-finished`;
    const wt = path.join(config.worktreeDir, 'run-finished');
    mkdirSync(wt, { recursive: true });
    const sandbox = new DockerSandbox(docker, BASE_IMAGE, config.sandbox, run);
    const outcome = sandbox.run({
      argv: ['sleep', '100000'],
      worktree: wt,
      timeoutMs: 600_000,
      maxOutputBytes: 4096,
    });
    const [c] = await until('the test container', async () => {
      const list = await ours(run);
      return list.some((x) => x.State === 'running') ? list : undefined;
    });
    expect(await sweepContainers(docker, { isFinished: async () => false })).not.toContain(c!.Id);
    // A wall clock that jumped forward (an NTP step, a VM resumed) puts every deadline in the past: this
    // live process's container of a running run stays (faults, second round; it was removed mid-call).
    const dayLater = Date.now() + 86_400_000;
    expect(await sweepContainers(docker, { isFinished: async () => false, now: dayLater })).not.toContain(
      c!.Id,
    );
    expect(await sweepContainers(docker, { isFinished: async (id) => id === run })).toContain(c!.Id);
    // The run in this process ends instead of waiting (killed: failed, or gone before inspection: error).
    expect(['failed', 'error']).toContain((await outcome).status);
    expect(await ours(run)).toHaveLength(0);
  }, 120_000);
});

d('container deployment: the start-up mount self-check (real engine)', () => {
  it('passes when the engine sees AGENTICFIX_HOME, also through a correct AGENTICFIX_HOST_HOME', async () => {
    await expect(
      prepareHost({ config, workspaces: compose(config).workspaces, docker: true, checkMounts: true }),
    ).resolves.toBeDefined();
    // The app sees its home as `seen`; the engine's host has it at `real`.
    const real = path.join(tmp.dir, 'host-data');
    const seen = path.join(tmp.dir, 'app-view');
    mkdirSync(path.join(real, 'worktrees'), { recursive: true });
    symlinkSync(real, seen);
    const mapped = loadConfig(
      { AGENTICFIX_HOME: seen, AGENTICFIX_HOST_HOME: real, AGENTICFIX_BASE_IMAGE: BASE_IMAGE },
      tmp.dir,
    );
    expect(hostPath(path.join(seen, 'worktrees', 'r1'), mapped.sandbox.hostHome)).toBe(
      path.join(real, 'worktrees', 'r1'),
    );
    expect(hostPath('/elsewhere/r1', mapped.sandbox.hostHome)).toBe('/elsewhere/r1');
    await expect(
      prepareHost({
        config: mapped,
        workspaces: compose(mapped).workspaces,
        docker: true,
        checkMounts: true,
      }),
    ).resolves.toBeDefined();
  }, 120_000);

  it('fails with what to mount when AGENTICFIX_HOST_HOME is wrong (the engine mounts an empty directory)', async () => {
    const wrong = path.join(tmp.dir, 'not-the-home');
    mkdirSync(wrong);
    const bad = loadConfig(
      {
        AGENTICFIX_HOME: config.worktreeDir.replace(/\/worktrees$/, ''),
        AGENTICFIX_HOST_HOME: wrong,
        AGENTICFIX_BASE_IMAGE: BASE_IMAGE,
      },
      tmp.dir,
    );
    const err = await prepareHost({
      config: bad,
      workspaces: compose(bad).workspaces,
      docker: true,
      checkMounts: true,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/could not be read back through a container/);
    expect((err as Error).message).toMatch(/AGENTICFIX_HOST_HOME=.*not-the-home is not the host path/);
    expect((err as Error).message).toMatch(/-v \/srv\/agenticfix:\/srv\/agenticfix/);
    // `serve` stops before it listens: startApp rejects with the same message.
    const started = startApp({
      ...compose(bad),
      config: { ...bad, dbPath: path.join(tmp.dir, 'app.sqlite') },
      appId: APP_ID,
      privateKey: PRIVATE_KEY,
      webhookSecret: SECRET,
      port: 0,
      checkMounts: true,
      log: quietLog,
    });
    await expect(started).rejects.toThrow(/AGENTICFIX_HOST_HOME=.*not-the-home is not the host path/);
    // The probe is gone from the worktree dir either way.
    expect(readdirSync(config.worktreeDir).filter((n) => n.startsWith('.mount-check'))).toEqual([]);
    expect(existsSync(path.join(wrong, 'worktrees'))).toBe(true); // what the engine mounted instead: empty
    expect(
      readdirSync(path.join(wrong, 'worktrees')).flatMap((n) =>
        readdirSync(path.join(wrong, 'worktrees', n)),
      ),
    ).toEqual([]);
  }, 120_000);
});
