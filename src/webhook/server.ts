import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import {
  createServer,
  type IncomingMessage,
  type Server as HttpServer,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { createNodeMiddleware, type Logger, type Probot } from 'probot';
import { signedBody } from './app.js';

/** The webhook endpoint: signed deliveries in, to the app's handlers. */

export const WEBHOOK_PATH = '/api/github/webhooks';

export interface WebhookServerOptions {
  probot: Probot;
  /** The Probot app function (the handlers). */
  register: (app: Probot) => void;
  webhookSecret: string;
  /** Largest body taken in. */
  maxBytes: number;
  port?: number; // 0 = any free port
  host?: string;
  log: Logger;
}

/** Listens; resolves with the webhook URL (`http://host:port/api/github/webhooks`). */
export async function listenForWebhooks(
  o: WebhookServerOptions,
): Promise<{ url: string; close(): Promise<void> }> {
  const { probot, log, maxBytes } = o;
  const middleware = await createNodeMiddleware(o.register, {
    probot,
    webhooksPath: WEBHOOK_PATH,
  });
  const server: HttpServer = createServer((req, res) => {
    takeIn(req, res).catch((err: unknown) => {
      log.error({ err }, 'webhook failed');
      if (!res.headersSent) res.writeHead(500).end();
    });
  });

  /**
   * In front of Probot's middleware, which would buffer a body of any size and only then check its
   * signature: the body is counted as it streams (413 past the limit, at once when Content-Length says
   * so), its signature is checked here, and only a signed body reaches Probot, with its SHA-256.
   */
  async function takeIn(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // For the log: what the sender claims, capped.
    const delivery = {
      delivery: header(req, 'x-github-delivery')?.slice(0, 100),
      event: header(req, 'x-github-event')?.slice(0, 100),
    };
    const body = await readBounded(req, maxBytes);
    if (body === 'too_large') {
      log.warn({ ...delivery, max_bytes: maxBytes }, 'webhook body over the limit: refused');
      return tooLarge(req, res, maxBytes);
    }
    if (body === 'aborted') return;
    if (
      req.method === 'POST' &&
      !signatureMatches(o.webhookSecret, body, header(req, 'x-hub-signature-256'))
    ) {
      log.warn({ ...delivery, bytes: body.length }, 'webhook signature does not match: refused');
      return refuse(res, 401, 'signature does not match');
    }
    // Probot's middleware takes a body already read from `rawBody`.
    Object.assign(req, { rawBody: body, body: {} });
    const sha256 = createHash('sha256').update(body).digest('hex');
    await signedBody.run({ sha256 }, () => middleware(req, res, () => res.writeHead(404).end()));
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 3000, o.host ?? '127.0.0.1', () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${host}:${addr.port}${WEBHOOK_PATH}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const header = (req: IncomingMessage, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

/** The body, or why there is none: over `max` bytes (declared or streamed), or the client went away. */
function readBounded(req: IncomingMessage, max: number): Promise<Buffer | 'too_large' | 'aborted'> {
  if (Number(req.headers['content-length']) > max) return Promise.resolve('too_large');
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= max) return void chunks.push(chunk);
      req.off('data', onData);
      chunks.length = 0;
      resolve('too_large');
    };
    req.on('data', onData);
    req.once('end', () => resolve(Buffer.concat(chunks, size)));
    req.once('close', () => resolve('aborted')); // no-op after end or too_large
    req.once('error', () => resolve('aborted'));
  });
}

/** How long the rest of a refused body is read and dropped before its connection is closed. */
const LINGER_MS = 1000;

/**
 * Answers a body that is not read to its end. Closing the connection at once, with the client still
 * sending, resets it, and the client can lose the answer; so the rest is read and dropped (Node does
 * that after a response) for LINGER_MS, and then the connection is closed whatever is left.
 */
function tooLarge(req: IncomingMessage, res: ServerResponse, maxBytes: number): void {
  refuse(res, 413, `body over ${maxBytes} bytes`);
  setTimeout(() => req.socket.destroy(), LINGER_MS).unref();
}

function refuse(res: ServerResponse, status: number, error: string): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error }));
}

/** GitHub's `X-Hub-Signature-256`: `sha256=` and the hex HMAC-SHA256 of the exact body. */
function signatureMatches(secret: string, body: Buffer, signature: string | undefined): boolean {
  const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(body).digest('hex')}`);
  const given = Buffer.from(signature ?? '');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
