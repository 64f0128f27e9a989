import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { lstat, mkdir, readdir, readFile, realpath, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import lockfile from 'proper-lockfile';
import { z } from 'zod';
import { removeStage, removeStages, wasLent } from './stage.js';
import { git, GitError, stripUserinfo, worktreeGit, type GitConfig } from './git.js';
import { removeTree } from './tree.js';
import { commitOverLimits } from './commit-size.js';
import { firstFileAt } from './first-file.js';
import { withinFetchLimits } from './fetch-bounds.js';
import { fetchQuarantined } from './fetch-quarantine.js';
import { besideMirror, clearLeftovers, fetchLeftovers, unlockHalfAdded } from './leftovers.js';
import { normalizeRemote } from './remote.js';
import type { Worktree, WorkspaceLimits, WorkspaceManager } from './types.js';

const FullSha = z.string().regex(/^[0-9a-f]{40}$/, 'base commit must be a full 40-hex SHA');
const RunId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'run id must be a safe directory name');
/** A leading '-' would be read by git as an option. */
const Rev = z
  .string()
  .min(1)
  .regex(/^[^-\s]/, 'revision must not start with "-" or whitespace');
const Remote = z.string().min(1).regex(/^[^-]/, 'remote must not start with "-"');

export class WorkspaceError extends Error {
  override name = 'WorkspaceError';
}

/** Prefix of worktrees set aside for removal (names of runs never start with a dot). */
const QUARANTINE = '.quarantine.';

/** Git's worktree admin files race under concurrent `worktree add`; clones and fetches must not overlap. */
const LOCK_RETRIES = { retries: 400, factor: 1.3, minTimeout: 25, maxTimeout: 2000 };

export class GitWorkspaceManager implements WorkspaceManager {
  private readonly cacheDir: string;
  private readonly worktreeDir: string;
  /** In-process queue per mirror, so callers in one process wait without polling the file lock. */
  private readonly queues = new Map<string, Promise<unknown>>();

  /** Checkouts over these are refused before a file is written (none: no check, for tests of other things). */
  private readonly limits: WorkspaceLimits | null;

  constructor(opts: { cacheDir: string; worktreeDir: string; limits?: WorkspaceLimits }) {
    this.cacheDir = path.resolve(opts.cacheDir);
    this.worktreeDir = path.resolve(opts.worktreeDir);
    this.limits = opts.limits ?? null;
  }

  /** Path of the bare mirror for `remote` (whether or not it exists yet). */
  mirrorPath(remote: string): string {
    const normalized = normalizeRemote(remote);
    const hash = createHash('sha256').update(normalized).digest('hex').slice(0, 16);
    const slug =
      path
        .basename(normalized)
        .replace(/[^A-Za-z0-9._-]/g, '_')
        .slice(0, 40) || 'repo';
    return path.join(this.cacheDir, `${slug}-${hash}.git`);
  }

  /**
   * `auth` is per-call git config for the network (e.g. an installation token header for a private
   * repository); it travels in git's environment and is never stored in the mirror. When `needs` (a
   * full SHA) is already in the mirror nothing is fetched: a rerun at the same base costs no network.
   */
  async mirror(remote: string, auth: GitConfig = [], needs?: string): Promise<string> {
    Remote.parse(remote);
    if (needs !== undefined) FullSha.parse(needs);
    const mirror = this.mirrorPath(remote);
    await this.locked(mirror, async () => {
      if (needs !== undefined && existsSync(mirror) && (await hasCommit(mirror, needs))) return;
      await this.cloneOrFetch(remote, mirror, auth);
    });
    return mirror;
  }

  async resolve(remote: string, rev: string): Promise<string> {
    Rev.parse(rev);
    // A pinned commit already in the cache needs no network (and no credentials).
    const cached = this.mirrorPath(remote);
    if (FullSha.safeParse(rev).success && existsSync(cached) && (await hasCommit(cached, rev))) return rev;
    const mirror = await this.mirror(remote);
    const res = await git(['rev-parse', '--verify', '--quiet', `${rev}^{commit}`], {
      cwd: mirror,
      allowFail: true,
    });
    if (res.exitCode !== 0) {
      throw new WorkspaceError(`unknown revision '${rev}' in ${stripUserinfo(remote)}`);
    }
    return res.stdout.trim();
  }

  /** `git diff --binary from to` of two commits in the mirror; over `maxBytes`: git stopped, an error. */
  async diff(remote: string, from: string, to: string, maxBytes?: number): Promise<string> {
    FullSha.parse(from);
    FullSha.parse(to);
    const args = ['diff', '--binary', from, to];
    const res = await git(args, { cwd: this.mirrorPath(remote), maxBuffer: maxBytes, allowFail: true });
    if (res.exitCode === 0) return res.stdout;
    if (!res.overflow) throw new GitError(args, res.exitCode, res.stderr);
    const over = `over ${Math.round(maxBytes! / 2 ** 20)} MB (AGENTICFIX_REVISION_MAX_DIFF_MB)`;
    throw new WorkspaceError(`the diff of ${from.slice(0, 12)}..${to.slice(0, 12)} is ${over}`);
  }

  /** The first of `files` at a commit already in the mirror (./first-file.ts). */
  firstFileAt(remote: string, commit: string, files: readonly string[]) {
    return firstFileAt(this.mirrorPath(remote), FullSha.parse(commit), files);
  }

  async create(remote: string, baseCommit: string, runId: string): Promise<Worktree> {
    return (await this.createMany(remote, baseCommit, [runId]))[0]!;
  }

  /** Several worktrees at one commit under one hold of the mirror's lock (a judge's cells). */
  async createMany(remote: string, baseCommit: string, runIds: readonly string[]): Promise<Worktree[]> {
    Remote.parse(remote);
    FullSha.parse(baseCommit);
    for (const id of runIds) RunId.parse(id);
    const mirror = this.mirrorPath(remote);
    await mkdir(this.worktreeDir, { recursive: true });
    return this.locked(mirror, async () => {
      // Fetch only when the pinned commit is not there yet: an existing mirror stays as is (and is asked once).
      let present = existsSync(mirror) && (await hasCommit(mirror, baseCommit));
      if (!present) {
        await this.cloneOrFetch(remote, mirror);
        present = await hasCommit(mirror, baseCommit);
      }
      if (!present) throw new WorkspaceError(`commit ${baseCommit} not found in ${stripUserinfo(remote)}`);
      const over = this.limits && (await commitOverLimits(mirror, baseCommit, this.limits));
      if (over)
        throw new WorkspaceError(`the base commit ${baseCommit.slice(0, 12)} is not checked out: ${over}`);
      const paths = runIds.map((runId) => path.join(this.worktreeDir, runId));
      for (const p of paths)
        if (existsSync(p)) throw new WorkspaceError(`worktree path already exists: ${p}`);
      try {
        // Registered one by one: a `worktree add` reads every admin dir and fails on one another is still
        // writing. Each checkout touches only its own index and files, so those run at once.
        const made: Worktree[] = [];
        for (const [i, runId] of runIds.entries()) {
          await git(['worktree', 'add', '--no-checkout', '--detach', paths[i]!, baseCommit], { cwd: mirror });
          made.push({
            runId,
            path: paths[i]!,
            gitDir: await adminDir(mirror, paths[i]!),
            baseCommit,
            remote,
            mirror,
          });
        }
        const checkouts = await Promise.allSettled(
          made.map((wt) => worktreeGit(wt, ['reset', '--quiet', '--hard', '--no-recurse-submodules'])),
        );
        const failed = checkouts.find((c) => c.status === 'rejected');
        if (failed) throw failed.reason;
        return made;
      } catch (err) {
        // None is handed out: those git made go again, so a failure leaves nothing behind.
        const left = paths.filter((p) => existsSync(p));
        await this.removeLocked(mirror, left).catch(() => undefined); // retention sweeps what resists
        throw err;
      }
    });
  }

  async remove(wt: Pick<Worktree, 'path' | 'mirror'>): Promise<void> {
    await this.removeMany([wt]);
  }

  /**
   * Removes worktrees, one hold of the lock per mirror: the directories this manager made (and any that
   * was lent to a container: git must not read it) are deleted and their admin entries pruned in one git
   * call; any other path goes through `git worktree remove`. Their stages go with them.
   */
  async removeMany(wts: readonly Pick<Worktree, 'path' | 'mirror'>[]): Promise<void> {
    const mirrors = new Set(wts.map((wt) => wt.mirror));
    for (const mirror of mirrors)
      await this.locked(mirror, () =>
        this.removeLocked(
          mirror,
          wts.filter((wt) => wt.mirror === mirror).map((wt) => wt.path),
        ),
      );
  }

  /**
   * The removal itself, with the mirror's lock held. A worktree of this manager is first renamed aside
   * (one call), so git's prune, the deletion of its files and of its stage run at once; one whose files
   * resist stays aside under the quarantine prefix, which the start-up sweep deletes. Nothing outlives
   * the lock: a prune must never overlap a `worktree add`.
   */
  private async removeLocked(mirror: string, paths: readonly string[]): Promise<void> {
    const aside = await Promise.all(
      paths.map(async (p) => {
        if (isInside(this.worktreeDir, p)) return this.setAside(p).catch(gone);
        if (wasLent(p)) await removeTree(p);
        else await git(['worktree', 'remove', '--force', p], { cwd: mirror });
        return null;
      }),
    );
    await unlockHalfAdded(mirror);
    const done = await Promise.allSettled([
      removeStages(
        paths,
        aside.filter((p): p is string => p !== null),
      ),
      git(['worktree', 'prune'], { cwd: mirror }),
    ]);
    const failed = done.find((d) => d.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /**
   * Retention: removes the worktrees under the worktree dir not modified for `maxAgeMs` (registered
   * ones through their mirror's git, strays directly), except those `keep` names. Returns their paths.
   */
  async removeOlderThan(
    maxAgeMs: number,
    keep: (worktree: string) => Promise<boolean> = async () => false,
    now = Date.now(),
  ): Promise<string[]> {
    const names = await readdir(this.worktreeDir).catch(() => [] as string[]);
    const old: string[] = [];
    for (const name of names) {
      if (name.startsWith('.')) continue; // markers and checks of their own
      const p = path.join(this.worktreeDir, name);
      const st = await lstat(p).catch(() => null);
      if (st?.isDirectory() && now - st.mtimeMs > maxAgeMs && !(await keep(p))) old.push(p);
    }
    if (old.length === 0) return [];
    const mirrorOf = new Map<string, string>();
    for (const m of await readdir(this.cacheDir).catch(() => [] as string[])) {
      if (!m.endsWith('.git')) continue;
      const mirror = path.join(this.cacheDir, m);
      const res = await git(['worktree', 'list', '--porcelain'], { cwd: mirror, allowFail: true });
      for (const line of res.stdout.split('\n'))
        if (line.startsWith('worktree ')) mirrorOf.set(path.resolve(line.slice('worktree '.length)), mirror);
    }
    const removed: string[] = [];
    for (const p of old) {
      const mirror = mirrorOf.get(p);
      const done = mirror ? this.remove({ path: p, mirror }) : removeTree(p);
      await done.then(
        () => removed.push(p),
        () => undefined, // tried again at the next start-up or run
      );
    }
    return removed;
  }

  /**
   * Sets a worktree aside at once (one rename, whatever its depth and modes) under a name no run and no
   * policy uses, with its stage gone; `removeQuarantined` deletes it. Returns its new path.
   */
  async quarantine(worktree: string): Promise<string> {
    const aside = await this.setAside(worktree);
    await removeStage(worktree);
    return aside;
  }

  private async setAside(worktree: string): Promise<string> {
    const aside = path.join(
      this.worktreeDir,
      `${QUARANTINE}${path.basename(worktree)}.${randomBytes(4).toString('hex')}`,
    );
    await rename(worktree, aside);
    return aside;
  }

  /** Deletes the worktrees set aside, by this process or an earlier one; returns those removed. */
  async removeQuarantined(): Promise<string[]> {
    const removed: string[] = [];
    for (const name of await readdir(this.worktreeDir).catch(() => [] as string[])) {
      if (!name.startsWith(QUARANTINE)) continue;
      const p = path.join(this.worktreeDir, name);
      // One that resists stays set aside and is tried again at the next start-up.
      await removeTree(p).then(
        () => removed.push(p),
        () => undefined,
      );
    }
    return removed;
  }

  /**
   * A clone or fetch is bounded (when the manager has fetch limits): past the deadline or a cap git and
   * its helpers are killed, what they wrote goes and the caller gets a WorkspaceError. A fetch's objects
   * reach the mirror only once accepted (./fetch-quarantine.ts); a clone is renamed into place once
   * accepted.
   */
  private async cloneOrFetch(remote: string, mirror: string, auth: GitConfig = []): Promise<void> {
    await clearLeftovers(mirror);
    if (existsSync(mirror)) {
      // The remote is passed explicitly each time so credentials in a URL are never stored in the mirror.
      const why = await fetchQuarantined(mirror, remote, auth, this.limits?.fetch);
      if (why !== null) throw new WorkspaceError(`the fetch of ${stripUserinfo(remote)} was stopped: ${why}`);
      return;
    }
    // Clone next to the final path and rename, so a half-cloned mirror is never visible.
    const tmp = besideMirror(mirror, 'tmp');
    try {
      const clone = (signal?: AbortSignal) =>
        git(['clone', '--mirror', '--quiet', '--', remote, tmp], {
          cwd: this.cacheDir,
          config: auth,
          signal,
        });
      const why = await withinFetchLimits(tmp, this.limits?.fetch, clone);
      if (why !== null) throw new WorkspaceError(`the clone of ${stripUserinfo(remote)} was stopped: ${why}`);
      await git(['remote', 'set-url', 'origin', stripUserinfo(remote)], { cwd: tmp });
      await rename(tmp, mirror);
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      throw err;
    }
  }

  /**
   * Start-up: what dead clones and fetches left beside each mirror goes (./leftovers.ts), under the
   * mirror's lock; one whose lock is held is a live fetch's and stays. Returns those removed.
   */
  async removeFetchLeftovers(): Promise<string[]> {
    const removed: string[] = [];
    for (const [mirror, dirs] of await fetchLeftovers(this.cacheDir)) {
      const release = await lockfile.lock(mirror, lockOf(mirror, 0)).catch(() => null);
      if (release)
        await clearLeftovers(mirror)
          .then(() => removed.push(...dirs))
          .finally(release);
    }
    return removed;
  }

  /** Serializes work on one mirror: in-process queue first, then the cross-process file lock. */
  private async locked<T>(mirror: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.queues.get(mirror) ?? Promise.resolve();
    const run = prev.catch(() => undefined).then(() => this.fileLocked(mirror, fn));
    this.queues.set(mirror, run);
    try {
      return await run;
    } finally {
      if (this.queues.get(mirror) === run) this.queues.delete(mirror);
    }
  }

  private async fileLocked<T>(mirror: string, fn: () => Promise<T>): Promise<T> {
    await mkdir(this.cacheDir, { recursive: true });
    const release = await lockfile.lock(mirror, lockOf(mirror, LOCK_RETRIES));
    try {
      return await fn();
    } finally {
      await release();
    }
  }
}

const lockOf = (mirror: string, retries: lockfile.LockOptions['retries']): lockfile.LockOptions => ({
  realpath: false,
  lockfilePath: `${mirror}.lock`,
  retries,
});

async function hasCommit(mirror: string, sha: string): Promise<boolean> {
  const res = await git(['cat-file', '-e', `${sha}^{commit}`], { cwd: mirror, allowFail: true });
  return res.exitCode === 0;
}

/**
 * The admin dir git just made for a new worktree, read from the `.git` file it wrote (nothing else has
 * touched the worktree yet) and checked to lie in the mirror's `worktrees/`.
 */
async function adminDir(mirror: string, wtPath: string): Promise<string> {
  const link = /^gitdir: (.+)$/m.exec(await readFile(path.join(wtPath, '.git'), 'utf8'));
  const dir = link ? path.resolve(wtPath, link[1]!) : '';
  const expected = path.join(await realpath(mirror), 'worktrees');
  if (!link || path.dirname(await realpath(dir)) !== expected)
    throw new WorkspaceError(`unexpected admin dir for worktree ${wtPath}: ${dir || 'none'}`);
  return dir;
}

/** A worktree already gone needs no deletion; any other failure to set it aside stands. */
function gone(err: unknown): null {
  if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
  throw err;
}

function isInside(dir: string, p: string): boolean {
  const rel = path.relative(dir, path.resolve(p));
  return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel);
}
