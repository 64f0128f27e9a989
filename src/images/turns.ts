import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import lockfile from 'proper-lockfile';

/** How long a holder's lock may go without its refresh before it counts as a dead holder's. */
export const TURN_STALE_MS = 10_000;

export interface TurnsOptions {
  /** Lock files of processes sharing the engine; without one, turns are this process's only. */
  dir?: string;
  /** A waiter looks at the lock again this often. */
  pollMs?: number;
  /** proper-lockfile's least is 2 s. */
  staleMs?: number;
}

/**
 * Turns, one holder per key at a time: builds of one environment asked for at once (a run's attempts
 * side by side, or runs of two worker processes on one Docker engine, each with the same Dockerfile and
 * files) take turns, so that the first builds it and the others find it in the cache, rather than the
 * engine building it once for each. In this process a waiter waits on the holder's promise; across
 * processes the holder keeps a lock file under `dir` (proper-lockfile: an atomic mkdir whose mtime the
 * holder refreshes), and a lock whose holder died (not refreshed for `staleMs`) is taken over.
 */
export class Turns {
  private readonly held = new Map<string, Promise<void>>();

  constructor(private readonly o: TurnsOptions = {}) {}

  /**
   * Waits until no one holds `key`, then holds it; the returned function ends the turn. A stop
   * (`signal`) ends the wait: the stopped one goes on without a turn (its work stops at once anyway).
   * A lock file that cannot be made at all (an unwritable directory) leaves only this process's turn:
   * the worst that follows is a build made twice.
   */
  async take(key: string, signal?: AbortSignal): Promise<() => void> {
    for (let held = this.held.get(key); held && !signal?.aborted; held = this.held.get(key))
      await until(held, signal);
    if (signal?.aborted) return () => {};
    let end!: () => void;
    const turn = new Promise<void>((resolve) => (end = resolve));
    this.held.set(key, turn);
    const endHere = () => {
      if (this.held.get(key) === turn) this.held.delete(key);
      end();
    };
    const release = this.o.dir ? await this.lock(this.o.dir, key, signal).catch(() => null) : null;
    if (!release) return endHere;
    // Released first: a waiter here then finds the lock file free.
    return () =>
      void release()
        .catch(() => undefined)
        .finally(endHere);
  }

  /** Holds the key's lock file, waiting while another live process holds it; null when stopped. */
  private async lock(dir: string, key: string, signal?: AbortSignal): Promise<(() => Promise<void>) | null> {
    await mkdir(dir, { recursive: true });
    const file = path.join(dir, `${key.replace(/[^A-Za-z0-9._-]/g, '_')}.lock`);
    for (;;) {
      if (signal?.aborted) return null;
      try {
        return await lockfile.lock(file, {
          realpath: false,
          lockfilePath: file,
          stale: this.o.staleMs ?? TURN_STALE_MS,
          // A lock that could not be refreshed in time may be taken over: a second build, not a failure.
          onCompromised: () => undefined,
        });
      } catch (e) {
        if ((e as { code?: string }).code !== 'ELOCKED') throw e;
      }
      await until(delay(this.o.pollMs ?? 500), signal);
    }
  }
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Resolves when `p` settles or `signal` stops the wait. */
function until(p: Promise<void>, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = () => resolve();
    signal?.addEventListener('abort', stop, { once: true });
    void p.then(() => (signal?.removeEventListener('abort', stop), resolve()));
  });
}
