import { randomBytes } from 'node:crypto';
import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';

/**
 * What a git process killed in a mirror leaves (serve or a worker killed, the fetch deadline's SIGKILL).
 * Git never takes over a stale lock: one file left by a killed fetch failed every later fetch of the
 * repository. These run with the mirror's lock held, and every writer of the mirror's refs and worktree
 * list runs under it (a fetch's `gc --auto` packs refs before it detaches), so what they find is a dead
 * process's.
 */

/** Git's lock files in the mirror's top directory and refs, its temporary packs, half-made clones and quarantines. */
export async function clearLeftovers(mirror: string): Promise<void> {
  const top = await readdir(mirror).catch(() => [] as string[]);
  const refs = await readdir(path.join(mirror, 'refs'), { recursive: true }).catch(() => [] as string[]);
  const beside = (await fetchLeftovers(path.dirname(mirror))).get(mirror) ?? [];
  await Promise.all([
    ...top.filter(isLock).map((n) => rm(path.join(mirror, n), { force: true })),
    ...refs.filter(isLock).map((n) => rm(path.join(mirror, 'refs', n), { force: true })),
    ...beside.map((p) => rm(p, { recursive: true, force: true })),
    removeTempPacks(mirror),
  ]);
}

/** What a clone (`tmp`) or a fetch's quarantine (`fetch`) of `<mirror>` writes to beside it. */
const BESIDE = /^(.+\.git)\.(?:tmp|fetch)-[0-9a-f]{8}$/;

/** A new scratch path beside `mirror`, for a clone or a fetch's quarantine (./fetch-quarantine.ts). */
export const besideMirror = (mirror: string, kind: 'tmp' | 'fetch') =>
  `${mirror}.${kind}-${randomBytes(4).toString('hex')}`;

/** Half-made clones and quarantines in a cache dir, by the mirror they belong to. */
export async function fetchLeftovers(cacheDir: string): Promise<Map<string, string[]>> {
  const byMirror = new Map<string, string[]>();
  for (const name of await readdir(cacheDir).catch(() => [] as string[])) {
    const m = BESIDE.exec(name);
    if (!m) continue;
    const mirror = path.join(cacheDir, m[1]!);
    byMirror.set(mirror, [...(byMirror.get(mirror) ?? []), path.join(cacheDir, name)]);
  }
  return byMirror;
}

/** The temporary packs a stopped fetch leaves in a mirror (git writes a pack under a tmp_ name first). */
export async function removeTempPacks(mirror: string): Promise<void> {
  const packs = path.join(mirror, 'objects', 'pack');
  const names = await readdir(packs).catch(() => [] as string[]);
  await Promise.all(
    names.filter((n) => n.startsWith('tmp_')).map((n) => rm(path.join(packs, n), { force: true })),
  );
}

/**
 * Unlocks the worktrees whose `git worktree add` was killed: git locks a new one ("initializing") until
 * it is made, and `worktree prune` never prunes a locked one, so its entry stayed and kept the mirror
 * from retention for good. This app locks no worktree itself.
 */
export async function unlockHalfAdded(mirror: string): Promise<void> {
  const admin = path.join(mirror, 'worktrees');
  const names = await readdir(admin).catch(() => [] as string[]);
  await Promise.all(
    names.map(async (n) => {
      const locked = path.join(admin, n, 'locked');
      const why = await readFile(locked, 'utf8').catch(() => null);
      if (why?.trim() === 'initializing') await rm(locked, { force: true });
    }),
  );
}

const isLock = (name: string) => name.endsWith('.lock');
