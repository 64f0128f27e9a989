import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Docker from 'dockerode';
import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';
import type { Config } from './config/config.js';
import { limitedServer, type ConnectionLimits } from './config/listener.js';
import { buildInfo } from './config/version.js';
import type { RunStore } from './store/store.js';
import { exportBuildInfo, exportRunCounts, registry } from './trace/metrics.js';

/**
 * What an operator watches: `/ping`, `/healthz` (each check with its time, 503 when one fails) and
 * `/metrics` (Prometheus), on serve's port and on a worker's own listener; and the log format.
 */

/** A check passes by resolving; its error message says what failed. */
export type Checks = Record<string, () => Promise<unknown>>;

const CHECK_TIMEOUT_MS = 3000;

/** The checks of a process holding `store`; `queue` when it talks to Redis, Docker where runs run. */
export function healthChecks(o: {
  store: RunStore;
  queue?: () => Promise<unknown>;
  docker: boolean;
}): Checks {
  return {
    store: () => o.store.get('healthz'),
    ...(o.queue ? { queue: o.queue } : {}),
    ...(o.docker ? { docker: () => new Docker().ping() } : {}),
  };
}

/**
 * The routes, or false for any other path (the caller answers it). `store`: the process serving the
 * store (serve) exports its run counts; workers share it and do not.
 */
export function observeRoutes(checks: Checks, store: RunStore | null) {
  const build = buildInfo();
  exportBuildInfo(build);
  if (store)
    exportRunCounts(async () => {
      const [queued, running, pending] = await Promise.all(
        (['queued', 'running', 'publish_pending'] as const).map((s) => store.list(s)),
      );
      return { queued: queued!.length, running: running!.length, publish_pending: pending!.length };
    });
  // Anyone who reaches the port may ask, and each round pings the engine: requests that come while a
  // round is under way share its answer, so a flood costs one round at a time.
  let round: Promise<(readonly [string, Awaited<ReturnType<typeof timed>>])[]> | null = null;
  const health = () =>
    (round ??= Promise.all(
      Object.entries(checks).map(async ([name, check]) => [name, await timed(check)] as const),
    ).finally(() => (round = null)));
  return async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    if (path === '/ping') res.writeHead(200, { 'content-type': 'text/plain' }).end('PONG');
    else if (path === '/healthz') {
      const results = await health();
      const ok = results.every(([, r]) => r.ok);
      res
        .writeHead(ok ? 200 : 503, { 'content-type': 'application/json' })
        .end(
          JSON.stringify({ status: ok ? 'ok' : 'failing', ...build, checks: Object.fromEntries(results) }),
        );
    } else if (path === '/metrics') {
      const text = await registry.metrics();
      res.writeHead(200, { 'content-type': registry.contentType }).end(text);
    } else return false;
    return true;
  };
}

async function timed(check: () => Promise<unknown>): Promise<{ ok: boolean; ms: number; error?: string }> {
  const start = Date.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      check(),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)),
          CHECK_TIMEOUT_MS,
        );
      }),
    ]);
    return { ok: true, ms: Date.now() - start };
  } catch (err) {
    return { ok: false, ms: Date.now() - start, error: err instanceof Error ? err.message : String(err) };
  } finally {
    clearTimeout(timer);
  }
}

/** A worker's listener for the same routes (it has no webhook server), with the app's connection limits. */
export async function listenObserve(
  routes: ReturnType<typeof observeRoutes>,
  port: number,
  host: string,
  limits: ConnectionLimits,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = limitedServer(limits, (req, res) => {
    routes(req, res).then(
      (handled) => handled || res.writeHead(404).end(),
      () => res.headersSent || res.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const addr = server.address() as AddressInfo;
  const shown = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${shown}:${addr.port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The process's logger: LOG_LEVEL, and LOG_FORMAT `json` (one object a line) or `pretty` (as Probot's). */
export function appLogger(config: Pick<Config, 'log'>): Logger {
  const { level, format } = config.log;
  return format === 'pretty'
    ? pino({ level }, pretty({ ignore: 'pid,hostname', translateTime: 'SYS:standard', sync: true }))
    : pino({ level });
}
