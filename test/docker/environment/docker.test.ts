import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { loadConfig, type Config } from '../../../src/config/config.js';
import { DockerEnvironmentBuilder, ENV_REPO } from '../../../src/images/builder.js';
import { dockerAvailable, DockerSandbox, FALLBACK_USER } from '../../../src/environment/docker.js';
import { LEASE_LABEL } from '../../../src/images/leases.js';
import { LocalSandbox } from '../../../src/environment/local.js';
import { WarmSandbox } from '../../../src/environment/warm.js';
import type { RunRequest } from '../../../src/environment/types.js';
import { makeBuildEnvironmentTool } from '../../../src/tools/build-environment.js';
import type { ToolContext } from '../../../src/tools/types.js';
import { RunTrace } from '../../../src/trace/trace.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';

const FIXTURE = path.join(
  path.join(path.dirname(fileURLToPath(import.meta.url)), '../..'),
  'fixtures',
  'pyproject-ok',
);
const FIXTURE_DOCKERFILE = [
  `FROM ${BASE_IMAGE}`,
  'COPY pyproject.toml /opt/calc/',
  'RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pytest',
  '',
].join('\n');
/** A host uid that is not root, so the run maps to a non-root user in the container. */
const OWNER = 1000;

const engine = await needDocker();
const d = describeIf(engine);
const docker = new Docker();
const cfg: Config['sandbox'] = { ...loadConfig({}).sandbox, memoryBytes: 128 * 1024 * 1024, pidsLimit: 64 };
const runId = `test-${process.pid}-${Date.now()}`;
const twoBuilders = `${runId}-two`;
const dirs: string[] = [];

function tempRepo(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-docker-'));
  dirs.push(dir);
  cpSync(FIXTURE, dir, { recursive: true });
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, stdio: 'ignore' });
  git('init', '-q');
  git('-c', 'user.name=t', '-c', 'user.email=t@t', 'add', '.');
  git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'fixture');
  if (process.getuid?.() === 0) execFileSync('chown', ['-R', `${OWNER}:${OWNER}`, dir]);
  return dir;
}

/** Test containers of the run still there; the run's image leases are meant to stay until it ends. */
async function leftoverContainers(): Promise<number> {
  const list = await docker.listContainers({ all: true, filters: { label: [`agenticfix.run=${runId}`] } });
  return list.filter((c) => !c.Labels[LEASE_LABEL]).length;
}

const req = (worktree: string, argv: string[], extra: Partial<RunRequest> = {}): RunRequest => ({
  argv,
  worktree,
  timeoutMs: 20_000,
  maxOutputBytes: 64 * 1024,
  ...extra,
});
const py = (code: string) => ['python3', '-c', code];

afterAll(async () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  if (engine.ok)
    for (const run of [runId, twoBuilders])
      await new DockerEnvironmentBuilder(docker, { ...cfg, imageKeep: 1, imageMaxAgeMs: 1 }).gc({
        runId: run,
      });
});

d('Docker environment builder and sandbox (real engine)', () => {
  let repo: string;
  let builder: DockerEnvironmentBuilder;
  let sandbox: DockerSandbox;
  let imageId: string;

  beforeAll(async () => {
    expect(await dockerAvailable(docker)).toBe(true);
    repo = tempRepo();
    builder = new DockerEnvironmentBuilder(docker, cfg);
    const result = await builder.build({ dockerfile: FIXTURE_DOCKERFILE, worktree: repo, runId });
    if (!result.success) throw new Error(`fixture build failed: ${JSON.stringify(result, null, 2)}`);
    imageId = result.image_id ?? '';
    sandbox = builder.sandboxFor(imageId, runId);
  }, 300_000);

  afterEach(async () => expect(await leftoverContainers()).toBe(0));
  // The run is over: its images are no longer leased, so the final GC can remove them.
  afterAll(() => builder?.release(runId));

  it('runs the fixture tests in the container with the same summary as the parsed output', async () => {
    const out = await sandbox.run(req(repo, ['python3', '-m', 'pytest', '-q', '-p', 'no:cacheprovider']));
    expect(out.status).toBe('failed');
    expect(out.exit_code).toBe(1);
    expect(out.stdout).toMatch(/1 failed, 3 passed/);
    expect(out.summary).toEqual({ passed: 3, failed: 1, errors: 0, skipped: 0, source: 'pytest' });
    expect(out.timed_out).toBe(false);

    const passing = await sandbox.run(
      req(repo, ['python3', '-m', 'pytest', '-q', 'tests/test_calc.py::test_add']),
    );
    expect(passing).toMatchObject({ status: 'passed', exit_code: 0, summary: { passed: 1, failed: 0 } });
  });

  it('an identical environment is a cache hit; noCache forces a real build', async () => {
    const again = await builder.build({ dockerfile: FIXTURE_DOCKERFILE, worktree: repo, runId });
    expect(again).toMatchObject({ success: true, cache_hit: true, image_id: imageId });
    expect(again.duration_ms).toBeLessThan(5000);

    const trivial = `FROM ${BASE_IMAGE}\nCOPY pyproject.toml /opt/\nRUN echo built > /built\n`;
    const first = await builder.build({ dockerfile: trivial, worktree: repo, runId });
    expect(first).toMatchObject({ success: true, cache_hit: false });
    expect(first.image_tag).toMatch(new RegExp(`^${ENV_REPO}:[0-9a-f]{20}$`));
    const hit = await builder.build({ dockerfile: trivial, worktree: repo, runId });
    expect(hit).toMatchObject({ success: true, cache_hit: true, image_id: first.image_id });
    const steps: string[] = [];
    const forced = await builder.build({
      dockerfile: trivial,
      worktree: repo,
      runId,
      noCache: true,
      onStep: (s) => steps.push(s),
    });
    // Progress names the model's own steps, as it numbered them (steps the builder adds stay hidden).
    expect(steps).toEqual([
      `Step 1/3 : FROM ${BASE_IMAGE}`,
      'Step 2/3 : COPY pyproject.toml /opt/',
      'Step 3/3 : RUN echo built > /built',
    ]);
    expect(forced).toMatchObject({ success: true, cache_hit: false });
    expect([...forced.log.head, ...forced.log.tail].join('\n')).not.toMatch(/Using cache/);
    // The forced rebuild has a tag of its own; the shared one still names the image other runs use.
    expect(forced.image_tag).toMatch(new RegExp(`^${first.image_tag}-`));
    expect(forced.image_id).not.toBe(first.image_id);
    const after = await builder.build({ dockerfile: trivial, worktree: repo, runId });
    expect(after).toMatchObject({ cache_hit: true, image_id: first.image_id });

    // A change in a file the Dockerfile copies is a different environment.
    const changed = tempRepo();
    writeFileSync(
      path.join(changed, 'pyproject.toml'),
      `${readFileSync(path.join(changed, 'pyproject.toml'), 'utf8')}\n`,
    );
    const other = await builder.build({ dockerfile: trivial, worktree: changed, runId });
    expect(other).toMatchObject({ success: true, cache_hit: false });
    expect(other.image_tag).not.toBe(first.image_tag);
    const img = await docker.getImage(forced.image_id ?? '').inspect();
    expect(img.Config.Labels).toMatchObject({ agenticfix: '1', 'agenticfix.run': runId });
  });

  // Attempts of one run side by side ask for one environment at once: each used to build it.
  it('one environment asked for twice at once is built once, the other build a cache hit of it', async () => {
    const fresh = `FROM ${BASE_IMAGE}\nRUN echo ${runId} > /at-once\n`;
    const both = await Promise.all(
      [1, 2].map(() => builder.build({ dockerfile: fresh, worktree: repo, runId })),
    );
    expect(both.map((b) => [b.success, b.cache_hit]).sort()).toEqual([
      [true, false],
      [true, true],
    ]);
    expect(both[0]!.image_id).toBe(both[1]!.image_id);
  });

  // Two worker processes on one engine each had their own turns: both built the image.
  it('one environment asked for at once by two builders that share only the lock directory is built once', async () => {
    const locks = mkdtempSync(path.join(tmpdir(), 'agenticfix-build-locks-'));
    dirs.push(locks);
    const fresh = `FROM ${BASE_IMAGE}\nRUN echo ${runId} > /two-builders\n`;
    const builders = [1, 2].map(() => new DockerEnvironmentBuilder(docker, { ...cfg, buildLockDir: locks }));
    try {
      const both = await Promise.all(
        builders.map((b) => b.build({ dockerfile: fresh, worktree: repo, runId: twoBuilders })),
      );
      expect(both.map((b) => [b.success, b.cache_hit]).sort()).toEqual([
        [true, false],
        [true, true],
      ]);
      expect(both[0]!.image_id).toBe(both[1]!.image_id);
    } finally {
      // Each holds a lease it renews until released (a run of its own: a release ends all of a run's
      // leases in this process, also the suite's builder's).
      await Promise.all(builders.map((b) => b.release(twoBuilders)));
    }
  });

  it('a broken Dockerfile fails with error lines naming the package; the corrected one builds', async () => {
    const broken = `${FIXTURE_DOCKERFILE}RUN apt-get install -y --no-install-recommends no-such-package-xyz\n`;
    const bad = await builder.build({ dockerfile: broken, worktree: repo, runId });
    expect(bad).toMatchObject({ success: false, image_id: null, cache_hit: false });
    expect(bad.log.exit_status).toBe('failed');
    expect(bad.log.error_lines).toContain('E: Unable to locate package no-such-package-xyz');
    expect(bad.log.error_lines.join('\n')).toMatch(/returned a non-zero code: 100/);
    expect(bad.error).toMatch(/no-such-package-xyz/);

    const fixed = `${FIXTURE_DOCKERFILE}RUN apt-get install -y --no-install-recommends tree\n`;
    const good = await builder.build({ dockerfile: fixed, worktree: repo, runId });
    expect(good).toMatchObject({ success: true, cache_hit: false });
    const out = await builder.sandboxFor(good.image_id ?? '', runId).run(req(repo, ['tree', '--version']));
    expect(out.status).toBe('passed');
  }, 120_000);

  it('a FROM that cannot be pulled names the local base images', async () => {
    const res = await builder.build({
      dockerfile: 'FROM no-such-registry.invalid/x:1\n',
      worktree: repo,
      runId,
    });
    expect(res.success).toBe(false);
    expect(res.error).toContain(BASE_IMAGE);
    expect(await builder.localBaseImages()).toContain(BASE_IMAGE);
    expect((await builder.localBaseImages()).some((t) => t.startsWith(`${ENV_REPO}:`))).toBe(false);
    // Another project's image on the host is no advice to the model (it listed `bars-base:bookworm`).
    const other = `other-project-${process.pid}`;
    await docker.getImage(BASE_IMAGE).tag({ repo: other, tag: 'bookworm' });
    try {
      expect(await builder.localBaseImages()).not.toContain(`${other}:bookworm`);
    } finally {
      await docker.getImage(`${other}:bookworm`).remove();
    }
  }, 60_000);

  it('runs as the worktree owner, writes only the worktree and /tmp', async () => {
    const out = await sandbox.run(
      req(
        repo,
        py(`
import os
print("id", os.getuid(), os.getgid(), os.getcwd(), os.environ.get("HOME"))
open("/workspace/written.txt", "w").write("ok")
open("/tmp/x", "w").write("ok")
for p in ["/etc/evil", "/usr/evil", "/root/evil", "/evil"]:
    try:
        open(p, "w").write("x"); print("WROTE", p)
    except OSError as e:
        print("denied", p, e.strerror)
`),
      ),
    );
    expect(out.status).toBe('passed');
    const expectedId =
      process.getuid?.() === 0 ? `${OWNER} ${OWNER}` : `${process.getuid?.()} ${process.getgid?.()}`;
    expect(out.stdout).toContain(`id ${expectedId} /workspace /tmp`);
    expect(out.stdout).not.toContain('WROTE');
    expect(out.stdout.match(/^denied /gm)).toHaveLength(4);
    expect(statSync(path.join(repo, 'written.txt')).uid).toBe(statSync(repo).uid);
  });

  it('never runs as root: a root-owned worktree maps to an unprivileged user', async () => {
    if (process.getuid?.() !== 0) return console.warn('not root: root-owned worktree case not exercised');
    const rootRepo = tempRepo();
    execFileSync('chown', ['-R', '0:0', rootRepo]);
    const out = await sandbox.run(req(rootRepo, ['sh', '-c', 'id -u && echo hi > made-by-test.txt']));
    expect(out.stdout.trim()).toBe(FALLBACK_USER.split(':')[0]);
    // The worktree was lent for the run and handed back: everything is root's again, new files too.
    expect(statSync(path.join(rootRepo, 'made-by-test.txt')).uid).toBe(0);
    expect(statSync(rootRepo).uid).toBe(0);
  });

  it('has no network', async () => {
    const out = await sandbox.run(
      req(
        repo,
        py(`
import socket
for target in [("deb.debian.org", 80), ("1.1.1.1", 53)]:
    try:
        socket.create_connection(target, timeout=3); print("CONNECTED", target)
    except OSError as e:
        print("no network:", target[0], e)
`),
      ),
    );
    expect(out.stdout).not.toContain('CONNECTED');
    expect(out.stdout.match(/^no network:/gm)).toHaveLength(2);
  });

  it('stops a fork bomb at the pid limit', async () => {
    const out = await sandbox.run(
      req(
        repo,
        py(`
import os, time
n = 0
while n < 10000:
    try:
        if os.fork() == 0:
            time.sleep(30); os._exit(0)
        n += 1
    except OSError as e:
        print("fork refused after", n, e.strerror); break
`),
      ),
    );
    const m = /fork refused after (\d+)/.exec(out.stdout);
    expect(m).not.toBeNull();
    expect(Number(m?.[1])).toBeLessThan(cfg.pidsLimit);
    expect(out.status).toBe('passed'); // the bomb's leader exits; its children die with the container
  });

  it('kills a memory hog and says so', async () => {
    const out = await sandbox.run(req(repo, py(`b = []\nwhile True: b.append(bytearray(16 * 1024 * 1024))`)));
    expect(out).toMatchObject({ status: 'error', detail: 'killed: out of memory', timed_out: false });
  });

  it('kills a run past its timeout and reports a timeout', async () => {
    const started = Date.now();
    const out = await sandbox.run(req(repo, ['sleep', '60'], { timeoutMs: 1500 }));
    expect(out).toMatchObject({ status: 'timeout', timed_out: true, exit_code: null });
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it('cancels a run when the signal aborts', async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 1000);
    const out = await sandbox.run(req(repo, ['sleep', '60'], { signal: ac.signal }));
    expect(out.status).toBe('cancelled');
  });

  // Issue 31: a container the engine stopped was reported to the model as a failed test run (exit 143).
  it('a container the engine stops mid-run is an infrastructure error, not a test result', async () => {
    const running = sandbox.run(req(repo, ['sleep', '60']));
    let ids: string[] = [];
    for (let i = 0; i < 200 && ids.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
      const list = await docker.listContainers({
        filters: { label: [`agenticfix.run=${runId}`], status: ['running'] },
      });
      ids = list.filter((c) => !c.Labels[LEASE_LABEL]).map((c) => c.Id);
    }
    expect(ids).toHaveLength(1);
    await docker.getContainer(ids[0]!).stop({ t: 1 }); // as `docker stop` or a daemon shutting down does
    const out = await running;
    expect(out.status).toBe('error');
    expect(out.detail).toMatch(/^infrastructure error: the engine killed the container \(exit \d+\)/);
  });

  it('cancels a run whose abort came while its container was being created', async () => {
    const ac = new AbortController();
    const t0 = Date.now();
    const running = sandbox.run(req(repo, ['sleep', '60'], { signal: ac.signal }));
    setImmediate(() => ac.abort());
    expect((await running).status).toBe('cancelled');
    expect(Date.now() - t0).toBeLessThan(20_000);
  });

  it('caps 50 MB of output per stream', async () => {
    const out = await sandbox.run(
      req(
        repo,
        py(
          `import sys\nchunk = "x" * 1048576\nfor _ in range(50): sys.stdout.write(chunk)\nsys.stderr.write("done")`,
        ),
        { maxOutputBytes: 100_000 },
      ),
    );
    expect(out.status).toBe('passed');
    expect(out.stdout_truncated).toBe(true);
    expect(out.stdout.length).toBeLessThan(101_000);
    expect(out.stderr).toBe('done');
    expect(out.stderr_truncated).toBe(false);
  });

  it('reports a missing executable as an error', async () => {
    const out = await sandbox.run(req(repo, ['no-such-binary']));
    expect(out.status).toBe('error');
    expect(out.detail).toMatch(/no-such-binary/);
  });

  // Found as "Jest did not exit one second after the test run": each run left its 2 s output-drain
  // timer armed, which held a one-shot process (a CLI run, a start-up check) open after its work.
  it('a finished run leaves no timer behind', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timers();
    const out = await sandbox.run(req(repo, ['true']));
    expect(out.status).toBe('passed');
    expect(timers()).toBe(before);
  });

  it('build_environment tool: structured failure, then success switches the run to the new sandbox', async () => {
    const runDir = mkdtempSync(path.join(tmpdir(), 'agenticfix-rundir-'));
    dirs.push(runDir);
    const ctx: ToolContext = {
      runId,
      worktree: repo,
      gitDir: path.join(repo, '.git'),
      baseCommit: 'HEAD',
      limits: loadConfig({}).limits,
      testCommands: { default: ['python3', '-m', 'pytest', '-q'] },
      runDir,
      sandbox: new LocalSandbox(),
      environment: null,
      builder,
      trace: new RunTrace(runId, runDir),
    };
    const tool = makeBuildEnvironmentTool(await builder.localBaseImages());
    expect(tool.description).toContain(BASE_IMAGE);

    const bad = await tool.run(ctx, { dockerfile: `${FIXTURE_DOCKERFILE}RUN false\n` });
    expect(bad).toMatchObject({ success: false, error_code: 'build_failed' });
    expect(JSON.stringify(bad.data)).toMatch(/returned a non-zero code: 1/);
    expect(ctx.sandbox?.kind).toBe('local');

    const good = await tool.run(ctx, { dockerfile: FIXTURE_DOCKERFILE });
    expect(good).toMatchObject({ success: true, data: { cache_hit: true, image_id: imageId } });
    expect(ctx.sandbox?.kind).toBe('docker');
    expect(ctx.environment).toEqual({ dockerfile: FIXTURE_DOCKERFILE, imageId });
    expect(readFileSync(path.join(runDir, 'Dockerfile'), 'utf8')).toBe(FIXTURE_DOCKERFILE);
    // The run's sandbox is one warm container (the version probe started it) until the run ends.
    expect(ctx.sandbox).toBeInstanceOf(WarmSandbox);
    expect(await leftoverContainers()).toBe(1);
    await (ctx.sandbox as WarmSandbox).close();

    const noDocker = await tool.run({ ...ctx, builder: null }, { dockerfile: FIXTURE_DOCKERFILE });
    expect(noDocker).toMatchObject({ success: false, error_code: 'no_environment' });
  });

  it('garbage-collects environment images by count and age', async () => {
    const gcRun = `${runId}-gc`;
    const builds = [];
    for (const n of [1, 2]) {
      builds.push(
        await builder.build({
          dockerfile: `FROM ${BASE_IMAGE}\nLABEL n=${n}-${runId}\n`,
          worktree: repo,
          runId: gcRun,
        }),
      );
    }
    const [older, newer] = builds.map((b) => b.image_tag ?? '');
    await builder.release(gcRun);
    const keepOne = new DockerEnvironmentBuilder(docker, { ...cfg, imageKeep: 1 });
    expect(await keepOne.gc({ runId: gcRun })).toEqual([older]);
    const expired = new DockerEnvironmentBuilder(docker, { ...cfg, imageMaxAgeMs: 1 });
    expect(await expired.gc({ runId: gcRun, now: Date.now() + 10_000 })).toEqual([newer]);
  });
});
