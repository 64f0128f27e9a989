import { readFileSync } from 'node:fs';
import path from 'node:path';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import { makeSourceRepo, tempDir } from '../../support/git-fixtures.js';
import { gitCalls } from '../../support/git-shim.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => ({ dir: root, cleanup } = await tempDir()));
afterAll(async () => cleanup());

/**
 * A worktree of a commit the mirror holds asks git once whether it is there (issue 40: every git call
 * is a process on the path from the label to the agent's first step; it asked twice).
 */
it('a worktree of a commit the mirror has asks for the commit once', async () => {
  const source = await makeSourceRepo(path.join(root, 'source'), { 'a.txt': 'a\n' });
  const m = new GitWorkspaceManager({
    cacheDir: path.join(root, 'cache'),
    worktreeDir: path.join(root, 'worktrees'),
  });
  await m.mirror(source.path);
  const calls = await gitCalls(root, async () => {
    const wt = await m.create(source.path, source.head, 'run-once');
    expect(readFileSync(path.join(wt.path, 'a.txt'), 'utf8')).toBe('a\n');
  });
  expect(calls.filter((l) => l.startsWith('cat-file -e'))).toEqual([`cat-file -e ${source.head}^{commit}`]);
});
