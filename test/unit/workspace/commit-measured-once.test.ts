import path from 'node:path';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import { makeSourceRepo, tempDir } from '../../support/git-fixtures.js';
import { gitCalls } from '../../support/git-shim.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => ({ dir: root, cleanup } = await tempDir()));
afterAll(() => cleanup());

/**
 * Issue 40: the size check walks the whole tree of the base commit (`git ls-tree -r`) before every
 * worktree, the agent's and then the judge's, on the path from the label to the pull request. A commit
 * never changes, so its verdict is measured once per mirror in the process.
 */
it('the agent worktree, the judge worktrees and a rerun at one base measure the tree once', async () => {
  const source = await makeSourceRepo(path.join(root, 'source'), { 'a.txt': 'a\n', 'd/b.txt': 'b\n' });
  const m = new GitWorkspaceManager({
    cacheDir: path.join(root, 'cache'),
    worktreeDir: path.join(root, 'worktrees'),
    limits: { maxWorktreeBytes: 2 ** 20, maxWorktreeEntries: 100 },
  });
  await m.mirror(source.path);
  const calls = await gitCalls(root, async () => {
    await m.create(source.path, source.head, 'agent');
    await m.createMany(source.path, source.head, ['j1', 'j2', 'j3', 'j4']);
    await m.create(source.path, source.head, 'rerun');
  });
  expect(calls.filter((c) => c.startsWith('ls-tree -r'))).toHaveLength(1); // was 3
  // Other limits are another verdict: measured again.
  const strict = new GitWorkspaceManager({
    cacheDir: path.join(root, 'cache'),
    worktreeDir: path.join(root, 'worktrees'),
    limits: { maxWorktreeBytes: 2 ** 20, maxWorktreeEntries: 2 },
  });
  const again = await gitCalls(root, async () => {
    await expect(strict.create(source.path, source.head, 'strict')).rejects.toThrow(/MAX_WORKTREE_FILES/);
    await expect(strict.create(source.path, source.head, 'strict2')).rejects.toThrow(/MAX_WORKTREE_FILES/);
  });
  expect(again.filter((c) => c.startsWith('ls-tree -r'))).toHaveLength(1);
});
