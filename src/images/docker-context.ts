import { createHash } from 'node:crypto';
import { readdir, readlink } from 'node:fs/promises';
import path from 'node:path';
import dockerignoreModule from '@balena/dockerignore';
import tar from 'tar-stream';
import { ALWAYS_EXCLUDED } from '../patch/types.js';
import { readRegularFile } from '../workspace/safe-read.js';

// CommonJS package typed with `export default`: under NodeNext the default import is the factory itself.
const ignore = dockerignoreModule as unknown as typeof dockerignoreModule.default;

/** Name of the model's Dockerfile inside the build context; never collides with a repository file we keep. */
export const CONTEXT_DOCKERFILE = '.agenticfix.Dockerfile';
/** Name of the build CA bundle (AGENTICFIX_BUILD_CA_FILE) in the build context, likewise reserved. */
export const CONTEXT_CA = '.agenticfix.build-ca.crt';

export interface SnapshotEntry {
  /** Path relative to the worktree root, with forward slashes. */
  path: string;
  mode: number;
  /** File content, or null for a symlink. */
  content: Buffer | null;
  linkTarget: string | null;
}

const MiB = 1024 * 1024;

const SKIPPED_DIRS = new Set<string>(['.git', ...ALWAYS_EXCLUDED]);

/** Bytes a tar header takes: every entry costs at least this much in the build context. */
const TAR_HEADER = 512;

/**
 * The files a build may see: the worktree without .git, caches and whatever `.dockerignore`
 * excludes. Regular files are read without following links or blocking (a FIFO planted by a test
 * would hang a plain read), symlinks are kept as links, anything else (FIFOs, sockets, devices) is
 * skipped; nothing outside the worktree is ever read. The context is held in memory, so past
 * `maxBytes` the snapshot fails rather than read a huge worktree.
 */
export async function snapshotWorktree(worktree: string, maxBytes: number): Promise<SnapshotEntry[]> {
  let budget = maxBytes;
  const take = (bytes: number) => {
    budget -= bytes;
    if (budget < 0)
      throw new Error(
        `the build context is over ${Math.floor(maxBytes / MiB)} MiB (AGENTICFIX_BUILD_CONTEXT_MAX_MB): exclude large files and folders in .dockerignore`,
      );
  };
  const ignoreFile = readRegularFile(path.join(worktree, '.dockerignore'), maxBytes);
  if (ignoreFile.ok && ignoreFile.truncated) take(ignoreFile.stat.size); // over the budget on its own: throws
  const ig = ignore({ ignorecase: false }).add(ignoreFile.ok ? ignoreFile.buf.toString('utf8') : '');
  const out: SnapshotEntry[] = [];
  const walk = async (rel: string): Promise<void> => {
    const dirents = await readdir(path.join(worktree, rel), { withFileTypes: true });
    dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const d of dirents) {
      const childRel = rel === '' ? d.name : `${rel}/${d.name}`;
      if (d.isDirectory()) {
        if (!SKIPPED_DIRS.has(d.name)) await walk(childRel);
        continue;
      }
      if (
        d.name === CONTEXT_DOCKERFILE ||
        d.name === CONTEXT_CA ||
        SKIPPED_DIRS.has(d.name) ||
        ig.ignores(childRel)
      )
        continue;
      const abs = path.join(worktree, childRel);
      if (d.isSymbolicLink()) {
        take(TAR_HEADER);
        out.push({ path: childRel, mode: 0o777, content: null, linkTarget: await readlink(abs) });
      } else if (d.isFile()) {
        // Reads one byte past the budget so that a file too large for it is noticed, never read whole.
        const file = readRegularFile(abs, Math.max(budget - TAR_HEADER, 0) + 1);
        if (!file.ok) continue; // replaced by something else (a FIFO, a link) since it was listed
        take(TAR_HEADER + (file.truncated ? file.stat.size : file.buf.length));
        out.push({ path: childRel, mode: file.stat.mode & 0o777, content: file.buf, linkTarget: null });
      }
    }
  };
  await walk('');
  return out;
}

/** Packs the snapshot plus the Dockerfile into an in-memory tar stream for the Engine's /build. */
export function packContext(snapshot: readonly SnapshotEntry[], dockerfile: string): NodeJS.ReadableStream {
  const pack = tar.pack();
  for (const e of snapshot) {
    if (e.content === null) pack.entry({ name: e.path, type: 'symlink', linkname: e.linkTarget ?? '' });
    else pack.entry({ name: e.path, mode: e.mode }, e.content);
  }
  pack.entry({ name: CONTEXT_DOCKERFILE, mode: 0o644 }, dockerfile);
  pack.finalize();
  // tar-stream's Pack is a streamx Readable: what dockerode pipes, though its typings differ from Node's.
  return pack as unknown as NodeJS.ReadableStream;
}

/** Joins continuation lines and returns the instructions as [keyword, rest] pairs. */
function instructions(dockerfile: string): Array<[string, string]> {
  const joined = dockerfile
    .split('\n')
    .filter((l) => !/^\s*#/.test(l))
    .join('\n')
    .replace(/\\\r?\n/g, ' ');
  const out: Array<[string, string]> = [];
  for (const line of joined.split('\n')) {
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (m?.[1] && m[2] !== undefined) out.push([m[1].toUpperCase(), m[2].trim()]);
  }
  return out;
}

/**
 * Sources of every COPY/ADD that reads the build context (not `--from=` another stage, not a URL).
 * `null` means "cannot tell precisely" (a glob): the whole snapshot counts.
 */
export function copiedSources(dockerfile: string): string[] | null {
  const sources: string[] = [];
  for (const [kw, rest] of instructions(dockerfile)) {
    if (kw !== 'COPY' && kw !== 'ADD') continue;
    let args: string[];
    if (rest.startsWith('[')) {
      try {
        args = (JSON.parse(rest) as unknown[]).map(String);
      } catch {
        return null;
      }
    } else {
      args = rest.split(/\s+/);
    }
    const flags = args.filter((a) => a.startsWith('--'));
    if (flags.some((f) => f.startsWith('--from='))) continue;
    const paths = args.filter((a) => !a.startsWith('--')).slice(0, -1);
    for (const src of paths) {
      if (/^https?:\/\//.test(src)) continue;
      if (/[*?[]/.test(src)) return null;
      sources.push(src);
    }
  }
  return sources;
}

const normalize = (p: string) =>
  path.posix
    .normalize(p)
    .replace(/^(\.\/)+|^\/+/, '')
    .replace(/\/+$/, '');

/** Snapshot entries a COPY/ADD source selects (a file, or everything under a directory). */
function selected(snapshot: readonly SnapshotEntry[], sources: string[] | null): SnapshotEntry[] {
  if (sources === null) return [...snapshot];
  const roots = sources.map(normalize);
  if (roots.some((r) => r === '' || r === '.')) return [...snapshot];
  return snapshot.filter((e) => roots.some((r) => e.path === r || e.path.startsWith(`${r}/`)));
}

/**
 * Content hash of an environment: the Dockerfile text, the ids of its local base images and the
 * content of every file it copies. Equal keys mean an identical image, so a rebuild can be skipped.
 */
export function environmentKey(
  dockerfile: string,
  snapshot: readonly SnapshotEntry[],
  baseImageIds: readonly string[],
): string {
  const h = createHash('sha256');
  h.update(`dockerfile\0${dockerfile}\0`);
  for (const id of baseImageIds) h.update(`base\0${id}\0`);
  for (const e of selected(snapshot, copiedSources(dockerfile))) {
    h.update(`file\0${e.path}\0${e.mode}\0`);
    h.update(e.content ?? `link:${e.linkTarget ?? ''}`);
    h.update('\0');
  }
  return h.digest('hex');
}

/** Image names in FROM lines that are not earlier stages (those are resolved to local image ids). */
export function fromImages(dockerfile: string): string[] {
  const stages = new Set<string>();
  const images: string[] = [];
  for (const [kw, rest] of instructions(dockerfile)) {
    if (kw !== 'FROM') continue;
    const parts = rest.split(/\s+/).filter((p) => !p.startsWith('--'));
    const image = parts[0];
    if (image && !stages.has(image.toLowerCase())) images.push(image);
    if (parts[1]?.toUpperCase() === 'AS' && parts[2]) stages.add(parts[2].toLowerCase());
  }
  return images;
}
