import { existsSync } from 'node:fs';
import { chmod, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { applyPatch, exportPatch, patchFiles, workspaceRevision } from '../../../src/patch/patch.js';
import { ALWAYS_EXCLUDED } from '../../../src/patch/types.js';
import { git } from '../../../src/workspace/git.js';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import type { Worktree } from '../../../src/workspace/types.js';
import { makeSourceRepo, tempDir, writeFiles } from '../../support/git-fixtures.js';

let cleanup: () => Promise<void>;
let manager: GitWorkspaceManager;
let source: { path: string; head: string };
let baseTree: string;
let n = 0;

const BINARY = Buffer.from([0, 1, 2, 0, 255, 254, 0, 10, 13, 0, 0x89, 0x50, 0x4e, 0x47]);

beforeAll(async () => {
  let root: string;
  ({ dir: root, cleanup } = await tempDir());
  manager = new GitWorkspaceManager({
    cacheDir: path.join(root, 'cache'),
    worktreeDir: path.join(root, 'wt'),
  });
  source = await makeSourceRepo(path.join(root, 'source'), {
    '.gitignore': 'build/\n*.log\n',
    'README.md': '# demo\n',
    'src/app.py': 'def answer():\n    return 41\n',
    'script.sh': '#!/bin/sh\necho hi\n',
    'old.txt': 'obsolete\n',
    'bin.dat': BINARY,
    'docs/notes.md': 'notes\n',
  });
  baseTree = (await git(['rev-parse', `${source.head}^{tree}`], { cwd: source.path })).stdout.trim();
});

afterAll(async () => cleanup());

const fresh = (): Promise<Worktree> => manager.create(source.path, source.head, `wt-${++n}`);
const LIMITS = { maxFileBytes: 1024 * 1024 };
const revision = (wt: Worktree) => workspaceRevision(wt, source.head, LIMITS);

/** Bytes and permission bits of a file, or null when it does not exist. */
async function fileState(wt: Worktree, rel: string): Promise<{ bytes: Buffer; mode: number } | null> {
  const file = path.join(wt.path, rel);
  if (!existsSync(file)) return null;
  return { bytes: await readFile(file), mode: (await stat(file)).mode & 0o777 };
}

/** Mutates a fresh worktree, exports, applies to another fresh worktree and checks exact reproduction. */
async function roundTrip(mutate: (dir: string) => Promise<void>, expectedFiles: string[]) {
  const src = await fresh();
  await mutate(src.path);
  const exported = await exportPatch(src, source.head, LIMITS);
  expect([...exported.files].sort()).toEqual([...expectedFiles].sort());
  expect(exported.tree).not.toBe(baseTree);
  expect(await revision(src)).toBe(exported.tree);

  const dst = await fresh();
  expect(await applyPatch(dst, exported.patch)).toEqual({ ok: true, error: null });
  expect(await revision(dst)).toBe(exported.tree);
  for (const rel of expectedFiles) expect(await fileState(dst, rel)).toEqual(await fileState(src, rel));
  return { src, dst, exported };
}

describe('exportPatch / applyPatch reproduce the tree exactly', () => {
  it('tracked modification', async () => {
    const { exported } = await roundTrip(
      (d) => writeFile(path.join(d, 'src/app.py'), 'def answer():\n    return 42\n'),
      ['src/app.py'],
    );
    expect(exported.patch).toContain('-    return 41\n+    return 42\n');
  });

  it('new untracked files, including nested directories', async () => {
    await roundTrip(
      (d) => writeFiles(d, { 'src/new_mod.py': 'x = 1\n', 'pkg/sub/deep.txt': 'deep\n' }),
      ['src/new_mod.py', 'pkg/sub/deep.txt'],
    );
  });

  it('deletion', async () => {
    const { dst } = await roundTrip((d) => rm(path.join(d, 'old.txt')), ['old.txt']);
    expect(existsSync(path.join(dst.path, 'old.txt'))).toBe(false);
  });

  it('binary files with NUL bytes, new and modified', async () => {
    const { dst, exported } = await roundTrip(
      (d) =>
        writeFiles(d, {
          'data/blob.bin': Buffer.concat([BINARY, BINARY.reverse()]),
          'bin.dat': Buffer.from([0, 0, 7]),
        }),
      ['data/blob.bin', 'bin.dat'],
    );
    expect(exported.patch).toContain('GIT binary patch');
    expect(await readFile(path.join(dst.path, 'bin.dat'))).toEqual(Buffer.from([0, 0, 7]));
  });

  it('mode change (chmod +x)', async () => {
    const { dst, exported } = await roundTrip((d) => chmod(path.join(d, 'script.sh'), 0o755), ['script.sh']);
    expect(exported.patch).toContain('new mode 100755');
    expect((await stat(path.join(dst.path, 'script.sh'))).mode & 0o111).not.toBe(0);
  });

  it('rename, non-UTF-8 text and awkward file names', async () => {
    const latin1 = Buffer.from('caf\xe9 cr\xe8me\n', 'latin1');
    const { exported } = await roundTrip(
      async (d) => {
        await rename(path.join(d, 'docs/notes.md'), path.join(d, 'docs/renamed notes.md'));
        await writeFiles(d, { 'latin1.txt': latin1, 'dir with space/naïve "q".txt': 'ü\n' });
      },
      ['docs/notes.md', 'docs/renamed notes.md', 'latin1.txt', 'dir with space/naïve "q".txt'],
    );
    // Bytes that are not UTF-8 cannot survive a text patch held in a string: they travel as binary.
    expect(exported.patch).toMatch(/latin1\.txt[\s\S]*GIT binary patch/);
    expect(exported.patch).not.toContain('\uFFFD');
  });

  it('excludes ALWAYS_EXCLUDED paths at any depth and ignored files, even when .gitignore does not', async () => {
    const junk: Record<string, string> = {
      'node_modules/left-pad/index.js': 'x',
      'web/node_modules/a/b.js': 'x',
      '.venv/bin/python': 'x',
      'src/__pycache__/app.cpython-311.pyc': 'x',
      '.pytest_cache/v/cache/lastfailed': '{}',
      'pkg/.ruff_cache/0.1/x': 'x',
      '.mypy_cache/3.11/app.json': '{}',
      '.DS_Store': 'x',
      'docs/.DS_Store': 'x',
      'build/out.o': 'x',
      'run.log': 'x',
    };
    const { src, exported } = await roundTrip(
      (d) => writeFiles(d, { ...junk, 'src/app.py': 'fixed\n' }),
      ['src/app.py'],
    );
    // The exported tree is exactly the base plus the fix: none of the junk is in it.
    const onlyFix = await fresh();
    await writeFiles(onlyFix.path, { 'src/app.py': 'fixed\n' });
    expect(await revision(onlyFix)).toBe(exported.tree);
    expect(await revision(src)).toBe(exported.tree);
    for (const name of ALWAYS_EXCLUDED) expect(exported.patch).not.toContain(name);
  });

  it('all cases at once', async () => {
    await roundTrip(
      async (d) => {
        await writeFiles(d, { 'README.md': '# changed\n', 'new.txt': 'new\n', 'b.bin': BINARY });
        await rm(path.join(d, 'old.txt'));
        await chmod(path.join(d, 'script.sh'), 0o755);
        await writeFiles(d, { 'node_modules/x.js': 'x', '.venv/pyvenv.cfg': 'x' });
      },
      ['README.md', 'new.txt', 'b.bin', 'old.txt', 'script.sh'],
    );
  });

  it('no change: empty patch, base tree, and applying it is a no-op', async () => {
    const wt = await fresh();
    await writeFiles(wt.path, { 'node_modules/x.js': 'x' });
    expect(await exportPatch(wt, source.head, LIMITS)).toEqual({
      patch: '',
      files: [],
      tree: baseTree,
      skipped: [],
    });
    expect(await applyPatch(wt, '')).toEqual({ ok: true, error: null });
    expect(await revision(wt)).toBe(baseTree);
  });
});

describe('index safety and failures', () => {
  it("never touches the worktree's own index", async () => {
    const wt = await fresh();
    await writeFiles(wt.path, { 'README.md': '# staged\n', 'src/app.py': 'unstaged\n', 'extra.txt': 'x\n' });
    await git(['add', 'README.md'], { cwd: wt.path });
    const indexFile = path.resolve(
      wt.path,
      (await git(['rev-parse', '--git-path', 'index'], { cwd: wt.path })).stdout.trim(),
    );
    const cachedBefore = (await git(['diff', '--cached'], { cwd: wt.path })).stdout;
    const indexBefore = await readFile(indexFile);
    const exported = await exportPatch(wt, source.head, LIMITS);
    await revision(wt);
    expect(exported.files.sort()).toEqual(['README.md', 'extra.txt', 'src/app.py']);
    expect(await readFile(indexFile)).toEqual(indexBefore);
    expect((await git(['diff', '--cached'], { cwd: wt.path })).stdout).toBe(cachedBefore);
    expect((await git(['status', '--porcelain'], { cwd: wt.path })).stdout).toBe(
      'M  README.md\n M src/app.py\n?? extra.txt\n',
    );
  });

  it("a patch that does not apply fails with git's message and leaves the target untouched", async () => {
    const src = await fresh();
    await writeFiles(src.path, { 'brand-new.txt': 'new\n', 'src/app.py': 'def answer():\n    return 42\n' });
    const { patch } = await exportPatch(src, source.head, LIMITS);

    const dst = await fresh();
    await writeFiles(dst.path, { 'src/app.py': 'something else entirely\n' });
    const before = await revision(dst);
    const statusBefore = (await git(['status', '--porcelain'], { cwd: dst.path })).stdout;
    const res = await applyPatch(dst, patch);
    expect(res.ok).toBe(false);
    expect(res.error).toMatch(/src\/app\.py/);
    expect(existsSync(path.join(dst.path, 'brand-new.txt'))).toBe(false);
    expect(await revision(dst)).toBe(before);
    expect((await git(['status', '--porcelain'], { cwd: dst.path })).stdout).toBe(statusBefore);

    const garbage = await applyPatch(dst, 'this is not a patch\n');
    expect(garbage.ok).toBe(false);
    expect(garbage.error).toBeTruthy();
  });
});

describe('patchFiles', () => {
  it('reads modifications, additions, deletions, renames, mode-only and binary sections', () => {
    const patch = [
      'diff --git a/src/a.py b/src/a.py',
      'index 1111111..2222222 100644',
      '--- a/src/a.py',
      '+++ b/src/a.py',
      '@@ -1,2 +1,2 @@',
      '--- a/not-a-file-header',
      '+++ b/also-content',
      'diff --git a/gone.txt b/gone.txt',
      'deleted file mode 100644',
      '--- a/gone.txt',
      '+++ /dev/null',
      'diff --git a/old name.md b/new name.md',
      'similarity index 100%',
      'rename from old name.md',
      'rename to new name.md',
      'diff --git a/run.sh b/run.sh',
      'old mode 100644',
      'new mode 100755',
      'diff --git a/x b/x b/x b/x',
      'old mode 100644',
      'new mode 100755',
      'diff --git a/img.png b/img.png',
      'new file mode 100644',
      'index 0000000..3333333',
      'GIT binary patch',
      'literal 3',
      'KcmZQzWB>pF00IC2',
      '',
      'diff --git "a/na\\303\\257ve \\"q\\".txt" "b/na\\303\\257ve \\"q\\".txt"',
      'new file mode 100644',
      '--- /dev/null',
      '+++ "b/na\\303\\257ve \\"q\\".txt"',
      'diff --git "a/t\\tab" "b/t\\tab"',
      'old mode 100644',
      'new mode 100755',
      'diff --git a/sp ace.txt b/sp ace.txt',
      '--- a/sp ace.txt\t',
      '+++ b/sp ace.txt\t',
    ].join('\n');
    expect(patchFiles(patch)).toEqual([
      'src/a.py',
      'gone.txt',
      'old name.md',
      'new name.md',
      'run.sh',
      'x b/x',
      'img.png',
      'naïve "q".txt',
      't\tab',
      'sp ace.txt',
    ]);
    expect(patchFiles('')).toEqual([]);
  });
});
