import { setTimeout as sleep } from 'node:timers/promises';
import { measureTree } from './tree.js';

/** What one clone or fetch of a repository may take: a remote is untrusted (huge, or trickling). */
export interface FetchLimits {
  timeoutMs: number;
  /** Growth of the mirror's directory while git writes to it. */
  maxBytes: number;
}

/** How often the directory git writes to is measured. */
const POLL_MS = 250;

const UNBOUNDED = Number.MAX_SAFE_INTEGER;

/**
 * Runs `work` (a clone into `dir` or a fetch into it) with a signal that stops git once it has run
 * longer than the deadline or `dir` grew past the cap, measured while git writes and once more when
 * it is done (a fast local copy can end between two polls). Returns null within both, else why it
 * was stopped, naming the setting; a failure of git's own is thrown as it is. No limits: no bounds.
 */
export async function withinFetchLimits(
  dir: string,
  limits: FetchLimits | undefined,
  work: (signal?: AbortSignal) => Promise<unknown>,
): Promise<string | null> {
  if (!limits) return work().then(() => null);
  const start = (await measureTree(dir, { maxBytes: UNBOUNDED, maxEntries: UNBOUNDED })).bytes;
  const cap = { maxBytes: start + limits.maxBytes, maxEntries: UNBOUNDED };
  const overCap = `it grew past ${Math.round(limits.maxBytes / 2 ** 20)} MB (AGENTICFIX_FETCH_MAX_MB)`;
  const stopper = new AbortController();
  let why: string | null = null;
  const stop = (reason: string) => {
    why ??= reason;
    stopper.abort();
  };
  const deadline = setTimeout(
    () => stop(`it took longer than ${Math.round(limits.timeoutMs / 1000)} s (AGENTICFIX_FETCH_TIMEOUT_S)`),
    limits.timeoutMs,
  );
  let done = false;
  const watch = (async () => {
    while (!done && !stopper.signal.aborted) {
      await sleep(POLL_MS);
      if (!done && (await measureTree(dir, cap)).over === 'bytes') stop(overCap);
    }
  })();
  try {
    await work(stopper.signal);
    if (why === null && (await measureTree(dir, cap)).over === 'bytes') why = overCap;
  } catch (err) {
    if (why === null) throw err;
  } finally {
    done = true;
    clearTimeout(deadline);
    await watch;
  }
  return why;
}
