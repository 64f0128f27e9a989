import path from 'node:path';
import { GitWorkspaceManager, WorkspaceError } from '../../../src/workspace/manager.js';
import { commitAll, makeSourceRepo, tempDir, writeFiles } from '../../support/git-fixtures.js';

/**
 * Red team: a revision's diff of the pull request against its base was read into one string, bounded
 * only by execa's 100 MB buffer, though the model sees 40,000 characters of it: a pull request that
 * adds a huge file made each revision run hold it (and a revision per review comment made several at
 * once). Now git is stopped past AGENTICFIX_REVISION_MAX_DIFF_MB and the run is told why.
 */

const MiB = 1024 * 1024;

it('a diff over the cap is refused with a WorkspaceError naming the setting; one within it is read whole', async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const source = await makeSourceRepo(path.join(dir, 'source'), { 'README.md': '# demo\n' });
    await writeFiles(source.path, { 'big.txt': 'line of text\n'.repeat((2 * MiB) / 13) });
    const head = await commitAll(source.path, 'big');
    const m = new GitWorkspaceManager({
      cacheDir: path.join(dir, 'cache'),
      worktreeDir: path.join(dir, 'wt'),
    });
    await m.mirror(source.path);
    const over = m.diff(source.path, source.head, head, MiB);
    await expect(over).rejects.toBeInstanceOf(WorkspaceError); // was: the 2 MiB diff, read whole
    await expect(over).rejects.toThrow(
      `the diff of ${source.head.slice(0, 12)}..${head.slice(0, 12)} is over 1 MB (AGENTICFIX_REVISION_MAX_DIFF_MB)`,
    );
    const within = await m.diff(source.path, source.head, head, 4 * MiB);
    expect(within).toMatch(/^diff --git a\/big\.txt b\/big\.txt\n/);
    expect(within.length).toBeGreaterThan(2 * MiB - 64);
  } finally {
    await cleanup();
  }
});
