import SmeeClient from 'smee-client';
import { z } from 'zod';
import { StoreInUseError } from '../store/instance.js';
import { startApp } from '../app.js';
import { loadEnv } from '../config/config.js';
import { buildInfo } from '../config/version.js';
import { appLogger } from '../observe.js';
import { untilStopped } from './app-env.js';
import { compose } from './compose.js';
import { reportCheck, startupCheck } from './doctor.js';
import { command, parseCli } from './program.js';
import { needsSetup, noCredentials, runSetup } from './setup.js';

/**
 * `agenticfix serve`: webhooks, intake, commands, status. Alone it also runs the runs (SQLite, the
 * in-process queue); with AGENTICFIX_REDIS_URL they go to `agenticfix worker` processes.
 */
export async function serveCommand(argv: string[]): Promise<number> {
  const parsed = parseCli(
    command('serve', 'start the GitHub App (Probot) server').addHelpText(
      'after',
      '\nSettings come from the environment and ./.env: APP_ID, PRIVATE_KEY or PRIVATE_KEY_PATH, WEBHOOK_SECRET,\n' +
        'the model (AGENTICFIX_MODEL_*), HOST, PORT; see docs/operating.md. `agenticfix doctor` checks them.\n' +
        'With none of the first three set (and NODE_ENV not production) it first serves the setup page\n' +
        'that registers the app from app.yml and writes them to .env, as `agenticfix setup` does.\n',
    ),
    z.strictObject({}),
    argv,
  );
  if (typeof parsed === 'number') return parsed;
  // First start without credentials: register the app (Probot's manifest flow), then start with them.
  if (needsSetup(loadEnv())) await runSetup('serve');
  const checked = await startupCheck('serve');
  if (!reportCheck('serve', checked)) {
    if (noCredentials(loadEnv()))
      process.stderr.write(
        'agenticfix serve: no app credentials at all: `agenticfix setup` registers the app and writes them to .env\n',
      );
    return 2;
  }
  const { app, config } = checked.ready!;
  const env = checked.ready!.serve!;
  const log = appLogger(config);
  const running = await startApp({
    config,
    ...compose(config),
    log,
    ...app,
    webhookSecret: env.WEBHOOK_SECRET,
    port: env.PORT,
    host: env.HOST,
    checkMounts: true,
  }).catch((err: unknown) => {
    if (!(err instanceof StoreInUseError)) throw err;
    process.stderr.write(`agenticfix serve: ${err.message}\n`);
    return null;
  });
  if (!running) return 1;
  // A log line like every other (JSON with LOG_FORMAT=json): a collector reads each line as one.
  log.info({ url: running.url, ...buildInfo() }, `agenticfix listening on ${running.url}`);
  // Development: relay deliveries from a smee.io channel to the local endpoint, as Probot does.
  const proxy = env.WEBHOOK_PROXY_URL
    ? await new SmeeClient({ source: env.WEBHOOK_PROXY_URL, target: running.url, logger: log }).start()
    : null;
  const signal = await untilStopped();
  log.info({ signal, drain_s: config.app.drainMs / 1000 }, 'agenticfix stopping');
  proxy?.close();
  await running.close(config.app.drainMs);
  return 0;
}
