import { createServer, type RequestListener, type Server } from 'node:http';
import type { Config } from './config.js';

/** What a listener allows each visitor (AGENTICFIX_HTTP_*); a field unset (tests of other things): Node's own. */
export type ConnectionLimits = Partial<Config['http']>;

/**
 * An HTTP server for every port the app listens on (serve's, a worker's /healthz, setup's): anyone who
 * reaches one can hold idle connections, each a file descriptor (up to the process's hard limit, to which
 * Node raises its soft one), or trickle a request's headers. Past `maxConnections` a new connection is closed unanswered; headers
 * not in within `headersTimeoutMs` get 408 and the connection closed. Node checks that deadline only
 * every `connectionsCheckingInterval` (30 s by default), so a short one is checked at a matching pace.
 * Kept-alive connections idle for Node's 5 s.
 */
export function limitedServer(limits: ConnectionLimits, handle: RequestListener): Server {
  const { maxConnections, headersTimeoutMs = 60_000 } = limits;
  const server = createServer(
    {
      headersTimeout: headersTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, headersTimeoutMs),
      keepAliveTimeout: 5000,
    },
    handle,
  );
  if (maxConnections !== undefined) server.maxConnections = maxConnections;
  return server;
}
