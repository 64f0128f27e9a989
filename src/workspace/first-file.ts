import { git } from './git.js';

/**
 * The first of `files` (in their order) that is a regular file at `commit` in the bare repository
 * `gitDir`, with its text, read from git's objects (never from a worktree): a link, a submodule or a
 * directory does not count; null when none is there. One listing for all of them.
 */
export async function firstFileAt(
  gitDir: string,
  commit: string,
  files: readonly string[],
): Promise<{ path: string; text: string } | null> {
  if (files.length === 0) return null;
  const ls = await git(['ls-tree', '-z', commit, '--', ...files], { cwd: gitDir, allowFail: true });
  const blobs = new Map<string, string>();
  for (const m of ls.stdout.matchAll(/(?:^|\0)100(?:644|755) blob ([0-9a-f]{40,64})\t([^\0]*)/g))
    blobs.set(m[2]!, m[1]!);
  const file = files.find((f) => blobs.has(f));
  if (file === undefined) return null;
  return { path: file, text: (await git(['cat-file', 'blob', blobs.get(file)!], { cwd: gitDir })).stdout };
}
