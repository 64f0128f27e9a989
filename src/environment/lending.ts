import { readFileSync } from 'node:fs';
import { readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { chownTree } from '../workspace/tree.js';

/**
 * Who owns what a run leaves behind (containers, worktrees lent to an unprivileged uid), so that a later
 * start-up can tell leftovers of a dead process from the work of a live one.
 */

/** Used when the worktree is owned by root: tests never run as root, even with no capabilities. */
export const FALLBACK_USER = '65534:65534';

/**
 * `host:pid:start`: the pid alone is reused after a restart; its start time (clock ticks since boot,
 * from /proc) is not. The host name tells processes of another machine or app container (another pid
 * namespace) apart: their liveness cannot be checked from here.
 */
export function processOwner(pid = process.pid): string {
  return `${hostname()}:${pid}:${startTicks(pid) ?? '0'}`;
}

/** Field 22 of /proc/<pid>/stat; null when there is no such process. A zombie is as good as dead. */
function startTicks(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields[0] is field 3 (state)
    return fields[0] === 'Z' ? null : (fields[19] ?? null);
  } catch {
    return null;
  }
}

/** Whether the process named by `processOwner()` still runs; `unknown` for other hosts and bad values. */
export function ownerState(owner: string | undefined): 'alive' | 'dead' | 'unknown' {
  const m = /^(.*):(\d+):(\d+)$/.exec(owner ?? '');
  if (!m || m[1] !== hostname()) return 'unknown';
  const pid = Number(m[2]);
  if (m[3] === '0') {
    // No /proc (not Linux): existence is all that can be checked.
    try {
      process.kill(pid, 0);
      return 'alive';
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'ESRCH' ? 'dead' : 'alive';
    }
  }
  return startTicks(pid) === m[3] ? 'alive' : 'dead';
}

const Marker = z.strictObject({
  worktree: z.string(),
  uid: z.number().int().min(0),
  gid: z.number().int().min(0),
  owner: z.string(),
});

/** Next to the worktree (never in it, where tests could change it): written before lending, removed after. */
const markerPath = (worktree: string) =>
  path.join(path.dirname(worktree), `.${path.basename(worktree)}.lent.json`);
const MARKER_NAME = /^\.(.+)\.lent\.json$/;

/**
 * The user the tests run as: the worktree's owner, so files they write stay owned correctly on the
 * host. Tests never run as root: a root-owned worktree (the service running as root) is lent to an
 * unprivileged uid for the run and handed back to root afterwards, new files included. The marker
 * written first lets a later start-up hand it back when this process dies in between.
 */
export async function worktreeUser(
  worktree: string,
): Promise<{ user: string; release: () => Promise<void> }> {
  const st = await stat(worktree);
  if (st.uid !== 0) return { user: `${st.uid}:${st.gid}`, release: async () => {} };
  const [uid, gid] = FALLBACK_USER.split(':').map(Number) as [number, number];
  const marker = markerPath(worktree);
  const record: z.infer<typeof Marker> = { worktree, uid: st.uid, gid: st.gid, owner: processOwner() };
  await writeFile(marker, JSON.stringify(record));
  await chownTree(worktree, uid, gid);
  return {
    user: FALLBACK_USER,
    release: async () => {
      await chownTree(worktree, st.uid, st.gid);
      await rm(marker, { force: true });
    },
  };
}

/** Whether `worktree` is lent right now (by any process, dead or alive). */
export async function isLent(worktree: string): Promise<boolean> {
  return stat(markerPath(worktree)).then(
    () => true,
    () => false,
  );
}

export interface Restored {
  restored: string[];
  /** Worktrees that could not be handed back (the marker stays): the caller sets them aside. */
  failed: { worktree: string; error: string }[];
}

/**
 * Hands back to their owner the worktrees under `dir` that a dead process left lent. A marker only ever
 * names its own sibling, so a damaged one cannot chown anything else. Never throws for one worktree:
 * whatever its tests made of it, the others are handed back and the caller goes on.
 */
export async function restoreLentWorktrees(dir: string): Promise<Restored> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const out: Restored = { restored: [], failed: [] };
  for (const name of names) {
    const m = MARKER_NAME.exec(name);
    if (!m) continue;
    const file = path.join(dir, name);
    const parsed = Marker.safeParse(parseJson(await readFile(file, 'utf8').catch(() => '')));
    if (parsed.success && ownerState(parsed.data.owner) !== 'dead') continue;
    const worktree = path.join(dir, m[1]!);
    if (parsed.success && parsed.data.worktree === worktree) {
      const exists = await stat(worktree).then(
        (s) => s.isDirectory(),
        () => false,
      );
      const handed = exists
        ? await chownTree(worktree, parsed.data.uid, parsed.data.gid).then(
            () => null,
            (err: unknown) => (err instanceof Error ? err.message : String(err)),
          )
        : null;
      if (handed !== null) {
        out.failed.push({ worktree, error: handed });
        continue;
      }
      if (exists) out.restored.push(worktree);
    }
    await rm(file, { force: true });
  }
  return out;
}

/** Removes the marker of a worktree that is gone or set aside (a later start-up has nothing to hand back). */
export const forgetLent = (worktree: string) => rm(markerPath(worktree), { force: true });

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}
