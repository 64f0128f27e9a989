import type { Redis } from 'ioredis';
import type { RunRecord } from '../store/store.js';
import { type keys as queueKeys, TAKE_SLOT } from './redis-keys.js';

/** How long a job whose issue or installation is busy waits before it is tried again. */
export const BUSY_RETRY_MS = 500;

/**
 * An installation's slots across all workers (AGENTICFIX_INSTALLATION_CONCURRENCY): a sorted set in
 * Redis of the jobs holding one (a run's, or a part's that runs on a job of its own, bull-parts.ts),
 * each scored by when its hold lapses, so that a dead worker's slots free themselves.
 */
export class InstallationSlots {
  constructor(
    private readonly redis: Redis,
    private readonly keys: ReturnType<typeof queueKeys>,
    /** Slots of one installation; 0: no limit. */
    private readonly limit: number,
    /** How long a hold lasts unless renewed (renewed every third of it). */
    private readonly lockMs: number,
  ) {}

  /**
   * Takes a slot of `run`'s installation for `holder` (a job's id) and keeps it until the returned
   * release is called; null when the installation's slots are all held. Without a limit, always.
   */
  async take(run: RunRecord, holder: string): Promise<(() => Promise<void>) | null> {
    if (this.limit === 0) return async () => {};
    const key = this.keys.installation(run);
    if (!(await this.hold(key, holder))) return null;
    const renew = setInterval(() => void this.hold(key, holder).catch(() => undefined), this.lockMs / 3);
    return async () => {
      clearInterval(renew);
      await this.redis.zrem(key, holder).catch(() => undefined);
    };
  }

  /** Takes or keeps the slot for lockMs from now. */
  private async hold(key: string, holder: string): Promise<boolean> {
    const now = Date.now();
    const took = await this.redis.eval(TAKE_SLOT, 1, key, now, now + this.lockMs, holder, this.limit);
    return took === 1;
  }
}
