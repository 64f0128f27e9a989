import SmeeClient from 'smee-client';
import { z } from 'zod';
import { StoreInUseError } from '../store/store.js';
import { startApp } from '../app.js';
import { untilStopped } from './app-env.js';
import { reportCheck, startupCheck } from './doctor.js';
import { command, parseCli } from './program.js';

/**
 * `agenticfix serve`: webhooks, intake, commands, status. Alone it also runs the runs (SQLite, the
 * in-process queue); with AGENTICFIX_REDIS_URL they go to `agenticfix worker` processes.
 */
export async function serveCommand(argv: string[]): Promise<number> {
  const parsed = parseCli(
    command('serve', 'start the GitHub App (Probot) server').addHelpText(
      'after',
      '\nSettings come from the environment and ./.env: APP_ID, PRIVATE_KEY or PRIVATE_KEY_PATH, WEBHOOK_SECRET,\n' +
        'the model (AGENTICFIX_MODEL_*), HOST, PORT; see the README. `agenticfix doctor` checks them.\n',
    ),
    z.strictObject({}),
    argv,
  );
  if (typeof parsed === 'number') return parsed;
  const checked = await startupCheck('serve');
  if (!reportCheck('serve', checked)) return 2;
  const { app, config } = checked.ready!;
  const env = checked.ready!.serve!;
  const running = await startApp({
    config,
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
  process.stdout.write(`agenticfix listening on ${running.url}\n`);
  // Development: relay deliveries from a smee.io channel to the local endpoint, as Probot does.
  const proxy = env.WEBHOOK_PROXY_URL
    ? await new SmeeClient({ source: env.WEBHOOK_PROXY_URL, target: running.url, logger: console }).start()
    : null;
  await untilStopped();
  proxy?.close();
  await running.close();
  return 0;
}
