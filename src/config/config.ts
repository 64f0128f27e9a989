import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { z } from 'zod';
import { ENV_SCHEMA, MiB, type Env, type EnvName } from './env.js';
import { BUILTIN_PRICES, parsePrices } from './prices.js';
import { defaultModelOf } from './providers.js';

/**
 * The one source of truth for every host-side limit, budget and path. Values come from
 * environment variables (optionally from a `.env` file in the working directory) and are
 * validated at start-up; an invalid value fails with a message naming the variable.
 */
/** Every setting, from the environment checked by ENV_SCHEMA (env.ts): derived, never written twice. */
export type Config = ReturnType<typeof loadConfig>;

export class ConfigError extends Error {}

/** Reads `.env` (if present) under the given env; real environment variables win. */
export function loadEnv(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): Record<string, string> {
  const file = path.join(cwd, '.env');
  const fromFile = existsSync(file) ? parseDotenv(readFileSync(file)) : {};
  const merged: Record<string, string> = { ...fromFile };
  for (const [k, v] of Object.entries(env)) if (v !== undefined) merged[k] = v;
  return merged;
}

/** The settings as the app reads them; its type is derived from what the schema gives (Config). */
export function loadConfig(env: Record<string, string | undefined> = loadEnv(), cwd = process.cwd()) {
  const known = Object.fromEntries(
    Object.entries(env).filter(([k, v]) => k in ENV_SCHEMA.shape && v !== undefined && v !== ''),
  );
  const parsed = ENV_SCHEMA.safeParse(known);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${String(i.path[0])}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  const e = parsed.data;
  if (e.AGENTICFIX_REDIS_URL && !e.AGENTICFIX_DATABASE_URL)
    throw new ConfigError(
      'invalid configuration:\n  AGENTICFIX_REDIS_URL needs AGENTICFIX_DATABASE_URL: workers on other machines cannot share a SQLite file',
    );
  const ceilings = {
    tokens: e.AGENTICFIX_MAX_TOKENS ?? e.AGENTICFIX_TOKEN_BUDGET,
    requests: e.AGENTICFIX_MAX_REQUESTS ?? e.AGENTICFIX_REQUEST_BUDGET,
    toolCalls: e.AGENTICFIX_MAX_TOOL_CALLS ?? e.AGENTICFIX_TOOL_CALL_BUDGET,
    timeS: e.AGENTICFIX_MAX_TIME_S ?? e.AGENTICFIX_TIME_BUDGET_S,
  };
  const below = (
    [
      ['AGENTICFIX_MAX_TOKENS', ceilings.tokens, 'AGENTICFIX_TOKEN_BUDGET', e.AGENTICFIX_TOKEN_BUDGET],
      [
        'AGENTICFIX_MAX_REQUESTS',
        ceilings.requests,
        'AGENTICFIX_REQUEST_BUDGET',
        e.AGENTICFIX_REQUEST_BUDGET,
      ],
      [
        'AGENTICFIX_MAX_TOOL_CALLS',
        ceilings.toolCalls,
        'AGENTICFIX_TOOL_CALL_BUDGET',
        e.AGENTICFIX_TOOL_CALL_BUDGET,
      ],
      ['AGENTICFIX_MAX_TIME_S', ceilings.timeS, 'AGENTICFIX_TIME_BUDGET_S', e.AGENTICFIX_TIME_BUDGET_S],
    ] as const
  ).filter(([, max, , budget]) => max < budget);
  if (below.length > 0) {
    const lines = below.map(([m, max, b, budget]) => `${m}: ${max} is below ${b} (${budget})`);
    throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  const defaultModel =
    e.AGENTICFIX_MODEL_NAME ?? (e.AGENTICFIX_MODEL_PROVIDER && defaultModelOf(e.AGENTICFIX_MODEL_PROVIDER));
  const allowlist = e.AGENTICFIX_MODEL_ALLOWLIST
    ? splitList(e.AGENTICFIX_MODEL_ALLOWLIST)
    : defaultModel
      ? [defaultModel]
      : [];
  let prices = BUILTIN_PRICES;
  if (e.AGENTICFIX_MODEL_PRICES)
    try {
      prices = { ...BUILTIN_PRICES, ...parsePrices(e.AGENTICFIX_MODEL_PRICES, cwd) };
    } catch (err) {
      throw new ConfigError(`invalid configuration:\n  AGENTICFIX_MODEL_PRICES: ${(err as Error).message}`);
    }
  const costUsd = e.AGENTICFIX_MAX_COST_USD ?? null;
  const home = path.resolve(cwd, e.AGENTICFIX_HOME);
  return {
    cacheDir: path.resolve(cwd, e.AGENTICFIX_CACHE_DIR ?? path.join(home, 'cache')),
    worktreeDir: path.resolve(cwd, e.AGENTICFIX_WORKTREE_DIR ?? path.join(home, 'worktrees')),
    runsDir: path.resolve(cwd, e.AGENTICFIX_RUNS_DIR),
    dbPath: path.resolve(cwd, e.AGENTICFIX_DB_PATH ?? path.join(home, 'runs.sqlite')),
    /** PostgreSQL run store shared by serve and workers; null: SQLite at dbPath. */
    databaseUrl: e.AGENTICFIX_DATABASE_URL ?? null,
    ...copied(e, 'AGENTICFIX_', ['DATABASE_SCHEMA', 'CHECK_TIMEOUT_S']),
    /** The queue across machines (BullMQ on Redis); null: serve runs the runs itself. */
    distributed: e.AGENTICFIX_REDIS_URL
      ? {
          redisUrl: e.AGENTICFIX_REDIS_URL,
          ...copied(e, 'AGENTICFIX_', ['QUEUE_NAME', 'WORKER_ID', 'WORKER_LOCK_MS', 'REQUEUE_STALLED']),
          /** Infrastructure failures tried again, after baseMs, 2 × baseMs, ... */
          retry: { retries: e.AGENTICFIX_INFRA_RETRIES, baseMs: e.AGENTICFIX_INFRA_RETRY_BASE_MS },
        }
      : null,
    limits: {
      ...copied(e, 'AGENTICFIX_', [
        'MAX_FILE_BYTES',
        'MAX_READ_LINES',
        'MAX_TEST_TIMEOUT_S',
        'MAX_OUTPUT_BYTES',
        'MAX_LIST_ENTRIES',
        'MAX_SCANNED_ENTRIES',
        'OBSERVATION_MAX_CHARS',
        'MAX_WORKTREE_MB',
        'MAX_PATCH_FILE_BYTES',
        'RUN_COMMAND_LOCAL',
        'REVISION_MAX_DIFF_MB',
      ]),
      /** The floor of a limit derived from the measured suite: at most the ceiling. */
      minTestTimeoutMs: Math.min(e.AGENTICFIX_MIN_TEST_TIMEOUT_S, e.AGENTICFIX_MAX_TEST_TIMEOUT_S) * 1000,
      maxWorktreeEntries: e.AGENTICFIX_MAX_WORKTREE_FILES,
      fetch: copied(e, 'AGENTICFIX_FETCH_', ['TIMEOUT_S', 'MAX_MB', 'MAX_FILES']),
    },
    sandbox: {
      ...copied(e, 'AGENTICFIX_SANDBOX_', ['MEMORY_MB', 'TMPFS_MB']),
      ...copied(e, 'AGENTICFIX_', [
        'BASE_IMAGE',
        'RUNTIME',
        'BUILD_TIMEOUT_S',
        'BUILD_MAX_OUTPUT_MB',
        'BUILD_CONTEXT_MAX_MB',
        'IMAGE_KEEP',
        'IMAGE_MAX_AGE_H',
        'IMAGE_LEASE_TTL_S',
        'ENGINE_CALL_TIMEOUT_S',
      ]),
      nanoCpus: Math.round(e.AGENTICFIX_SANDBOX_CPUS * 1e9),
      pidsLimit: e.AGENTICFIX_SANDBOX_PIDS,
      /** AGENTICFIX_HOME here and on the engine's host, when they differ (the app in a container). */
      hostHome: e.AGENTICFIX_HOST_HOME
        ? { local: home, host: path.posix.normalize(e.AGENTICFIX_HOST_HOME) }
        : null,
      buildNetwork: {
        mode: e.AGENTICFIX_BUILD_NETWORK,
        /** Resolvers builds may reach on port 53; undefined = the host's /etc/resolv.conf. */
        ...(e.AGENTICFIX_BUILD_DNS && { dns: e.AGENTICFIX_BUILD_DNS }),
        ...buildProxy(e),
        ...(e.AGENTICFIX_BUILD_CA_FILE && { caFile: e.AGENTICFIX_BUILD_CA_FILE }),
      },
      imageMaxBytes: Math.round(e.AGENTICFIX_IMAGE_MAX_GB * 1024 * MiB),
      /** Builds of one image take turns across processes through lock files here (images/turns.ts). */
      buildLockDir: path.resolve(cwd, e.AGENTICFIX_BUILD_LOCK_DIR ?? path.join(home, 'build-locks')),
      /**
       * A run's warm test container ends on its own this long after it started (when the app is gone):
       * the longest run (the time ceiling) plus one test run at the ceiling. A live run replaces it sooner.
       */
      warmLifetimeMs: (ceilings.timeS + e.AGENTICFIX_MAX_TEST_TIMEOUT_S) * 1000,
    },
    model: {
      ...copied(e, 'AGENTICFIX_MODEL_', [
        'PROVIDER',
        'NAME',
        'API_KEY',
        'BASE_URL',
        'TIMEOUT_S',
        'MAX_RETRIES',
        'RETRY_BASE_MS',
        'MAX_REPLY_MB',
      ]),
      /** Model names a repository config or a command may choose. */
      allowlist,
      /** USD per million tokens by model name: the built-in table with the operator's entries over it. */
      prices,
    },
    budgets: {
      tokens: e.AGENTICFIX_TOKEN_BUDGET,
      requests: e.AGENTICFIX_REQUEST_BUDGET,
      toolCalls: e.AGENTICFIX_TOOL_CALL_BUDGET,
      timeMs: e.AGENTICFIX_TIME_BUDGET_S * 1000,
      ...copied(e, 'AGENTICFIX_', ['TOKEN_RESERVE']),
      /** USD a run may spend on model requests; null: no limit. */
      costUsd,
    },
    /** The most a repository config or a command may ask for (revisions and CI rounds: also the default). */
    ceilings: {
      tokens: ceilings.tokens,
      requests: ceilings.requests,
      toolCalls: ceilings.toolCalls,
      timeMs: ceilings.timeS * 1000,
      revisions: e.AGENTICFIX_MAX_REVISIONS,
      attempts: e.AGENTICFIX_MAX_ATTEMPTS,
      ciRounds: e.AGENTICFIX_CI_FEEDBACK_MAX_ROUNDS,
      /** AGENTICFIX_MAX_COST_USD, as the budget is; null: a repository may set any. */
      costUsd,
    },
    context: {
      keepFullObservations: e.AGENTICFIX_KEEP_FULL_OBSERVATIONS,
      compactTokens: e.AGENTICFIX_CONTEXT_COMPACT_TOKENS,
      stubMinSavingTokens: e.AGENTICFIX_CONTEXT_STUB_MIN_SAVING_TOKENS,
      smallWholeMaxTokens: e.AGENTICFIX_CONTEXT_SMALL_WHOLE_MAX_TOKENS,
      readWindowMaxTokens: e.AGENTICFIX_CONTEXT_READ_WINDOW_MAX_TOKENS,
      stubHeadLines: e.AGENTICFIX_CONTEXT_STUB_HEAD_LINES,
      searchAroundLines: e.AGENTICFIX_CONTEXT_SEARCH_AROUND_LINES,
      enabled: e.AGENTICFIX_CONTEXT_POLICY,
    },
    agent: copied(e, 'AGENTICFIX_', ['MAX_FORMAT_ERRORS', 'NO_EDIT_NUDGES', 'LOOP_REPEAT']),
    verify: copied(e, 'AGENTICFIX_', ['FLAKY_RERUNS', 'MAX_REPORT_MB']),
    app: {
      ...copied(e, 'AGENTICFIX_', [
        'CONCURRENCY',
        'INSTALLATION_CONCURRENCY',
        'DRAIN_S',
        'LABEL',
        'MENTION',
        'STATUS_EDIT_INTERVAL_MS',
        'KEEP_FAILED_WORKTREES',
        'WORKTREE_MAX_AGE_H',
        'MIN_FREE_MB',
        'GITHUB_WRITE_INTERVAL_MS',
        'GITHUB_RETRY_BASE_MS',
        'GITHUB_TIMEOUT_MS',
        'PUBLISH_RETRY_BASE_S',
        'STORE_RETRY_S',
        'WEBHOOK_MAX_BYTES',
        'WEBHOOK_INFLIGHT_MB',
        'OUTSIDER_REPLY_INTERVAL_S',
      ]),
      retention: copied(e, 'AGENTICFIX_', [
        'RUNS_KEEP',
        'RUNS_MAX_AGE_D',
        'MIRROR_MAX_AGE_D',
        'DELIVERY_MAX_AGE_D',
      ]),
      /** Check apps allowed to start revisions; null: GitHub Actions only. */
      checkApps: e.AGENTICFIX_CHECK_APPS ? splitList(e.AGENTICFIX_CHECK_APPS) : null,
    },
    log: { level: e.LOG_LEVEL, format: e.LOG_FORMAT },
    /** Each listener's connection limits (listener.ts). */
    http: {
      ...copied(e, 'AGENTICFIX_HTTP_', ['MAX_CONNECTIONS', 'HEADERS_TIMEOUT_S']),
      // Named for webhooks, which are most of the bodies; the deadline holds on every port.
      bodyTimeoutMs: e.AGENTICFIX_WEBHOOK_BODY_TIMEOUT_S * 1000,
    },
    workerListen: { port: e.AGENTICFIX_WORKER_PORT, host: e.AGENTICFIX_WORKER_HOST },
    /** Run pages: the public base URL (links in comments) and the OAuth client; null: not set. */
    web: {
      publicUrl: e.AGENTICFIX_PUBLIC_URL ?? null,
      clientId: e.CLIENT_ID ?? e.GITHUB_CLIENT_ID ?? null,
      clientSecret: e.CLIENT_SECRET ?? e.GITHUB_CLIENT_SECRET ?? null,
      trustProxy: e.AGENTICFIX_TRUST_PROXY,
    },
  };
}

/** `MAX_READ_LINES` → `MaxReadLines`. */
type Words<S extends string> = S extends `${infer H}_${infer T}`
  ? `${Capitalize<Lowercase<H>>}${Words<T>}`
  : Capitalize<Lowercase<S>>;
/** A setting's key in the config, by its unit: `MAX_TEST_TIMEOUT_S` → `maxTestTimeoutMs`, `MIN_FREE_MB` → `minFreeBytes`. */
type KeyOf<N extends string> = Uncapitalize<
  N extends `${infer B}_${'S' | 'H' | 'D'}`
    ? `${Words<B>}Ms`
    : N extends `${infer B}_MB`
      ? `${Words<B>}Bytes`
      : Words<N>
>;
/** The names of the settings that start with `P`, without it. */
type Suffix<P extends string> = EnvName extends infer N ? (N extends `${P}${infer R}` ? R : never) : never;
type Value<N extends EnvName> = N extends `${string}_${'S' | 'H' | 'D' | 'MB'}` ? number : Env[N];

/** Seconds, hours, days to ms; MiB to bytes: the units setting names end with. */
const UNITS: readonly [RegExp, string, number][] = [
  [/_S$/, 'Ms', 1000],
  [/_H$/, 'Ms', 3600_000],
  [/_D$/, 'Ms', 86_400_000],
  [/_MB$/, 'Bytes', MiB],
];

/**
 * The settings `names` (after `prefix`) as config keys and values, converted by their unit: what is a
 * plain copy is derived, not written twice. `copied(e, 'AGENTICFIX_MODEL_', ['TIMEOUT_S'])` is
 * `{ timeoutMs: e.AGENTICFIX_MODEL_TIMEOUT_S * 1000 }`.
 */
function copied<P extends string, S extends Suffix<P>>(
  e: Env,
  prefix: P,
  names: readonly S[],
): { [K in S as KeyOf<K>]: Value<`${P}${K}` & EnvName> } {
  return Object.fromEntries(
    names.map((name) => {
      const value = e[`${prefix}${name}` as EnvName];
      const unit = UNITS.find(([re]) => re.test(name));
      const base = unit ? name.replace(unit[0], '') : name;
      const key = base.toLowerCase().replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
      return unit ? [`${key}${unit[1]}`, (value as number) * unit[2]] : [key, value];
    }),
  ) as never;
}

/** A comma-separated list's entries, trimmed, without empty ones. */
const splitList = (text: string): string[] =>
  text
    .split(',')
    .map((m) => m.trim())
    .filter(Boolean);

export interface BuildProxy {
  host: string;
  port: number;
  url: string;
}

/**
 * The builds' proxy: AGENTICFIX_BUILD_PROXY, else the standard variables (HTTPS first, one proxy for
 * both schemes). The build network admits the proxy by address, so its host must be an IPv4 literal.
 */
function buildProxy(e: Env): { proxy?: BuildProxy; noProxy?: string } {
  const noProxy = e.NO_PROXY ?? e.no_proxy;
  const own = e.AGENTICFIX_BUILD_PROXY;
  if (own) return { proxy: { ...own, url: `http://${own.host}:${own.port}` }, noProxy };
  const names = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy'] as const;
  const name = names.find((n) => e[n]);
  if (!name) return { noProxy };
  let url: URL;
  try {
    url = new URL(e[name]!);
  } catch {
    throw new ConfigError(`invalid configuration:\n  ${name}: not a URL`);
  }
  const host = z.ipv4().safeParse(url.hostname);
  if (!/^https?:$/.test(url.protocol) || !host.success)
    throw new ConfigError(
      `invalid configuration:\n  ${name}: builds need an http(s) proxy at an IPv4 address (the build network admits it by address); got ${url.protocol}//${url.hostname}`,
    );
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  return { proxy: { host: url.hostname, port, url: e[name]! }, noProxy };
}
