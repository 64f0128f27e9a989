import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

/** Probot's usual variables; the private key comes inline (PRIVATE_KEY) or from a file (PRIVATE_KEY_PATH). */
const AppEnv = z.object({
  APP_ID: z
    .string()
    .regex(/^[1-9]\d*$/, "must be the app's number (its settings page shows it)")
    .transform(Number),
  GHE_HOST: z.string().min(1).optional(),
  GHE_PROTOCOL: z.enum(['https', 'http']).default('https'),
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
  const parsed = AppEnv.safeParse(emptyUnset(raw));
  const key = privateKeyOf(raw);
  const problems = [parsed.success ? '' : issuesLine(parsed.error), key.problem ?? ''].filter(Boolean);
  if (!parsed.success || key.pem === null) return problems.join('; ');
  const env = parsed.data;
  return {
    appId: env.APP_ID,
    privateKey: key.pem,
    baseUrl: env.GHE_HOST ? `${env.GHE_PROTOCOL}://${env.GHE_HOST}/api/v3` : undefined,
  };
}

/** The private key from PRIVATE_KEY or the file at PRIVATE_KEY_PATH (relative to the working directory). */
function privateKeyOf(
  raw: Record<string, string>,
): { pem: string; problem?: never } | { pem: null; problem: string } {
  let text: string;
  if (raw.PRIVATE_KEY) text = raw.PRIVATE_KEY;
  else if (raw.PRIVATE_KEY_PATH) {
    try {
      text = readFileSync(path.resolve(raw.PRIVATE_KEY_PATH), 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      return {
        pem: null,
        problem: `PRIVATE_KEY_PATH: cannot read ${raw.PRIVATE_KEY_PATH} (${code === 'ENOENT' ? 'no such file' : (code ?? String(err))})`,
      };
    }
  } else
    return {
      pem: null,
      problem: 'PRIVATE_KEY is not set (nor PRIVATE_KEY_PATH): the key GitHub generates for the app',
    };
  const pem = privateKeyPem(text);
  return pem
    ? { pem }
    : {
        pem: null,
        problem: `${raw.PRIVATE_KEY ? 'PRIVATE_KEY' : 'PRIVATE_KEY_PATH'}: not a PEM private key (expected the .pem file GitHub generates for the app)`,
      };
}

/**
 * The key as a PEM that parses, or null. `docker run --env-file` keeps quotes and writes newlines as `\n`,
 * so surrounding quotes are dropped and `\n` turned into newlines before parsing (as dotenv does).
 */
export function privateKeyPem(text: string): string | null {
  const pem = text
    .trim()
    .replace(/^(["'])([\s\S]*)\1$/, '$2')
    .replace(/\\n/g, '\n');
  try {
    createPrivateKey(pem);
    return pem;
  } catch {
    return null;
  }
}

/** Settings set to the empty string count as not set, as loadConfig treats them. */
export const emptyUnset = (raw: Record<string, string>) =>
  Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== ''));

/**
 * The settings that make `serve` and `worker` the app of the GitHub emulator at `githubUrl`, with a
 * scripted model at `modelUrl`: `agenticfix emulator` prints them and the end-to-end tests start
 * children with them, so a renamed variable breaks both at once.
 */
export function emulatorAppEnv(o: {
  githubUrl: string;
  appId: number;
  key: { PRIVATE_KEY: string } | { PRIVATE_KEY_PATH: string };
  modelUrl: string;
}): Record<string, string> {
  const github = new URL(o.githubUrl);
  return {
    APP_ID: String(o.appId),
    ...o.key,
    GHE_HOST: github.host,
    GHE_PROTOCOL: github.protocol.replace(/:$/, ''),
    AGENTICFIX_MODEL_PROVIDER: 'custom',
    AGENTICFIX_MODEL_BASE_URL: o.modelUrl,
    AGENTICFIX_MODEL_NAME: 'scripted',
    // The emulator has no rate limits; GitHub's write spacing would only slow the runs down.
    AGENTICFIX_GITHUB_WRITE_INTERVAL_MS: '0',
    AGENTICFIX_STATUS_EDIT_INTERVAL_MS: '0',
  };
}

/** The role-specific part of a child's environment: what `serve` or `worker` reads beyond the common part. */
export type ChildRole =
  | { role: 'serve'; webhookSecret: string; port: number }
  | { role: 'worker'; workerId: string; concurrency: number };

/**
 * The whole environment (the caller passes `extendEnv: false`) of an `agenticfix serve` or `worker`
 * child process acting as the app on the GitHub emulator, its state under `home`. For the benchmarks
 * and the end-to-end tests. `overrides` come last.
 */
export function childAppEnv(
  o: ChildRole & { home: string; githubUrl: string; appId: number; privateKey: string; modelUrl: string },
  overrides: Record<string, string> = {},
): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    AGENTICFIX_HOME: o.home,
    AGENTICFIX_RUNS_DIR: path.join(o.home, 'runs'),
    ...emulatorAppEnv({ ...o, key: { PRIVATE_KEY: o.privateKey } }),
    // Info: "agenticfix listening" and the worker's "taking runs" are info log lines, which callers wait for.
    LOG_LEVEL: 'info',
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

/** Zod's issues named by variable: `APP_ID is not set; WEBHOOK_SECRET is not set`. */
export const issuesLine = (error: z.ZodError) =>
  error.issues
    .map((i) => {
      if (i.path.length === 0) return i.message;
      const name = String(i.path[0]);
      // A missing value reads "expected string, received undefined" in zod's words.
      return i.code === 'invalid_type' && i.input === undefined
        ? `${name} is not set`
        : `${name}: ${i.message}`;
    })
    .join('; ');

/** Resolves on the first SIGINT or SIGTERM. */
export function untilStopped(): Promise<NodeJS.Signals> {
  return new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
}
