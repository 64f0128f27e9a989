import { constants } from 'node:fs';
import { lchown, lstat, open, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * The worktree's link to its repository (`.git`) and the admin files it leads to, as they were before
 * untrusted code ran. Host git never reads `.git` (it is given GIT_DIR explicitly), and containers see it
 * read-only; a change after a container run therefore means the isolation did not hold, and the run
 * must stop. See DockerSandbox.
 */
export interface GitLinkSnapshot {
  readonly worktree: string;
  readonly dotGit: Entry;
  /** Key files of the repository `.git` leads to (path → content, null when absent). */
  readonly admin: Readonly<Record<string, string | null>>;
}

interface Entry {
  kind: 'file' | 'dir' | 'missing' | 'other';
  ino: number;
  mode: number;
  uid: number;
  gid: number;
  /** Content of a regular file (capped), else null. */
  content: string | null;
}

/** `.git` files, HEAD and commondir are a line each: anything longer is a change, whatever it is. */
const MAX_BYTES = 4096;

async function entry(p: string): Promise<Entry> {
  const st = await lstat(p).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return null;
    throw err;
  });
  if (!st) return { kind: 'missing', ino: 0, mode: 0, uid: 0, gid: 0, content: null };
  const kind = st.isFile() ? 'file' : st.isDirectory() ? 'dir' : 'other';
  const meta = { kind, ino: st.ino, mode: st.mode, uid: st.uid, gid: st.gid } as const;
  return { ...meta, content: kind === 'file' ? await readSmall(p) : null };
}

/** Reads at most MAX_BYTES + 1 of a regular file, never following a link or blocking on a pipe. */
async function readSmall(p: string): Promise<string | null> {
  const fh = await open(p, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(
    () => null,
  );
  if (!fh) return null;
  try {
    if (!(await fh.stat()).isFile()) return null;
    const buf = Buffer.alloc(MAX_BYTES + 1);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    return buf.subarray(0, bytesRead).toString('latin1');
  } finally {
    await fh.close();
  }
}

/** The repository a worktree's `.git` names: its admin dir (file) or itself (directory). */
function adminFiles(worktree: string, dotGit: Entry): string[] {
  const link = path.join(worktree, '.git');
  if (dotGit.kind === 'dir') return ['HEAD', 'config'].map((f) => path.join(link, f));
  const m = dotGit.content === null ? null : /^gitdir: (.+)$/m.exec(dotGit.content);
  if (!m) return [];
  const dir = path.resolve(worktree, m[1]!);
  return ['HEAD', 'commondir', 'gitdir'].map((f) => path.join(dir, f));
}

export async function snapshotGitLink(worktree: string): Promise<GitLinkSnapshot> {
  const dotGit = await entry(path.join(worktree, '.git'));
  const admin: Record<string, string | null> = {};
  for (const f of adminFiles(worktree, dotGit)) admin[f] = (await entry(f)).content;
  return { worktree, dotGit, admin };
}

const show = (e: Entry) =>
  e.kind === 'file' ? `a file (${JSON.stringify((e.content ?? '').trim().slice(0, 200))})` : `a ${e.kind}`;

/** What changed since the snapshot (empty when nothing did). Ownership is not compared: sandboxes lend it. */
export async function gitLinkChanges(before: GitLinkSnapshot): Promise<string[]> {
  const now = await entry(path.join(before.worktree, '.git'));
  const b = before.dotGit;
  const changes: string[] = [];
  if (now.kind !== b.kind || now.content !== b.content) changes.push(`.git was ${show(b)}, now ${show(now)}`);
  else if (now.ino !== b.ino || now.mode !== b.mode) changes.push('.git was replaced (same content)');
  for (const [f, content] of Object.entries(before.admin))
    if ((await entry(f)).content !== content) changes.push(`${f} changed`);
  return changes;
}

/**
 * Puts `.git` back as it was (a file, or nothing), so the worktree stays usable for the run's record
 * (patch export) and for removal. A directory `.git` (a plain repository, in tests), or one that could
 * not be read before, is left as found: returns false.
 */
export async function restoreGitLink(before: GitLinkSnapshot): Promise<boolean> {
  const b = before.dotGit;
  if (b.kind === 'dir' || (b.kind === 'file' && b.content === null)) return false;
  const link = path.join(before.worktree, '.git');
  await rm(link, { recursive: true, force: true });
  if (b.kind !== 'file' || b.content === null) return true;
  await writeFile(link, b.content, { encoding: 'latin1', mode: b.mode & 0o777, flag: 'wx' });
  await lchown(link, b.uid, b.gid);
  return true;
}
