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
  // A commit's tree never changes: measured once per mirror, commit and limits in this process, so the
  // judge's worktrees and a rerun at the same base skip the walk of the whole tree.
  const key = `${repo}\0${commit}\0${limits.maxWorktreeBytes}\0${limits.maxWorktreeEntries}`;
  const known = verdicts.get(key);
  if (known !== undefined) return known;
  const over = await measure(repo, commit, limits);
  if (verdicts.size >= MAX_VERDICTS) verdicts.delete(verdicts.keys().next().value!); // the oldest
  verdicts.set(key, over);
  return over;
}

/** Verdicts remembered; a key is a few hundred bytes, so this bounds the map at about a MB. */
const MAX_VERDICTS = 4096;
const verdicts = new Map<string, string | null>();

async function measure(
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
