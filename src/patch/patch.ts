import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { git } from '../workspace/git.js';
import { ALWAYS_EXCLUDED, type ApplyResult, type ExportedPatch } from './types.js';

/** A leading '-' would be read by git as an option. */
const Rev = z
  .string()
  .min(1)
  .regex(/^[^-\s]/, 'base commit must not start with "-" or whitespace');

/** Every ALWAYS_EXCLUDED name, at any depth, as a directory or a file. */
const EXCLUDE_PATHSPECS = ALWAYS_EXCLUDED.flatMap((name) => [
  `:(exclude,glob)**/${name}`,
  `:(exclude,glob)**/${name}/**`,
]);

const DIFF_ARGS = [
  'diff',
  '--cached',
  '--binary',
  '--full-index',
  '--no-color',
  '--no-ext-diff',
  '--no-textconv',
  '--src-prefix=a/',
  '--dst-prefix=b/',
];

/**
 * Stages the worktree's current content (minus ignored and always-excluded paths) into a temporary
 * index based on `baseCommit` and runs `fn` with that index; the worktree's own index is never touched.
 */
async function withTempIndex<T>(
  worktreePath: string,
  baseCommit: string,
  fn: (env: Record<string, string>, scratchDir: string) => Promise<T>,
): Promise<T> {
  Rev.parse(baseCommit);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agenticfix-index-'));
  const env = { GIT_INDEX_FILE: path.join(dir, 'index') };
  try {
    await git(['read-tree', baseCommit], { cwd: worktreePath, env });
    await git(['add', '-A', '--', '.', ...EXCLUDE_PATHSPECS], { cwd: worktreePath, env });
    return await fn(env, dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * The staged diff as text. Content that is not UTF-8 would be mangled by decoding (U+FFFD appears), so the
 * diff is then redone with every file treated as binary: a base85 patch reproduces any bytes.
 */
async function stagedDiff(
  worktreePath: string,
  baseCommit: string,
  env: Record<string, string>,
  scratchDir: string,
): Promise<string> {
  const text = (await git([...DIFF_ARGS, baseCommit], { cwd: worktreePath, env })).stdout;
  if (!text.includes('\uFFFD')) return text;
  const attrs = path.join(scratchDir, 'attributes');
  await writeFile(attrs, '* -diff\n');
  const args = ['-c', `core.attributesFile=${attrs}`, ...DIFF_ARGS, baseCommit];
  return (await git(args, { cwd: worktreePath, env })).stdout;
}

export async function exportPatch(worktreePath: string, baseCommit: string): Promise<ExportedPatch> {
  return withTempIndex(worktreePath, baseCommit, async (env, scratchDir) => {
    const patch = await stagedDiff(worktreePath, baseCommit, env, scratchDir);
    const tree = (await git(['write-tree'], { cwd: worktreePath, env })).stdout.trim();
    return { patch, files: patchFiles(patch), tree };
  });
}

/** Tree id of the worktree's current content, computed exactly as exportPatch does. */
export async function workspaceRevision(worktreePath: string, baseCommit: string): Promise<string> {
  return withTempIndex(worktreePath, baseCommit, async (env) =>
    (await git(['write-tree'], { cwd: worktreePath, env })).stdout.trim(),
  );
}

/** Applies a `git diff --binary` patch to the files (not the index); all or nothing. */
export async function applyPatch(worktreePath: string, patch: string): Promise<ApplyResult> {
  if (patch.trim() === '') return { ok: true, error: null };
  const input = patch.endsWith('\n') ? patch : `${patch}\n`;
  const args = ['apply', '--binary', '--whitespace=nowarn'];
  for (const extra of [['--check'], []]) {
    const res = await git([...args, ...extra, '-'], { cwd: worktreePath, input, allowFail: true });
    if (res.exitCode !== 0)
      return { ok: false, error: res.stderr.trim() || `git apply exited ${res.exitCode}` };
  }
  return { ok: true, error: null };
}

/** Paths (old and new) touched by a git patch, in order of appearance, without duplicates. */
export function patchFiles(patch: string): string[] {
  const files = new Set<string>();
  // Names are read only from a section's extended header: hunk lines such as "--- x" are content.
  let section: { header: string; named: boolean; inHeader: boolean } | null = null;
  const flush = () => {
    if (section && !section.named) for (const p of headerPaths(section.header)) files.add(p);
  };
  for (const line of patch.split('\n')) {
    if (line.startsWith('diff --git ')) {
      flush();
      section = { header: line.slice('diff --git '.length), named: false, inHeader: true };
      continue;
    }
    if (!section?.inHeader) continue;
    if (line.startsWith('@@') || line.startsWith('GIT binary patch')) {
      section.inHeader = false;
      continue;
    }
    const m = /^(?:(---|\+\+\+) |(?:rename|copy) (?:from|to) )(.*)$/.exec(line);
    if (!m) continue;
    // `---`/`+++` lines carry a trailing tab when the name contains a space.
    const name = m[1] ? stripPrefix(unquote(m[2]!.replace(/\t$/, ''))) : unquote(m[2]!);
    if (name === '/dev/null') continue;
    files.add(name);
    section.named = true;
  }
  flush();
  return [...files];
}

/**
 * Paths of a `diff --git` header line alone (mode-only and binary changes have no `---` lines).
 * Without rename lines both sides name the same path, which settles names containing " b/".
 */
function headerPaths(header: string): string[] {
  if (header.startsWith('"')) {
    const first = readQuoted(header);
    const rest = header.slice(first.length + 1);
    const second = rest.startsWith('"') ? unquote(rest) : rest;
    return [stripPrefix(unquote(first)), stripPrefix(second)];
  }
  const half = (header.length - 1) / 2;
  if (Number.isInteger(half) && header.slice(2, half) === header.slice(half + 3))
    return [header.slice(2, half)];
  const cut = header.indexOf(' b/');
  return cut < 0 ? [] : [stripPrefix(header.slice(0, cut)), stripPrefix(header.slice(cut + 1))];
}

const stripPrefix = (p: string) => p.replace(/^[ab]\//, '');

/** The leading C-quoted token of `s`, quotes included. */
function readQuoted(s: string): string {
  let i = 1;
  while (i < s.length && s[i] !== '"') i += s[i] === '\\' ? 2 : 1;
  return s.slice(0, i + 1);
}

const ESCAPES: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, '\\': 92 };

/** Undoes git's C-style path quoting (octal escapes are UTF-8 bytes). */
function unquote(s: string): string {
  if (!s.startsWith('"') || !s.endsWith('"') || s.length < 2) return s;
  const bytes: number[] = [];
  const body = s.slice(1, -1);
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c !== '\\') {
      bytes.push(...Buffer.from(c, 'utf8'));
      continue;
    }
    const next = body[i + 1] ?? '';
    const octal = /^[0-7]{3}/.exec(body.slice(i + 1));
    if (octal) {
      bytes.push(parseInt(octal[0], 8));
      i += 3;
    } else {
      bytes.push(ESCAPES[next] ?? next.charCodeAt(0));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString('utf8');
}
