import { APIConnectionError, APIError } from 'openai';

/** One retry of a model request, as reported to the trace. */
export interface RetryInfo {
  attempt: number;
  delay_ms: number;
  status: number | null;
  error: string;
}

/**
 * undici's error when the connection drops while the body is read (a TypeError of fetch's realm, so told
 * by its name and message). The reply is read inside the size-capped fetch, so the SDK wraps it as a
 * connection error: retried like one, but said as what it is rather than "Connection error.".
 */
const cutMidBody = (err: unknown): boolean => {
  const cause =
    err instanceof APIConnectionError ? (err.cause as { name?: unknown; message?: unknown } | null) : null;
  return cause?.name === 'TypeError' && cause.message === 'terminated';
};

/** What failed, for the trace and the final error. */
export const failureMessage = (err: unknown): string =>
  cutMidBody(err) ? 'terminated' : (err as Error).message;

export const isTransient = (err: unknown): boolean =>
  err instanceof APIConnectionError || // includes timeouts and a reply cut mid-body
  (err instanceof APIError && typeof err.status === 'number' && (err.status === 429 || err.status >= 500));

/** The longest `retry-after` honoured, in seconds: a provider asking for more is not waited on for hours. */
export const RETRY_AFTER_CAP_S = 120;

/**
 * The wait a provider asked for (`retry-after-ms`, else `retry-after` in seconds or as an HTTP date),
 * capped, in units of `unitMs` per second (AGENTICFIX_MODEL_RETRY_BASE_MS, 1000 by default); null when it
 * asked for none.
 */
export function retryAfterMs(err: unknown, unitMs: number, now = Date.now()): number | null {
  if (!(err instanceof APIError) || !err.headers) return null;
  const ms = Number(err.headers.get('retry-after-ms') ?? NaN);
  const header = err.headers.get('retry-after');
  let seconds = Number.isFinite(ms) && ms >= 0 ? ms / 1000 : header === null ? NaN : Number(header);
  if (Number.isNaN(seconds) && header !== null) seconds = (Date.parse(header) - now) / 1000;
  if (!Number.isFinite(seconds)) return null;
  return Math.round(Math.min(Math.max(seconds, 0), RETRY_AFTER_CAP_S) * unitMs);
}

/** Full-jitter exponential backoff, capped so a run never sleeps for minutes on one request. */
export const backoffMs = (attempt: number, baseMs: number, random = Math.random): number =>
  Math.round(Math.min(baseMs * 2 ** attempt, 30_000) * (0.5 + random() / 2));
