import { readFileSync } from 'node:fs';
import Docker from 'dockerode';
import SmeeClient from 'smee-client';
import { z } from 'zod';
import { loadConfig, loadEnv } from '../config/config.js';
import { ensureBuildNetwork } from '../environment/network.js';
import { StoreInUseError } from '../queue/store.js';
import { startApp } from '../webhook/server.js';

/** Probot's usual variables; the private key comes inline (PRIVATE_KEY) or from a file (PRIVATE_KEY_PATH). */
const AppEnv = z
  .object({
    APP_ID: z.coerce.number().int().positive(),
    PRIVATE_KEY: z.string().min(1).optional(),
    PRIVATE_KEY_PATH: z.string().min(1).optional(),
    WEBHOOK_SECRET: z.string().min(1),
    WEBHOOK_PROXY_URL: z.url().optional(),
    GHE_HOST: z.string().min(1).optional(),
    GHE_PROTOCOL: z.enum(['https', 'http']).default('https'),
    PORT: z.coerce.number().int().min(0).max(65535).default(3000),
    HOST: z.string().min(1).default('0.0.0.0'),
  })
  .refine((e) => e.PRIVATE_KEY || e.PRIVATE_KEY_PATH, {
    message: 'set PRIVATE_KEY or PRIVATE_KEY_PATH',
    path: ['PRIVATE_KEY'],
  });

export async function serveCommand(_argv: string[]): Promise<number> {
  const raw = loadEnv();
  const parsed = AppEnv.safeParse(raw);
  if (!parsed.success) {
    process.stderr.write(
      `agenticfix serve: ${parsed.error.issues.map((i) => `${String(i.path[0])}: ${i.message}`).join('; ')}\n`,
    );
    return 2;
  }
  const env = parsed.data;
  const privateKey = env.PRIVATE_KEY?.replace(/\\n/g, '\n') ?? readFileSync(env.PRIVATE_KEY_PATH!, 'utf8');
  const config = loadConfig(raw);
  // Fail at start-up, not in every run, when builds cannot be kept off the host and internal networks.
  try {
    await ensureBuildNetwork(new Docker(), config.sandbox.buildNetwork);
  } catch (err) {
    process.stderr.write(
      `agenticfix serve: build network: ${err instanceof Error ? err.message : String(err)}\n`,
    );
    return 2;
  }
  const app = await startApp({
    config,
    appId: env.APP_ID,
    privateKey,
    webhookSecret: env.WEBHOOK_SECRET,
    baseUrl: env.GHE_HOST ? `${env.GHE_PROTOCOL}://${env.GHE_HOST}/api/v3` : undefined,
    port: env.PORT,
    host: env.HOST,
    checkMounts: true,
  }).catch((err: unknown) => {
    if (!(err instanceof StoreInUseError)) throw err;
    process.stderr.write(`agenticfix serve: ${err.message}\n`);
    return null;
  });
  if (!app) return 1;
  process.stdout.write(`agenticfix listening on ${app.url}\n`);
  // Development: relay deliveries from a smee.io channel to the local endpoint, as Probot does.
  const proxy = env.WEBHOOK_PROXY_URL
    ? await new SmeeClient({ source: env.WEBHOOK_PROXY_URL, target: app.url, logger: console }).start()
    : null;
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  proxy?.close();
  await app.close();
  return 0;
}
