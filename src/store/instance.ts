import { hostname } from 'node:os';
import { z } from 'zod';

/** The one instance serving a run store (RunStore.acquireInstance): its claim, and when a holder is gone. */

/** How long an instance that stopped heart-beating keeps the store (a crash on another host, a hang). */
export const INSTANCE_STALE_MS = 30_000;

export const INSTANCE_ROW = z.strictObject({
  id: z.literal(1),
  owner: z.string(),
  host: z.string(),
  pid: z.number().int(),
  started_at: z.string(),
  heartbeat_at: z.string(),
});
export type InstanceHolder = Omit<z.output<typeof INSTANCE_ROW>, 'id'>;

/** Another live instance already serves this store. */
export class StoreInUseError extends Error {
  /** `where`: the store as an operator knows it (a file, or a database without its password). */
  constructor(
    readonly where: string,
    readonly holder: InstanceHolder,
  ) {
    const ago = Math.round((Date.now() - Date.parse(holder.heartbeat_at)) / 1000);
    super(
      `another AgenticFix instance (pid ${holder.pid} on ${holder.host}, started ${holder.started_at}, ` +
        `last heartbeat ${ago} s ago) serves the run store ${where}; stop it first, or give this instance ` +
        `its own AGENTICFIX_HOME / AGENTICFIX_DB_PATH / AGENTICFIX_DATABASE_URL. An instance that stopped ` +
        `without closing holds the store for at most ${INSTANCE_STALE_MS / 1000} s.`,
    );
    this.name = 'StoreInUseError';
  }
}

/** A claim for this process, fresh now. */
export function newInstance(owner: string): InstanceHolder {
  const at = new Date().toISOString();
  return { owner, host: hostname(), pid: process.pid, started_at: at, heartbeat_at: at };
}

export function holderGone(h: InstanceHolder): boolean {
  if (Date.now() - Date.parse(h.heartbeat_at) > INSTANCE_STALE_MS) return true;
  if (h.host !== hostname()) return false;
  // Our own pid: an earlier process that had it (a restarted container is pid 1 again), or another
  // store of this very process.
  if (h.pid === process.pid) return Date.parse(h.started_at) < performance.timeOrigin;
  try {
    process.kill(h.pid, 0); // signal 0: existence check only
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'EPERM'; // EPERM: alive, someone else's
  }
}
