import { spawn } from 'node:child_process';
import { lstat, statfs } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { execa } from 'execa';
import { capMiddle } from '../trace/cap.js';

/**
 * Whole-tree operations on a tree that code under test may have written: any depth and any mode. A
 * path deeper than PATH_MAX (4,096 bytes) cannot be named by any call that takes a full path, which is
 * every call of Node's fs (ENAMETOOLONG), and `chdir` is process-wide. GNU find, chown, chmod and rm
 * descend through open directory handles (fts, openat), relative to each level, never following a
 * link: these do the work, in child processes, so no depth and no mode stops them.
 */

export interface TreeLimits {
  maxBytes: number;
  maxEntries: number;
}

export interface TreeMeasure {
  /** Bytes counted so far: each entry as the larger of its size and the space it takes. */
  bytes: number;
  /** Entries (files, directories, links, anything) counted so far, the root not included. */
  entries: number;
  /** Which limit the tree is over, `unmeasurable` when a part of it could not be read; null within both. */
  over: 'bytes' | 'entries' | 'unmeasurable' | null;
  /** What could not be read (the walker's first error lines), for `unmeasurable`. */
  detail: string | null;
}

/** "No such file or directory": an entry removed while the walk ran has nothing left to count. */
const VANISHED = /No such file or directory$/;

/**
 * Measures `dir` (links not followed) and stops as soon as a limit is passed, so measuring a tree that
 * blew up costs no more than one at the limit. Fails closed: any error but a vanished entry (a directory
 * this process may not read, a walker that could not run) makes the tree `unmeasurable`, which callers
 * treat as over the limit.
 */
export async function measureTree(dir: string, limits: TreeLimits): Promise<TreeMeasure> {
  // `%s %b`: size and 512-byte blocks (a sparse file counts by its size: that is what git would read).
  const find = spawn('find', ['-P', dir, '-mindepth', '1', '-printf', '%s %b\n'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const errors: string[] = [];
  let errorLines = 0;
  createInterface({ input: find.stderr }).on('line', (line) => {
    if (VANISHED.test(line)) return;
    errorLines++;
    if (errors.length < 3) errors.push(capMiddle(line, 300));
  });
  const ended = new Promise<{ code: number | null; failed: Error | null }>((resolve) => {
    find.once('error', (err) => resolve({ code: null, failed: err }));
    find.once('close', (code) => resolve({ code, failed: null }));
  });
  const m: TreeMeasure = { bytes: 0, entries: 0, over: null, detail: null };
  for await (const line of createInterface({ input: find.stdout })) {
    const space = line.indexOf(' ');
    m.bytes += Math.max(Number(line.slice(0, space)), Number(line.slice(space + 1)) * 512);
    m.entries++;
    m.over = m.bytes > limits.maxBytes ? 'bytes' : m.entries > limits.maxEntries ? 'entries' : null;
    if (m.over) {
      find.kill('SIGKILL');
      break;
    }
  }
  const { code, failed } = await ended;
  if (m.over) return m;
  if (failed || errorLines > 0 || code !== 0) {
    m.over = 'unmeasurable';
    m.detail = failed
      ? `find did not run: ${failed.message}`
      : errors.length > 0
        ? `${errors.join('; ')}${errorLines > errors.length ? ` (+${errorLines - errors.length} more)` : ''}`
        : `find exited ${code}`;
  }
  return m;
}

/**
 * Why a worktree is over the operator's limits (AGENTICFIX_MAX_WORKTREE_MB, _FILES), one sentence, or
 * null within both. One that cannot be measured counts as over.
 */
export async function worktreeOverLimits(
  worktree: string,
  limits: { maxWorktreeBytes: number; maxWorktreeEntries: number },
): Promise<string | null> {
  const m = await measureTree(worktree, {
    maxBytes: limits.maxWorktreeBytes,
    maxEntries: limits.maxWorktreeEntries,
  });
  switch (m.over) {
    case null:
      return null;
    case 'bytes':
      return `the worktree grew past ${Math.round(limits.maxWorktreeBytes / 2 ** 20)} MB (AGENTICFIX_MAX_WORKTREE_MB)`;
    case 'entries':
      return `the worktree grew past ${limits.maxWorktreeEntries} files and directories (AGENTICFIX_MAX_WORKTREE_FILES)`;
    case 'unmeasurable':
      return `the worktree could not be measured, which counts as over its limits (${m.detail})`;
  }
}

/**
 * Less free space than this where the worktree lives is a full disk: the trace, the result and git need
 * room to write, and code under test that filled it may have had some given back since (a worktree
 * removed beside it), so ENOSPC alone would show only by chance.
 */
const FULL_BELOW_BYTES = 2 ** 20;

/** Why the filesystem holding `worktree` counts as full, or null while it has room. */
export async function filesystemFull(worktree: string): Promise<string | null> {
  const s = await statfs(worktree).catch(() => null); // no worktree to look at: measureTree says so
  if (!s) return null;
  const free = s.bavail * s.bsize;
  return free < FULL_BELOW_BYTES
    ? `no space left on device: ${Math.floor(free / 1024)} KB free where the worktree is`
    : null;
}

export class TreeError extends Error {
  override name = 'TreeError';
}

const run = (cmd: string, args: string[]) =>
  execa(cmd, args, { reject: false, stdin: 'ignore', stdout: 'ignore', stripFinalNewline: true });

/**
 * Removes `dir` whatever its depth and modes: a directory its owner closed (`chmod 000`) is opened
 * again (u+rwx, links untouched) before a second try, which a process that is not root needs to
 * empty it. Gone already is done.
 */
export async function removeTree(dir: string): Promise<void> {
  const st = await lstat(dir).catch(() => null);
  if (!st) return;
  if ((await run('rm', ['-rf', '--', dir])).exitCode === 0) return;
  if (st.isDirectory()) await run('chmod', ['-R', 'u+rwx', '--', dir]);
  const again = await run('rm', ['-rf', '--', dir]);
  if (again.exitCode !== 0) throw new TreeError(`cannot remove ${dir}: ${capMiddle(again.stderr, 2000)}`);
}

/** Removes the trees in `dirs` as removeTree does, by one process for all of them unless one resists. */
export async function removeTrees(dirs: readonly string[]): Promise<void> {
  const here = (
    await Promise.all(dirs.map(async (d) => ((await lstat(d).catch(() => null)) ? d : null)))
  ).filter((d): d is string => d !== null);
  if (here.length === 0) return;
  if (here.length > 1 && (await run('rm', ['-rf', '--', ...here])).exitCode === 0) return;
  await Promise.all(here.map(removeTree));
}

/** Gives every entry under `dir`, `dir` included, to `uid:gid`: links themselves, never what they name. */
export async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  const res = await run('chown', ['-R', '-P', '--no-dereference', `${uid}:${gid}`, '--', dir]);
  if (res.exitCode !== 0)
    throw new TreeError(`cannot hand ${dir} to ${uid}:${gid}: ${capMiddle(res.stderr, 2000)}`);
}
