import type { Claim, DeliveryClaim, RunStore } from '../store/store.js';

/**
 * Group commit for webhook deliveries: the ones that arrive while the event loop is busy are recorded
 * together in one transaction at the next turn, and each is answered only after that commit. A burst
 * pays one commit per turn instead of one per delivery, and no delivery is answered before it is durable.
 */
export class DeliveryRecorder {
  private batch: { claim: DeliveryClaim; resolve: (c: Claim) => void; reject: (e: unknown) => void }[] = [];

  constructor(private readonly store: RunStore) {}

  record(claim: DeliveryClaim): Promise<Claim> {
    return new Promise((resolve, reject) => {
      if (this.batch.push({ claim, resolve, reject }) === 1) setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    const batch = this.batch;
    this.batch = [];
    try {
      const claims = await this.store.claimDeliveries(batch.map((b) => b.claim));
      batch.forEach((b, i) => b.resolve(claims[i]!));
    } catch (err) {
      for (const b of batch) b.reject(err);
    }
  }
}
