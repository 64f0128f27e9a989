/**
 * Routes answered deliveries to the handlers after the answers, at lower priority than answering: while
 * requests keep arriving routing holds back (a burst is answered first), but never longer than `maxHoldMs`
 * for the oldest delivery, and at most `concurrency` route at once, so no answer waits behind a pile of
 * handler work on the one event loop. A delivery's intake mostly waits on GitHub (three reads of
 * ~100 ms): with 2 at once a burst of 200 labels took 38 s to become runs against an emulator
 * answering in 100 ms, with 16 about 9 s, and the burst's acknowledgements stayed as fast.
 * A burst reaches the event loop in batches a few ms apart (one batch per turn), so a 5 ms quiet let
 * routing start between the batches of the same burst, and a 1,000 burst outlasted a 250 ms hold:
 * 50 ms and 1 s took the burst's p99 from 61 to 25-38 ms (200) and from 122 to ~100 ms (1,000).
 * A delivery that is the only request since the last quiet gap is routed at once: there is no burst's
 * answers for it to wait behind, and the quiet window would add 50 ms to every lone label's pickup. If
 * it turns out to be a burst's first, that one delivery's routing is all that competes with the rest.
 */
export class RoutingBacklog {
  private readonly waiting: { route: () => Promise<void>; since: number }[] = [];
  private active = 0;
  private lastArrival = -Infinity;
  /** Requests since the last quiet gap (none arrived for `quietMs`), this one included. */
  private run = 0;
  private timer: NodeJS.Timeout | undefined;
  private idlers: (() => void)[] = [];

  constructor(
    private readonly quietMs = 50,
    private readonly maxHoldMs = 1000,
    private readonly concurrency = 16,
  ) {}

  /** A request is arriving at the endpoint. */
  arrived(): void {
    const now = performance.now();
    this.run = now - this.lastArrival >= this.quietMs ? 1 : this.run + 1;
    this.lastArrival = now;
  }

  /** `route` must not reject: it reports its own failures. */
  add(route: () => Promise<void>): void {
    this.waiting.push({ route, since: performance.now() });
    if (this.run <= 1) this.start();
    else this.pump();
  }

  /** Resolves when every delivery added so far has been routed. */
  idle(): Promise<void> {
    if (this.empty()) return Promise.resolve();
    return new Promise((resolve) => this.idlers.push(resolve));
  }

  private empty(): boolean {
    return this.active === 0 && this.waiting.length === 0;
  }

  /** Routes what is waiting once the burst went quiet or the oldest was held `maxHoldMs`. */
  private pump(): void {
    if (this.timer) return;
    const oldest = this.waiting[0];
    if (oldest) {
      const at = Math.min(this.lastArrival + this.quietMs, oldest.since + this.maxHoldMs);
      const wait = at - performance.now();
      if (wait > 0) {
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.pump();
        }, wait);
        return;
      }
    }
    this.start();
  }

  /** Routes what is waiting now, as far as `concurrency` allows. */
  private start(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.active < this.concurrency && this.waiting.length > 0) {
      const { route } = this.waiting.shift()!;
      this.active++;
      void route().finally(() => {
        this.active--;
        this.pump();
      });
    }
    if (this.empty()) for (const resolve of this.idlers.splice(0)) resolve();
  }
}
