import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { z } from 'zod';
import { ENV_SCHEMA, MiB, type Env } from './env.js';
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
    databaseSchema: e.AGENTICFIX_DATABASE_SCHEMA,
    /** How long each start-up check (model, Docker, Redis, PostgreSQL) may take. */
    checkTimeoutMs: e.AGENTICFIX_CHECK_TIMEOUT_S * 1000,
    /** The queue across machines (BullMQ on Redis); null: serve runs the runs itself. */
    distributed: e.AGENTICFIX_REDIS_URL
      ? {
          redisUrl: e.AGENTICFIX_REDIS_URL,
          queueName: e.AGENTICFIX_QUEUE_NAME,
          /** This worker's name in the store; host:pid by default. */
          workerId: e.AGENTICFIX_WORKER_ID,
          workerLockMs: e.AGENTICFIX_WORKER_LOCK_MS,
          requeueStalled: e.AGENTICFIX_REQUEUE_STALLED,
          /** Runs of one installation running at once across all workers; 0: no limit. */
          installationLimit: e.AGENTICFIX_INSTALLATION_CONCURRENCY,
          /** Infrastructure failures tried again, after baseMs, 2 × baseMs, ... */
          retry: { retries: e.AGENTICFIX_INFRA_RETRIES, baseMs: e.AGENTICFIX_INFRA_RETRY_BASE_MS },
        }
      : null,
    limits: {
      maxFileBytes: e.AGENTICFIX_MAX_FILE_BYTES,
      maxReadLines: e.AGENTICFIX_MAX_READ_LINES,
      /** The operator's ceiling for one test run (tools and judge cells). */
      maxTestTimeoutMs: e.AGENTICFIX_MAX_TEST_TIMEOUT_S * 1000,
      /** The floor of a limit derived from the measured suite. */
      minTestTimeoutMs: Math.min(e.AGENTICFIX_MIN_TEST_TIMEOUT_S, e.AGENTICFIX_MAX_TEST_TIMEOUT_S) * 1000,
      maxOutputBytes: e.AGENTICFIX_MAX_OUTPUT_BYTES,
      maxListEntries: e.AGENTICFIX_MAX_LIST_ENTRIES,
      maxScannedEntries: e.AGENTICFIX_MAX_SCANNED_ENTRIES,
      /** Longest observation the model is sent; read_file and list_files pages are made to fit it. */
      observationMaxChars: e.AGENTICFIX_OBSERVATION_MAX_CHARS,
      /** A worktree larger than this after a test run ends the run. */
      maxWorktreeBytes: e.AGENTICFIX_MAX_WORKTREE_MB * MiB,
      /** A worktree with more entries than this after a test run ends the run. */
      maxWorktreeEntries: e.AGENTICFIX_MAX_WORKTREE_FILES,
      /** Larger new or changed files are left out of exported patches (and of the workspace revision). */
      maxPatchFileBytes: e.AGENTICFIX_MAX_PATCH_FILE_BYTES,
      /** Whether run_command may run on the host when the sandbox is the local one (never by default). */
      runCommandLocal: e.AGENTICFIX_RUN_COMMAND_LOCAL,
    },
    sandbox: {
      baseImage: e.AGENTICFIX_BASE_IMAGE,
      memoryBytes: e.AGENTICFIX_SANDBOX_MEMORY_MB * MiB,
      nanoCpus: Math.round(e.AGENTICFIX_SANDBOX_CPUS * 1e9),
      pidsLimit: e.AGENTICFIX_SANDBOX_PIDS,
      tmpfsBytes: e.AGENTICFIX_SANDBOX_TMPFS_MB * MiB,
      /** `runsc`: test and judge containers run under gVisor; `runc`: the engine's default runtime. */
      runtime: e.AGENTICFIX_RUNTIME,
      buildTimeoutMs: e.AGENTICFIX_BUILD_TIMEOUT_S * 1000,
      /** Build output (the engine's progress stream) past which a build is stopped. */
      buildMaxOutputBytes: e.AGENTICFIX_BUILD_MAX_OUTPUT_MB * MiB,
      /** Worktree snapshot sent as build context; it is held in memory. */
      buildContextMaxBytes: e.AGENTICFIX_BUILD_CONTEXT_MAX_MB * MiB,
      imageKeep: e.AGENTICFIX_IMAGE_KEEP,
      imageMaxAgeMs: e.AGENTICFIX_IMAGE_MAX_AGE_H * 3600_000,
      /** AGENTICFIX_HOME here and on the engine's host, when they differ (the app in a container). */
      hostHome: e.AGENTICFIX_HOST_HOME
        ? { local: home, host: path.posix.normalize(e.AGENTICFIX_HOST_HOME) }
        : null,
      buildNetwork: {
        mode: e.AGENTICFIX_BUILD_NETWORK,
        /** Resolvers builds may reach on port 53; undefined = the host's /etc/resolv.conf. */
        ...(e.AGENTICFIX_BUILD_DNS && { dns: e.AGENTICFIX_BUILD_DNS }),
        ...buildProxy(e),
        /** PEM bundle of extra certificate authorities every build trusts (TLS-inspecting networks). */
        ...(e.AGENTICFIX_BUILD_CA_FILE && { caFile: e.AGENTICFIX_BUILD_CA_FILE }),
      },
      /** GC removes the oldest unleased environment images while they hold more than this. */
      imageMaxBytes: Math.round(e.AGENTICFIX_IMAGE_MAX_GB * 1024 * MiB),
      /** A lease not renewed for this long belongs to a dead process and may be reclaimed. */
      imageLeaseTtlMs: e.AGENTICFIX_IMAGE_LEASE_TTL_S * 1000,
      /**
       * A run's warm test container ends on its own this long after it started (when the app is gone):
       * the longest run (the time ceiling) plus one test run at the ceiling. A live run replaces it sooner.
       */
      warmLifetimeMs: (ceilings.timeS + e.AGENTICFIX_MAX_TEST_TIMEOUT_S) * 1000,
    },
    model: {
      provider: e.AGENTICFIX_MODEL_PROVIDER,
      name: e.AGENTICFIX_MODEL_NAME,
      apiKey: e.AGENTICFIX_MODEL_API_KEY,
      baseUrl: e.AGENTICFIX_MODEL_BASE_URL,
      timeoutMs: e.AGENTICFIX_MODEL_TIMEOUT_S * 1000,
      maxRetries: e.AGENTICFIX_MODEL_MAX_RETRIES,
      retryBaseMs: e.AGENTICFIX_MODEL_RETRY_BASE_MS,
      /** A reply larger than this is refused before it is parsed. */
      maxReplyBytes: e.AGENTICFIX_MODEL_MAX_REPLY_MB * MiB,
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
      tokenReserve: e.AGENTICFIX_TOKEN_RESERVE,
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
      enabled: e.AGENTICFIX_CONTEXT_POLICY,
    },
    agent: {
      maxFormatErrors: e.AGENTICFIX_MAX_FORMAT_ERRORS,
      noEditNudges: e.AGENTICFIX_NO_EDIT_NUDGES,
      loopRepeat: e.AGENTICFIX_LOOP_REPEAT,
    },
    verify: { flakyReruns: e.AGENTICFIX_FLAKY_RERUNS, maxReportBytes: e.AGENTICFIX_MAX_REPORT_MB * MiB },
    app: {
      concurrency: e.AGENTICFIX_CONCURRENCY,
      /** On SIGTERM: how long running runs may go on before they are handed back or interrupted. */
      drainMs: e.AGENTICFIX_DRAIN_S * 1000,
      label: e.AGENTICFIX_LABEL,
      mention: e.AGENTICFIX_MENTION,
      statusEditIntervalMs: e.AGENTICFIX_STATUS_EDIT_INTERVAL_MS,
      keepFailedWorktrees: e.AGENTICFIX_KEEP_FAILED_WORKTREES,
      /** Worktrees not modified for this long are removed (at start-up and after each run). */
      worktreeMaxAgeMs: e.AGENTICFIX_WORKTREE_MAX_AGE_H * 3600_000,
      /** A run is refused when less than this is free where worktrees or run directories live. */
      minFreeBytes: e.AGENTICFIX_MIN_FREE_MB * MiB,
      /** Retention, at start-up and periodically: run directories (newest kept), mirrors, deliveries. */
      retention: {
        runsKeep: e.AGENTICFIX_RUNS_KEEP,
        runsMaxAgeMs: e.AGENTICFIX_RUNS_MAX_AGE_D * 86_400_000,
        mirrorMaxAgeMs: e.AGENTICFIX_MIRROR_MAX_AGE_D * 86_400_000,
        deliveryMaxAgeMs: e.AGENTICFIX_DELIVERY_MAX_AGE_D * 86_400_000,
      },
      githubWriteIntervalMs: e.AGENTICFIX_GITHUB_WRITE_INTERVAL_MS,
      githubRetryBaseMs: e.AGENTICFIX_GITHUB_RETRY_BASE_MS,
      githubTimeoutMs: e.AGENTICFIX_GITHUB_TIMEOUT_MS,
      /** The first wait before publishing a judged run again (pending.ts); each next one doubles. */
      publishRetryBaseMs: e.AGENTICFIX_PUBLISH_RETRY_BASE_S * 1000,
      /** Largest webhook body taken in; larger ones get 413 before any buffering or signature work. */
      webhookMaxBytes: e.AGENTICFIX_WEBHOOK_MAX_BYTES,
      /** Bytes of webhook bodies being read at once across connections; past it a delivery gets 503. */
      webhookInflightBytes: e.AGENTICFIX_WEBHOOK_INFLIGHT_MB * MiB,
      /** A webhook body must arrive within this. */
      webhookBodyTimeoutMs: e.AGENTICFIX_WEBHOOK_BODY_TIMEOUT_S * 1000,
      /** People without write access get at most one reply per issue in this interval. */
      outsiderReplyIntervalMs: e.AGENTICFIX_OUTSIDER_REPLY_INTERVAL_S * 1000,
      /** Check apps allowed to start revisions; null: GitHub Actions only. */
      checkApps: e.AGENTICFIX_CHECK_APPS ? splitList(e.AGENTICFIX_CHECK_APPS) : null,
    },
    log: { level: e.LOG_LEVEL, format: e.LOG_FORMAT },
    /** Where a worker answers /healthz, /ping and /metrics. */
    workerListen: { port: e.AGENTICFIX_WORKER_PORT, host: e.AGENTICFIX_WORKER_HOST },
    /** Run pages: the public base URL (links in comments) and the OAuth client; null: not set. */
    web: {
      publicUrl: e.AGENTICFIX_PUBLIC_URL ?? null,
      clientId: e.CLIENT_ID ?? e.GITHUB_CLIENT_ID ?? null,
      clientSecret: e.CLIENT_SECRET ?? e.GITHUB_CLIENT_SECRET ?? null,
      /** X-Forwarded-Proto is believed (a TLS proxy in front that sets it). */
      trustProxy: e.AGENTICFIX_TRUST_PROXY,
    },
  };
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
