import { fstatSync, lstatSync, readdirSync, type Stats } from 'node:fs';
import path from 'node:path';
import { globMatches } from '../config/path-patterns.js';
import { ALWAYS_EXCLUDED } from '../patch/types.js';
import { sha256 } from '../trace/trace.js';
import { readRegularFile } from '../workspace/safe-read.js';
import type { GitIgnores } from './gitignore.js';
import { isForbiddenName, pathError, resolveInWorktree } from './paths.js';
import { fail, type ToolContext, type ToolResult } from './types.js';

/** Shared file helpers of the tools: loading with limits, versions, line numbering, tree walking. */

/**
 * A file's version is the SHA-256 of its bytes cut to 16 hex digits (every read and stub carries it; it
 * tells versions of one file apart, nothing more): edits must name the version they were based on.
 */
export const fileVersion = (buf: Buffer | string): string => sha256(buf).slice(0, 16);

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** NUL bytes or invalid UTF-8: not something to show or edit as text. */
export function isBinary(buf: Buffer): boolean {
  if (buf.subarray(0, 8192).includes(0)) return true;
  try {
    utf8.decode(buf);
    return false;
  } catch {
    return true;
  }
}

export interface LoadedFile {
  abs: string;
  rel: string;
  buf: Buffer;
  stat: Stats;
  version: string;
}

/** Whether a descriptor's file is the one an earlier lstat saw (not a link, file or FIFO swapped in since). */
export const sameFile = (fd: number, seen: Stats): boolean => {
  const st = fstatSync(fd);
  return st.isFile() && st.dev === seen.dev && st.ino === seen.ino;
};

/** Reads the file `seen` describes through one descriptor; null if it is gone, replaced or grown since. */
export function readSameFile(abs: string, seen: Stats): Buffer | null {
  const r = readRegularFile(abs, seen.size, seen);
  return r.ok && !r.truncated ? r.buf : null;
}

/** Resolves and reads an existing regular file within the limits; `text` also refuses binary files. */
export function loadFile(ctx: ToolContext, relPath: string, text: boolean): LoadedFile | ToolResult {
  const r = resolveInWorktree(ctx.worktree, relPath, { mustExist: true });
  if (!r.ok) return pathError(r);
  const stat = r.stat as Stats;
  if (stat.isDirectory()) return fail('is_directory', `${r.rel} is a directory; use list_files`);
  if (!stat.isFile()) return fail('not_a_file', `${r.rel} is not a regular file`);
  if (stat.size > ctx.limits.maxFileBytes) {
    return fail(
      'too_large',
      `${r.rel} has ${stat.size} bytes, over the ${ctx.limits.maxFileBytes}-byte limit`,
    );
  }
  const buf = readSameFile(r.abs, stat);
  if (!buf) return fail('not_found', `${r.rel} changed while it was being read; try again`);
  if (text && isBinary(buf)) return fail('binary_file', `${r.rel} is a binary file`);
  return { abs: r.abs, rel: r.rel, buf, stat, version: fileVersion(buf) };
}

export const isLoaded = (x: LoadedFile | ToolResult): x is LoadedFile => 'buf' in x;

/** Lines without their terminators; a final newline does not start another line. */
export function splitLines(text: string): string[] {
  const lines = text.split('\n').map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** `   12| text`, the format the model sees everywhere. */
export const numberLines = (lines: readonly string[], first: number): string =>
  lines.map((l, i) => `${String(first + i).padStart(5)}| ${l}`).join('\n');

/**
 * A tiny glob (globMatches): `*` and `?` within a path segment, `**` across segments; everything else
 * literal. A pattern without `/` matches the basename, otherwise the whole relative path.
 */
export function globMatcher(pattern: string): (rel: string) => boolean {
  return pattern.includes('/')
    ? (rel) => globMatches(pattern, rel)
    : (rel) => globMatches(pattern, path.posix.basename(rel));
}

export interface TreeEntry {
  rel: string;
  abs: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  stat: Stats;
  depth: number;
}

const EXCLUDED = new Set<string>(ALWAYS_EXCLUDED);

/** Skipped by every walk: git internals, env files and tool caches that never enter a patch. */
const isSkipped = (name: string): boolean => isForbiddenName(name) || EXCLUDED.has(name);

/**
 * Breadth-first walk below `start` (shallow entries first, so a cut keeps the overview), sorted per
 * directory, never following links. `visit` returns false to stop. Stops after `maxScanned` entries.
 */
export function walkTree(
  start: string,
  startRel: string,
  opts: { maxDepth: number; maxScanned: number; ignores?: GitIgnores | null },
  visit: (e: TreeEntry) => boolean | void,
): { scanLimitHit: boolean } {
  let scanned = 0;
  let queue: { abs: string; rel: string }[] = [{ abs: start, rel: startRel }];
  for (let depth = 1; depth <= opts.maxDepth && queue.length > 0; depth++) {
    const next: typeof queue = [];
    for (const dir of queue) {
      let names: string[];
      try {
        names = readdirSync(dir.abs).sort();
      } catch {
        continue; // vanished or unreadable: nothing to show
      }
      for (const name of names) {
        if (isSkipped(name)) continue;
        if (++scanned > opts.maxScanned) return { scanLimitHit: true };
        const abs = path.join(dir.abs, name);
        const rel = dir.rel === '.' ? name : `${dir.rel}/${name}`;
        let st: Stats;
        try {
          st = lstatSync(abs);
        } catch {
          continue;
        }
        const type = st.isSymbolicLink()
          ? 'symlink'
          : st.isDirectory()
            ? 'dir'
            : st.isFile()
              ? 'file'
              : 'other';
        if (opts.ignores?.ignored(rel, type === 'dir')) continue;
        if (visit({ rel, abs, type, stat: st, depth }) === false) {
          return { scanLimitHit: false };
        }
        if (type === 'dir') next.push({ abs, rel });
      }
    }
    queue = next;
  }
  return { scanLimitHit: false };
}
