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
