import Docker from 'dockerode';
import SmeeClient from 'smee-client';
import { z } from 'zod';
import { loadConfig, loadEnv } from '../config/config.js';
import { ensureBuildNetwork } from '../environment/network.js';
import { StoreInUseError } from '../queue/store.js';
import { startApp } from '../app.js';
import { appCredentials, issuesLine, untilStopped } from './app-env.js';

const ServeEnv = z.object({
  WEBHOOK_SECRET: z.string().min(1),
  WEBHOOK_PROXY_URL: z.url().optional(),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
});

/**
 * `agenticfix serve`: webhooks, intake, commands, status. Alone it also runs the runs (SQLite, the
 * in-process queue); with AGENTICFIX_REDIS_URL they go to `agenticfix worker` processes.
 */
export async function serveCommand(_argv: string[]): Promise<number> {
  const raw = loadEnv();
  const app = appCredentials(raw);
  const parsed = ServeEnv.safeParse(raw);
  if (typeof app === 'string' || !parsed.success) {
    const problems = [typeof app === 'string' ? app : '', parsed.success ? '' : issuesLine(parsed.error)];
    process.stderr.write(`agenticfix serve: ${problems.filter(Boolean).join('; ')}\n`);
    return 2;
  }
  const env = parsed.data;
  const config = loadConfig(raw);
  // Fail at start-up, not in every run, when builds cannot be kept off the host and internal networks.
  if (!config.distributed) {
    try {
      await ensureBuildNetwork(new Docker(), config.sandbox.buildNetwork);
    } catch (err) {
      process.stderr.write(
        `agenticfix serve: build network: ${err instanceof Error ? err.message : String(err)}\n`,
      );
      return 2;
    }
  }
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
