/**
 * Milliseconds since the call, on the monotonic clock: durations must not jump when the system clock is
 * stepped or slewed (this machine's wall clock has been seen to step by seconds in the middle of a run).
 */
export function stopwatch(): () => number {
  const t0 = performance.now();
  return () => Math.round(performance.now() - t0);
}

/**
 * Wall time per phase of a run, for result.json and the trace comment: where the time outside the
 * tests goes. Starting a phase ends the one before; a phase entered twice adds up.
 */
export class PhaseClock {
  private readonly ms: Record<string, number> = {};
  private current: { name: string; since: number } | null = null;

  constructor(private readonly now: () => number = () => performance.now()) {}

  start(name: string): void {
    this.stop();
    this.current = { name, since: this.now() };
  }

  stop(): void {
    if (!this.current) return;
    const { name, since } = this.current;
    this.ms[name] = (this.ms[name] ?? 0) + Math.round(this.now() - since);
    this.current = null;
  }

  /** The phases so far, the current one included up to now. */
  snapshot(): Record<string, number> {
    const out = { ...this.ms };
    if (this.current)
      out[this.current.name] = (out[this.current.name] ?? 0) + Math.round(this.now() - this.current.since);
    return out;
  }
}
