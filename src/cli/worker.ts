import { Probot } from 'probot';
import { z } from 'zod';
import { buildInfo } from '../config/version.js';
import { appLogger, healthChecks, listenObserve, observeRoutes } from '../observe.js';
import { JobRunner } from '../pipeline/job.js';
import { publicScrubber } from '../pipeline/public.js';
import { hostUpkeep, prepareHost, runGoingOn, UPKEEP_MS } from '../pipeline/startup.js';
import { appOctokit, type GitHub } from '../publish/github.js';
import { RunWorker } from '../queue/bullmq.js';
import { openStore } from '../store/open-store.js';
import { untilStopped } from './app-env.js';
import { compose } from './compose.js';
import { reportCheck, startupCheck } from './doctor.js';
import { command, parseCli } from './program.js';

/**
 * `agenticfix worker`: takes runs from the queue (AGENTICFIX_REDIS_URL) and runs them on this machine
 * with its own Docker engine, mirrors and image cache; it mints installation tokens and publishes
 * itself, and records its runs in the shared store (AGENTICFIX_DATABASE_URL). On SIGTERM or SIGINT it
 * drains: takes no more runs and gives running ones AGENTICFIX_DRAIN_S, then hands them back to the
 * queue for another worker. Every line it prints is a log line (JSON with LOG_FORMAT=json).
 */
/** How often an idle worker looks at the store. */
const STORE_PROBE_MS = 5000;

export async function workerCommand(argv: string[]): Promise<number> {
  const parsed = parseCli(
    command('worker', 'take runs from the shared queue (AGENTICFIX_REDIS_URL) and run them here').addHelpText(
      'after',
      '\nSettings come from the environment and ./.env: APP_ID, PRIVATE_KEY or PRIVATE_KEY_PATH, the model\n' +
        '(AGENTICFIX_MODEL_*), AGENTICFIX_REDIS_URL, AGENTICFIX_DATABASE_URL; `agenticfix doctor --worker` checks them.\n',
    ),
    z.strictObject({}),
    argv,
  );
  if (typeof parsed === 'number') return parsed;
  const checked = await startupCheck('worker');
  if (!reportCheck('worker', checked)) return 2;
  const { app, config } = checked.ready!;
  const distributed = config.distributed!;
  const log = appLogger(config);
  const probot = new Probot({ ...app, Octokit: appOctokit(config, publicScrubber(config)), log });
  // Its outages are logged: one line when PostgreSQL stops answering, one when it answers again.
  const store = await openStore(config, log);
  const parts = compose(config);
  const runner = new JobRunner({
    ...parts,
    config,
    store,
    auth: async (installationId) => (await probot.auth(installationId)) as GitHub,
    log,
  });
  try {
    // This machine's leftovers: containers of runs that are over, lent worktrees; the mount self-check.
    log.info(
      await prepareHost({
        config,
        workspaces: parts.workspaces,
        docker: true,
        checkMounts: true,
        isFinished: (id) => runner.isFinished(id),
        isRunning: runGoingOn(store), // another worker sharing this machine's run directories
        log,
      }),
      'start-up cleanup done',
    );
  } catch (err) {
    await store.close();
    throw err;
  }
  const worker = new RunWorker(store, runner, {
    redisUrl: distributed.redisUrl,
    name: distributed.queueName,
    concurrency: config.app.concurrency,
    id: distributed.workerId,
    lockMs: distributed.workerLockMs,
    requeueStalled: distributed.requeueStalled,
    installationLimit: config.app.installationConcurrency,
    onQueueError: (err) => log.warn({ err }, 'queue error'),
    log,
  });
  // The store-wide run counts are serve's to export (observeRoutes).
  const routes = observeRoutes(healthChecks({ store, queue: () => worker.ping(), docker: true }), null);
  const listener = await listenObserve(
    routes,
    config.workerListen.port,
    config.workerListen.host,
    config.http,
  );
  await worker.start();
  // This machine's upkeep: the engine swept, retention (run directories, mirrors) applied hourly.
  const host = {
    config,
    docker: true,
    isFinished: (id: string) => runner.isFinished(id),
    isRunning: runGoingOn(store),
    log,
  };
  let ticks = 0;
  const upkeep = setInterval(() => hostUpkeep(host, ++ticks), UPKEEP_MS).unref();
  // A store outage is noticed (and logged, with its end) also while no run writes.
  const probe = setInterval(() => void store.get('probe').catch(() => undefined), STORE_PROBE_MS).unref();
  log.info(
    { worker: worker.id, url: listener.url, ...buildInfo() },
    `agenticfix worker ${worker.id} taking runs (concurrency ${config.app.concurrency}); health and metrics on ${listener.url}`,
  );
  const signal = await untilStopped();
  log.info(
    { worker: worker.id, signal, running: worker.running, drain_s: config.app.drainMs / 1000 },
    `agenticfix worker ${worker.id} stopping`,
  );
  clearInterval(upkeep);
  clearInterval(probe);
  await worker.close(config.app.drainMs);
  await listener.close();
  await runner.settled();
  await store.close();
  log.info({ worker: worker.id }, `agenticfix worker ${worker.id} stopped`);
  return 0;
}
