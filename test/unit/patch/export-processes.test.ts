import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { exportPatch } from '../../../src/patch/patch.js';
import { git } from '../../../src/workspace/git.js';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import { makeSourceRepo, tempDir } from '../../support/git-fixtures.js';
import { gitCalls } from '../../support/git-shim.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => ({ dir: root, cleanup } = await tempDir()));
afterAll(() => cleanup());

/**
 * Issue 40: record's patch export ran six git processes one after another (`rev-parse
 * --git-common-dir`, read-tree, ls-files, add, diff, write-tree) on the path from the model's last
 * step to the pull request. The common dir is read from the worktree's admin dir, and the calls that do
 * not need each other run at once (seen through a git shim on PATH that makes them wait for each other).
 */
it('exports a patch in five git processes, three steps deep, and keeps the base gitlinks', async () => {
  const source = await makeSourceRepo(path.join(root, 'source'), { 'a.txt': 'a\n', 'd/b.txt': 'b\n' });
  // A submodule in the base (a gitlink, checked out as an empty directory): what is in it is never the patch's.
  await git(['update-index', '--add', '--cacheinfo', `160000,${source.head},vendor/lib`], {
    cwd: source.path,
  });
  await git(['commit', '-q', '-m', 'gitlink'], { cwd: source.path });
  const head = (await git(['rev-parse', 'HEAD'], { cwd: source.path })).stdout.trim();
  const m = new GitWorkspaceManager({
    cacheDir: path.join(root, 'cache'),
    worktreeDir: path.join(root, 'wt'),
  });
  const wt = await m.create(source.path, head, 'export');
  await writeFile(path.join(wt.path, 'a.txt'), 'A\n');
  await writeFile(path.join(wt.path, 'vendor/lib/inside.txt'), 'in the submodule\n'); // not the parent's
  let exported: Awaited<ReturnType<typeof exportPatch>> | undefined;
  const calls = await gitCalls(
    root,
    async () => void (exported = await exportPatch(wt, head, { maxFileBytes: 1 << 20 })),
    [
      ['read-tree', 'ls-tree'],
      ['diff', 'write-tree'],
    ],
  );
  expect(exported!.files).toEqual(['a.txt']);
  expect(exported!.tree).toMatch(/^[0-9a-f]{40}$/);
  const started = calls.filter((c) => !/ (met|alone)$/.test(c)).map((c) => c.split(' ')[0]);
  expect(started.sort()).toEqual(['add', 'diff', 'ls-tree', 'read-tree', 'write-tree']); // was 6, with rev-parse
  expect(calls.filter((c) => / (met|alone)$/.test(c)).sort()).toEqual([
    'diff met',
    'ls-tree met',
    'read-tree met',
    'write-tree met',
  ]); // was: each alone
});
