import type { FetchLimits } from './fetch-bounds.js';

/** A detached worktree pinned at a full base commit SHA, sharing objects with a bare mirror. */
export interface Worktree {
  readonly runId: string;
  readonly path: string;
  /**
   * The worktree's admin directory in the mirror (`<mirror>/worktrees/<name>`). Host git is always
   * pointed here explicitly: the worktree's own `.git` file is writable by the code under test.
   */
  readonly gitDir: string;
  readonly baseCommit: string;
  readonly remote: string;
  readonly mirror: string;
}

/** What host git needs to work on a worktree without trusting anything inside it. */
export type WorktreeGit = Pick<Worktree, 'path' | 'gitDir'>;

export interface WorkspaceManager {
  /** Ensures a bare mirror of `remote` (local path or URL) exists and is fetched, under a file lock. */
  mirror(remote: string): Promise<string>;
  /** Resolves a revision (branch, tag, short or full SHA) in the mirror to a full commit SHA. */
  resolve(remote: string, rev: string): Promise<string>;
  /** Creates a detached worktree at `baseCommit` (a full SHA) for one run. Safe to call concurrently. */
  create(remote: string, baseCommit: string, runId: string): Promise<Worktree>;
  /** Removes the worktree through git (no stray admin entries). */
  remove(wt: Worktree): Promise<void>;
}

/** The operator's limits on checkouts and (when given) on what one clone or fetch may take. */
export interface WorkspaceLimits {
  maxWorktreeBytes: number;
  maxWorktreeEntries: number;
  fetch?: FetchLimits;
}
