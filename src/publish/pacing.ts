/** GitHub's write pacing: how many writes pass at once and how the rest are spaced. */

/**
 * GitHub's spacing advice is for integrations making many writes; its hard limit is 80 content-creating
 * requests a minute. A run publishes a handful (status comment, PR, review request, evidence, trace,
 * configuration), so that many pass at once and only a longer stream is spaced: at most
 * NOTIFYING_BURST + 20 notifying writes in any minute per installation.
 */
export const WRITE_BURST = 10;
export const NOTIFYING_BURST = 6;
/** How long an installation's writes pause before both bursts are whole again. */
export const pacingRefillMs = (intervalMs: number): number =>
  Math.max(WRITE_BURST, 3 * NOTIFYING_BURST) * intervalMs;
/**
 * The generic cell rate algorithm (a token bucket kept as one timestamp): up to `burst` calls pass at
 * once, then one per `everyMs`. Returns how long the call made at `now` must wait; calls are served in
 * the order they ask. A `yielding` call takes a slot only when one is free now: otherwise it is told
 * how long until one is and asks again then, having reserved nothing that would hold a later call back.
 */
export function pacer(everyMs: number, burst: number): (now: number, yielding?: boolean) => number {
  let due = 0; // when the bucket would be full again, had nothing more been asked
  const slack = (burst - 1) * everyMs;
  return (now, yielding = false) => {
    const wait = Math.max(0, due - slack - now);
    if (wait > 0 && yielding) return wait;
    due = Math.max(due, now) + everyMs;
    return wait;
  };
}

/**
 * An edit of a comment (`path` as sent or as its route template): the app edits only its status
 * comments, which show progress beside the job.
 * They yield to the job's writes for GitHub's pacing (an edit is coalesced with later states meanwhile).
 */
export const besideTheJob = (method: string, path: string): boolean =>
  method === 'PATCH' && /^\/repos\/[^/]+\/[^/]+\/issues\/comments\/[^/]+$/.test(path);
