import { Redis } from 'ioredis';
import { issueKey } from './queue.js';
import type { RunRecord } from '../store/store.js';
import { OutageLog } from '../trace/outage.js';

/** What the distributed queue keeps in Redis besides BullMQ's jobs: its keys, the scripts on them, its connections. */

export const keys = (name: string) => ({
  stop: (runId: string) => `${name}:stop:${runId}`,
  issue: (run: RunRecord) => `${name}:issue:${issueKey(run)}`,
  installation: (run: RunRecord) => `${name}:installation:${run.installation_id}`,
  channel: `${name}:stop`,
});

/** Stop requests outlive any queue wait. */
export const STOP_TTL_MS = 24 * 3600_000;

/**
 * Connections to close: BullMQ leaves the ones it is given open. Their errors go to `outage` (one line
 * per outage and one on recovery), never to ioredis's "Unhandled error event" stack traces.
 */
export class Connections {
  private readonly all: Redis[] = [];
  constructor(
    private readonly url: string,
    readonly outage = new OutageLog('redis'),
  ) {}
  open(): Redis {
    // BullMQ requires maxRetriesPerRequest null on its connections (blocking commands).
    const r = new Redis(this.url, { maxRetriesPerRequest: null });
    r.on('error', (err) => this.outage.failed(err));
    r.on('ready', () => this.outage.answered());
    this.all.push(r);
    return r;
  }
  close(): void {
    for (const r of this.all) r.disconnect();
  }
}

/** Errors of a Redis connection (an outage), as against BullMQ's own (a lock renewal that failed). */
export const CONNECTION_ERROR =
  /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EHOSTUNREACH|EAI_AGAIN|Connection is closed/;

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
