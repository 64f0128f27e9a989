import { createServer, type RequestListener, type Server } from 'node:http';
import type { Config } from './config.js';

/** What a listener allows each visitor (AGENTICFIX_HTTP_*); a field unset (tests of other things): Node's own. */
export type ConnectionLimits = Partial<Config['http']>;

/**
 * An HTTP server for every port the app listens on (serve's, a worker's /healthz, setup's): anyone who
 * reaches one can hold idle connections, each a file descriptor (up to the process's hard limit, to which
 * Node raises its soft one), or trickle a request's headers or body. Past `maxConnections` a new connection is closed unanswered; headers
 * not in within `headersTimeoutMs` get 408 and the connection closed, and so does a request whose body
 * is not in `bodyTimeoutMs` later (Node's own 5 min held a connection whose announced body never came,
 * on any path, answered or not). Node checks those deadlines only every `connectionsCheckingInterval`
 * (30 s by default), so short ones are checked at a matching pace. Kept-alive connections idle for Node's 5 s.
 */
export function limitedServer(limits: ConnectionLimits, handle: RequestListener): Server {
  const { maxConnections, headersTimeoutMs = 60_000, bodyTimeoutMs = 30_000 } = limits;
  const server = createServer(
    {
      headersTimeout: headersTimeoutMs,
      requestTimeout: headersTimeoutMs + bodyTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, headersTimeoutMs),
      keepAliveTimeout: 5000,
    },
    handle,
  );
  if (maxConnections !== undefined) server.maxConnections = maxConnections;
  return server;
}
