import type Docker from 'dockerode';
import { answered } from '../environment/containers.js';
import { LABEL, OWNER_LABEL, RUN_LABEL } from '../environment/docker.js';
import { ownerState, processOwner } from '../environment/lending.js';

/** The run holding the lease. */
export const LEASE_LABEL = 'agenticfix.lease';
/** Milliseconds since the epoch after which the lease is dead unless renewed. */
export const LEASE_EXPIRES_LABEL = 'agenticfix.lease.expires';

export interface Lease {
  container: string;
  image: string;
  run: string;
  expires: number;
  /** Its holder process (processOwner()). */
  owner: string;
}

/**
 * Image leases that every process sharing the engine sees. A lease is a container of the image that is
 * created and never started: the engine refuses to remove an image a container references, and every
 * GC skips leased images. Its holder renews it (a new container with a later expiry replaces the old
 * one) every third of the TTL; a holder that dies stops renewing, and GC reclaims the lease once expired
 * (on this host at once: the engine sweep sees its holder gone). Every engine request is given up after
 * `callMs` (a hung engine): a release then rejects, and what it left is the engine sweep's.
 */
export class ImageLeases {
  /** run → image id → lease container id. */
  private readonly held = new Map<string, Map<string, string>>();
  private timer: NodeJS.Timeout | null = null;
  /** Leases being created: a release waits for them, so none is created after it and outlives the run. */
  private readonly creating = new Set<Promise<string>>();
  private renewing = false;

  constructor(
    private readonly docker: Docker,
    private readonly ttlMs: number,
    /** The engine-call bound (AGENTICFIX_ENGINE_CALL_TIMEOUT_S). */
    private readonly callMs: number,
    /** The holder process named on each lease (tests name two holders in one process). */
    private readonly owner = processOwner(),
  ) {}

  /** Every lease on the engine, of any process. */
  static async list(docker: Docker, callMs: number): Promise<Lease[]> {
    const containers = await answered(
      'a listing of image leases',
      (o) => docker.listContainers({ ...o, all: true, filters: { label: [LEASE_LABEL] } }),
      callMs,
    );
    return containers.map((c) => ({
      container: c.Id,
      image: c.ImageID,
      run: c.Labels[LEASE_LABEL] ?? '',
      expires: Number(c.Labels[LEASE_EXPIRES_LABEL]) || 0,
      owner: c.Labels[OWNER_LABEL] ?? '',
    }));
  }

  /**
   * Images under a live lease; expired leases on images in `scope` are removed (their holder is gone).
   * A holder alive on this host keeps its leases whatever the wall clock says (it may have jumped forward).
   */
  static async live(docker: Docker, scope: Set<string>, now: number, callMs: number): Promise<Set<string>> {
    const live = new Set<string>();
    for (const lease of await ImageLeases.list(docker, callMs)) {
      if (lease.expires > now || ownerState(lease.owner) === 'alive') live.add(lease.image);
      else if (scope.has(lease.image)) await removeLease(docker, lease.container, callMs);
    }
    return live;
  }

  /** Pins the image (by id) for the run; rejects when the image no longer exists. */
  async acquire(runId: string, imageId: string): Promise<void> {
    const leases = this.held.get(runId) ?? new Map<string, string>();
    if (leases.has(imageId)) return;
    const creating = this.create(runId, imageId);
    this.creating.add(creating);
    try {
      leases.set(imageId, await creating);
    } finally {
      this.creating.delete(creating);
    }
    this.held.set(runId, leases);
    this.timer ??= setInterval(() => void this.renew(), Math.max(1000, this.ttlMs / 3)).unref();
  }

  /**
   * Drops every lease of the run this process holds on the engine, whichever of its builders took it. A
   * stale worker whose run another worker took over (requeue stalled) never drops the newer one's leases;
   * a dead holder's leases are the engine sweep's.
   */
  async release(runId: string): Promise<void> {
    await Promise.allSettled([...this.creating]);
    this.held.delete(runId);
    if (this.held.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
    const mine = await answered(
      "a listing of the run's image leases",
      (o) =>
        this.docker.listContainers({
          ...o,
          all: true,
          filters: { label: [`${LEASE_LABEL}=${runId}`, `${OWNER_LABEL}=${this.owner}`] },
        }),
      this.callMs,
    );
    await Promise.all(mine.map((c) => this.remove(c.Id)));
  }

  private async create(runId: string, imageId: string): Promise<string> {
    const container = await answered(
      'an image lease',
      (o) =>
        this.docker.createContainer({
          ...o,
          Image: imageId,
          // Never started; should anyone start it, there is nothing to run and nothing to reach.
          Entrypoint: ['/agenticfix-lease-is-never-started'],
          Cmd: [],
          // A container inherits its image's labels: the run label must name the holder, not the builder.
          Labels: {
            [LABEL]: '1',
            [RUN_LABEL]: runId,
            [LEASE_LABEL]: runId,
            // The holder process, as on test containers: the start-up sweep and the sweep after the engine
            // came back (sweepContainers) clear a lease whose holder is gone without waiting for it to expire.
            [OWNER_LABEL]: this.owner,
            [LEASE_EXPIRES_LABEL]: String(Date.now() + this.ttlMs),
          },
          NetworkDisabled: true,
          HostConfig: { NetworkMode: 'none', CapDrop: ['ALL'], ReadonlyRootfs: true, AutoRemove: false },
        }),
      this.callMs,
    );
    return container.id;
  }

  private remove(container: string): Promise<void> {
    return removeLease(this.docker, container, this.callMs);
  }

  /** A failed renewal leaves the old lease in place until it expires; the next tick tries again. */
  private async renew(): Promise<void> {
    if (this.renewing) return;
    this.renewing = true;
    try {
      await this.renewAll();
    } finally {
      this.renewing = false;
    }
  }

  private async renewAll(): Promise<void> {
    for (const [runId, leases] of this.held) {
      for (const [imageId, old] of leases) {
        const fresh = await this.create(runId, imageId).catch(() => null);
        if (!fresh) continue;
        // Released while the new container was being created: it must not outlive the release.
        if (this.held.get(runId)?.get(imageId) !== old) {
          await this.remove(fresh);
          continue;
        }
        leases.set(imageId, fresh);
        await this.remove(old);
      }
    }
  }
}

/** Removes a lease container; never throws (one left behind expires, or the engine sweep takes it). */
function removeLease(docker: Docker, container: string, callMs: number): Promise<void> {
  return answered(
    'a lease removal',
    (o) => docker.getContainer(container).remove({ ...o, force: true }),
    callMs,
  ).catch(() => undefined);
}
