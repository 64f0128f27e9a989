import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

/** Probot's usual variables; the private key comes inline (PRIVATE_KEY) or from a file (PRIVATE_KEY_PATH). */
const AppEnv = z
  .object({
    APP_ID: z.coerce.number().int().positive(),
    PRIVATE_KEY: z.string().min(1).optional(),
    PRIVATE_KEY_PATH: z.string().min(1).optional(),
    GHE_HOST: z.string().min(1).optional(),
    GHE_PROTOCOL: z.enum(['https', 'http']).default('https'),
  })
  .refine((e) => e.PRIVATE_KEY || e.PRIVATE_KEY_PATH, {
    message: 'set PRIVATE_KEY or PRIVATE_KEY_PATH',
    path: ['PRIVATE_KEY'],
  });

/** What serve and worker need to act as the GitHub App: both mint installation tokens themselves. */
export interface AppCredentials {
  appId: number;
  privateKey: string;
  /** GitHub Enterprise or the emulator; api.github.com when undefined. */
  baseUrl: string | undefined;
}

/** The app's credentials from the environment, or the problems as one line. */
export function appCredentials(raw: Record<string, string>): AppCredentials | string {
  const parsed = AppEnv.safeParse(raw);
  if (!parsed.success) return issuesLine(parsed.error);
  const env = parsed.data;
  return {
    appId: env.APP_ID,
    privateKey: env.PRIVATE_KEY?.replace(/\\n/g, '\n') ?? readFileSync(env.PRIVATE_KEY_PATH!, 'utf8'),
    baseUrl: env.GHE_HOST ? `${env.GHE_PROTOCOL}://${env.GHE_HOST}/api/v3` : undefined,
  };
}

/** The role-specific part of a child's environment: what `serve` or `worker` reads beyond the common part. */
export type ChildRole =
  | { role: 'serve'; webhookSecret: string; port: number }
  | { role: 'worker'; workerId: string; concurrency: number };

/**
 * The whole environment (the caller passes `extendEnv: false`) of an `agenticfix serve` or `worker`
 * child process acting as the app on the GitHub emulator (`githubUrl`) with a scripted model at
 * `modelUrl`, its state under `home`. One source for the benchmarks and the end-to-end tests, so a
 * renamed variable breaks both at once. `overrides` come last.
 */
export function childAppEnv(
  o: ChildRole & { home: string; githubUrl: string; appId: number; privateKey: string; modelUrl: string },
  overrides: Record<string, string> = {},
): Record<string, string> {
  const github = new URL(o.githubUrl);
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    AGENTICFIX_HOME: o.home,
    AGENTICFIX_RUNS_DIR: path.join(o.home, 'runs'),
    // The emulator has no rate limits; GitHub's write spacing would only slow the runs down.
    AGENTICFIX_GITHUB_WRITE_INTERVAL_MS: '0',
    AGENTICFIX_STATUS_EDIT_INTERVAL_MS: '0',
    APP_ID: String(o.appId),
    PRIVATE_KEY: o.privateKey,
    GHE_HOST: github.host,
    GHE_PROTOCOL: github.protocol.replace(/:$/, ''),
    LOG_LEVEL: 'warn',
    AGENTICFIX_MODEL_PROVIDER: 'custom',
    AGENTICFIX_MODEL_BASE_URL: o.modelUrl,
    AGENTICFIX_MODEL_NAME: 'scripted',
    ...(o.role === 'serve'
      ? { WEBHOOK_SECRET: o.webhookSecret, HOST: '127.0.0.1', PORT: String(o.port) }
      : {
          AGENTICFIX_WORKER_ID: o.workerId,
          AGENTICFIX_CONCURRENCY: String(o.concurrency),
          // Several workers on one host: each its own free port for /healthz and /metrics.
          AGENTICFIX_WORKER_PORT: '0',
          AGENTICFIX_WORKER_HOST: '127.0.0.1',
        }),
    ...overrides,
  };
}

export const issuesLine = (error: z.ZodError) =>
  error.issues.map((i) => `${String(i.path[0])}: ${i.message}`).join('; ');

/** Resolves on the first SIGINT or SIGTERM. */
export function untilStopped(): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}
