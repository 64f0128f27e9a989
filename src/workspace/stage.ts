import { constants, existsSync, type BigIntStats } from 'node:fs';
import { lstat, mkdir, open, readdir, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { removeTree, removeTrees } from './tree.js';

/**
 * The sandbox boundary, host side, in one module. Rule: once untrusted code may have written a
 * worktree (it was lent to a container), no host process interprets that tree as a git repository or
 * follows anything in it. The host reads it only as data, here: regular files (opened without following
 * links or blocking), plain directories and the text of symbolic links are copied into a host-owned
 * stage beside it, and host git works on the stage alone. What the copy never carries: any `.git` entry
 * (a directory holding one is a nested repository and is left out whole), gitlink paths of the base,
 * files over the size limit, FIFOs, sockets and devices. So a planted gitdir, alternates, replace ref,
 * filter driver or fsmonitor has nothing to be found through: git never sees the tree they were planted in.
 * `markLent` records that a worktree was lent; `worktreeGit` (./git.ts) refuses to run on one.
 */

/** More entries than any real repository has: past this, an export fails instead of walking forever. */
export const STAGE_MAX_ENTRIES = 300_000;

export class StageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StageError';
  }
}

const sibling = (worktree: string, suffix: string) =>
  path.join(path.dirname(worktree), `.${path.basename(worktree)}.${suffix}`);

/** The host-owned copy git works on; beside the worktree, never inside it, never mounted anywhere. */
export const stagePath = (worktree: string) => sibling(worktree, 'stage');
const lentPath = (worktree: string) => sibling(worktree, 'lent');

/** Records, before any untrusted code runs in it, that `worktree` is no longer the host's to interpret. */
export async function markLent(worktree: string): Promise<void> {
  await writeFile(lentPath(worktree), '', { flag: 'a' });
}

export const wasLent = (worktree: string): boolean => existsSync(lentPath(worktree));

/** Removes what this module keeps beside a worktree (its stage and its mark). */
export const removeStage = (worktree: string): Promise<void> => removeStages([worktree]);

/**
 * Removes what this module keeps beside `worktrees`, and the `trees` given besides (worktrees set
 * aside): each process started holds the event loop a few ms, so one removes them all.
 */
export async function removeStages(
  worktrees: readonly string[],
  trees: readonly string[] = [],
): Promise<void> {
  for (const w of worktrees) manifests.delete(stagePath(w));
  await removeTrees([...trees, ...worktrees.map(stagePath)]);
  await Promise.all(worktrees.map((w) => rm(lentPath(w), { force: true })));
}

/** A path a snapshot left out, and why. */
export interface SkippedFile {
  path: string;
  bytes: number;
  /**
   * too_large: a new or changed file over the size limit; repository: a directory holding a `.git`
   * (a nested repository); special: a FIFO, socket or device; unreadable: could not be read as data;
   * too_deep: a path longer than a system call can name (PATH_MAX), which no git could stage either.
   */
  reason: 'too_large' | 'repository' | 'special' | 'unreadable' | 'too_deep';
}

export interface StageOptions {
  maxFileBytes: number;
  /** The base's submodule paths: never copied, never entered. */
  gitlinks: ReadonlySet<string>;
  /** Names never copied at any depth (dependency and cache directories). */
  excludedNames: ReadonlySet<string>;
}

export interface Staged {
  /** The stage: git's work tree for this snapshot. */
  stage: string;
  /** Paths not in the stage that git must keep at the base: large, unreadable or special files, nested repositories. */
  excluded: string[];
  /** What was left out and why (large files are decided by the caller, which can compare with the base). */
  skipped: SkippedFile[];
  /** Regular files over the size limit (not copied). */
  large: { path: string; abs: string; bytes: number }[];
}

/**
 * What the stage holds, per relative path, as the source looked when it was copied: the change time
 * cannot be set from user space, so a file rewritten with its old size and mtime is still copied anew.
 * In memory only: a new process starts its stages afresh.
 */
const manifests = new Map<string, Map<string, string>>();
/** One sync per stage at a time. */
const syncing = new Map<string, Promise<unknown>>();

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const WRITE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;

/** Longest path (bytes) a system call takes on Linux: PATH_MAX less its terminating NUL. */
const MAX_PATH_BYTES = 4095;

/** Files copied at once (each holds two descriptors while it is copied). */
const COPY_BATCH = 32;
/** Entries looked at (lstat) at once. */
const STAT_BATCH = 512;

const isGitName = (name: string) => name.toLowerCase() === '.git';

/** Brings the stage of `worktree` up to date with it, copying only what changed since the last sync. */
export async function syncStage(worktree: string, opts: StageOptions): Promise<Staged> {
  const stage = stagePath(worktree);
  const previous = syncing.get(stage) ?? Promise.resolve();
  const run = previous.catch(() => undefined).then(() => sync(worktree, stage, opts));
  syncing.set(stage, run);
  try {
    return await run;
  } finally {
    if (syncing.get(stage) === run) syncing.delete(stage);
  }
}

async function sync(worktree: string, stage: string, opts: StageOptions): Promise<Staged> {
  let old = manifests.get(stage);
  if (!old || !existsSync(stage)) {
    await removeTree(stage);
    await mkdir(stage, { mode: 0o700 });
    old = new Map();
  }
  manifests.delete(stage); // restored only when the sync completes: a half-done stage is never trusted
  const seen = new Map<string, string>();
  const out: Staged = { stage, excluded: [], skipped: [], large: [] };
  const leaveOut = (rel: string, bytes: number, reason: SkippedFile['reason']) => {
    out.excluded.push(rel);
    out.skipped.push({ path: reason === 'repository' ? `${rel}/` : rel, bytes, reason });
  };
  let entries = 0;
  const dirs = [''];
  const syncBatch = async (batch: string[]) => {
    const stats = await Promise.all(
      batch.map((childRel) => lstat(path.join(worktree, childRel), { bigint: true }).catch(() => null)),
    );
    const copies: (() => Promise<void>)[] = [];
    for (const [i, childRel] of batch.entries()) {
      const abs = path.join(worktree, childRel);
      const st = stats[i];
      if (!st) leaveOut(childRel, 0, 'unreadable');
      else if (st.isDirectory()) dirs.push(childRel);
      else if (st.isSymbolicLink()) copies.push(() => copyLink(abs, stage, childRel, old, seen));
      else if (!st.isFile()) leaveOut(childRel, 0, 'special');
      else if (st.size > BigInt(opts.maxFileBytes)) {
        out.excluded.push(childRel);
        out.large.push({ path: childRel, abs, bytes: Number(st.size) });
      } else
        copies.push(async () => {
          if (!(await copyFile(abs, st, stage, childRel, old, seen))) leaveOut(childRel, 0, 'unreadable');
        });
    }
    // Distinct paths in one directory: copied a batch at a time, within the descriptor limit.
    for (let i = 0; i < copies.length; i += COPY_BATCH)
      await Promise.all(copies.slice(i, i + COPY_BATCH).map((copy) => copy()));
  };
  try {
    while (dirs.length > 0) {
      const rel = dirs.pop()!;
      const names = await readdir(path.join(worktree, rel)).catch(() => null);
      if (names === null) {
        if (rel !== '') leaveOut(rel, 0, 'unreadable');
        continue;
      }
      if (rel !== '' && names.some(isGitName)) {
        leaveOut(rel, 0, 'repository');
        continue;
      }
      if (rel !== '') await ensureDir(stage, rel, old, seen);
      const children = names
        .map((name) => (rel === '' ? name : `${rel}/${name}`))
        .filter((childRel, i) => {
          const name = names[i]!;
          if (isGitName(name) || opts.excludedNames.has(name) || opts.gitlinks.has(childRel)) return false;
          // The stage's path is the longer one (its root's name is): past the limit, nothing can name it.
          if (Buffer.byteLength(path.join(stage, childRel)) <= MAX_PATH_BYTES) return true;
          leaveOut(childRel, 0, 'too_deep');
          return false;
        });
      entries += children.length;
      if (entries > STAGE_MAX_ENTRIES)
        throw new StageError(`the worktree holds more than ${STAGE_MAX_ENTRIES} entries`);
      // A directory's entries a batch at a time (most syncs copy nothing, and their cost is these
      // calls), never all at once: a directory can hold 250,000 files.
      for (let i = 0; i < children.length; i += STAT_BATCH)
        await syncBatch(children.slice(i, i + STAT_BATCH));
    }
    await removeStale(stage, old, seen);
  } catch (err) {
    await removeTree(stage);
    throw err;
  }
  manifests.set(stage, seen);
  return out;
}

const typeOf = (sig: string | undefined) => sig?.[0];

/** Removes the stage's entry at `rel` when it is not of the kind about to be written there. */
async function clearIfOther(stage: string, rel: string, kind: string, old: Map<string, string>) {
  const was = old.get(rel);
  if (was !== undefined && typeOf(was) !== kind)
    await rm(path.join(stage, rel), { recursive: true, force: true });
}

async function ensureDir(stage: string, rel: string, old: Map<string, string>, seen: Map<string, string>) {
  seen.set(rel, 'd');
  if (typeOf(old.get(rel)) === 'd') return;
  await clearIfOther(stage, rel, 'd', old);
  await mkdir(path.join(stage, rel));
}

async function copyLink(
  abs: string,
  stage: string,
  rel: string,
  old: Map<string, string>,
  seen: Map<string, string>,
) {
  const target = await readlink(abs);
  const sig = `l${target}`;
  seen.set(rel, sig);
  if (old.get(rel) === sig) return;
  if (old.has(rel)) await rm(path.join(stage, rel), { recursive: true, force: true });
  await symlink(target, path.join(stage, rel)); // its text only: never followed, here or by git
}

/** Copies one regular file through a descriptor that cannot follow a link or block; false if unreadable. */
async function copyFile(
  abs: string,
  st: BigIntStats,
  stage: string,
  rel: string,
  old: Map<string, string>,
  seen: Map<string, string>,
): Promise<boolean> {
  const exec = (st.mode & 0o111n) !== 0n;
  const sig = `f${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}:${exec ? 'x' : '-'}`;
  if (old.get(rel) === sig) {
    seen.set(rel, sig);
    return true;
  }
  const src = await open(abs, READ_FLAGS).catch(() => null);
  if (!src) return false;
  let content: Buffer;
  try {
    const now = await src.stat({ bigint: true });
    if (!now.isFile() || now.ino !== st.ino) return false;
    content = await src.readFile();
  } catch {
    return false;
  } finally {
    await src.close();
  }
  await clearIfOther(stage, rel, 'f', old);
  const dst = await open(path.join(stage, rel), WRITE_FLAGS, exec ? 0o755 : 0o644);
  try {
    await dst.writeFile(content);
    await dst.chmod(exec ? 0o755 : 0o644); // an existing file keeps its old mode through O_CREAT
  } finally {
    await dst.close();
  }
  seen.set(rel, sig);
  return true;
}

/**
 * Removes from the stage what the source no longer has. Only below directories the stage holds as real
 * directories now: an entry whose ancestor was replaced is gone with it, and a path through a link
 * written this time must never be followed.
 */
async function removeStale(stage: string, old: Map<string, string>, seen: Map<string, string>) {
  for (const rel of old.keys()) {
    if (seen.has(rel)) continue;
    const parts = rel.split('/');
    let underDirs = true;
    for (let i = 1; i < parts.length && underDirs; i++)
      underDirs = seen.get(parts.slice(0, i).join('/')) === 'd';
    if (underDirs) await rm(path.join(stage, rel), { recursive: true, force: true });
  }
}

/** The git blob id of a regular file, read as data through a descriptor that follows no link. */
export async function blobId(abs: string, algorithm: 'sha1' | 'sha256'): Promise<string | null> {
  const fh = await open(abs, READ_FLAGS).catch(() => null);
  if (!fh) return null;
  try {
    const st = await fh.stat();
    if (!st.isFile()) return null;
    const hash = createHash(algorithm).update(`blob ${st.size}\0`);
    for await (const chunk of fh.createReadStream({ autoClose: false })) hash.update(chunk as Buffer);
    return hash.digest('hex');
  } finally {
    await fh.close();
  }
}
