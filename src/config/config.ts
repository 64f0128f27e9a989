import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { z } from 'zod';
import { defaultModelOf, PROVIDERS } from './providers.js';

/**
 * The one source of truth for every host-side limit, budget and path. Values come from
 * environment variables (optionally from a `.env` file in the working directory) and are
 * validated at start-up; an invalid value fails with a message naming the variable.
 */
const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);
const bool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');

const MiB = 1024 * 1024;

export const ENV_SCHEMA = z.object({
  // Paths
  AGENTICFIX_HOME: z.string().min(1).default('.agenticfix'),
  AGENTICFIX_CACHE_DIR: z.string().min(1).optional(),
  AGENTICFIX_WORKTREE_DIR: z.string().min(1).optional(),
  AGENTICFIX_RUNS_DIR: z.string().min(1).default('runs'),
  // The host path of AGENTICFIX_HOME when the app itself runs in a container (bind sources are host paths).
  AGENTICFIX_HOST_HOME: z.string().startsWith('/', 'must be an absolute path').optional(),
  // Tool limits
  AGENTICFIX_MAX_FILE_BYTES: int(MiB, 1),
  AGENTICFIX_MAX_READ_LINES: int(400, 1),
  // A test run's limit is derived from the measured suite (see src/environment/time-limits.ts) within these.
  AGENTICFIX_MAX_TEST_TIMEOUT_S: int(1800, 1),
  AGENTICFIX_MIN_TEST_TIMEOUT_S: int(60, 1),
  AGENTICFIX_MAX_OUTPUT_BYTES: int(MiB, 1024),
  AGENTICFIX_MAX_LIST_ENTRIES: int(2000, 1),
  AGENTICFIX_MAX_SCANNED_ENTRIES: int(20000, 1),
  AGENTICFIX_MAX_WORKTREE_MB: int(1024, 1),
  AGENTICFIX_MAX_PATCH_FILE_BYTES: int(10 * MiB, 1),
  AGENTICFIX_RUN_COMMAND_LOCAL: bool(false), // run_command with the local sandbox runs on the host: off unless set
  // Docker sandbox
  AGENTICFIX_BASE_IMAGE: z.string().min(1).default('agenticfix/debian:bookworm'),
  AGENTICFIX_SANDBOX_MEMORY_MB: int(1024, 16),
  AGENTICFIX_SANDBOX_CPUS: z.coerce.number().positive().default(1),
  AGENTICFIX_SANDBOX_PIDS: int(256, 8),
  AGENTICFIX_SANDBOX_TMPFS_MB: int(256, 1),
  // The OCI runtime of test and judge containers: `runc` leaves it to the engine's default, `runsc` is gVisor
  // (registered with dockerd; builds cannot use it: the classic builder's API has no runtime option).
  AGENTICFIX_RUNTIME: z.enum(['runc', 'runsc']).default('runc'),
  AGENTICFIX_BUILD_TIMEOUT_S: int(900, 1),
  AGENTICFIX_BUILD_MAX_OUTPUT_MB: int(64, 1),
  AGENTICFIX_BUILD_CONTEXT_MAX_MB: int(256, 1),
  AGENTICFIX_IMAGE_KEEP: int(20, 1),
  AGENTICFIX_IMAGE_MAX_AGE_H: int(168, 1),
  // Build network: `isolated` (a bridge of its own behind rules the app installs), `preinstalled` (the same
  // bridge, rules installed by the operator with `agenticfix build-network`) or `unrestricted` (Docker's default bridge)
  AGENTICFIX_BUILD_NETWORK: z.enum(['isolated', 'preinstalled', 'unrestricted']).default('isolated'),
  AGENTICFIX_BUILD_DNS: z
    .string()
    .transform((v) => v.split(',').map((s) => s.trim()))
    .pipe(z.array(z.ipv4()).min(1))
    .optional(), // default: the IPv4 nameservers of /etc/resolv.conf (what Docker's resolver forwards to)
  AGENTICFIX_BUILD_PROXY: z
    .string()
    .regex(/^[0-9.]+:\d{1,5}$/, 'expected <IPv4>:<port>')
    .transform((v) => ({
      host: v.slice(0, v.lastIndexOf(':')),
      port: Number(v.slice(v.lastIndexOf(':') + 1)),
    }))
    .pipe(z.strictObject({ host: z.ipv4(), port: z.number().int().min(1).max(65535) }))
    .optional(),
  AGENTICFIX_BUILD_CA_FILE: z.string().min(1).optional(), // PEM bundle trusted inside every build (read at each build)
  // The standard variables, used for builds when AGENTICFIX_BUILD_PROXY is unset (build arguments only).
  HTTPS_PROXY: z.string().min(1).optional(),
  https_proxy: z.string().min(1).optional(),
  HTTP_PROXY: z.string().min(1).optional(),
  http_proxy: z.string().min(1).optional(),
  NO_PROXY: z.string().optional(),
  no_proxy: z.string().optional(),
  AGENTICFIX_IMAGE_MAX_GB: z.coerce.number().positive().default(20),
  AGENTICFIX_IMAGE_LEASE_TTL_S: int(600, 30),
  // Model
  AGENTICFIX_MODEL_PROVIDER: z.enum(PROVIDERS).optional(),
  AGENTICFIX_MODEL_NAME: z.string().min(1).optional(),
  AGENTICFIX_MODEL_API_KEY: z.string().min(1).optional(),
  AGENTICFIX_MODEL_BASE_URL: z.url().optional(),
  AGENTICFIX_MODEL_TIMEOUT_S: int(120, 1),
  AGENTICFIX_MODEL_MAX_RETRIES: int(4, 0),
  AGENTICFIX_MODEL_RETRY_BASE_MS: int(1000, 0),
  // Budgets
  AGENTICFIX_TOKEN_BUDGET: int(150_000, 1),
  AGENTICFIX_REQUEST_BUDGET: int(60, 1),
  AGENTICFIX_TOOL_CALL_BUDGET: int(120, 1),
  AGENTICFIX_TIME_BUDGET_S: int(1800, 1),
  AGENTICFIX_TOKEN_RESERVE: int(12_000, 0),
  // Operator ceilings: a repository config or a rerun command may lower budgets, never raise them past
  // these (default: the budgets above), and may name only allow-listed models.
  AGENTICFIX_MAX_TOKENS: z.coerce.number().int().min(1).optional(),
  AGENTICFIX_MAX_REQUESTS: z.coerce.number().int().min(1).optional(),
  AGENTICFIX_MAX_TOOL_CALLS: z.coerce.number().int().min(1).optional(),
  AGENTICFIX_MAX_TIME_S: z.coerce.number().int().min(1).optional(),
  AGENTICFIX_MODEL_ALLOWLIST: z.string().optional(), // comma-separated; default: the configured model name
  // Revisions per pull request and CI feedback rounds: the repository's default and ceiling.
  AGENTICFIX_MAX_REVISIONS: int(5, 0),
  AGENTICFIX_CI_FEEDBACK_MAX_ROUNDS: int(2, 1),
  // Check apps (slugs, comma-separated) whose failing runs may start a revision; default: GitHub
  // Actions and the apps that reported on the default branch's head.
  AGENTICFIX_CHECK_APPS: z.string().optional(),
  // Context policy
  AGENTICFIX_OBSERVATION_MAX_CHARS: int(12_000, 200),
  AGENTICFIX_KEEP_FULL_OBSERVATIONS: int(1, 1), // the newest ones, never compacted
  // Older whole observations compacted at once past this; low, because each compaction makes what follows
  // its start be paid for uncached again (the context benchmark measures it).
  AGENTICFIX_CONTEXT_COMPACT_TOKENS: int(100, 0),
  AGENTICFIX_CONTEXT_POLICY: bool(true), // false: send the full history (benchmark baseline)
  // Agent loop
  AGENTICFIX_MAX_FORMAT_ERRORS: int(3, 1),
  AGENTICFIX_NO_EDIT_NUDGES: int(2, 0),
  AGENTICFIX_LOOP_REPEAT: int(3, 2),
  // Verification
  AGENTICFIX_FLAKY_RERUNS: int(2, 0),
  AGENTICFIX_MAX_REPORT_MB: int(32, 1),
  // App
  AGENTICFIX_CONCURRENCY: int(2, 1),
  AGENTICFIX_LABEL: z.string().min(1).default('agenticfix'),
  // The handle review comments mention to ask for a revision (`revise_on: [mention]`).
  AGENTICFIX_MENTION: z
    .string()
    .regex(/^@[A-Za-z0-9][A-Za-z0-9-]{0,38}$/, 'an @handle')
    .default('@agenticfix'),
  AGENTICFIX_DB_PATH: z.string().min(1).optional(),
  // Distributed: the run store in PostgreSQL (instead of SQLite at AGENTICFIX_DB_PATH) ...
  AGENTICFIX_DATABASE_URL: z.url({ protocol: /^postgres(ql)?$/ }).optional(),
  AGENTICFIX_DATABASE_SCHEMA: z
    .string()
    .regex(/^[a-z_][a-z0-9_]*$/)
    .default('public'),
  // ... and the queue in Redis (BullMQ), served by `agenticfix worker` processes.
  AGENTICFIX_REDIS_URL: z.url({ protocol: /^rediss?$/ }).optional(),
  AGENTICFIX_QUEUE_NAME: z
    .string()
    .regex(/^[\w-]{1,64}$/)
    .default('agenticfix-runs'),
  AGENTICFIX_WORKER_ID: z.string().min(1).max(200).optional(), // default host:pid
  AGENTICFIX_WORKER_GRACE_S: int(600, 0), // on SIGTERM: running runs get this long to finish
  AGENTICFIX_WORKER_LOCK_MS: int(30_000, 500), // a worker silent this long is dead: its runs stalled
  AGENTICFIX_REQUEUE_STALLED: bool(false), // a dead worker's run is run again once (else interrupted)
  AGENTICFIX_INSTALLATION_CONCURRENCY: int(0, 0), // runs of one installation at once, all workers; 0: no limit
  AGENTICFIX_INFRA_RETRIES: int(2, 0), // a run whose job threw (GitHub, the engine unreachable) is tried again
  AGENTICFIX_INFRA_RETRY_BASE_MS: int(30_000, 0), // the first wait before that; each next one doubles
  AGENTICFIX_STATUS_EDIT_INTERVAL_MS: int(5000, 0),
  AGENTICFIX_KEEP_FAILED_WORKTREES: bool(true),
  AGENTICFIX_WORKTREE_MAX_AGE_H: int(72, 1),
  AGENTICFIX_MIN_FREE_MB: int(512, 0), // a run starts only with this much free where worktrees and runs live
  AGENTICFIX_RUNS_KEEP: int(500, 1), // run directories kept, newest first
  AGENTICFIX_RUNS_MAX_AGE_D: int(90, 1), // run directories older than this are removed
  AGENTICFIX_MIRROR_MAX_AGE_D: int(30, 1), // a mirror in cache/ no run used for this long is removed
  // Deliveries are forgotten after this, and an event older than this is refused (a replay of a
  // forgotten one); at least GitHub's redelivery window of 3 days, or a redelivery would be refused.
  AGENTICFIX_DELIVERY_MAX_AGE_D: int(7, 3),
  AGENTICFIX_GITHUB_WRITE_INTERVAL_MS: int(1000, 0), // pace of writes beyond a burst (3x for notifying ones)
  AGENTICFIX_GITHUB_RETRY_BASE_MS: int(1000, 0), // unit of Retry-After and of the 5xx back-off
  AGENTICFIX_GITHUB_TIMEOUT_MS: int(30_000, 100), // one GitHub request; a timed-out one is retried as a 5xx
  AGENTICFIX_PUBLISH_RETRY_BASE_S: int(60, 0), // a judged run whose publishing failed: first wait, doubling
  AGENTICFIX_WEBHOOK_MAX_BYTES: int(25 * MiB, 1024), // GitHub caps payloads at 25 MB
  AGENTICFIX_OUTSIDER_REPLY_INTERVAL_S: int(3600, 0),
  // Observability: a worker's /healthz, /ping and /metrics listener (serve has them on its own port)
  AGENTICFIX_WORKER_PORT: int(3001, 0),
  AGENTICFIX_WORKER_HOST: z.string().min(1).default('0.0.0.0'),
  LOG_LEVEL: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  // As Probot: `pretty` (readable lines) or `json` (one object a line, for collectors); default json
  LOG_FORMAT: z.enum(['pretty', 'json']).default('json'),
  AGENTICFIX_CHECK_TIMEOUT_S: int(5, 1), // each start-up check (model, Docker, Redis, PostgreSQL) waits this long
});

/** A setting's name. */
export type EnvName = keyof typeof ENV_SCHEMA.shape;

/** `AGENTICFIX_*` names that the scripts and the tests read, not the app: no warning for them. */
const SCRIPT_ENV_NAMES = new Set([
  'AGENTICFIX_TEST_REDIS_URL',
  'AGENTICFIX_TEST_DATABASE_URL',
  'AGENTICFIX_SERVICES_ENV',
  'AGENTICFIX_CONTRACT_SUMMARY',
  'AGENTICFIX_DOCKERD_LOG',
  'AGENTICFIX_BASE_SUITE',
  'AGENTICFIX_APT_MIRROR',
]);

/**
 * One warning per `AGENTICFIX_*` variable that is no setting, naming the closest setting: a misspelt
 * name would otherwise be ignored and its default used without a word.
 */
export function unknownSettings(env: Record<string, string | undefined>): string[] {
  const known = Object.keys(ENV_SCHEMA.shape);
  return Object.keys(env)
    .filter((k) => k.startsWith('AGENTICFIX_') && !(k in ENV_SCHEMA.shape) && !SCRIPT_ENV_NAMES.has(k))
    .sort()
    .map((k) => {
      const [best] = known.map((n) => [n, editDistance(k, n)] as const).sort((a, b) => a[1] - b[1]);
      const hint = best && best[1] <= 3 ? ` (did you mean ${best[0]}?)` : '';
      return `${k} is not a setting and is ignored${hint}`;
    });
}

/** Levenshtein distance: one row at a time. */
function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++)
      next.push(Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    row = next;
  }
  return row[b.length]!;
}

export interface Config {
  cacheDir: string;
  worktreeDir: string;
  runsDir: string;
  dbPath: string;
  /** PostgreSQL run store shared by serve and workers; null: SQLite at dbPath. */
  databaseUrl: string | null;
  databaseSchema: string;
  /** How long each start-up check (model, Docker, Redis, PostgreSQL) may take. */
  checkTimeoutMs: number;
  /** The queue across machines (BullMQ on Redis); null: serve runs the runs itself. */
  distributed: {
    redisUrl: string;
    queueName: string;
    /** This worker's name in the store; host:pid by default. */
    workerId: string | undefined;
    workerGraceMs: number;
    workerLockMs: number;
    requeueStalled: boolean;
    /** Runs of one installation running at once across all workers; 0: no limit. */
    installationLimit: number;
    /** Infrastructure failures tried again, after baseMs, 2 × baseMs, ... */
    retry: { retries: number; baseMs: number };
  } | null;
  limits: {
    maxFileBytes: number;
    maxReadLines: number;
    /** The operator's ceiling for one test run (tools and judge cells). */
    maxTestTimeoutMs: number;
    /** The floor of a limit derived from the measured suite. */
    minTestTimeoutMs: number;
    maxOutputBytes: number;
    maxListEntries: number;
    maxScannedEntries: number;
    /** Longest observation the model is sent; read_file and list_files pages are made to fit it. */
    observationMaxChars: number;
    /** A worktree larger than this after a test run ends the run. */
    maxWorktreeBytes: number;
    /** Larger new or changed files are left out of exported patches (and of the workspace revision). */
    maxPatchFileBytes: number;
    /** Whether run_command may run on the host when the sandbox is the local one (never by default). */
    runCommandLocal: boolean;
  };
  sandbox: {
    baseImage: string;
    memoryBytes: number;
    nanoCpus: number;
    pidsLimit: number;
    tmpfsBytes: number;
    /** `runsc`: test and judge containers run under gVisor; `runc`: the engine's default runtime. */
    runtime: 'runc' | 'runsc';
    buildTimeoutMs: number;
    /** Build output (the engine's progress stream) past which a build is stopped. */
    buildMaxOutputBytes: number;
    /** Worktree snapshot sent as build context; it is held in memory. */
    buildContextMaxBytes: number;
    imageKeep: number;
    imageMaxAgeMs: number;
    /** AGENTICFIX_HOME here and on the engine's host, when they differ (the app in a container). */
    hostHome: { local: string; host: string } | null;
    buildNetwork: {
      mode: 'isolated' | 'preinstalled' | 'unrestricted';
      /** Resolvers builds may reach on port 53; undefined = the host's /etc/resolv.conf. */
      dns?: string[];
      /**
       * When set, the only other destination builds may reach; `url` (which may hold credentials) is
       * passed to builds as HTTP(S)_PROXY build arguments and is never recorded.
       */
      proxy?: BuildProxy;
      /** NO_PROXY for builds. */
      noProxy?: string;
      /** PEM bundle of extra certificate authorities every build trusts (TLS-inspecting networks). */
      caFile?: string;
    };
    /** GC removes the oldest unleased environment images while they hold more than this. */
    imageMaxBytes: number;
    /** A lease not renewed for this long belongs to a dead process and may be reclaimed. */
    imageLeaseTtlMs: number;
  };
  model: {
    provider?: z.infer<typeof ENV_SCHEMA>['AGENTICFIX_MODEL_PROVIDER'];
    name?: string;
    apiKey?: string;
    baseUrl?: string;
    timeoutMs: number;
    maxRetries: number;
    retryBaseMs: number;
    /** Model names a repository config or a command may choose. */
    allowlist: string[];
  };
  budgets: {
    tokens: number;
    requests: number;
    toolCalls: number;
    timeMs: number;
    tokenReserve: number;
  };
  /** The most a repository config or a command may ask for (revisions and CI rounds: also the default). */
  ceilings: {
    tokens: number;
    requests: number;
    toolCalls: number;
    timeMs: number;
    revisions: number;
    ciRounds: number;
  };
  context: {
    keepFullObservations: number;
    compactTokens: number;
    enabled: boolean;
  };
  agent: { maxFormatErrors: number; noEditNudges: number; loopRepeat: number };
  verify: { flakyReruns: number; /** Largest test report the judge reads. */ maxReportBytes: number };
  app: {
    concurrency: number;
    label: string;
    mention: string;
    statusEditIntervalMs: number;
    keepFailedWorktrees: boolean;
    /** Worktrees not modified for this long are removed (at start-up and after each run). */
    worktreeMaxAgeMs: number;
    /** A run is refused when less than this is free where worktrees or run directories live. */
    minFreeBytes: number;
    /** Retention, at start-up and periodically: run directories (newest kept), mirrors, deliveries. */
    retention: { runsKeep: number; runsMaxAgeMs: number; mirrorMaxAgeMs: number; deliveryMaxAgeMs: number };
    githubWriteIntervalMs: number;
    githubRetryBaseMs: number;
    githubTimeoutMs: number;
    /** The first wait before publishing a judged run again (pending.ts); each next one doubles. */
    publishRetryBaseMs: number;
    /** Largest webhook body taken in; larger ones get 413 before any buffering or signature work. */
    webhookMaxBytes: number;
    /** People without write access get at most one reply per issue in this interval. */
    outsiderReplyIntervalMs: number;
    /** Check apps allowed to start revisions; null: GitHub Actions and those on the default branch's head. */
    checkApps: string[] | null;
  };
  log: { level: string; format: 'pretty' | 'json' };
  /** Where a worker answers /healthz, /ping and /metrics. */
  workerListen: { port: number; host: string };
}

export class ConfigError extends Error {}

/** Reads `.env` (if present) under the given env; real environment variables win. */
export function loadEnv(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): Record<string, string> {
  const file = path.join(cwd, '.env');
  const fromFile = existsSync(file) ? parseDotenv(readFileSync(file)) : {};
  const merged: Record<string, string> = { ...fromFile };
  for (const [k, v] of Object.entries(env)) if (v !== undefined) merged[k] = v;
  return merged;
}

export function loadConfig(env: Record<string, string | undefined> = loadEnv(), cwd = process.cwd()): Config {
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
  const home = path.resolve(cwd, e.AGENTICFIX_HOME);
  return {
    cacheDir: path.resolve(cwd, e.AGENTICFIX_CACHE_DIR ?? path.join(home, 'cache')),
    worktreeDir: path.resolve(cwd, e.AGENTICFIX_WORKTREE_DIR ?? path.join(home, 'worktrees')),
    runsDir: path.resolve(cwd, e.AGENTICFIX_RUNS_DIR),
    dbPath: path.resolve(cwd, e.AGENTICFIX_DB_PATH ?? path.join(home, 'runs.sqlite')),
    databaseUrl: e.AGENTICFIX_DATABASE_URL ?? null,
    databaseSchema: e.AGENTICFIX_DATABASE_SCHEMA,
    checkTimeoutMs: e.AGENTICFIX_CHECK_TIMEOUT_S * 1000,
    distributed: e.AGENTICFIX_REDIS_URL
      ? {
          redisUrl: e.AGENTICFIX_REDIS_URL,
          queueName: e.AGENTICFIX_QUEUE_NAME,
          workerId: e.AGENTICFIX_WORKER_ID,
          workerGraceMs: e.AGENTICFIX_WORKER_GRACE_S * 1000,
          workerLockMs: e.AGENTICFIX_WORKER_LOCK_MS,
          requeueStalled: e.AGENTICFIX_REQUEUE_STALLED,
          installationLimit: e.AGENTICFIX_INSTALLATION_CONCURRENCY,
          retry: { retries: e.AGENTICFIX_INFRA_RETRIES, baseMs: e.AGENTICFIX_INFRA_RETRY_BASE_MS },
        }
      : null,
    limits: {
      maxFileBytes: e.AGENTICFIX_MAX_FILE_BYTES,
      maxReadLines: e.AGENTICFIX_MAX_READ_LINES,
      maxTestTimeoutMs: e.AGENTICFIX_MAX_TEST_TIMEOUT_S * 1000,
      minTestTimeoutMs: Math.min(e.AGENTICFIX_MIN_TEST_TIMEOUT_S, e.AGENTICFIX_MAX_TEST_TIMEOUT_S) * 1000,
      maxOutputBytes: e.AGENTICFIX_MAX_OUTPUT_BYTES,
      maxListEntries: e.AGENTICFIX_MAX_LIST_ENTRIES,
      maxScannedEntries: e.AGENTICFIX_MAX_SCANNED_ENTRIES,
      observationMaxChars: e.AGENTICFIX_OBSERVATION_MAX_CHARS,
      maxWorktreeBytes: e.AGENTICFIX_MAX_WORKTREE_MB * MiB,
      maxPatchFileBytes: e.AGENTICFIX_MAX_PATCH_FILE_BYTES,
      runCommandLocal: e.AGENTICFIX_RUN_COMMAND_LOCAL,
    },
    sandbox: {
      baseImage: e.AGENTICFIX_BASE_IMAGE,
      memoryBytes: e.AGENTICFIX_SANDBOX_MEMORY_MB * MiB,
      nanoCpus: Math.round(e.AGENTICFIX_SANDBOX_CPUS * 1e9),
      pidsLimit: e.AGENTICFIX_SANDBOX_PIDS,
      tmpfsBytes: e.AGENTICFIX_SANDBOX_TMPFS_MB * MiB,
      runtime: e.AGENTICFIX_RUNTIME,
      buildTimeoutMs: e.AGENTICFIX_BUILD_TIMEOUT_S * 1000,
      buildMaxOutputBytes: e.AGENTICFIX_BUILD_MAX_OUTPUT_MB * MiB,
      buildContextMaxBytes: e.AGENTICFIX_BUILD_CONTEXT_MAX_MB * MiB,
      imageKeep: e.AGENTICFIX_IMAGE_KEEP,
      imageMaxAgeMs: e.AGENTICFIX_IMAGE_MAX_AGE_H * 3600_000,
      hostHome: e.AGENTICFIX_HOST_HOME
        ? { local: home, host: path.posix.normalize(e.AGENTICFIX_HOST_HOME) }
        : null,
      buildNetwork: {
        mode: e.AGENTICFIX_BUILD_NETWORK,
        dns: e.AGENTICFIX_BUILD_DNS,
        ...buildProxy(e),
        caFile: e.AGENTICFIX_BUILD_CA_FILE,
      },
      imageMaxBytes: Math.round(e.AGENTICFIX_IMAGE_MAX_GB * 1024 * MiB),
      imageLeaseTtlMs: e.AGENTICFIX_IMAGE_LEASE_TTL_S * 1000,
    },
    model: {
      provider: e.AGENTICFIX_MODEL_PROVIDER,
      name: e.AGENTICFIX_MODEL_NAME,
      apiKey: e.AGENTICFIX_MODEL_API_KEY,
      baseUrl: e.AGENTICFIX_MODEL_BASE_URL,
      timeoutMs: e.AGENTICFIX_MODEL_TIMEOUT_S * 1000,
      maxRetries: e.AGENTICFIX_MODEL_MAX_RETRIES,
      retryBaseMs: e.AGENTICFIX_MODEL_RETRY_BASE_MS,
      allowlist,
    },
    budgets: {
      tokens: e.AGENTICFIX_TOKEN_BUDGET,
      requests: e.AGENTICFIX_REQUEST_BUDGET,
      toolCalls: e.AGENTICFIX_TOOL_CALL_BUDGET,
      timeMs: e.AGENTICFIX_TIME_BUDGET_S * 1000,
      tokenReserve: e.AGENTICFIX_TOKEN_RESERVE,
    },
    ceilings: {
      tokens: ceilings.tokens,
      requests: ceilings.requests,
      toolCalls: ceilings.toolCalls,
      timeMs: ceilings.timeS * 1000,
      revisions: e.AGENTICFIX_MAX_REVISIONS,
      ciRounds: e.AGENTICFIX_CI_FEEDBACK_MAX_ROUNDS,
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
      label: e.AGENTICFIX_LABEL,
      mention: e.AGENTICFIX_MENTION,
      statusEditIntervalMs: e.AGENTICFIX_STATUS_EDIT_INTERVAL_MS,
      keepFailedWorktrees: e.AGENTICFIX_KEEP_FAILED_WORKTREES,
      worktreeMaxAgeMs: e.AGENTICFIX_WORKTREE_MAX_AGE_H * 3600_000,
      minFreeBytes: e.AGENTICFIX_MIN_FREE_MB * MiB,
      retention: {
        runsKeep: e.AGENTICFIX_RUNS_KEEP,
        runsMaxAgeMs: e.AGENTICFIX_RUNS_MAX_AGE_D * 86_400_000,
        mirrorMaxAgeMs: e.AGENTICFIX_MIRROR_MAX_AGE_D * 86_400_000,
        deliveryMaxAgeMs: e.AGENTICFIX_DELIVERY_MAX_AGE_D * 86_400_000,
      },
      githubWriteIntervalMs: e.AGENTICFIX_GITHUB_WRITE_INTERVAL_MS,
      githubRetryBaseMs: e.AGENTICFIX_GITHUB_RETRY_BASE_MS,
      githubTimeoutMs: e.AGENTICFIX_GITHUB_TIMEOUT_MS,
      publishRetryBaseMs: e.AGENTICFIX_PUBLISH_RETRY_BASE_S * 1000,
      webhookMaxBytes: e.AGENTICFIX_WEBHOOK_MAX_BYTES,
      outsiderReplyIntervalMs: e.AGENTICFIX_OUTSIDER_REPLY_INTERVAL_S * 1000,
      checkApps: e.AGENTICFIX_CHECK_APPS ? splitList(e.AGENTICFIX_CHECK_APPS) : null,
    },
    log: { level: e.LOG_LEVEL, format: e.LOG_FORMAT },
    workerListen: { port: e.AGENTICFIX_WORKER_PORT, host: e.AGENTICFIX_WORKER_HOST },
  };
}

/** A comma-separated list's entries, trimmed, without empty ones. */
const splitList = (text: string): string[] =>
  text
    .split(',')
    .map((m) => m.trim())
    .filter(Boolean);

/** Names of environment variables that hold secrets: never passed to a sandbox, always redacted. */
export interface BuildProxy {
  host: string;
  port: number;
  url: string;
}

/**
 * The builds' proxy: AGENTICFIX_BUILD_PROXY, else the standard variables (HTTPS first, one proxy for
 * both schemes). The build network admits the proxy by address, so its host must be an IPv4 literal.
 */
function buildProxy(e: z.infer<typeof ENV_SCHEMA>): { proxy?: BuildProxy; noProxy?: string } {
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

export const SECRET_ENV_NAMES = [
  'AGENTICFIX_MODEL_API_KEY',
  // Service URLs carry passwords.
  'AGENTICFIX_DATABASE_URL',
  'AGENTICFIX_REDIS_URL',
  // A proxy URL may carry credentials.
  'HTTPS_PROXY',
  'https_proxy',
  'HTTP_PROXY',
  'http_proxy',
  'GITHUB_TOKEN',
  'GH_TOKEN',
  'PRIVATE_KEY',
  'WEBHOOK_SECRET',
  'OPENAI_API_KEY',
  'ANTHROPIC_API_KEY',
  'DEEPSEEK_API_KEY',
  'DASHSCOPE_API_KEY',
  'GEMINI_API_KEY',
] as const;
