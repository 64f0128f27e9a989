import { existsSync, lstatSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { mkdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import Docker from 'dockerode';
import { loadConfig, type Config } from '../../../src/config/config.js';
import { startScriptedModelServer } from '../../../src/emulator/scripted-model.js';
import { DockerEnvironmentBuilder } from '../../../src/images/builder.js';
import type { Sandbox } from '../../../src/environment/types.js';
import { applyPatch, exportPatch, workspaceRevision } from '../../../src/patch/patch.js';
import { runRepair } from '../../../src/pipeline/repair.js';
import { createRegistry } from '../../../src/tools/registry.js';
import type { ToolContext } from '../../../src/tools/types.js';
import { RunTrace } from '../../../src/trace/trace.js';
import { CellIsolationError, runCell } from '../../../src/verify/cells.js';
import { infraReason, judge } from '../../../src/verify/judge.js';
import { git, GitError, worktreeGit } from '../../../src/workspace/git.js';
import { gitLinkChanges, restoreGitLink, snapshotGitLink } from '../../../src/workspace/guard.js';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import type { Worktree } from '../../../src/workspace/types.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { makeSourceRepo, tempDir } from '../../support/git-fixtures.js';
import { compose } from '../../../src/cli/compose.js';

/**
 * Issue 9, item 1 (and the git side of item 7): code under test rewrites the worktree's `.git` to
 * `gitdir: .evil`, a repository it made whose config defines a clean filter, with `* filter=x` in its
 * attributes; host git used to follow it at the next `git add -A` and run the filter as root.
 */

const MiB = 1024 * 1024;
const LIMITS = { maxFileBytes: MiB };
/** A deterministic 2 MiB file the base commit already has. */
const LARGE = Buffer.alloc(2 * MiB, 'abcdefgh');

let tmp: { dir: string; cleanup: () => Promise<void> };
let source: { path: string; head: string };
let manager: GitWorkspaceManager;
let config: Config;
let n = 0;

beforeAll(async () => {
  tmp = await tempDir('agenticfix-isolation-');
  source = await makeSourceRepo(path.join(tmp.dir, 'source'), {
    'src/app.py': 'def answer():\n    return 41\n',
    'large.dat': LARGE,
  });
  config = loadConfig(
    { AGENTICFIX_HOME: path.join(tmp.dir, 'home'), AGENTICFIX_BASE_IMAGE: BASE_IMAGE },
    tmp.dir,
  );
  manager = new GitWorkspaceManager({ cacheDir: config.cacheDir, worktreeDir: config.worktreeDir });
});
afterAll(() => tmp.cleanup());

const fresh = (): Promise<Worktree> => manager.create(source.path, source.head, `iso-${process.pid}-${++n}`);
const newMarker = () => path.join(tmp.dir, `marker-${++n}`);

/** The attack as a shell script: what the test code did inside its container. */
const attackScript = (marker: string) =>
  [
    'cd /workspace',
    'mkdir -p .evil/objects .evil/refs/heads .evil/info',
    "echo 'ref: refs/heads/main' > .evil/HEAD",
    `printf '[core]\\n\\tbare = false\\n[filter "x"]\\n\\tclean = id > ${marker} && cat\\n' > .evil/config`,
    "echo '* filter=x' > .evil/info/attributes",
    "echo '* filter=x' > .gitattributes",
    "echo 'gitdir: .evil' 2>/dev/null > .git || echo 'rewrite refused'",
    "mv .git .git-old 2>/dev/null || echo 'rename refused'",
    "rm -f .git 2>/dev/null || echo 'remove refused'",
    'echo planted',
  ].join('\n');

/** The same attack done by hand on the host (no container): `.git` does get rewritten here. */
async function plantByHand(wt: Worktree, marker: string): Promise<void> {
  await git(['init', '-q', '--bare', path.join(wt.path, '.evil')], { cwd: wt.path });
  await writeFile(
    path.join(wt.path, '.evil', 'config'),
    `[core]\n\tbare = false\n[filter "x"]\n\tclean = id > ${marker} && cat\n`,
  );
  await mkdir(path.join(wt.path, '.evil', 'info'), { recursive: true });
  await writeFile(path.join(wt.path, '.evil', 'info', 'attributes'), '* filter=x\n');
  await writeFile(path.join(wt.path, '.gitattributes'), '* filter=x\n');
  await writeFile(path.join(wt.path, '.git'), 'gitdir: .evil\n');
}

/** Every file of the mirror's object store with its size: what an export must leave as it is. */
function objectStore(mirror: string): string[] {
  const root = path.join(mirror, 'objects');
  return readdirSync(root, { recursive: true, encoding: 'utf8' })
    .map((rel) => ({ rel, st: statSync(path.join(root, rel)) }))
    .filter(({ st }) => st.isFile())
    .map(({ rel, st }) => `${rel} ${st.size}`)
    .sort();
}

describe('host git never follows a .git planted in a worktree (no container)', () => {
  it('export, revision, apply and git_diff ignore the planted repository; plain discovery would not', async () => {
    const wt = await fresh();
    const marker = newMarker();
    await writeFile(path.join(wt.path, 'src/app.py'), 'def answer():\n    return 42\n');
    await plantByHand(wt, marker);
    // A nested repository with the same filter (and an fsmonitor), and no commit: left out, never read.
    const nested = path.join(wt.path, 'nested');
    await git(['init', '-q', nested], { cwd: wt.path });
    const evil = `[core]\n\tfsmonitor = id > ${marker}\n[filter "x"]\n\tclean = id > ${marker} && cat\n`;
    await writeFile(path.join(nested, '.git', 'config'), evil);
    await writeFile(path.join(nested, '.gitattributes'), '* filter=x\n');

    const exported = await exportPatch(wt, source.head, LIMITS);
    expect(exported.files).toEqual(expect.arrayContaining(['src/app.py', '.gitattributes', '.evil/config']));
    expect(exported.files.filter((f) => f.startsWith('nested'))).toEqual([]);
    expect(exported.skipped).toEqual([{ path: 'nested/', bytes: 0, reason: 'repository' }]);
    expect(await workspaceRevision(wt, source.head, LIMITS)).toBe(exported.tree);
    const dst = await fresh();
    expect(await applyPatch(dst, exported.patch)).toEqual({ ok: true, error: null });
    await plantByHand(dst, marker);
    expect(await workspaceRevision(dst, source.head, LIMITS)).toBe(exported.tree);

    const trace = new RunTrace(`iso-${n}`, path.join(tmp.dir, 'runs'));
    const registry = createRegistry({ ...toolContext(wt, [], null), trace });
    const diff = await registry.call('git_diff', {});
    expect(diff.success).toBe(true);
    expect(existsSync(marker)).toBe(false);

    // Control: git left to discover the repository from the worktree runs the filter (as before the fix).
    await git(['add', '-A'], { cwd: wt.path, allowFail: true });
    expect(readFileSync(marker, 'utf8')).toMatch(/uid=/);
  });

  it('export writes no object into the mirror and skips new or changed files over the limit', async () => {
    const wt = await fresh();
    const before = objectStore(wt.mirror);
    expect(await exportPatch(wt, source.head, LIMITS)).toMatchObject({ patch: '', skipped: [] });

    await writeFile(path.join(wt.path, 'big.bin'), Buffer.alloc(3 * MiB, 7));
    await writeFile(path.join(wt.path, 'src/app.py'), 'def answer():\n    return 42\n');
    const exported = await exportPatch(wt, source.head, LIMITS);
    expect(exported.files).toEqual(['src/app.py']);
    expect(exported.skipped).toEqual([{ path: 'big.bin', bytes: 3 * MiB, reason: 'too_large' }]);
    expect(exported.patch).not.toContain('big.bin');
    await workspaceRevision(wt, source.head, LIMITS);
    expect(objectStore(wt.mirror)).toEqual(before);
    // Not even the small changed file's blob or the tree: they lived in the temporary object directory.
    const stored = await git(['cat-file', '-e', exported.tree], { cwd: wt.mirror, allowFail: true });
    expect(stored.exitCode).not.toBe(0);

    // A large file of the base, unchanged, is no skip; changed (same size), it is.
    const changed = Buffer.from(LARGE);
    changed[0] = 0x5a;
    await writeFile(path.join(wt.path, 'large.dat'), changed);
    const again = await exportPatch(wt, source.head, LIMITS);
    expect(again.skipped).toEqual([
      { path: 'big.bin', bytes: 3 * MiB, reason: 'too_large' },
      { path: 'large.dat', bytes: 2 * MiB, reason: 'too_large' },
    ]);
    expect(again.patch).not.toContain('large.dat');
    expect(objectStore(wt.mirror)).toEqual(before);
  });

  it("a failing git's error keeps the head and tail of its stderr, not all of it", async () => {
    const wt = await fresh();
    const missing = Array.from({ length: 3000 }, (_, i) => `no-such-file-${i}`);
    const err = await worktreeGit(wt, ['ls-files', '--error-unmatch', '--', ...missing]).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(GitError);
    const { message, stderr } = err as GitError;
    expect(message.length).toBeLessThan(6000);
    expect(stderr.length).toBeLessThan(5000);
    expect(message).toMatch(/^git ls-files --error-unmatch -- no-such-file-0 [\s\S]*characters left out/);
    expect(stderr).toMatch(/no-such-file-0'[\s\S]*characters left out[\s\S]*no-such-file-2999'/);
  });
});

describe('the .git guard (snapshot, changes, restore)', () => {
  it('sees .git replaced by a directory or a symlink, and a changed admin file; restores the file', async () => {
    const wt = await fresh();
    const dotGit = path.join(wt.path, '.git');
    const link = await readFile(dotGit, 'utf8');
    const snap = await snapshotGitLink(wt.path);
    expect(await gitLinkChanges(snap)).toEqual([]);
    // A same-content file made beside it (the first one still there, so an inode of its own) and renamed over it.
    await writeFile(`${dotGit}.copy`, link);
    await rename(`${dotGit}.copy`, dotGit);
    expect(await gitLinkChanges(snap)).toEqual(['.git was replaced (same content)']);

    await rm(dotGit);
    await git(['init', '-q', '--bare', dotGit], { cwd: wt.path });
    expect(await gitLinkChanges(snap)).toEqual([expect.stringMatching(/^\.git was a file .*, now a dir$/)]);
    expect(await restoreGitLink(snap)).toBe(true);
    expect(await readFile(dotGit, 'utf8')).toBe(link);
    // The restored file may get a freed inode back, even the first one's (seen in CI): its content counts.
    expect(await gitLinkChanges(snap)).not.toContainEqual(expect.stringMatching(/^\.git was a /));

    await rm(dotGit);
    await symlink(wt.gitDir, dotGit);
    expect(await gitLinkChanges(snap)).toEqual([expect.stringMatching(/now a other$/)]);
    await restoreGitLink(snap);
    expect(lstatSync(dotGit).isFile()).toBe(true);

    const head = path.join(wt.gitDir, 'HEAD');
    const before = await readFile(head, 'utf8');
    const restored = await snapshotGitLink(wt.path);
    await writeFile(head, 'ref: refs/heads/evil\n');
    expect(await gitLinkChanges(restored)).toEqual([`${head} changed`]);
    await writeFile(head, before);
  });

  it('a .git created where there was none is a change, and restoring removes it', async () => {
    const { dir, cleanup } = await tempDir('agenticfix-nogit-');
    try {
      const snap = await snapshotGitLink(dir);
      await mkdir(path.join(dir, '.git', 'info'), { recursive: true });
      expect(await gitLinkChanges(snap)).toEqual(['.git was a missing, now a dir']);
      await restoreGitLink(snap);
      expect(existsSync(path.join(dir, '.git'))).toBe(false);
    } finally {
      await cleanup();
    }
  });
});

function toolContext(wt: Worktree, argv: string[], sandbox: Sandbox | null): Omit<ToolContext, 'trace'> {
  return {
    runId: `iso-${n}`,
    worktree: wt.path,
    gitDir: wt.gitDir,
    baseCommit: wt.baseCommit,
    limits: { ...config.limits, maxPatchFileBytes: LIMITS.maxFileBytes },
    testCommands: { default: argv },
    runDir: path.join(tmp.dir, 'runs', `iso-${n}`),
    sandbox,
    environment: null,
    builder: null,
  };
}

/** Stands in for a broken mount: rewrites the `.git` of the first worktree whose test signalled `.ready`. */
function breachWhenReady(worktrees: () => string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + 120_000;
    const timer = setInterval(() => {
      const hit = worktrees().find((w) => existsSync(path.join(w, '.ready')));
      if (hit) {
        clearInterval(timer);
        writeFileSync(path.join(hit, '.git'), 'gitdir: .evil\n');
        resolve(hit);
      } else if (Date.now() > deadline) {
        clearInterval(timer);
        reject(new Error('no test run signalled .ready'));
      }
    }, 50);
  });
}
const SIGNAL_AND_WAIT = ['sh', '-c', 'touch .ready; sleep 3; echo done'];

const engine = await needDocker();
const d = describeIf(engine);
const DOCKERFILE = `FROM ${BASE_IMAGE}\nWORKDIR /workspace\n`;
const runIds: string[] = [];

d('the attack from a real test container (DockerSandbox)', () => {
  const docker = new Docker();
  let builder: DockerEnvironmentBuilder;
  let sandbox: Sandbox;
  let runId: string;

  beforeAll(async () => {
    builder = new DockerEnvironmentBuilder(docker, config.sandbox);
    runId = `iso-${process.pid}-${Date.now()}`;
    runIds.push(runId);
    const wt = await fresh();
    const built = await builder.build({ dockerfile: DOCKERFILE, worktree: wt.path, runId });
    if (!built.success || !built.image_id) throw new Error(`build failed: ${JSON.stringify(built.log)}`);
    sandbox = builder.sandboxFor(built.image_id, runId);
  }, 300_000);

  afterAll(async () => {
    // The builder that built holds the lease and renews it: it ends it, or it makes it again (a lease
    // container left in this jest worker, which the next suite's leak check counts).
    await builder?.release(runId);
    const gc = new DockerEnvironmentBuilder(docker, { ...config.sandbox, imageKeep: 1, imageMaxAgeMs: 1 });
    // The runs are over: their leases end (as a run's do), so GC can take their images.
    for (const runId of runIds) await gc.release(runId).then(() => gc.gc({ runId }));
  });

  it('cannot rewrite .git; run_tests, git_diff, export and a judge cell never run its filter', async () => {
    const wt = await fresh();
    const marker = newMarker();
    const link = await readFile(path.join(wt.path, '.git'), 'utf8');
    const trace = new RunTrace(`iso-${n}`, path.join(tmp.dir, 'runs'));
    const argv = ['sh', '-c', attackScript(marker)];
    const registry = createRegistry({ ...toolContext(wt, argv, sandbox), trace });

    const first = await registry.call('run_tests', {});
    expect(first).toMatchObject({ success: true, fatal: false });
    const out = (first.data as { stdout: string }).stdout;
    expect(out).toContain('rewrite refused');
    expect(out).toContain('rename refused');
    expect(out).toContain('remove refused');
    expect(out).toContain('planted');
    expect(readFileSync(path.join(wt.path, '.evil', 'config'), 'utf8')).toContain('filter "x"');
    expect(await readFile(path.join(wt.path, '.git'), 'utf8')).toBe(link);

    expect(await registry.call('run_tests', {})).toMatchObject({ success: true, fatal: false });
    expect(await registry.call('git_diff', {})).toMatchObject({ success: true });
    const exported = await exportPatch(wt, wt.baseCommit, LIMITS);
    expect(exported.files).toContain('.evil/config');
    const cell = await runCell(
      { name: 'base', source: 'base', tests: 'base' },
      {
        sandbox,
        worktree: wt.path,
        argv,
        timeoutMs: 30_000,
        maxOutputBytes: 65536,
        maxReportBytes: loadConfig({}).verify.maxReportBytes,
        reruns: 0,
        allowEmpty: true,
      },
    );
    expect(cell.output_tail).toContain('rewrite refused');
    await exportPatch(wt, wt.baseCommit, LIMITS);
    expect(existsSync(marker)).toBe(false);
    expect(await readFile(path.join(wt.path, '.git'), 'utf8')).toBe(link);
  }, 120_000);

  it('a .git changed during a run is an isolation error: run_tests is fatal and .git is restored', async () => {
    const wt = await fresh();
    const marker = newMarker();
    const link = await readFile(path.join(wt.path, '.git'), 'utf8');
    await plantByHand(wt, marker);
    await writeFile(path.join(wt.path, '.git'), link); // the repository is planted; the breach comes mid-run
    const trace = new RunTrace(`iso-${n}`, path.join(tmp.dir, 'runs'));
    const registry = createRegistry({ ...toolContext(wt, SIGNAL_AND_WAIT, sandbox), trace });

    const breached = breachWhenReady(() => [wt.path]);
    const result = await registry.call('run_tests', {});
    expect(await breached).toBe(wt.path);
    expect(result).toMatchObject({ success: false, fatal: true, error_code: 'isolation_lost' });
    expect(result.error).toMatch(/isolation violated: \.git was a file .* now a file \("gitdir: \.evil"\)/);
    expect(result.error).toMatch(/\.git restored/);
    expect(await readFile(path.join(wt.path, '.git'), 'utf8')).toBe(link);
    await exportPatch(wt, wt.baseCommit, LIMITS);
    expect(existsSync(marker)).toBe(false);
  }, 120_000);

  it('refuses to run when .git is a symlink (it would be mounted as its target)', async () => {
    const wt = await fresh();
    const dotGit = path.join(wt.path, '.git');
    await rm(dotGit);
    await symlink(wt.gitDir, dotGit);
    const out = await sandbox.run({
      argv: ['true'],
      worktree: wt.path,
      timeoutMs: 10_000,
      maxOutputBytes: 1024,
    });
    expect(out).toMatchObject({ status: 'error', detail: "the worktree's .git is not a file" });
  });

  it('a judge cell reports the isolation error', async () => {
    const wt = await fresh();
    const breached = breachWhenReady(() => [wt.path]);
    const err = await runCell(
      { name: 'base', source: 'base', tests: 'base' },
      {
        sandbox,
        worktree: wt.path,
        argv: SIGNAL_AND_WAIT,
        timeoutMs: 30_000,
        maxOutputBytes: 65536,
        maxReportBytes: loadConfig({}).verify.maxReportBytes,
        reruns: 0,
        allowEmpty: true,
      },
    ).catch((e: unknown) => e);
    await breached;
    expect(err).toBeInstanceOf(CellIsolationError);
    expect(infraReason(err)).toMatch(/^Sandbox isolation was violated during a test run \(\.git was a file/);
    expect(await readFile(path.join(wt.path, '.git'), 'utf8')).toMatch(/^gitdir: \//);
  }, 120_000);

  it('the judge: contained attack in every cell; a breach is an infra_error naming the isolation', async () => {
    const marker = newMarker();
    const patch = (await exportPatchOf({ 'src/app.py': 'def answer():\n    return 42\n' })).patch;
    const opts = {
      ...compose(config),
      config,
      remote: source.path,
      baseCommit: source.head,
      patch,
      dockerfile: DOCKERFILE,
    };
    const contained = await judge({
      ...opts,
      testArgv: ['sh', '-c', attackScript(marker)],
      runId: nextRunId('judge-attack'),
    });
    expect(contained.cells).toHaveLength(4);
    for (const cell of contained.cells) expect(cell.output_tail).toContain('rewrite refused');
    expect(contained.reason).not.toMatch(/isolation/i);
    expect(existsSync(marker)).toBe(false);

    const runId = nextRunId('judge-breach');
    const breached = breachWhenReady(() =>
      readdirSync(config.worktreeDir)
        .filter((w) => w.startsWith(runId))
        .map((w) => path.join(config.worktreeDir, w)),
    );
    const report = await judge({ ...opts, testArgv: SIGNAL_AND_WAIT, runId });
    await breached;
    expect(report.verdict).toBe('infra_error');
    expect(report.reason).toMatch(/^Sandbox isolation was violated during a test run/);
  }, 300_000);

  it('a repair run stops fatal, with the isolation error in its result and trace; a big test output stays out of the mirror', async () => {
    const runId = nextRunId('repair');
    const mirror = manager.mirrorPath(source.path);
    const storeBefore = objectStore(mirror);
    const server = await startScriptedModelServer([
      { tool_calls: [{ name: 'run_tests', arguments: {} }] },
      { tool_calls: [{ name: 'finish', arguments: { summary: 'never reached' } }] },
    ]);
    const breached = breachWhenReady(() => [path.join(config.worktreeDir, runId)]);
    try {
      const result = await runRepair({
        ...compose(config),
        remote: source.path,
        baseCommit: source.head,
        issue: { title: 't', body: '' },
        testArgv: ['sh', '-c', `head -c ${3 * MiB} /dev/zero > big.out; ${SIGNAL_AND_WAIT[2]}`],
        model: { kind: 'url', baseUrl: server.url, name: 'm' },
        sandbox: 'docker',
        dockerfile: DOCKERFILE,
        runId,
        config: { ...config, limits: { ...config.limits, maxPatchFileBytes: MiB } },
      });
      const wtPath = await breached;
      expect(result.stop_reason).toBe('fatal');
      expect(result.error).toMatch(/sandbox isolation violated: \.git was a file/);
      const recorded = JSON.parse(readFileSync(result.result_path, 'utf8')) as Record<string, unknown>;
      expect(recorded).toMatchObject({ stop_reason: 'fatal', error: result.error, success: false });
      const events = readFileSync(result.trace_path, 'utf8');
      expect(events).toContain('"error_code":"isolation_lost"');
      expect(result.worktree_path).toBe(wtPath);
      expect(await readFile(path.join(wtPath, '.git'), 'utf8')).toMatch(/^gitdir: \//);
      // The test's 3 MiB output: skipped by the export (recorded), and not in the mirror's object store.
      expect(statSync(path.join(wtPath, 'big.out')).size).toBe(3 * MiB);
      const skipped = [{ path: 'big.out', bytes: 3 * MiB, reason: 'too_large' }];
      expect(result.patch_skipped).toEqual(skipped);
      expect(recorded.patch_skipped).toEqual(skipped);
      expect(events).toContain('"type":"patch_files_skipped"');
      expect(result.patch).toContain('.ready');
      expect(result.patch).not.toContain('big.out');
      expect(objectStore(mirror)).toEqual(storeBefore);
    } finally {
      await server.close();
    }
  }, 300_000);
});

function nextRunId(kind: string): string {
  const runId = `iso-${kind}-${process.pid}-${++n}`;
  runIds.push(runId);
  return runId;
}

async function exportPatchOf(files: Record<string, string>) {
  const wt = await fresh();
  for (const [rel, content] of Object.entries(files)) await writeFile(path.join(wt.path, rel), content);
  return exportPatch(wt, source.head, LIMITS);
}
