import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { networkInterfaces, release, tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { ConfigError, loadConfig, type Config } from '../../../src/config/config.js';
import { DockerSandbox } from '../../../src/environment/docker.js';
import { checkRuntime, engineRuntimes } from '../../../src/environment/startup.js';
import type { RunRequest } from '../../../src/environment/types.js';
import { prepareHost } from '../../../src/pipeline/startup.js';
import { BASE_IMAGE, needDocker, needRunsc } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { compose } from '../../../src/cli/compose.js';

/** A host uid that is not root, so the run maps to a non-root user in the container. */
const OWNER = 1000;
const asRoot = process.getuid?.() === 0;

const engine = await needDocker();
const gvisor = await needRunsc();
const docker = new Docker();
const dirs: string[] = [];

function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-runsc-'));
  dirs.push(dir);
  return dir;
}

/** A worktree as the sandbox gets it: a `.git` file (bind-mounted read-only) and a non-root owner. */
function worktree(): string {
  const dir = tempDir();
  writeFileSync(path.join(dir, '.git'), 'gitdir: /nowhere\n');
  if (asRoot) execFileSync('chown', ['-R', `${OWNER}:${OWNER}`, dir]);
  return dir;
}

const configOf = (runtime: string, home = tempDir()): Config =>
  loadConfig({ AGENTICFIX_RUNTIME: runtime, AGENTICFIX_BASE_IMAGE: BASE_IMAGE, AGENTICFIX_HOME: home }, home);

const sandboxOf = (runtime: 'runc' | 'runsc', limits: Partial<Config['sandbox']> = {}) =>
  new DockerSandbox(
    docker,
    BASE_IMAGE,
    { ...configOf(runtime).sandbox, ...limits },
    `runsc-test-${process.pid}`,
  );

const req = (wt: string, script: string): RunRequest => ({
  argv: ['sh', '-c', script],
  worktree: wt,
  timeoutMs: 60_000,
  maxOutputBytes: 64 * 1024,
});

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('AGENTICFIX_RUNTIME', () => {
  it('is runc unless set to runsc; any other value stops the start-up', () => {
    expect(loadConfig({}).sandbox.runtime).toBe('runc');
    expect(loadConfig({ AGENTICFIX_RUNTIME: 'runsc' }).sandbox.runtime).toBe('runsc');
    expect(() => loadConfig({ AGENTICFIX_RUNTIME: 'kata' })).toThrow(/AGENTICFIX_RUNTIME/);
  });
});

describeIf(engine)('AGENTICFIX_RUNTIME at start-up (real engine)', () => {
  it('runsc on an engine without it stops the start-up with one line saying what to do', async () => {
    // The engine's own answer, less any runsc entry: what an engine without gVisor registered says.
    const withoutRunsc = {
      info: async () => {
        const info = (await docker.info()) as { Runtimes: Record<string, unknown> };
        delete info.Runtimes.runsc;
        return info;
      },
    } as unknown as Docker;
    const err = await checkRuntime(withoutRunsc, configOf('runsc')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    const text = (err as Error).message;
    expect(text).not.toContain('\n');
    expect(text).toMatch(
      /^AGENTICFIX_RUNTIME=runsc but the Docker engine has no "runsc" runtime \(it has: .*runc/,
    );
    expect(text).toMatch(/register it with dockerd in \/etc\/docker\/daemon\.json/);
    // runc needs nothing registered.
    await expect(checkRuntime(withoutRunsc, configOf('runc'))).resolves.toBeUndefined();
  });

  it('prepareHost agrees with the runtimes the engine lists', async () => {
    const registered = (await engineRuntimes(docker)).includes('runsc');
    const started = prepareHost({
      config: configOf('runsc'),
      workspaces: compose(configOf('runsc')).workspaces,
      docker: true,
    });
    if (registered) await expect(started).resolves.toBeDefined();
    else await expect(started).rejects.toThrow(/no "runsc" runtime/);
  });
});

describeIf(gvisor)('the sandbox under gVisor (AGENTICFIX_RUNTIME=runsc, real engine)', () => {
  const kernel = 'cat /proc/version; dmesg 2>&1 | head -n 3';

  it("runs the tests on gVisor's kernel, where runc runs them on the host's", async () => {
    const wt = worktree();
    const underRunsc = await sandboxOf('runsc').run(req(wt, kernel));
    expect(underRunsc.status).toBe('passed');
    expect(underRunsc.stdout).toMatch(/Starting gVisor/);
    expect(underRunsc.stdout).not.toContain(release());

    const underRunc = await sandboxOf('runc').run(req(wt, kernel));
    expect(underRunc.stdout).toContain(`Linux version ${release()}`);
    expect(underRunc.stdout).not.toMatch(/gVisor/);
    expect(sandboxOf('runsc').describe()).toMatchObject({ runtime: 'runsc', network: 'none' });
  });

  it('keeps the limits: not root, read-only root and .git, the worktree and /tmp writable, no network', async () => {
    // A listener of the test's own on a host address: the container must not reach it.
    const hostIp = Object.values(networkInterfaces())
      .flat()
      .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
    expect(hostIp).toBeDefined();
    let connections = 0;
    const server: Server = createServer((s) => {
      connections++;
      s.destroy();
    });
    await new Promise<void>((r) => server.listen(0, '0.0.0.0', r));
    const port = (server.address() as AddressInfo).port;
    try {
      const wt = worktree();
      const out = await sandboxOf('runsc').run(
        req(
          wt,
          `
dmesg | grep -q gVisor && echo gvisor
echo "uid $(id -u)"
for p in /etc/evil /usr/evil /evil /workspace/.git; do (echo x >> "$p") 2>/dev/null && echo "WROTE $p" || echo "denied $p"; done
echo ok > /workspace/written.txt && echo ok > /tmp/x && echo writable
tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sed 's/^/iface /'
timeout 5 bash -c 'echo hi > /dev/tcp/${hostIp}/${port}' 2>/dev/null && echo CONNECTED || echo "no network"
`,
        ),
      );
      expect(out.status).toBe('passed');
      expect(out.stdout).toMatch(/^gvisor$/m);
      expect(out.stdout).toContain(`uid ${asRoot ? OWNER : process.getuid?.()}`);
      expect(out.stdout).not.toContain('WROTE');
      expect(out.stdout.match(/^denied /gm)).toHaveLength(4);
      expect(out.stdout).toMatch(/^writable$/m);
      expect(out.stdout.match(/^iface .*/gm)).toEqual(['iface lo']);
      expect(out.stdout).toMatch(/^no network$/m);
      expect(connections).toBe(0);
      expect(readFileSync(path.join(wt, '.git'), 'utf8')).toBe('gitdir: /nowhere\n');
      expect(statSync(path.join(wt, 'written.txt')).uid).toBe(statSync(wt).uid);
    } finally {
      server.close();
    }
  });

  it('ends a memory hog at the memory limit and says so', async () => {
    const out = await sandboxOf('runsc', { memoryBytes: 64 * 1024 * 1024 }).run(
      // One 200 MB line: tail holds it whole.
      req(worktree(), 'head -c 200000000 /dev/zero | tail > /dev/null; echo survived'),
    );
    expect(out.stdout).not.toContain('survived');
    expect(out).toMatchObject({ status: 'error', detail: 'killed: out of memory' });
  });

  it('passes the start-up mount check through gVisor', async () => {
    const config = configOf('runsc');
    mkdirSync(config.worktreeDir, { recursive: true });
    await expect(
      prepareHost({ config, workspaces: compose(config).workspaces, docker: true, checkMounts: true }),
    ).resolves.toBeDefined();
  });
});
