import { Redis } from 'ioredis';
import { issueKey } from './queue.js';
import type { RunRecord } from '../store/store.js';

/** What the distributed queue keeps in Redis besides BullMQ's jobs: its keys, the scripts on them, its connections. */

export const keys = (name: string) => ({
  stop: (runId: string) => `${name}:stop:${runId}`,
  issue: (run: RunRecord) => `${name}:issue:${issueKey(run)}`,
  installation: (run: RunRecord) => `${name}:installation:${run.installation_id}`,
  channel: `${name}:stop`,
});

/** Connections to close: BullMQ leaves the ones it is given open. */
export class Connections {
  private readonly all: Redis[] = [];
  constructor(private readonly url: string) {}
  open(): Redis {
    // BullMQ requires maxRetriesPerRequest null on its connections (blocking commands).
    const r = new Redis(this.url, { maxRetriesPerRequest: null });
    this.all.push(r);
    return r;
  }
  close(): void {
    for (const r of this.all) r.disconnect();
  }
}

/** Deletes the issue lock only while it is this run's (it may have expired and been taken since). */
export const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`;
/** Extends the issue lock only while it is this run's. */
export const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0`;

/** Takes (or keeps) an installation slot for ARGV[3] until ARGV[2] when fewer than ARGV[4] are held at ARGV[1]. */
export const TAKE_SLOT = `
redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[1])
if redis.call('zscore', KEYS[1], ARGV[3]) or redis.call('zcard', KEYS[1]) < tonumber(ARGV[4]) then
  redis.call('zadd', KEYS[1], ARGV[2], ARGV[3])
  return 1
end
return 0`;
