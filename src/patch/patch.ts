import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { capStderr, git, worktreeGit, type GitOptions } from '../workspace/git.js';
import { blobId, syncStage } from '../workspace/stage.js';
import type { WorktreeGit } from '../workspace/types.js';
import { ALWAYS_EXCLUDED, type ApplyResult, type ExportedPatch, type SkippedFile } from './types.js';

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

export interface ExportOptions {
  /** Files larger than this stay out of the patch (new or changed ones are reported in `skipped`). */
  maxFileBytes: number;
}

interface Staged {
  env: Record<string, string>;
  scratchDir: string;
  skipped: SkippedFile[];
}

/**
 * Stages the worktree's current content (minus ignored, always-excluded and oversized paths) into a
 * temporary index based on `baseCommit` and runs `fn` with it. Git reads the worktree only through its
 * host-owned copy (`syncStage`, the sandbox boundary): never the tree a container wrote. Nothing is
 * written to the repository: not its index, and not its object store (new objects go to a temporary
 * object directory, the mirror's objects are only read, as alternates).
 */
async function withTempIndex<T>(
  wt: WorktreeGit,
  baseCommit: string,
  opts: ExportOptions,
  fn: (staged: Staged) => Promise<T>,
): Promise<T> {
  Rev.parse(baseCommit);
  const [common, scratchDir] = await Promise.all([
    commonDir(wt.gitDir),
    mkdtemp(path.join(os.tmpdir(), 'agenticfix-index-')),
  ]);
  const env = {
    GIT_INDEX_FILE: path.join(scratchDir, 'index'),
    GIT_OBJECT_DIRECTORY: path.join(scratchDir, 'objects'),
    GIT_ALTERNATE_OBJECT_DIRECTORIES: path.join(common, 'objects'),
  };
  try {
    await mkdir(env.GIT_OBJECT_DIRECTORY);
    // Each git call is a process on the path from the model's last step to the pull request: the
    // index and the base's gitlinks are read at once.
    const [gitlinks] = await Promise.all([
      baseGitlinks(wt, baseCommit),
      mirrorGit(wt, ['read-tree', baseCommit], { env }),
    ]);
    const copy = await syncStage(wt.path, {
      maxFileBytes: opts.maxFileBytes,
      gitlinks,
      excludedNames: EXCLUDED_NAMES,
    });
    const skipped = [...copy.skipped];
    for (const f of copy.large)
      if (!(await sameAsBase(wt, baseCommit, env, f)))
        skipped.push({ path: f.path, bytes: f.bytes, reason: 'too_large' });
    // What the stage does not hold keeps its base entry. Pathspecs through stdin: any number, any characters.
    const kept = [...gitlinks, ...copy.excluded].map((p) => `:(exclude,literal)${p}`);
    const stage = { path: copy.stage, gitDir: wt.gitDir };
    await worktreeGit(stage, ['add', '-A', '--pathspec-from-file=-', '--pathspec-file-nul'], {
      env,
      input: ['.', ...EXCLUDE_PATHSPECS, ...kept].join('\0'),
    });
    return await fn({ env, scratchDir, skipped });
  } finally {
    await rm(scratchDir, { recursive: true, force: true });
  }
}

const EXCLUDED_NAMES: ReadonlySet<string> = new Set(ALWAYS_EXCLUDED);

/** Git on the repository alone (the mirror's objects and config, the temporary index): no work tree. */
const mirrorGit = (wt: WorktreeGit, args: string[], opts: Omit<GitOptions, 'cwd'> = {}) =>
  git(args, { ...opts, cwd: wt.gitDir, env: { ...opts.env, GIT_DIR: wt.gitDir } });

/**
 * The repository's common dir (the mirror) as git finds it: a worktree's admin dir names it in its
 * `commondir` file (relative to the admin dir); a repository's own git dir has none and is its own.
 * Read here rather than asked of `git rev-parse`: one process fewer on every export.
 */
async function commonDir(gitDir: string): Promise<string> {
  const named = await readFile(path.join(gitDir, 'commondir'), 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  return named === null ? path.resolve(gitDir) : path.resolve(gitDir, named.trim());
}

/** Submodule paths of the base (gitlinks, mode 160000), read from its tree. */
async function baseGitlinks(wt: WorktreeGit, baseCommit: string): Promise<Set<string>> {
  const out = (await mirrorGit(wt, ['ls-tree', '-r', '-z', '--full-tree', baseCommit])).stdout;
  const links = new Set<string>();
  for (const line of out.split('\0'))
    if (line.startsWith('160000 ')) links.add(line.slice(line.indexOf('\t') + 1));
  return links;
}

/**
 * Whether a large file is the base's, unchanged: sizes first, then its blob id, hashed here from a
 * descriptor that follows no link (git never reads the worktree).
 */
async function sameAsBase(
  wt: WorktreeGit,
  baseCommit: string,
  env: Record<string, string>,
  f: { path: string; abs: string; bytes: number },
): Promise<boolean> {
  const spec = `${baseCommit}:${f.path}`;
  const size = await mirrorGit(wt, ['cat-file', '-s', spec], { env, allowFail: true });
  if (size.exitCode !== 0 || Number(size.stdout.trim()) !== f.bytes) return false;
  const blob = (await mirrorGit(wt, ['rev-parse', spec], { env })).stdout.trim();
  return (await blobId(f.abs, blob.length === 64 ? 'sha256' : 'sha1')) === blob;
}

/**
 * The staged diff as text. Content that is not UTF-8 would be mangled by decoding (U+FFFD appears), so the
 * diff is then redone with every file treated as binary: a base85 patch reproduces any bytes.
 */
async function stagedDiff(wt: WorktreeGit, baseCommit: string, staged: Staged): Promise<string> {
  const { env, scratchDir } = staged;
  const text = (await mirrorGit(wt, [...DIFF_ARGS, baseCommit], { env })).stdout;
  if (!text.includes('\uFFFD')) return text;
  const attrs = path.join(scratchDir, 'attributes');
  await writeFile(attrs, '* -diff\n');
  const args = ['-c', `core.attributesFile=${attrs}`, ...DIFF_ARGS, baseCommit];
  return (await mirrorGit(wt, args, { env })).stdout;
}

export async function exportPatch(
  wt: WorktreeGit,
  baseCommit: string,
  opts: ExportOptions,
): Promise<ExportedPatch> {
  return withTempIndex(wt, baseCommit, opts, async (staged) => {
    // Both only read the staged index (write-tree swaps in its cache by rename): at once.
    const [patch, tree] = await Promise.all([
      stagedDiff(wt, baseCommit, staged),
      mirrorGit(wt, ['write-tree'], { env: staged.env }).then((r) => r.stdout.trim()),
    ]);
    return { patch, files: patchFiles(patch), tree, skipped: staged.skipped };
  });
}

/** Tree id of the worktree's current content, computed exactly as exportPatch does. */
export async function workspaceRevision(
  wt: WorktreeGit,
  baseCommit: string,
  opts: ExportOptions,
): Promise<string> {
  return withTempIndex(wt, baseCommit, opts, async ({ env }) =>
    (await mirrorGit(wt, ['write-tree'], { env })).stdout.trim(),
  );
}

/** Where a patch is applied: a worktree's files, or an index file of a bare repository (`--cached`). */
export type ApplyTarget = WorktreeGit | { gitDir: string; indexFile: string };

/**
 * Applies a `git diff --binary` patch; all or nothing (git apply checks every section before it
 * writes any, so no separate `--check` pass).
 */
export async function applyPatch(target: ApplyTarget, patch: string): Promise<ApplyResult> {
  if (patch.trim() === '') return { ok: true, error: null };
  const input = patch.endsWith('\n') ? patch : `${patch}\n`;
  const args = ['apply', '--binary', '--whitespace=nowarn'];
  const res =
    'indexFile' in target
      ? await git([...args, '--cached', '-'], {
          cwd: target.gitDir,
          env: { GIT_DIR: target.gitDir, GIT_INDEX_FILE: target.indexFile },
          input,
          allowFail: true,
        })
      : await worktreeGit(target, [...args, '-'], { input, allowFail: true });
  if (res.exitCode !== 0)
    return { ok: false, error: capStderr(res.stderr) || `git apply exited ${res.exitCode}` };
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
  // Line by line without splitting: a patch of 250,000 files has a million lines.
  for (let at = 0; at < patch.length;) {
    const eol = patch.indexOf('\n', at);
    const line = patch.slice(at, eol < 0 ? patch.length : eol);
    at = eol < 0 ? patch.length : eol + 1;
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
