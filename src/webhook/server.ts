import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { createNodeMiddleware, Probot, type Logger } from 'probot';
import { ConfigError, type Config } from '../config/config.js';
import { JobRunner, type JobDeps } from '../pipeline/job.js';
import { prepareHost } from '../pipeline/startup.js';
import type { ModelSpec } from '../pipeline/types.js';
import { appOctokit, type GitHub } from '../publish/github.js';
import { RunQueue } from '../queue/queue.js';
import { RunStore } from '../queue/store.js';
import { createApp } from './app.js';
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

export async function startApp(o: StartAppOptions): Promise<RunningApp> {
  const log = o.log ?? pino({ level: process.env.LOG_LEVEL ?? 'info' });
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
      store.close();
      throw err;
    }
    log.warn({ err }, 'start-up cleanup failed');
  }

  // Deliveries acknowledged before a crash but not taken in yet.
  const resumed = handlers.resume(auth, log);
  if (resumed > 0) log.info({ resumed }, 'taking in deliveries left by the previous process');

  const middleware = await createNodeMiddleware(handlers.register, {
    probot,
    webhooksPath: WEBHOOK_PATH,
  });
  const server: HttpServer = createServer((req, res) => {
    void middleware(req, res, () => res.writeHead(404).end());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 3000, o.host ?? '127.0.0.1', () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;

  return {
    url: `http://${host}:${addr.port}${WEBHOOK_PATH}`,
    probot,
    queue,
    store,
    runner,
    async idle() {
      await intake.idle();
      await queue.idle();
      await runner.settled();
    },
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await intake.idle();
      await queue.close();
      await runner.settled();
      store.close();
    },
  };
}
