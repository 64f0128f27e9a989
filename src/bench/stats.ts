import { readFileSync } from 'node:fs';
import type { RunRecord } from '../store/store.js';

/** The p-th percentile (nearest rank) of `xs`. */
export const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

/** One decimal. */
export const round = (x: number) => Math.round(x * 10) / 10;
/** A share of a whole, to two places. */
export const share = (part: number, whole: number) => Math.round((part / whole) * 100) / 100;

/** The most runs that overlapped in time, from what the store recorded. */
export function maxOverlap(runs: RunRecord[]): number {
  const edges = runs.flatMap((r) => [
    [Date.parse(r.started_at!), 1] as const,
    [Date.parse(r.finished_at!), -1] as const,
  ]);
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, d] of edges) most = Math.max(most, (now += d));
  return most;
}

/**
 * This thread's time on a CPU and waiting in the run queue for one, in µs, from Linux's scheduler
 * statistics (NaN elsewhere). The wait is the machine's other load, on this thread's clock.
 */
export function threadTimes(): { runUs: number; waitUs: number } {
  try {
    const [run, wait] = readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ').map(Number);
    return { runUs: run! / 1000, waitUs: wait! / 1000 };
  } catch {
    return { runUs: NaN, waitUs: NaN };
  }
}

/**
 * What a burst's p99 is made of (medians over bursts): how long the sender took to write it (it reads
 * no answer meanwhile: its share of the early answers' latency); the app thread's CPU per delivery,
 * which the machine's other load moves much less than latencies (for comparing code; all the thread
 * did until the burst's last answer: routing that starts mid-burst counts, routing after it does not);
 * and how long the app's and the sender's threads waited for a CPU (the other load, in the latencies).
 * Where Linux tells them.
 */
export function burstFigures(
  prefix: string,
  bursts: {
    size: number;
    writeMs: number;
    senderWaitMs: number;
    thread: { runUs: number; waitUs: number };
  }[],
): Record<string, number> {
  const median = (f: (b: (typeof bursts)[number]) => number) => pct(bursts.map(f), 50);
  const cpu = median((b) => b.thread.runUs / b.size);
  return {
    [`${prefix}_sender_write_ms`]: round(median((b) => b.writeMs)),
    ...(Number.isFinite(cpu) && {
      [`${prefix}_app_cpu_us_per_delivery`]: Math.round(cpu),
      [`${prefix}_app_cpu_wait_ms`]: round(median((b) => b.thread.waitUs / 1000)),
      [`${prefix}_sender_cpu_wait_ms`]: round(median((b) => b.senderWaitMs)),
    }),
  };
}
