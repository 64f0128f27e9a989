import { OutageLog, type OutageLogger } from '../trace/outage.js';
import type { RunStore } from './store.js';

/**
 * A store outage (PostgreSQL down or restarting, a SQLite file locked by another process) is waited
 * out rather than failing the run that writes: its run-state writes are tried again with back-off
 * for up to AGENTICFIX_STORE_RETRY_S. Every call reports to one OutageLog: a line when the store stops
 * answering and one when it answers again, on serve and on each worker.
 */

/** The writes that record a run's state; the others (reads, the intake's) fail at once as before. */
const PATIENT: ReadonlySet<string | symbol> = new Set<keyof RunStore>([
  'update',
  'updateIf',
  'putAttempt',
  'markInterrupted',
]);
const FIRST_WAIT_MS = 250;
const MAX_WAIT_MS = 10_000;

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENOTFOUND',
]);
const CONNECTION_MESSAGE =
  /Connection terminated|timeout exceeded when trying to connect|has encountered a connection error/i;

/**
 * Whether `err` says the store cannot be reached for now, as against a write it refused: a connection
 * that failed or broke; PostgreSQL's connection errors (class 08), shutting down or starting up
 * (57P01-57P03) or out of resources (53); SQLite busy, locked or unable to open or read its file. A
 * full disk is not one: the run's own space given back frees it (queue.ts retries a run's end).
 */
export function storeUnreachable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  const c = typeof code === 'string' ? code : '';
  return (
    CONNECTION_CODES.has(c) ||
    /^(08|57P0[123]|53)/.test(c) ||
    /^SQLITE_(BUSY|LOCKED|CANTOPEN|IOERR)/.test(c) ||
    CONNECTION_MESSAGE.test(typeof message === 'string' ? message : '')
  );
}

export interface Patience {
  /** How long a run-state write is tried again in all (AGENTICFIX_STORE_RETRY_S). */
  retryMs: number;
  /** `postgresql` or `sqlite`: names the outage lines. */
  service: string;
  log?: OutageLogger;
}

/** `store` with its run-state writes waiting out outages, and its outages logged. */
export function patientStore(store: RunStore, o: Patience): RunStore {
  const outage = new OutageLog(o.service, o.log);
  const call = async (work: () => Promise<unknown>, patient: boolean): Promise<unknown> => {
    const start = Date.now();
    for (let wait = FIRST_WAIT_MS; ; wait = Math.min(wait * 2, MAX_WAIT_MS)) {
      try {
        const result = await work();
        outage.answered();
        return result;
      } catch (err) {
        if (!storeUnreachable(err)) {
          outage.answered(); // it answered, with a refusal
          throw err;
        }
        outage.failed(err);
        const left = o.retryMs - (Date.now() - start);
        if (!patient || left <= 0) throw err;
        await new Promise((r) => setTimeout(r, Math.min(wait, left)));
      }
    }
  };
  return new Proxy(store, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      const method = value as (...args: unknown[]) => Promise<unknown>;
      if (prop === 'close') return method.bind(target);
      return (...args: unknown[]) => call(() => method.apply(target, args), PATIENT.has(prop));
    },
  });
}
