import { setTimeout as sleep } from 'node:timers/promises';
import { measureTree } from './tree.js';

/** What one clone or fetch of a repository may take: a remote is untrusted (huge, or trickling). */
export interface FetchLimits {
  timeoutMs: number;
  /** Growth of the mirror's directory while git writes to it. */
  maxBytes: number;
  /** Files git may write (each new or changed ref is one, each loose object one); unset: any number. */
  maxFiles?: number;
}

/** How often the directory git writes to is measured. */
const POLL_MS = 250;

const UNBOUNDED = Number.MAX_SAFE_INTEGER;

/**
 * Runs `work` (a clone into `dir` or a fetch into it) with a signal that stops git once it has run
 * longer than the deadline or `dir` grew past a cap (bytes, files), measured while git writes and once
 * more when it is done (a fast local copy can end between two polls). Returns null within all, else why
 * it was stopped, naming the setting; a failure of git's own is thrown as it is. No limits: no bounds.
 */
export async function withinFetchLimits(
  dir: string,
  limits: FetchLimits | undefined,
  work: (signal?: AbortSignal) => Promise<unknown>,
): Promise<string | null> {
  if (!limits) return work().then(() => null);
  const start = await measureTree(dir, { maxBytes: UNBOUNDED, maxEntries: UNBOUNDED });
  const cap = {
    maxBytes: start.bytes + limits.maxBytes,
    maxEntries: start.entries + (limits.maxFiles ?? UNBOUNDED),
  };
  const over = (m: { over: string | null }) =>
    m.over === 'bytes'
      ? `it grew past ${Math.round(limits.maxBytes / 2 ** 20)} MB (AGENTICFIX_FETCH_MAX_MB)`
      : m.over === 'entries'
        ? `it wrote more than ${limits.maxFiles} files (AGENTICFIX_FETCH_MAX_FILES)`
        : null;
  const stopper = new AbortController();
  const finished = new AbortController();
  let why: string | null = null;
  const stop = (reason: string) => {
    why ??= reason;
    stopper.abort();
  };
  const deadline = setTimeout(
    () => stop(`it took longer than ${Math.round(limits.timeoutMs / 1000)} s (AGENTICFIX_FETCH_TIMEOUT_S)`),
    limits.timeoutMs,
  );
  const watch = (async () => {
    while (!finished.signal.aborted && !stopper.signal.aborted) {
      // Cut short when git is done: a fetch's wait is git's, not the rest of a poll.
      await sleep(POLL_MS, undefined, { signal: finished.signal }).catch(() => undefined);
      if (finished.signal.aborted) return;
      const past = over(await measureTree(dir, cap));
      if (past !== null) stop(past);
    }
  })();
  try {
    await work(stopper.signal);
    why ??= over(await measureTree(dir, cap));
  } catch (err) {
    if (why === null) throw err;
  } finally {
    finished.abort();
    clearTimeout(deadline);
    await watch;
  }
  return why;
}
