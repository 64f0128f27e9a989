import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { loadConfig, type Config } from '../../../src/config/config.js';
import { containersStarted } from '../../../src/environment/containers.js';
import { RUN_LABEL } from '../../../src/environment/docker.js';
import { sweepContainers } from '../../../src/environment/startup.js';
import type { RunRequest, Sandbox } from '../../../src/environment/types.js';
import { DockerEnvironmentBuilder } from '../../../src/images/builder.js';
import { LEASE_LABEL } from '../../../src/images/leases.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';

/** A host uid that is not root, so the calls run as a non-root user in the container. */
const OWNER = 1000;

const engine = await needDocker();
const docker = new Docker();
const cfg: Config['sandbox'] = { ...loadConfig({}).sandbox, memoryBytes: 128 * 1024 * 1024, pidsLimit: 64 };
const DOCKERFILE = `FROM ${BASE_IMAGE}\nWORKDIR /workspace\n`;
const dirs: string[] = [];
const runIds: string[] = [];
let n = 0;

function worktree(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-warm-'));
  dirs.push(dir);
  writeFileSync(path.join(dir, 'a.txt'), 'a\n');
  writeFileSync(path.join(dir, '.git'), `gitdir: ${dir}.git\n`); // a worktree's link, as runs have
  if (process.getuid?.() === 0) execFileSync('chown', ['-R', `${OWNER}:${OWNER}`, dir]);
  return dir;
}

const req = (wt: string, script: string, extra: Partial<RunRequest> = {}): RunRequest => ({
  argv: ['sh', '-c', script],
  worktree: wt,
  timeoutMs: 20_000,
  maxOutputBytes: 64 * 1024,
  ...extra,
});

/** The run's containers now (the image leases, also labelled with the run, are not containers that run code). */
async function containers(runId: string): Promise<Docker.ContainerInfo[]> {
  const list = await docker.listContainers({ all: true, filters: { label: [`${RUN_LABEL}=${runId}`] } });
  return list.filter((c) => !c.Labels[LEASE_LABEL]);
}

/** A background loop that stamps `file` in the worktree every 100 ms while it lives. */
const beating = (file: string) => `while true; do date +%s%N > ${file}; sleep 0.1; done`;

async function stillBeating(file: string): Promise<boolean> {
  const before = readFileSync(file, 'utf8');
  await new Promise((r) => setTimeout(r, 800));
  return readFileSync(file, 'utf8') !== before;
}

afterAll(async () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  if (!engine.ok) return;
  const gc = new DockerEnvironmentBuilder(docker, { ...cfg, imageKeep: 1, imageMaxAgeMs: 1 });
  for (const runId of runIds) await gc.release(runId).then(() => gc.gc({ runId }));
});

describeIf(engine)('the warm sandbox: one container per run for the tool calls (issue 40)', () => {
  /** A builder with the run's environment built, and the run's sandbox. */
  async function run(): Promise<{
    runId: string;
    builder: DockerEnvironmentBuilder;
    sandbox: Sandbox;
    wt: string;
    since: number;
  }> {
    const runId = `warm-${process.pid}-${++n}`;
    runIds.push(runId);
    const wt = worktree();
    const builder = new DockerEnvironmentBuilder(docker, cfg);
    const built = await builder.build({ dockerfile: DOCKERFILE, worktree: wt, runId });
    if (!built.success || !built.image_id) throw new Error(`build failed: ${JSON.stringify(built.log)}`);
    const since = Date.now();
    return { runId, builder, sandbox: builder.runSandboxFor(built.image_id, runId), wt, since };
  }

  it("a run's calls share one container under the same limits; a call's leftover processes end with it; the run's end removes it", async () => {
    const { runId, builder, sandbox, wt, since } = await run();
    const first = await sandbox.run(req(wt, 'echo one > out.txt; id -u'));
    expect(first).toMatchObject({ status: 'passed', exit_code: 0 });
    expect(first.stdout.split('\n')[0]).toBe(
      process.getuid?.() === 0 ? String(OWNER) : String(process.getuid?.()),
    );
    expect(readFileSync(path.join(wt, 'out.txt'), 'utf8')).toBe('one\n');
    // A background process, one that left the call's process group, and /tmp kept between calls.
    const second = await sandbox.run(
      req(
        wt,
        `(${beating('bg')}) & setsid sh -c '${beating('daemon')}' & echo kept > /tmp/kept; sleep 0.5; echo two`,
      ),
    );
    expect(second).toMatchObject({ status: 'passed', stdout: 'two\n' });
    expect(await stillBeating(path.join(wt, 'bg'))).toBe(false);
    expect(await stillBeating(path.join(wt, 'daemon'))).toBe(false);
    const third = await sandbox.run(req(wt, 'cat /tmp/kept; touch /etc/x 2>&1 || true; exit 3'));
    expect(third).toMatchObject({ status: 'failed', exit_code: 3 });
    expect(third.stdout).toMatch(/^kept\n.*Read-only file system/s);

    const [c] = await containers(runId);
    expect(await containers(runId)).toHaveLength(1);
    const info = await docker.getContainer(c!.Id).inspect();
    expect(info.HostConfig).toMatchObject({
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      Memory: cfg.memoryBytes,
      PidsLimit: cfg.pidsLimit,
      NanoCpus: cfg.nanoCpus,
      Privileged: false,
      Init: true,
    });
    expect(info.Config.User).not.toMatch(/^0?(:|$)/); // the keeper is not root either
    expect(await containersStarted(docker, runId, since)).toBe(1);

    await builder.release(runId);
    expect(await containers(runId)).toHaveLength(0);
  }, 120_000);

  it('a timed-out call kills what it started and replaces the container; a rebuild replaces it too', async () => {
    const { runId, builder, sandbox, wt, since } = await run();
    expect((await sandbox.run(req(wt, 'true'))).status).toBe('passed');
    const [before] = await containers(runId);
    const out = await sandbox.run(
      req(wt, `(${beating('left')}) & echo started; sleep 300`, { timeoutMs: 2000 }),
    );
    expect(out).toMatchObject({ status: 'timeout', timed_out: true, exit_code: null, stdout: 'started\n' });
    expect(await stillBeating(path.join(wt, 'left'))).toBe(false);
    expect(await containers(runId)).toHaveLength(0);
    await expect(docker.getContainer(before!.Id).inspect()).rejects.toMatchObject({ statusCode: 404 });

    expect(await sandbox.run(req(wt, 'echo again'))).toMatchObject({ status: 'passed', stdout: 'again\n' });
    expect(await containersStarted(docker, runId, since)).toBe(2);

    // The environment is built again (the same image here): the run's sandbox is a new container.
    const again = builder.runSandboxFor(
      (await builder.build({ dockerfile: DOCKERFILE, worktree: wt, runId })).image_id!,
      runId,
    );
    expect((await again.run(req(wt, 'true'))).status).toBe('passed');
    expect(await containers(runId)).toHaveLength(1);
    expect(await containersStarted(docker, runId, since)).toBe(3);
    await builder.release(runId);
    expect(await containers(runId)).toHaveLength(0);
  }, 120_000);

  it('a .git changed during a call is still an isolation error, and the container is replaced', async () => {
    const { runId, builder, sandbox, wt, since } = await run();
    const link = path.join(wt, '.git');
    const ready = path.join(wt, '.ready');
    // The host plays the breach (the read-only mount stops a container from doing it) while the call runs.
    const breach = new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        if (!existsSync(ready)) return;
        clearInterval(timer);
        writeFileSync(link, 'gitdir: .evil\n');
        resolve();
      }, 50);
    });
    const out = await sandbox.run(req(wt, 'touch .ready; sleep 2; echo done'));
    await breach;
    expect(out.status).toBe('error');
    expect(out.isolation_violation).toMatch(
      /\.git was a file .* now a file \("gitdir: \.evil"\).*\.git restored/,
    );
    expect(readFileSync(link, 'utf8')).toBe(`gitdir: ${wt}.git\n`);
    expect(await containers(runId)).toHaveLength(0);
    expect((await sandbox.run(req(wt, 'true'))).status).toBe('passed');
    expect(await containersStarted(docker, runId, since)).toBe(2);
    await builder.release(runId);
  }, 120_000);

  it("the start-up sweep removes a finished run's warm container, and a call in another worktree gets a fresh one", async () => {
    const { runId, sandbox, wt, since } = await run();
    expect((await sandbox.run(req(wt, 'true'))).status).toBe('passed');
    const other = worktree();
    expect(await sandbox.run(req(other, 'pwd; ls'))).toMatchObject({
      status: 'passed',
      stdout: '/workspace\na.txt\n',
    });
    expect(await containersStarted(docker, runId, since)).toBe(2);
    const [warm] = await containers(runId); // the fresh one is gone with its call
    expect(await containers(runId)).toHaveLength(1);
    const removed = await sweepContainers(docker, { isFinished: async (id) => id === runId });
    expect(removed).toContain(warm!.Id);
    expect(await containers(runId)).toHaveLength(0);
  }, 120_000);
});
