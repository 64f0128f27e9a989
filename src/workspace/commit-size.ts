import { gitRecords } from './git.js';

/**
 * Why the tree of `commit` in `repo` would be over the operator's limits once checked out, one sentence,
 * or null. Read from git's objects, before anything is written: a pack is compressed and one blob may
 * sit at any number of paths, so a push of a few MB can be a checkout of terabytes (a git bomb) that fills
 * the disk every run and the store share. Stops reading at the first limit crossed.
 */
export async function commitOverLimits(
  repo: string,
  commit: string,
  limits: { maxWorktreeBytes: number; maxWorktreeEntries: number },
): Promise<string | null> {
  let bytes = 0;
  let entries = 0;
  let over: string | null = null;
  // -t lists the directories too (the worktree's count has them); -l adds each blob's size.
  await gitRecords(['ls-tree', '-r', '-t', '-l', '-z', '--full-tree', commit], repo, (record) => {
    bytes += Number(/^\S+ blob \S+ +(\d+)\t/.exec(record)?.[1] ?? 0);
    entries += 1;
    if (bytes > limits.maxWorktreeBytes)
      over = `its files come to more than ${Math.round(limits.maxWorktreeBytes / 2 ** 20)} MB (AGENTICFIX_MAX_WORKTREE_MB)`;
    else if (entries > limits.maxWorktreeEntries)
      over = `it has more than ${limits.maxWorktreeEntries} files and directories (AGENTICFIX_MAX_WORKTREE_FILES)`;
    return over === null;
  });
  return over;
}
