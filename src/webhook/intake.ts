import type { Logger } from 'probot';
import type { RunStore } from '../store/store.js';

/**
 * What happens to a delivery after its webhook was answered: permission checks, pinning the base
 * commit, enqueueing. Each delivery is marked done when its intake ends; a failed one is logged and
 * released, so GitHub's "redeliver" can try it again.
 */
export class Intake {
  private readonly inflight = new Set<Promise<void>>();

  constructor(
    private readonly store: RunStore,
    private readonly log: Logger,
  ) {}

  /** Resolves when this delivery's intake ended, failed or not (the endpoint paces routing by it). */
  run(deliveryId: string, act: () => Promise<void>): Promise<void> {
    const done = act()
      .then(
        () => this.store.finishDelivery(deliveryId),
        (err: unknown) => {
          this.log.error({ err, delivery: deliveryId }, 'webhook intake failed');
          return this.store.releaseDelivery(deliveryId);
        },
      )
      // A failed store write must not become an unhandled rejection (which would stop the server).
      .catch((err: unknown) => this.log.error({ err, delivery: deliveryId }, 'could not record a delivery'))
      .finally(() => this.inflight.delete(done));
    this.inflight.add(done);
    return done;
  }

  /** Resolves when every delivery taken so far has been taken in. */
  async idle(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }
}
