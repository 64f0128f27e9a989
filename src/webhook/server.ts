import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import {
  createServer,
  type IncomingMessage,
  type Server as HttpServer,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { Probot, type Logger } from 'probot';
import { ConfigError, type Config } from '../config/config.js';
import { JobRunner, type JobDeps } from '../pipeline/job.js';
import { prepareHost } from '../pipeline/startup.js';
import type { ModelSpec } from '../pipeline/types.js';
import { appOctokit, type GitHub } from '../publish/github.js';
import { RunQueue } from '../queue/queue.js';
import { INSTANCE_STALE_MS, RunStore } from '../queue/store.js';
import { createApp, wanted } from './app.js';
import { RoutingBacklog } from './backlog.js';
import { DeliveryRecorder } from './recorder.js';
import { Intake } from './intake.js';

/** The GitHub App as a running HTTP service: signed webhooks in, runs out. */

export const WEBHOOK_PATH = '/api/github/webhooks';

export interface StartAppOptions {
  config: Config;
  appId: number | string;
  privateKey: string;
  webhookSecret: string;
  /** GitHub API base URL (GitHub Enterprise or the emulator); api.github.com by default. */
  baseUrl?: string;
  port?: number; // 0 = any free port
  host?: string;
  /** Pipeline stages (the real ones by default). */
  deps?: JobDeps;
  model?: ModelSpec;
  sandbox?: 'docker' | 'local';
  /** Run the start-up mount self-check (serve, demo); a failure stops the app. */
  checkMounts?: boolean;
  log?: Logger;
}

export interface RunningApp {
  /** The webhook URL (`http://host:port/api/github/webhooks`). */
  url: string;
  probot: Probot;
  queue: RunQueue;
  store: RunStore;
  runner: JobRunner;
  /** Resolves when nothing is queued or running and every status edit has landed. */
  idle(): Promise<void>;
  /** Stops the HTTP server, aborts running runs (they end `interrupted`) and closes the store. */
  close(): Promise<void>;
}

/**
 * @octokit/webhooks attaches the delivery (`event`, with the whole payload) to the errors Probot logs;
 * only its id and name are kept.
 */
const withoutPayloads = (log: Logger): Logger =>
  log.child(
    {},
    {
      redact: {
        paths: ['event.payload', 'err.event.payload', 'err.aggregateErrors[*].event.payload'],
        censor: '[payload omitted]',
      },
    },
  );

/**
 * Starts the app. Throws StoreInUseError when another live instance serves the same run store: two
 * instances would each take the other's runs for crashed ones.
 */
export async function startApp(o: StartAppOptions): Promise<RunningApp> {
  const log = withoutPayloads(o.log ?? pino({ level: process.env.LOG_LEVEL ?? 'info' }));
  const probot = new Probot({
    appId: o.appId,
    privateKey: o.privateKey,
    secret: o.webhookSecret,
    baseUrl: o.baseUrl,
    Octokit: appOctokit(o.config),
    log,
  });
  const auth = async (installationId: number) => (await probot.auth(installationId)) as GitHub;
  const store = new RunStore(o.config.dbPath);
  try {
    store.acquireInstance();
  } catch (err) {
    store.close();
    throw err;
  }
  const heartbeat = setInterval(() => {
    try {
      if (!store.heartbeat()) log.error('another instance has taken over the run store');
    } catch (err) {
      log.error({ err }, 'could not renew the run store claim');
    }
  }, INSTANCE_STALE_MS / 6).unref();
  const runner = new JobRunner({
    config: o.config,
    store,
    auth,
    deps: o.deps,
    model: o.model,
    sandbox: o.sandbox,
    log,
  });
  const queue = new RunQueue(store, o.config.app.concurrency, runner);
  const intake = new Intake(store, log);
  const handlers = createApp({ config: o.config, store, queue, intake });

  // Runs a crash left behind: recorded as interrupted, and their issues are told.
  for (const run of store.markInterrupted()) {
    await runner
      .reportInterrupted(run)
      .catch((err) => log.error({ err, run: run.id }, 'could not report an interrupted run'));
  }

  // Containers and lent worktrees of runs that are over; old worktrees; the mount self-check.
  try {
    const cleanup = await prepareHost({
      config: o.config,
      docker: (o.sandbox ?? 'docker') === 'docker',
      checkMounts: o.checkMounts,
      isFinished: (id) => runner.isFinished(id),
    });
    log.info(cleanup, 'start-up cleanup done');
  } catch (err) {
    if (err instanceof ConfigError) {
      clearInterval(heartbeat);
      store.close();
      throw err;
    }
    log.warn({ err }, 'start-up cleanup failed');
  }

  // Deliveries acknowledged before a crash but not taken in yet.
  const resumed = handlers.resume(auth, log);
  if (resumed > 0) log.info({ resumed }, 'taking in deliveries left by the previous process');

  await probot.load(handlers.register);
  const recorder = new DeliveryRecorder(store);
  const backlog = new RoutingBacklog();
  const maxBytes = o.config.app.webhookMaxBytes;
  const server: HttpServer = createServer((req, res) => {
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
    if ((req.url ?? '').split('?')[0] !== WEBHOOK_PATH) return refuse(res, 404, 'not found');
    if (req.method !== 'POST') return refuse(res, 405, 'POST only');
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
    if (!signatureMatches(o.webhookSecret, body, header(req, 'x-hub-signature-256'))) {
      log.warn({ ...delivery, bytes: body.length }, 'webhook signature does not match: refused');
      return refuse(res, 401, 'signature does not match');
    }
    const text = body.toString('utf8');
    const event = delivery.event ?? '';
    if (!wanted(event, text)) return answer(res, 'ignored');
    const id = delivery.delivery ?? '';
    if (!DELIVERY_ID.test(id)) return refuse(res, 400, 'missing or malformed X-GitHub-Delivery');
    const sha256 = createHash('sha256').update(body).digest('hex');
    const claim = await recorder.record({ id, event, body: text, sha256 });
    answer(res, claim);
    if (claim === 'replay') log.warn(delivery, 'ignored a replay: this signed body came before');
    if (claim !== 'new') return;
    backlog.add(() => route(id, event, text, delivery));
  }

  async function route(id: string, event: string, text: string, delivery: object): Promise<void> {
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch {
      log.warn(delivery, 'webhook body is not JSON: ignored');
      return store.finishDelivery(id);
    }
    await probot
      .receive({ id, name: event, payload } as Parameters<Probot['receive']>[0])
      .catch((err: unknown) => log.error({ err, ...delivery }, 'webhook handler failed'));
  }

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(o.port ?? 3000, o.host ?? '127.0.0.1', () => resolve());
    });
  } catch (err) {
    clearInterval(heartbeat);
    await queue.close();
    store.close();
    throw err;
  }
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;

  return {
    url: `http://${host}:${addr.port}${WEBHOOK_PATH}`,
    probot,
    queue,
    store,
    runner,
    async idle() {
      await backlog.idle();
      await intake.idle();
      await queue.idle();
      await runner.settled();
    },
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await backlog.idle();
      await intake.idle();
      await queue.close();
      await runner.settled();
      clearInterval(heartbeat);
      store.close();
    },
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

/** GitHub's delivery ids are GUIDs; anything else of that size is accepted, nothing longer. */
const DELIVERY_ID = /^[A-Za-z0-9-]{1,100}$/;

function answer(res: ServerResponse, outcome: string): void {
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true, outcome }));
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
