import type { Config } from '../config/config.js';

/**
 * How many times the measured suite a later run may take: room for a loaded machine and for the
 * judge's cells side by side (a 1,200-test jest suite took 20 s alone, 150 s under load on 2 CPUs).
 */
export const SUITE_FACTOR = 5;

type Limits = Pick<Config['limits'], 'minTestTimeoutMs' | 'maxTestTimeoutMs'>;

/**
 * The wall-clock limit of one test run: the ceiling until the suite is measured (the first full run
 * needs the room to be measured), then `SUITE_FACTOR` × the measured time within floor and ceiling.
 */
export function testLimitMs(limits: Limits, suiteMs: number | null | undefined): number {
  const ceiling = limits.maxTestTimeoutMs;
  if (suiteMs === null || suiteMs === undefined) return ceiling;
  const derived = Math.ceil((suiteMs * SUITE_FACTOR) / 1000) * 1000;
  return Math.min(ceiling, Math.max(Math.min(limits.minTestTimeoutMs, ceiling), derived));
}
