import { createHmac, hash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger, Probot } from 'probot';
import { limitedServer, type ConnectionLimits } from '../config/listener.js';
import type { Claim, RunStore } from '../store/store.js';
import { webhookFigures } from '../trace/metrics.js';
import { isHandled, wanted } from './events.js';
import { RoutingBacklog } from './backlog.js';
import { DeliveryRecorder } from './recorder.js';

/** The webhook endpoint: signed deliveries recorded and answered, then routed to the app's handlers. */

export const WEBHOOK_PATH = '/api/github/webhooks';

/** `maxConnections`, `headersTimeoutMs`: AGENTICFIX_HTTP_*; `bodyTimeoutMs` (AGENTICFIX_WEBHOOK_BODY_TIMEOUT_S) also bounds every request of the port (limitedServer). */
export interface WebhookServerOptions extends ConnectionLimits {
  probot: Probot;
  /** The Probot app function (the handlers). */
  register: (app: Probot) => void;
  store: RunStore;
  webhookSecret: string;
  /** Largest body taken in. */
  maxBytes: number;
  /** Bytes of bodies being read at once, all connections together: past it a delivery gets 503. */
  inflightBytes: number;
  /** A body must have arrived within this, or it gets 408 and its connection is closed. */
  bodyTimeoutMs: number;
  port?: number; // 0 = any free port
  host?: string;
  log: Logger;
  /** Other routes on the same port (/healthz, /metrics): resolves false for a path it does not serve. */
  routes?: (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;
}

export interface WebhookServer {
  /** `http://host:port/api/github/webhooks` */
  url: string;
  /** Resolves when every answered delivery has been routed to the handlers. */
  idle(): Promise<void>;
  /** Stops listening; resolves once the answered deliveries are routed. */
  close(): Promise<void>;
}

export async function listenForWebhooks(o: WebhookServerOptions): Promise<WebhookServer> {
  const { probot, log, maxBytes } = o;
  const inflight = new InflightBytes(o.inflightBytes, o.bodyTimeoutMs);
  await probot.load(o.register);
  const recorder = new DeliveryRecorder(o.store);
  const backlog = new RoutingBacklog();
  const server: HttpServer = limitedServer(o, (req, res) => {
    takeIn(req, res).catch((err: unknown) => {
      log.error({ err }, 'webhook failed');
      if (!res.headersSent) res.writeHead(500).end();
    });
  });

  /**
   * The webhook endpoint, in place of Probot's middleware (which buffers a body of any size before it
   * checks the signature, and answers only after the handlers ran): the body is counted as it streams
   * (413 past the limit, at once when Content-Length says so), its signature checked once, a delivery
   * the app may act on recorded durably (group commit with the others of the same moment), and then
   * answered. Probot routes it to the handlers only after the answer.
   */
  async function takeIn(req: IncomingMessage, res: ServerResponse): Promise<void> {
    backlog.arrived();
    const path = (req.url ?? '').split('?')[0];
    // An app registered through Probot's manifest flow (`agenticfix setup`) has the server's root as its
    // webhook URL, so deliveries are taken there too.
    if (path !== WEBHOOK_PATH && !(path === '/' && req.method === 'POST')) {
      if (!(await o.routes?.(req, res))) refuse(res, 404, 'not found');
      return;
    }
    if (req.method !== 'POST') return refuse(res, 405, 'POST only');
    // For the log: what the sender claims, capped.
    const delivery = {
      delivery: header(req, 'x-github-delivery')?.slice(0, 100),
      event: header(req, 'x-github-event')?.slice(0, 100),
    };
    // The label only of an event the app handles: made-up names must not grow /metrics.
    const label = delivery.event && isHandled(delivery.event) ? delivery.event : 'other';
    const count = (outcome: string) => webhookFigures.count(label, outcome);
    const signature = header(req, 'x-hub-signature-256');
    // Unsigned: refused before a byte of its body is read (GitHub signs every delivery of an app with a secret).
    if (!signature || !SIGNATURE.test(signature)) {
      count('refused');
      log.warn(delivery, 'webhook without a signature: refused unread');
      return refuseUnread(req, res, 401, 'X-Hub-Signature-256 missing or malformed');
    }
    const reader = inflight.open();
    let body: Awaited<ReturnType<typeof readBounded>>;
    try {
      body = await readBounded(req, maxBytes, inflight, reader);
      if (typeof body !== 'string') return await signed(res, body, delivery, count, signature);
    } finally {
      inflight.close(reader);
    }
    if (body === 'aborted') return;
    count('refused');
    log.warn({ ...delivery, max_bytes: maxBytes, refused: body }, 'webhook body refused');
    const [status, error] = REFUSALS[body];
    return refuseUnread(req, res, status, error.replace('MAX', String(maxBytes)));
  }

  /** A body read whole: its signature checked, then recorded and answered. */
  async function signed(
    res: ServerResponse,
    body: Buffer,
    delivery: { delivery?: string; event?: string },
    count: (outcome: string) => void,
    signature: string,
  ): Promise<void> {
    if (!signatureMatches(o.webhookSecret, body, signature)) {
      count('refused');
      log.warn({ ...delivery, bytes: body.length }, 'webhook signature does not match: refused');
      return refuse(res, 401, 'signature does not match');
    }
    const text = body.toString('utf8');
    const event = delivery.event ?? '';
    if (!wanted(event, text)) {
      count('ignored');
      return answer(res, 'ignored');
    }
    const id = delivery.delivery ?? '';
    if (!DELIVERY_ID.test(id)) return refuse(res, 400, 'missing or malformed X-GitHub-Delivery');
    const sha256 = hash('sha256', body, 'hex');
    const claim = await recorder.record({ id, event, body: text, sha256 });
    answer(res, claim);
    count(claim);
    // A group commit answers a whole burst in one turn: a line is written after that turn's answers,
    // not between them (a synchronous write each: 10-30 µs as JSON, 100-270 µs pretty, measured).
    if (claim === 'replay')
      setImmediate(() => log.warn(delivery, 'ignored a replay: this signed body came before'));
    if (claim !== 'new') return;
    backlog.add(() => route(id, event, text, delivery));
  }

  async function route(id: string, event: string, text: string, delivery: object): Promise<void> {
    // Logged when routed, once the burst is answered: written between its batches, the lines of a
    // 1,000 burst held its last answers 40-70 ms (p99 112-133 ms against 60-67 ms, measured).
    log.info(delivery, 'delivery taken');
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch {
      log.warn(delivery, 'webhook body is not JSON: ignored');
      return o.store.finishDelivery(id);
    }
    await probot
      .receive({ id, name: event, payload } as Parameters<Probot['receive']>[0])
      .catch((err: unknown) => log.error({ err, ...delivery }, 'webhook handler failed'));
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 3000, o.host ?? '127.0.0.1', () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${host}:${addr.port}${WEBHOOK_PATH}`,
    idle: () => backlog.idle(),
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await backlog.idle();
    },
  };
}

const header = (req: IncomingMessage, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

/** Why a body was not read whole, as the status and error its sender gets (MAX: the size limit). */
const REFUSALS = {
  too_large: [413, 'body over MAX bytes'],
  busy: [503, 'too many webhook bodies being received at once; try again'],
  timeout: [408, 'the body did not arrive in time'],
} as const;

/** `sha256=` and 64 hex digits. */
const SIGNATURE = /^sha256=[0-9a-f]{64}$/i;

/** Why a body being read was stopped before its end. */
type Stop = 'busy' | 'timeout';

/** A body being read: the bytes it holds, since when, and how it is stopped. */
export interface Reader {
  bytes: number;
  /** performance.now() when it was opened. */
  readonly since: number;
  /** Stops reading it (its sender gets 503 or 408); set by whoever reads it. */
  stop: (why: Stop) => void;
}

/** A body read for less than this is never stopped for another: GitHub's deliveries arrive well within it. */
const EVICT_GRACE_MS = 1000;

/**
 * Bytes of webhook bodies held at once across connections, with a ceiling; the gauge reads them at
 * scrape (webhookFigures). Anyone can send a signature header of the right shape, so the ceiling alone
 * let slow bodies keep every other delivery out (503) for as long as they were kept coming. A body that needs room takes it from the
 * slowest body (fewest bytes a second) read for over EVICT_GRACE_MS: holding the cap then takes sending
 * at a rate near the link's, no longer a trickle.
 * A body not read whole within `timeoutMs` is stopped. One timer serves all bodies (armed for the
 * oldest; bodies are opened in the order of their deadlines), not one each: a burst armed and cleared
 * a timer per delivery.
 */
export class InflightBytes {
  private held = 0;
  /** Bodies still being read, oldest first (those read whole hold their bytes until closed, and are not stopped). */
  private readonly reading = new Set<Reader>();
  private timer: NodeJS.Timeout | undefined;
  constructor(
    private readonly max: number,
    private readonly timeoutMs: number,
  ) {}

  open(): Reader {
    const r: Reader = { bytes: 0, since: performance.now(), stop: () => {} };
    this.reading.add(r);
    // Left armed when the bodies it was for were read (re-arming it per batch cost as much), unref'd:
    // every body being read holds its connection open anyway.
    this.timer ??= setTimeout(() => this.expire(), this.timeoutMs).unref();
    return r;
  }

  /** Takes `n` more bytes for `r`, stopping slower bodies to make room; false when none can give it. */
  take(r: Reader, n: number): boolean {
    while (this.held + n > this.max) {
      const victim = this.slowest(r);
      if (!victim) return false;
      victim.stop('busy');
      this.close(victim);
    }
    r.bytes += n;
    this.held += n;
    webhookFigures.held += n;
    return true;
  }

  /** `r` was read whole: its bytes stay held, but it is no longer stopped for another or for time. */
  read(r: Reader): void {
    this.reading.delete(r);
  }

  /** Gives back what `r` holds (again: nothing). */
  close(r: Reader): void {
    this.reading.delete(r);
    this.held -= r.bytes;
    webhookFigures.held -= r.bytes;
    r.bytes = 0;
  }

  /** Stops the bodies past their deadline and waits for the next one's. */
  private expire(): void {
    this.timer = undefined;
    const now = performance.now();
    for (const r of this.reading) {
      const left = r.since + this.timeoutMs - now;
      if (left > 0) {
        this.timer = setTimeout(() => this.expire(), left).unref();
        return;
      }
      r.stop('timeout');
      this.reading.delete(r); // its reader closes it
    }
  }

  private slowest(except: Reader): Reader | null {
    const now = performance.now();
    let slowest: Reader | null = null;
    let rate = Infinity;
    for (const r of this.reading) {
      const age = now - r.since;
      if (r === except || r.bytes === 0 || age < EVICT_GRACE_MS) continue;
      if (r.bytes / age < rate) [slowest, rate] = [r, r.bytes / age];
    }
    return slowest;
  }
}

/**
 * The body, or why there is none: over `max` bytes (declared or streamed), no room under the bytes all
 * bodies may hold together (or its room given to another), not there in time (`inflight`'s deadline),
 * or the client went away. The bytes of a Buffer stay taken by `reader` until the caller closes it.
 */
function readBounded(
  req: IncomingMessage,
  max: number,
  inflight: InflightBytes,
  reader: Reader,
): Promise<Buffer | keyof typeof REFUSALS | 'aborted'> {
  if (Number(req.headers['content-length']) > max) return Promise.resolve('too_large');
  return new Promise((resolve) => {
    // Most bodies arrive in one chunk: no array for them.
    let first: Buffer | undefined;
    let rest: Buffer[] | undefined;
    let size = 0;
    let settled = false;
    const settle = (outcome: Buffer | keyof typeof REFUSALS | 'aborted') => {
      if (settled) return;
      settled = true;
      req.off('data', onData);
      first = rest = undefined;
      resolve(outcome);
    };
    const onData = (chunk: Buffer) => {
      if (size + chunk.length > max) return settle('too_large');
      if (!inflight.take(reader, chunk.length)) return settle('busy');
      size += chunk.length;
      if (!first) first = chunk;
      else (rest ??= [first]).push(chunk);
    };
    reader.stop = settle;
    req.on('data', onData);
    // `on`, not `once` (a wrapper each): each fires once, and settling twice is a no-op.
    req.on('end', () => {
      inflight.read(reader);
      settle(rest ? Buffer.concat(rest, size) : (first ?? Buffer.alloc(0)));
    });
    const aborted = () => settle('aborted'); // no-op after the end or a refusal
    req.on('close', aborted).on('error', aborted);
  });
}

/** How long the rest of a refused body is read and dropped before its connection is closed. */
const LINGER_MS = 1000;

/**
 * Answers a body that is not read to its end. Closing the connection at once, with the client still
 * sending, resets it, and the client can lose the answer; so the rest is read and dropped (Node does
 * that after a response) for LINGER_MS, and then the connection is closed if the body is still coming.
 * A body that ended meanwhile leaves a kept-alive connection that may already carry the next request.
 */
function refuseUnread(req: IncomingMessage, res: ServerResponse, status: number, error: string): void {
  refuse(res, status, error);
  const socket = req.socket;
  setTimeout(() => {
    if (!req.complete) socket.destroy();
  }, LINGER_MS).unref();
}

/** GitHub's delivery ids are GUIDs; anything else of that size is accepted, nothing longer. */
const DELIVERY_ID = /^[A-Za-z0-9-]{1,100}$/;

/** What a signed delivery is answered, by outcome: made once, not for each delivery. */
const ANSWERS = Object.fromEntries(
  (['new', 'seen', 'replay', 'ignored'] as const).map((outcome) => [
    outcome,
    JSON.stringify({ ok: true, outcome }),
  ]),
) as Record<Claim | 'ignored', string>;

function answer(res: ServerResponse, outcome: Claim | 'ignored'): void {
  json(res, 200, ANSWERS[outcome]);
}

function refuse(res: ServerResponse, status: number, error: string): void {
  json(res, status, JSON.stringify({ error }));
}

/**
 * With its length: without one Node answers in chunked encoding, five chunks (the head, the size line,
 * the body, its end, the last chunk) where this is one.
 */
function json(res: ServerResponse, status: number, body: string): void {
  res
    .writeHead(status, [
      'content-type',
      'application/json',
      'content-length',
      String(Buffer.byteLength(body)),
    ])
    .end(body);
}

/**
 * GitHub's `X-Hub-Signature-256`: `sha256=` and the hex HMAC-SHA256 of the exact body. Not
 * @octokit/webhooks-methods' `verify`, measured (issue 39): it takes the body as a string, so a 25 MB body
 * held the event loop 180-190 ms against 77-91 ms here (8 KB: the same, ~50 µs), and a string check no
 * longer binds the bytes (invalid UTF-8 decodes to U+FFFD), while the replay hash below is of the bytes.
 */
function signatureMatches(secret: string, body: Buffer, signature: string): boolean {
  // The header's shape is checked (SIGNATURE): its hex is 32 bytes, compared as bytes.
  const given = Buffer.from(signature.slice('sha256='.length), 'hex');
  const expected = createHmac('sha256', secret).update(body).digest();
  return given.length === expected.length && timingSafeEqual(given, expected);
}
