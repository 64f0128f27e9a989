import { Probot, type Logger } from 'probot';
import { ConfigError, type Config } from './config/config.js';
import type { JobDeps } from './pipeline/context.js';
import { JobRunner } from './pipeline/job.js';
import { publicScrubber } from './pipeline/public.js';
import { hostUpkeep, prepareHost, runGoingOn, UPKEEP_MS, RETENTION_TICKS } from './pipeline/startup.js';
import type { ModelSpec } from './pipeline/types.js';
import type { Parts } from './verify/types.js';
import { appOctokit, type GitHub } from './publish/github.js';
import { BullRunQueue } from './queue/bullmq.js';
import type { RunQueue } from './queue/queue.js';
import { LocalRunQueue } from './queue/local.js';
import { openStore } from './store/open-store.js';
import { INSTANCE_STALE_MS } from './store/instance.js';
import type { RunStore } from './store/store.js';
import { createApp } from './webhook/app.js';
import { Intake } from './webhook/intake.js';
import { listenForWebhooks } from './webhook/server.js';
import { appLogger, healthChecks, observeRoutes } from './observe.js';
import { webRoutes } from './web/routes.js';

/**
 * The GitHub App put together (serve, demo, the tests): the run store, the queue (in-process, or
 * BullMQ to workers), the job runner, the webhook handlers and their HTTP server.
 */

/** With the process's workspace manager, image builder and sandboxes (src/cli/compose.ts). */
export interface StartAppOptions extends Parts {
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
  /** How often a live run page looks at the store (1 s by default). */
  livePollMs?: number;
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
  /**
   * Stops the HTTP server and the queue (in one process running runs get `drainMs` to finish, then are
   * aborted and end `interrupted`, their issues told; distributed, they go on in their workers) and
   * closes the store. Each step logged.
   */
  close(drainMs?: number): Promise<void>;
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
  const log = withoutPayloads(o.log ?? appLogger(o.config));
  const probot = new Probot({
    appId: o.appId,
    privateKey: o.privateKey,
    secret: o.webhookSecret,
    baseUrl: o.baseUrl,
    Octokit: appOctokit(o.config, publicScrubber(o.config, o.model)),
    log,
  });
  const auth = async (installationId: number) => (await probot.auth(installationId)) as GitHub;
  // Its outages are logged (one line when it stops answering, one when it is back); the heartbeat
  // below notices one also while nothing runs.
  const store = await openStore(o.config, log);
  try {
    await store.acquireInstance();
  } catch (err) {
    await store.close();
    throw err;
  }
  const heartbeat = setInterval(() => {
    store.heartbeat().then(
      (held) => held || log.error('another instance has taken over the run store'),
      () => undefined, // logged as an outage by the store
    );
  }, INSTANCE_STALE_MS / 6).unref();
  const runner = new JobRunner({
    config: o.config,
    workspaces: o.workspaces,
    images: o.images,
    sandboxes: o.sandboxes,
    store,
    auth,
    deps: o.deps,
    model: o.model,
    sandbox: o.sandbox,
    log,
  });
  const distributed = o.config.distributed;
  // Distributed: workers run the runs; serve enqueues, stops, and tells issues whose worker died.
  const queue: RunQueue = distributed
    ? new BullRunQueue(
        store,
        {
          onQueued: (run) => runner.announceQueued(run),
          onFinished: (run) => runner.onFinished(run),
          onError: (run, err) => runner.onError(run, err),
          onInterrupted: (run) =>
            void runner
              .reportInterrupted(run, run.error ?? 'its worker stopped', 'worker_died')
              .catch((err) => log.error({ err, run: run.id }, 'could not report an interrupted run')),
        },
        { redisUrl: distributed.redisUrl, name: distributed.queueName, retry: distributed.retry, log },
      )
    : new LocalRunQueue(store, o.config.app.concurrency, runner, {
        installationLimit: o.config.app.installationConcurrency,
      });
  const intake = new Intake(store, log);
  const handlers = createApp({ config: o.config, store, queue, intake });

  if (queue instanceof BullRunQueue) await queue.ready();
  // Runs a crash left running: recorded as interrupted, and their issues are told. Distributed, runs
  // live on in their workers, and a dead worker's runs are found by the queue. Queued ones are the
  // queue's reconcile's, below.
  const left = distributed ? [] : await store.markInterrupted();
  for (const run of left.filter((r) => r.state === 'interrupted')) {
    await runner
      .reportInterrupted(run)
      .catch((err) => log.error({ err, run: run.id }, 'could not report an interrupted run'));
  }

  const isRunning = runGoingOn(store);
  // Containers and lent worktrees of runs that are over; old worktrees; the mount self-check (a
  // distributed serve runs nothing: its workers do this on their machines).
  if (!distributed)
    try {
      const cleanup = await prepareHost({
        config: o.config,
        workspaces: o.workspaces,
        docker: (o.sandbox ?? 'docker') === 'docker',
        checkMounts: o.checkMounts,
        isFinished: (id) => runner.isFinished(id),
        isRunning,
        log,
      });
      log.info(cleanup, 'start-up cleanup done');
    } catch (err) {
      if (err instanceof ConfigError) {
        clearInterval(heartbeat);
        await store.close();
        throw err;
      }
      log.warn({ err }, 'start-up cleanup failed');
    }
  // Runs recorded queued that no queue holds (a crash between recording and enqueueing, or the
  // in-process queue lost with its process) are enqueued again, as a distributed serve's `ready` does.
  if (!distributed)
    await queue.reconcile().catch((err: unknown) => log.error({ err }, 'could not reconcile the runs'));

  // Judged runs whose publishing failed, whichever machine ran them (what publishing needs is in the
  // store), and the final GitHub writes the store keeps: tried again when due, now and periodically.
  const resumePublishing = () =>
    void runner.resumePublishing().catch((err: unknown) => log.error({ err }, 'could not resume publishing'));
  resumePublishing();
  // Deliveries older than AGENTICFIX_DELIVERY_MAX_AGE_D are forgotten (their events are refused by age);
  // runs over for AGENTICFIX_RUNS_MAX_AGE_D with their events, as their run directories are.
  const { deliveryMaxAgeMs, runsMaxAgeMs } = o.config.app.retention;
  const before = (ms: number) => new Date(Date.now() - ms).toISOString();
  const pruneDeliveries = () =>
    void Promise.all([
      store.pruneDeliveries(before(deliveryMaxAgeMs)),
      store.pruneRuns(before(runsMaxAgeMs)),
    ]).then(
      ([pruned, runs]) =>
        (pruned > 0 || runs > 0) && log.info({ pruned, runs }, 'deliveries and runs pruned'),
      (err: unknown) => log.error({ err }, 'could not prune deliveries and runs'),
    );
  pruneDeliveries();

  // Periodically: runs with no live job are ended and their issues told (an end the store would not
  // take, recorded once it does; a job lost or failed in a store or Redis outage, a dead worker);
  // publishing resumed; deliveries pruned; where runs run here (not distributed: the workers do it on
  // their machines), the engine swept and retention applied.
  const host = {
    config: o.config,
    docker: (o.sandbox ?? 'docker') === 'docker',
    isFinished: (id: string) => runner.isFinished(id),
    isRunning,
    log,
  };
  let ticks = 0;
  const upkeep = setInterval(() => {
    queue.reconcile().catch((err: unknown) => log.error({ err }, 'could not reconcile the runs'));
    resumePublishing();
    if (!distributed) hostUpkeep(host, ++ticks);
    else ++ticks;
    if (ticks % RETENTION_TICKS === 0) pruneDeliveries();
  }, UPKEEP_MS).unref();

  // Deliveries acknowledged before a crash but not taken in yet.
  const resumed = await handlers.resume(auth, log);
  if (resumed > 0) log.info({ resumed }, 'taking in deliveries left by the previous process');

  const { clientId, clientSecret, publicUrl, trustProxy } = o.config.web;
  const web = webRoutes({
    store,
    queue,
    githubApi: o.baseUrl,
    client: clientId && clientSecret ? { id: clientId, secret: clientSecret } : null,
    publicUrl,
    trustProxy,
    pollMs: o.livePollMs,
    log,
  });
  const observe = observeRoutes(
    healthChecks({
      store,
      queue: queue instanceof BullRunQueue ? () => queue.ping() : undefined,
      docker: !distributed && (o.sandbox ?? 'docker') === 'docker',
    }),
    store,
  );
  let server: Awaited<ReturnType<typeof listenForWebhooks>>;
  try {
    server = await listenForWebhooks({
      probot,
      register: handlers.register,
      store,
      webhookSecret: o.webhookSecret,
      maxBytes: o.config.app.webhookMaxBytes,
      inflightBytes: o.config.app.webhookInflightBytes,
      ...o.config.http,
      port: o.port,
      host: o.host,
      log,
      // Health and metrics (Docker only where runs run: a distributed serve needs no engine), run pages.
      routes: async (req, res) => (await observe(req, res)) || web(req, res),
    });
  } catch (err) {
    clearInterval(heartbeat);
    clearInterval(upkeep);
    await queue.close();
    await store.close();
    throw err;
  }

  return {
    url: server.url,
    probot,
    queue,
    store,
    runner,
    async idle() {
      await server.idle();
      await intake.idle();
      await queue.idle();
      await runner.settled();
    },
    async close(drainMs = 0) {
      web.close();
      await server.close();
      await intake.idle();
      const running = (await store.list('running')).map((r) => r.id);
      if (!distributed && running.length > 0)
        log.info({ runs: running, drain_s: drainMs / 1000 }, 'draining: no more runs taken');
      await queue.close(drainMs);
      await runner.settled();
      clearInterval(heartbeat);
      clearInterval(upkeep);
      await store.close();
      log.info('stopped');
    },
  };
}
