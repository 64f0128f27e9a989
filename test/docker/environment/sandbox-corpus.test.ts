import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { loadConfig, type Config } from '../../../src/config/config.js';
import { startScriptedModelServer } from '../../../src/emulator/scripted-model.js';
import { runRepair } from '../../../src/pipeline/repair.js';
import { prepareHost } from '../../../src/pipeline/startup.js';
import { judge } from '../../../src/verify/judge.js';
import { git } from '../../../src/workspace/git.js';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import { removeTree } from '../../../src/workspace/tree.js';
import { BASE_IMAGE, needDocker, needRunsc } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { makeSourceRepo, tempDir, writeFiles } from '../../support/git-fixtures.js';
import { compose } from '../../../src/cli/compose.js';

/**
 * Issue 23: the adversarial corpus of the sandbox boundary. Each case is what test code (here a scripted
 * model's `run_command`) writes into /workspace inside a real container: a tarball prepared on the
 * attacker's side, unpacked, plus a few shell lines. The run then snapshots the worktree three times
 * (git_diff, run_tests' workspace revision, the final patch export). Every planted command writes a
 * marker file on the host if the host ever runs it; no marker may appear, every run must still end with
 * a result, and nothing of the host (a secret file, the mirror) may leak into a patch or change.
 * Add every later finding here.
 */

/** The base's submodule: a gitlink at vendor/lib (the commit exists nowhere, as in a fresh clone). */
const SUBMODULE_SHA = '1111111111111111111111111111111111111111';
const SECRET = 'host-secret-7f3a9c';

interface Ctx {
  /** The attacker's scratch dir: everything in it is unpacked into /workspace. */
  dir: string;
  /** Host path the planted command writes if it ever runs on the host. */
  marker: string;
  mirror: string;
  secretFile: string;
  secretDir: string;
}

interface Case {
  name: string;
  /** Fills ctx.dir; returns extra shell lines run in /workspace after unpacking. */
  plant: (ctx: Ctx) => Promise<string>;
  /** A path the case planted (checked after the run, so that a case that planted nothing fails). */
  planted: string;
}

const pwn = (marker: string) => `sh -c 'id > ${marker}; cat'`;

/** A repository's config that runs `marker` through every hook git offers for it. */
const evilConfig = (marker: string, extra = '') =>
  [
    '[core]',
    '\tbare = false',
    `\tfsmonitor = sh -c 'id > ${marker}'`,
    `\tsshCommand = sh -c 'id > ${marker}'`,
    `\tpager = sh -c 'id > ${marker}'`,
    `\teditor = sh -c 'id > ${marker}'`,
    `\taskPass = sh -c 'id > ${marker}'`,
    '\thooksPath = hooks',
    '[filter "pwn"]',
    `\tclean = ${pwn(marker)}`,
    `\tsmudge = ${pwn(marker)}`,
    `\tprocess = sh -c 'id > ${marker}'`,
    '\trequired = true',
    '[diff "pwn"]',
    `\ttextconv = ${pwn(marker)}`,
    `\tcommand = sh -c 'id > ${marker}'`,
    '[merge "pwn"]',
    `\tdriver = sh -c 'id > ${marker}'`,
    extra,
  ].join('\n');

const ATTRS = '* filter=pwn diff=pwn merge=pwn\n';
const HOOKS = [
  'pre-commit',
  'post-checkout',
  'post-index-change',
  'reference-transaction',
  'fsmonitor-watchman',
];

/**
 * A repository the attacker prepared (with git, on their side): one commit, a replace ref that makes the
 * base's submodule commit resolve to it, HEAD at that commit, an index with a stale entry for `file`
 * (so a status in it must look at the file's content: through the filter), hooks that write the marker.
 */
async function evilRepo(gitDir: string, workTree: string, marker: string, extraConfig = ''): Promise<void> {
  await mkdir(workTree, { recursive: true });
  await mkdir(path.dirname(gitDir), { recursive: true });
  await git(['init', '-q', '--bare', gitDir], { cwd: path.dirname(gitDir) });
  const env = { GIT_DIR: gitDir, GIT_WORK_TREE: workTree };
  await writeFile(path.join(workTree, 'file'), 'one\n');
  await git(['add', 'file'], { cwd: workTree, env });
  const tree = (await git(['write-tree'], { cwd: workTree, env })).stdout.trim();
  const commit = (await git(['commit-tree', tree, '-m', 'x'], { cwd: workTree, env })).stdout.trim();
  await git(['update-ref', `refs/replace/${SUBMODULE_SHA}`, commit], { cwd: workTree, env });
  await writeFile(path.join(gitDir, 'HEAD'), `${SUBMODULE_SHA}\n`);
  await writeFile(path.join(workTree, 'file'), 'two\n'); // same size, other content: a stale index entry
  await writeFile(path.join(workTree, '.gitattributes'), ATTRS);
  for (const d of ['hooks', 'description', 'info']) execFileSync('rm', ['-rf', path.join(gitDir, d)]);
  await mkdir(path.join(gitDir, 'hooks'));
  for (const h of HOOKS)
    await writeFile(path.join(gitDir, 'hooks', h), `#!/bin/sh\nid > ${marker}\n`, { mode: 0o755 });
  await writeFile(path.join(gitDir, 'config'), evilConfig(marker, extraConfig));
}

const CASES: Case[] = [
  {
    name: 'submodule path: .git file with a gitdir into a planted repository (the reported attack)',
    planted: 'vendor/lib/.git',
    plant: async ({ dir, marker }) => {
      await evilRepo(path.join(dir, '.cache/evil'), path.join(dir, 'vendor/lib'), marker);
      await writeFile(path.join(dir, 'vendor/lib/.git'), 'gitdir: ../../.cache/evil\n');
      return '';
    },
  },
  {
    name: 'submodule path: a whole .git directory',
    planted: 'vendor/lib/.git/config',
    plant: async ({ dir, marker }) => {
      await evilRepo(path.join(dir, 'vendor/lib/.git'), path.join(dir, 'vendor/lib'), marker);
      return '';
    },
  },
  {
    name: 'nested .git directory at depth 1',
    planted: 'pkg/.git/config',
    plant: async ({ dir, marker }) => {
      await evilRepo(path.join(dir, 'pkg/.git'), path.join(dir, 'pkg'), marker);
      return '';
    },
  },
  {
    name: 'nested .git directory at depth 4',
    planted: 'a/b/c/d/.git/HEAD',
    plant: async ({ dir, marker }) => {
      await evilRepo(path.join(dir, 'a/b/c/d/.git'), path.join(dir, 'a/b/c/d'), marker);
      return '';
    },
  },
  {
    name: 'nested .git file at depth 2 pointing to a repository elsewhere in the tree',
    planted: 'src/deep/.git',
    plant: async ({ dir, marker }) => {
      await evilRepo(path.join(dir, 'data/repo'), path.join(dir, 'src/deep'), marker);
      await writeFile(path.join(dir, 'src/deep/.git'), 'gitdir: ../../data/repo\n');
      return '';
    },
  },
  {
    name: '.git as a symbolic link to a planted repository',
    planted: 'lnk/.git',
    plant: async ({ dir, marker }) => {
      await evilRepo(path.join(dir, 'store/r.git'), path.join(dir, 'lnk'), marker);
      await symlink('../store/r.git', path.join(dir, 'lnk/.git'));
      return '';
    },
  },
  {
    name: 'gitdir pointing into the mirror',
    planted: 'm/.git',
    plant: async ({ dir, mirror }) => {
      await mkdir(path.join(dir, 'm'));
      await writeFile(path.join(dir, 'm/.git'), `gitdir: ${mirror}\n`);
      await writeFile(path.join(dir, 'm/.gitattributes'), ATTRS);
      await writeFile(path.join(dir, 'm/x'), 'x\n');
      return '';
    },
  },
  {
    name: 'planted objects/info/alternates to the mirror and to a host directory',
    planted: 'alt/.git/objects/info/alternates',
    plant: async ({ dir, marker, mirror, secretDir }) => {
      await evilRepo(path.join(dir, 'alt/.git'), path.join(dir, 'alt'), marker);
      await mkdir(path.join(dir, 'alt/.git/objects/info'), { recursive: true });
      await writeFile(
        path.join(dir, 'alt/.git/objects/info/alternates'),
        `${path.join(mirror, 'objects')}\n${secretDir}\n`,
      );
      return '';
    },
  },
  {
    name: 'replace refs and a grafted HEAD in a nested repository',
    planted: `rr/.git/refs/replace/${SUBMODULE_SHA}`,
    plant: async ({ dir, marker }) => {
      await evilRepo(path.join(dir, 'rr/.git'), path.join(dir, 'rr'), marker);
      await mkdir(path.join(dir, 'rr/.git/info'), { recursive: true });
      await writeFile(path.join(dir, 'rr/.git/info/grafts'), `${SUBMODULE_SHA}\n`);
      return '';
    },
  },
  {
    name: '.gitattributes filter, textconv and diff drivers at the top and at several depths',
    planted: 'x/y/z/.gitattributes',
    plant: async ({ dir, marker }) => {
      await writeFiles(dir, {
        '.gitattributes': ATTRS,
        'src/.gitattributes': ATTRS,
        'x/y/z/.gitattributes': ATTRS,
        'x/y/z/data.txt': 'data\n',
        // Configs an include could name: never read by host git.
        '.gitconfig': evilConfig(marker),
        '.git-config': evilConfig(marker),
      });
      return '';
    },
  },
  {
    name: 'core.fsmonitor, sshCommand and hooksPath in a planted config, with a .gitmodules that names ssh',
    planted: 'vendor/lib/.git',
    plant: async ({ dir, marker }) => {
      await evilRepo(path.join(dir, '.m/sub'), path.join(dir, 'vendor/lib'), marker);
      await writeFile(path.join(dir, 'vendor/lib/.git'), 'gitdir: ../../.m/sub\n');
      await writeFile(
        path.join(dir, '.gitmodules'),
        `[submodule "lib"]\n\tpath = vendor/lib\n\turl = ssh://example.invalid/x\n\tupdate = !sh -c 'id > ${marker}'\n`,
      );
      return '';
    },
  },
  {
    name: 'includeIf in a planted config naming a planted file',
    planted: 'inc/.git/evil.inc',
    plant: async ({ dir, marker }) => {
      const include = `[includeIf "gitdir:/"]\n\tpath = evil.inc\n[include]\n\tpath = evil.inc\n`;
      await evilRepo(path.join(dir, 'inc/.git'), path.join(dir, 'inc'), marker, include);
      await writeFile(path.join(dir, 'inc/.git/evil.inc'), `[core]\n\tfsmonitor = sh -c 'id > ${marker}'\n`);
      return '';
    },
  },
  {
    name: '.git spelt in other cases (.GIT, .Git)',
    planted: 'up/.GIT/config',
    plant: async ({ dir, marker }) => {
      await evilRepo(path.join(dir, 'up/.GIT'), path.join(dir, 'up'), marker);
      await evilRepo(path.join(dir, 'mix/.Git'), path.join(dir, 'mix'), marker);
      return '';
    },
  },
  {
    name: 'symbolic links to host files: a secret, /etc/shadow, and a source file replaced by a link',
    planted: 'leak',
    plant: async ({ secretFile }) =>
      [
        `ln -s ${secretFile} leak`,
        'ln -s /etc/shadow shadow',
        `rm src/app.py && ln -s ${secretFile} src/app.py`,
      ].join('\n'),
  },
  {
    name: 'symbolic links to host directories (a secret directory, /) with files "inside" them',
    planted: 'hostdir',
    plant: async ({ secretDir }) =>
      [`ln -s ${secretDir} hostdir`, 'ln -s / root', 'mkdir -p ok && echo ok > ok/f'].join('\n'),
  },
  {
    name: 'a directory replaced by a link between two snapshots',
    planted: 'swap',
    plant: async ({ secretDir }) =>
      `mkdir -p swap && echo a > swap/${path.basename(secretDir)}-file && rm -rf swap && ln -s ${secretDir} swap`,
  },
  {
    name: 'hard links inside the worktree',
    planted: 'hard',
    plant: async () => 'ln src/app.py hard && ln README.md README.copy',
  },
  {
    name: 'FIFOs at the top and nested, and a FIFO named like a config file',
    planted: 'deep/er',
    // Under gVisor a FIFO made on the mounted worktree does not reach the host: the directory shows the planting ran.
    plant: async () =>
      '(mkfifo fifo || echo refused > fifo) && mkdir -p deep/er && (mkfifo deep/er/pipe; mkfifo .gitignore.fifo; true)',
  },
  {
    name: 'a symlinked .gitmodules, .gitignore and .gitattributes',
    planted: '.gitmodules',
    plant: async ({ secretFile }) =>
      [
        `ln -s ${secretFile} .gitmodules`,
        `ln -s ${secretFile} .gitignore`,
        `ln -s ${secretFile} .gitattributes`,
      ].join('\n'),
  },
  {
    name: 'device nodes (refused without capabilities) and files of odd modes: unreadable, setuid, no-exec dirs',
    planted: 'modes/secret',
    plant: async () =>
      [
        'mknod dev c 1 3 2>/dev/null || echo mknod refused',
        'mkdir -p modes/closed && echo s > modes/secret && chmod 000 modes/secret',
        'echo x > modes/closed/f && chmod 000 modes/closed',
        "printf '#!/bin/sh\\nid\\n' > modes/suid && chmod 4755 modes/suid",
      ].join('\n'),
  },
  {
    name: 'the worktree link itself rewritten or replaced (refused by the read-only mount)',
    planted: 'evil2/HEAD',
    plant: async ({ dir, marker }) => {
      await evilRepo(path.join(dir, 'evil2'), path.join(dir, 'wt2'), marker);
      return [
        "echo 'gitdir: evil2' > .git 2>/dev/null || echo refused",
        'rm -f .git 2>/dev/null || echo refused',
      ].join('\n');
    },
  },
  {
    name: 'deep nesting and long names',
    planted: 'n0',
    plant: async () =>
      `d=n0; for i in $(seq 1 120); do d=$d/n$i; done; mkdir -p $d && echo deep > $d/f && touch n0/$(printf 'x%.0s' $(seq 1 250))`,
  },
];

const engine = await needDocker();
const d = describeIf(engine);
/** The corpus runs once more under gVisor where it is registered and starts containers (a loud skip otherwise). */
const gvisor = await needRunsc();
const DOCKERFILE = `FROM ${BASE_IMAGE}\nWORKDIR /workspace\n`;
const MiB = 1024 * 1024;

let tmp: { dir: string; cleanup: () => Promise<void> };
let source: { path: string; head: string };
let config: Config;
let markers: string;
let secretFile: string;
let secretDir: string;
let n = 0;

beforeAll(async () => {
  tmp = await tempDir('agenticfix-corpus-');
  source = await makeSourceRepo(path.join(tmp.dir, 'source'), {
    'src/app.py': 'def answer():\n    return 41\n',
    'README.md': 'calc\n',
    '.gitmodules': '[submodule "lib"]\n\tpath = vendor/lib\n\turl = https://example.invalid/lib\n',
  });
  // The base commit has one submodule: a gitlink at vendor/lib.
  await git(['update-index', '--add', '--cacheinfo', `160000,${SUBMODULE_SHA},vendor/lib`], {
    cwd: source.path,
  });
  await git(['commit', '-q', '-m', 'add submodule'], { cwd: source.path });
  source.head = (await git(['rev-parse', 'HEAD'], { cwd: source.path })).stdout.trim();
  markers = path.join(tmp.dir, 'markers');
  await mkdir(markers);
  secretDir = path.join(tmp.dir, 'secret-dir');
  await mkdir(secretDir);
  secretFile = path.join(secretDir, 'secret.txt');
  await writeFile(secretFile, `${SECRET}\n`);
  config = loadConfig(
    { AGENTICFIX_HOME: path.join(tmp.dir, 'home'), AGENTICFIX_BASE_IMAGE: BASE_IMAGE },
    tmp.dir,
  );
});
afterAll(async () => {
  // A case may leave unreadable directories and chains deeper than PATH_MAX.
  if (!process.env.KEEP_CORPUS) await removeTree(tmp.dir);
});

/** What every judge of the corpus is given but its test command: a one-line patch of the README. */
const judgeOptions = () => ({
  ...compose(config),
  config,
  remote: source.path,
  baseCommit: source.head,
  patch:
    'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-calc\n+calculator\n',
  dockerfile: DOCKERFILE,
});

/** Every file of the mirror (objects, refs, config) with its content hash: what no case may change. */
function mirrorState(mirror: string): string[] {
  return readdirSync(mirror, { recursive: true, encoding: 'utf8' })
    .filter((rel) => !rel.startsWith('worktrees') && statSync(path.join(mirror, rel)).isFile())
    .map(
      (rel) =>
        `${rel} ${createHash('sha256')
          .update(readFileSync(path.join(mirror, rel)))
          .digest('hex')}`,
    )
    .sort();
}

/** The case's planting, as one shell script for `run_command`: the attacker's tarball, then its shell lines. */
async function plantScript(c: Case, ctx: Ctx): Promise<string> {
  const shell = await c.plant(ctx);
  const tarball = execFileSync('tar', ['-C', ctx.dir, '-czf', '-', '.']).toString('base64');
  const script = [
    'set -e',
    'cd /workspace',
    `echo ${tarball} | base64 -d | tar -xzf - --no-same-owner`,
    shell,
  ].join('\n');
  if (script.length > 4000) throw new Error(`${c.name}: the planting script has ${script.length} characters`);
  return script;
}

d('adversarial corpus: what a container writes never runs on the host (issue 23)', () => {
  const runtimes = [
    { name: 'runc', runtime: 'runc' as const, need: engine },
    { name: 'runsc', runtime: 'runsc' as const, need: gvisor },
  ];

  it('has at least 20 cases', () => expect(CASES.length).toBeGreaterThanOrEqual(20));

  for (const runtime of runtimes)
    describeIf(runtime.need)(`under ${runtime.name}`, () => {
      it.each(CASES.map((c) => [c.name, c] as const))(
        '%s',
        async (_name, c) => {
          const caseDir = path.join(tmp.dir, `case-${++n}`);
          await mkdir(caseDir);
          const workspaces = new GitWorkspaceManager({
            cacheDir: config.cacheDir,
            worktreeDir: config.worktreeDir,
          });
          const mirror = await workspaces.mirror(source.path);
          const before = mirrorState(mirror);
          const ctx: Ctx = {
            dir: caseDir,
            marker: path.join(markers, `m-${n}`),
            mirror,
            secretFile,
            secretDir,
          };
          const script = await plantScript(c, ctx);
          const server = await startScriptedModelServer([
            { tool_calls: [{ name: 'run_command', arguments: { argv: ['sh', '-c', script] } }] },
            { tool_calls: [{ name: 'git_diff', arguments: {} }] },
            { tool_calls: [{ name: 'run_tests', arguments: {} }] },
            { tool_calls: [{ name: 'create_file', arguments: { path: 'fix.py', content: 'FIX = 1\n' } }] },
            { tool_calls: [{ name: 'git_diff', arguments: {} }] },
            { tool_calls: [{ name: 'finish', arguments: { summary: 'planted' } }] },
          ]);
          const runId = `corpus-${runtime.name}-${process.pid}-${n}`;
          try {
            const result = await runRepair({
              ...compose(config),
              remote: source.path,
              baseCommit: source.head,
              issue: { title: 't', body: '' },
              testArgv: ['sh', '-c', 'cat src/app.py >/dev/null 2>&1; ls -la >/dev/null'],
              model: { kind: 'url', baseUrl: server.url, name: 'm' },
              sandbox: 'docker',
              dockerfile: DOCKERFILE,
              runId,
              keepWorktree: true,
              config: {
                ...config,
                sandbox: { ...config.sandbox, runtime: runtime.runtime },
                limits: { ...config.limits, maxPatchFileBytes: MiB },
              },
            });
            // The planting ran in the container (so the case tests something) ...
            const events = readFileSync(result.trace_path, 'utf8');
            expect(events).toContain('"name":"run_command"');
            const wt = path.join(config.worktreeDir, runId);
            expect(lstatSync(path.join(wt, c.planted), { throwIfNoEntry: false })).toBeDefined();
            // ... nothing it planted ran on the host, and the run ended with its result.
            expect(existsSync(ctx.marker)).toBe(false);
            expect(existsSync(result.result_path)).toBe(true);
            expect(result.stop_reason).toBe('completed');
            expect(result.patch).toContain('diff --git a/fix.py b/fix.py');
            expect(result.patch).toContain('diff --git a/fix.py b/fix.py');
            // Nothing of the host reached the patch, no repository entered it, the mirror is as it was.
            expect(result.patch).not.toContain(SECRET);
            expect(result.patch).not.toMatch(/^diff --git a\/(.*\/)?\.git\//im);
            expect(result.patch).not.toContain(`diff --git a/vendor/lib/file`);
            expect(mirrorState(mirror)).toEqual(before);
            expect(readFileSync(secretFile, 'utf8')).toBe(`${SECRET}\n`);
            expect(readdirSync(secretDir)).toEqual(['secret.txt']);
            // Nothing the container wrote became a root-owned setuid file on the host.
            const suid = path.join(wt, 'modes/suid');
            if (existsSync(suid)) expect(statSync(suid).mode & 0o4000).toBe(0);
          } finally {
            await server.close();
            execFileSync('chmod', ['-R', 'u+rwX', path.join(config.worktreeDir, runId)]);
          }
        },
        180_000,
      );
    });

  it('the judge: the reported attack planted by the test command in every cell runs nothing on the host', async () => {
    const ctx: Ctx = {
      dir: path.join(tmp.dir, 'judge-case'),
      marker: path.join(markers, 'judge'),
      mirror: '',
      secretFile,
      secretDir,
    };
    await mkdir(ctx.dir);
    const script = await plantScript(CASES[0]!, ctx);
    const report = await judge({
      ...judgeOptions(),
      testArgv: ['sh', '-c', `${script}\necho planted`],
      runId: `corpus-judge-${process.pid}`,
    });
    expect(report.cells).toHaveLength(4);
    for (const cell of report.cells) expect(cell.output_tail).toContain('planted');
    expect(existsSync(ctx.marker)).toBe(false);
  }, 300_000);
});

/**
 * Issue 35: trees of any shape. What a command in the container makes of the worktree — a directory chain
 * deeper than PATH_MAX with a large file at its bottom, a file count past its limit, a directory of mode 000 (which a
 * service that is not root cannot read) — ends the run with the limit it broke (never `internal_error`, never
 * `completed` over the limit), and leaves nothing on the disk; the judge's cells likewise.
 */
const NAME = 'd'.repeat(200);
/** 40 levels of 201 bytes below /workspace/deep: twice PATH_MAX. Relative steps (`cd -P`), as a test would make it. */
const DEEP_CHAIN = `mkdir deep && cd deep && for i in $(seq 1 40); do mkdir ${NAME} && cd -P ${NAME} || exit 1; done`;
const ROOT_DIR = path.resolve(path.join(path.dirname(new URL(import.meta.url).pathname), '../..'), '..');
/** A user that is not root, with the Docker socket's group (the service's user in a non-root deployment). */
const NOBODY = 65534;
const asRoot = process.getuid?.() === 0;

/** The steps of a hostile run: the planting, then what would copy the worktree. */
const hostileScript = (script: string) => [
  { tool_calls: [{ name: 'run_command', arguments: { script } }] },
  { tool_calls: [{ name: 'git_diff', arguments: {} }] },
  { tool_calls: [{ name: 'finish', arguments: { summary: 'planted' } }] },
];

/** A hostile run's options but its settings (JSON: they also go to a child process). */
const hostileOptions = (repo: { path: string; head: string }, modelUrl: string, runId: string) => ({
  remote: repo.path,
  baseCommit: repo.head,
  issue: { title: 't', body: '' },
  testArgv: ['true'],
  model: { kind: 'url' as const, baseUrl: modelUrl, name: 'm' },
  sandbox: 'docker' as const,
  dockerfile: DOCKERFILE,
  runId,
});

/** Everything of a run beside its worktree (stage, marks, lending marker) and the worktree itself. */
const leftOf = (worktreeDir: string, runId: string) =>
  existsSync(worktreeDir) ? readdirSync(worktreeDir).filter((n) => n.includes(runId)) : [];

interface Ended {
  stop_reason: string;
  error: string | null;
  trace_path: string;
}

/** The planting's tool result, as the trace recorded it. */
function plantingResult(tracePath: string): { error_code: string | null; error: string | null } {
  const events = readFileSync(tracePath, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const result = events.find((e) => e.type === 'tool_end' && e.name === 'run_command');
  return result!.result as { error_code: string | null; error: string | null };
}

d('hostile trees: what a command makes of the worktree (issue 35)', () => {
  const hostile = async (runId: string, script: string, env: Record<string, string>): Promise<Ended> => {
    const server = await startScriptedModelServer(hostileScript(script));
    try {
      const cfg = loadConfig(
        { AGENTICFIX_HOME: path.join(tmp.dir, 'home'), AGENTICFIX_BASE_IMAGE: BASE_IMAGE, ...env },
        tmp.dir,
      );
      return await runRepair({ ...hostileOptions(source, server.url, runId), ...compose(cfg), config: cfg });
    } finally {
      await server.close();
    }
  };

  it('a chain deeper than PATH_MAX with 3 MB at its bottom, under a 2 MB limit: disk_limit, nothing left', async () => {
    const runId = `corpus-deep-${process.pid}`;
    const script = `set -e\n${DEEP_CHAIN}\ndd if=/dev/zero of=big bs=1M count=3 status=none\necho planted`;
    const result = await hostile(runId, script, { AGENTICFIX_MAX_WORKTREE_MB: '2' });
    expect(plantingResult(result.trace_path)).toMatchObject({ error_code: 'disk_limit' });
    expect(result.stop_reason).toBe('fatal');
    expect(result.error).toMatch(/grew past 2 MB \(AGENTICFIX_MAX_WORKTREE_MB\) during the command/);
    expect(leftOf(config.worktreeDir, runId)).toEqual([]);
  }, 180_000);

  // The shape of 250,000 files, at a tenth of the scale: creating files on the bind mount is what costs
  // (about 20 s per 25,000 here). The observation of 250,000 paths is trees.test.ts's.
  it('25,000 files made by one command past a 20,000 file limit: the file limit stops the run, nothing left', async () => {
    const runId = `corpus-many-${process.pid}`;
    const script = 'set -e\nmkdir many && cd many && seq 1 25000 | xargs touch\necho planted';
    const result = await hostile(runId, script, { AGENTICFIX_MAX_WORKTREE_FILES: '20000' });
    expect(plantingResult(result.trace_path)).toMatchObject({ error_code: 'disk_limit' });
    expect(result.stop_reason).toBe('fatal');
    expect(result.error).toMatch(/grew past 20000 files and directories \(AGENTICFIX_MAX_WORKTREE_FILES\)/);
    expect(leftOf(config.worktreeDir, runId)).toEqual([]);
  }, 300_000);

  it('a chmod 000 directory holding 3 MB, the service not root: the worktree cannot be measured, so it is over, and it is removed', async () => {
    const runId = `corpus-closed-${process.pid}`;
    const script =
      'set -e\nmkdir closed && dd if=/dev/zero of=closed/big bs=1M count=3 status=none && chmod 000 closed\necho planted';
    const server = await startScriptedModelServer(hostileScript(script));
    // Its own home and repository, owned by the service's user; the service runs as that user (the
    // compiled app in a child process when this test runs as root, with the Docker socket's group).
    const home = mkdtempSync(path.join(tmpdir(), 'agenticfix-nonroot-'));
    const repo = await makeSourceRepo(path.join(home, 'source'), { 'README.md': 'calc\n' });
    const uid = asRoot ? NOBODY : process.getuid!();
    const gid = asRoot ? statSync('/var/run/docker.sock').gid : process.getgid!();
    if (asRoot) execFileSync('chown', ['-R', `${uid}:${gid}`, home]);
    const options = hostileOptions(repo, server.url, runId);
    const env = {
      AGENTICFIX_HOME: path.join(home, 'home'),
      AGENTICFIX_BASE_IMAGE: BASE_IMAGE,
      AGENTICFIX_MAX_WORKTREE_MB: '2',
    };
    const child = `
      import { loadConfig } from ${JSON.stringify(path.join(ROOT_DIR, 'dist/config/config.js'))};
      import { runRepair } from ${JSON.stringify(path.join(ROOT_DIR, 'dist/pipeline/repair.js'))};
      import { compose } from ${JSON.stringify(path.join(ROOT_DIR, 'dist/cli/compose.js'))};
      const o = JSON.parse(process.env.OPTIONS);
      const config = loadConfig(JSON.parse(process.env.SETTINGS), process.env.HOME);
      const r = await runRepair({ ...o, ...compose(config), config });
      process.stdout.write(JSON.stringify({ stop_reason: r.stop_reason, error: r.error, trace_path: r.trace_path }));
    `;
    try {
      const result: Ended = asRoot
        ? (JSON.parse(
            // Not a synchronous call: the scripted model answers from this process.
            (
              await execa(
                'setpriv',
                [
                  `--reuid=${uid}`,
                  `--regid=${gid}`,
                  '--clear-groups',
                  process.execPath,
                  '--input-type=module',
                  '-e',
                  child,
                ],
                {
                  cwd: ROOT_DIR,
                  extendEnv: false,
                  env: {
                    PATH: process.env.PATH!,
                    HOME: home,
                    OPTIONS: JSON.stringify(options),
                    SETTINGS: JSON.stringify(env),
                  },
                },
              )
            ).stdout,
          ) as Ended)
        : await runRepair({ ...options, ...compose(loadConfig(env, home)), config: loadConfig(env, home) });
      expect(plantingResult(result.trace_path)).toMatchObject({ error_code: 'disk_limit' });
      expect(result.stop_reason).toBe('fatal');
      expect(result.error).toMatch(
        /could not be measured, which counts as over its limits \(.*Permission denied/,
      );
      expect(leftOf(path.join(home, 'home', 'worktrees'), runId)).toEqual([]);
    } finally {
      await server.close();
      await removeTree(home);
    }
  }, 300_000);

  it('the judge: tests that make a chain deeper than PATH_MAX in every cell get a verdict, leave nothing, and the next start-up passes', async () => {
    const runId = `corpus-judge-deep-${process.pid}`;
    const report = await judge({
      ...judgeOptions(),
      testArgv: ['sh', '-c', `set -e\n${DEEP_CHAIN}\necho deep > f\necho planted`],
      runId,
    });
    expect(report.verdict).not.toBe('infra_error');
    expect(report.cells).toHaveLength(4);
    for (const cell of report.cells) expect(cell.output_tail).toContain('planted');
    expect(leftOf(config.worktreeDir, runId)).toEqual([]);
    await expect(
      prepareHost({ config, workspaces: compose(config).workspaces, docker: false }),
    ).resolves.toMatchObject({
      quarantined_worktrees: [],
    });
  }, 300_000);
});
