import { lstatSync, mkdirSync, realpathSync, type Stats } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { matchingPattern } from '../config/path-patterns.js';
import { fail, type ToolContext, type ToolResult } from './types.js';

/**
 * Path safety for every file tool. A model-supplied path is relative to the worktree; it may not
 * leave it, pass through a symlink (not even a parent directory), name a hard-linked file, or touch
 * `.git` or env files. Each existing component is checked with lstat, and the result again with
 * realpath, so neither `../` tricks nor links can reach host files.
 */

/** The `path` argument of every file tool. */
export const relPath = z.string().min(1).max(4096).describe('Path relative to the repository root');

export interface ResolvedPath {
  ok: true;
  /** Absolute host path (under the worktree's real path). */
  abs: string;
  /** Normalised relative path, `.` for the root. */
  rel: string;
  /** lstat of the target, or null when it does not exist yet. */
  stat: Stats | null;
}

export interface PathFailure {
  ok: false;
  error_code: 'path_outside_workspace' | 'path_forbidden' | 'not_found' | 'invalid_arguments';
  error: string;
}

export interface ResolveOptions {
  /** Fail with not_found when the target does not exist. */
  mustExist?: boolean;
  /** The caller will write the target: the worktree root itself is not a valid target. */
  forWrite?: boolean;
}

/** Names that are never read, listed or written: git internals and env files (secrets). */
export function isForbiddenName(name: string): boolean {
  const n = name.toLowerCase();
  return n === '.git' || n === '.env' || n.startsWith('.env.');
}

export function resolveInWorktree(
  worktree: string,
  relPath: string,
  opts: ResolveOptions = {},
): ResolvedPath | PathFailure {
  const bad = (error_code: PathFailure['error_code'], error: string): PathFailure => ({
    ok: false,
    error_code,
    error,
  });
  if (relPath.includes('\0')) return bad('invalid_arguments', 'path contains a NUL byte');
  if (path.isAbsolute(relPath)) {
    return bad(
      'path_outside_workspace',
      `absolute paths are not allowed: use a path relative to the repository root`,
    );
  }
  const rel = path.posix.normalize(relPath === '' ? '.' : relPath).replace(/\/+$/, '') || '.';
  if (rel === '..' || rel.startsWith('../')) {
    return bad('path_outside_workspace', `${relPath} is outside the repository`);
  }
  const parts = rel === '.' ? [] : rel.split('/');
  const forbidden = parts.find(isForbiddenName);
  if (forbidden)
    return bad('path_forbidden', `${relPath}: ${forbidden} is off limits (git internals or env file)`);
  if (opts.forWrite && parts.length === 0)
    return bad('invalid_arguments', 'the repository root is not a file');

  let root: string;
  try {
    root = realpathSync(worktree);
  } catch {
    return bad('not_found', 'the worktree does not exist');
  }
  let cur = root;
  let stat: Stats | null = lstatSync(root);
  for (const [i, part] of parts.entries()) {
    cur = path.join(cur, part);
    const shown = parts.slice(0, i + 1).join('/');
    try {
      stat = lstatSync(cur);
    } catch {
      stat = null;
      break; // the rest does not exist yet
    }
    if (stat.isSymbolicLink())
      return bad('path_forbidden', `${shown} is a symbolic link; links are not followed`);
    const last = i === parts.length - 1;
    if (!last && !stat.isDirectory()) return bad('not_found', `${shown} is not a directory`);
    if (last && stat.isFile() && stat.nlink > 1) {
      return bad('path_forbidden', `${shown} is a hard link; linked files are off limits`);
    }
  }
  const abs = path.join(root, ...parts);
  if (stat === null && opts.mustExist) return bad('not_found', `${rel} does not exist`);
  if (stat !== null) {
    // Belt and braces: whatever the checks above missed, the real path must stay inside.
    const real = realpathSync(abs);
    if (real !== root && !real.startsWith(root + path.sep)) {
      return bad('path_outside_workspace', `${relPath} resolves outside the repository`);
    }
  }
  return { ok: true, abs, rel, stat };
}

export const pathError = (f: PathFailure): ToolResult => fail(f.error_code, f.error);

/**
 * Creates the missing parent directories of `abs` one at a time below `root`, refusing to pass
 * through anything that is not a real directory (a link created meanwhile, a file).
 */
export function mkdirSafe(root: string, abs: string): PathFailure | null {
  const parts = path.relative(root, path.dirname(abs)).split(path.sep).filter(Boolean);
  let cur = root;
  for (const part of parts) {
    cur = path.join(cur, part);
    try {
      mkdirSync(cur);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const st = lstatSync(cur);
    if (!st.isDirectory() || st.isSymbolicLink()) {
      return {
        ok: false,
        error_code: 'path_forbidden',
        error: `${path.relative(root, cur)} is not a directory`,
      };
    }
  }
  return null;
}

/** Refuses a change to a path the repository's configuration protects. */
export function protectedPathError(ctx: ToolContext, rel: string): ToolResult | null {
  const entry = matchingPattern(rel, ctx.protectedPaths ?? []);
  return entry === undefined
    ? null
    : fail(
        'path_forbidden',
        `${rel} is protected (\`${entry}\`) by the repository's configuration and must not change`,
      );
}
