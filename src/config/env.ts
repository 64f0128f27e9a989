import { z } from 'zod';
import { PROVIDERS } from './providers.js';
import { nearest } from './did-you-mean.js';

/**
 * Every setting the app reads from its environment, with its default and its check: the one schema
 * the settings (config.ts), the README's table and `.env.example` (settings-doc.ts) derive from.
 */
const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);
const bool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');

export const MiB = 1024 * 1024;

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
  AGENTICFIX_MAX_WORKTREE_FILES: int(200_000, 1),
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
  AGENTICFIX_MODEL_MAX_REPLY_MB: int(16, 1), // a larger reply is refused (model_error) before it is parsed
  // Prices per model over the built-in table (src/config/prices.ts): JSON, or the path of a JSON file.
  AGENTICFIX_MODEL_PRICES: z.string().min(1).optional(),
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
  // A run's cost in USD: the budget and the ceiling a repository's `max_cost_usd` may lower (unset: none).
  AGENTICFIX_MAX_COST_USD: z.coerce.number().positive().finite().optional(),
  AGENTICFIX_MODEL_ALLOWLIST: z.string().optional(), // comma-separated; default: the configured model name
  // Revisions per pull request and CI feedback rounds: the repository's default and ceiling.
  AGENTICFIX_MAX_REVISIONS: int(5, 0),
  // Attempts per run (each repaired and judged on its own): the ceiling of a repository's `attempts`.
  AGENTICFIX_MAX_ATTEMPTS: int(3, 1),
  AGENTICFIX_CI_FEEDBACK_MAX_ROUNDS: int(2, 1),
  // Check apps (slugs, comma-separated) whose failing runs may start a revision; default: GitHub
  // Actions only (a repository's ci_feedback.apps overrides it).
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
  // On SIGTERM (serve running runs, a worker): no more runs; running ones get this long to finish,
  // then a worker hands them back to the queue and serve ends them `interrupted`, telling the issue.
  AGENTICFIX_DRAIN_S: int(600, 0),
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
  AGENTICFIX_WEBHOOK_MAX_BYTES: int(25_000_000, 1024), // GitHub caps payloads at 25 MB
  // All webhook bodies being read at once, and how long one may take: slow or unsigned senders cannot hold memory.
  AGENTICFIX_WEBHOOK_INFLIGHT_MB: int(64, 1),
  AGENTICFIX_WEBHOOK_BODY_TIMEOUT_S: int(30, 1),
  AGENTICFIX_OUTSIDER_REPLY_INTERVAL_S: int(3600, 0),
  // Observability: a worker's /healthz, /ping and /metrics listener (serve has them on its own port)
  AGENTICFIX_WORKER_PORT: int(3001, 0),
  AGENTICFIX_WORKER_HOST: z.string().min(1).default('0.0.0.0'),
  // Run pages (src/web): where people reach serve, and the app's OAuth client for signing them in.
  AGENTICFIX_PUBLIC_URL: z
    .url({ protocol: /^https?$/ })
    .transform((u) => u.replace(/\/+$/, ''))
    .optional(),
  CLIENT_ID: z.string().min(1).optional(),
  CLIENT_SECRET: z.string().min(1).optional(),
  // The same client as `agenticfix setup` (Probot's manifest flow) writes it; CLIENT_ID/CLIENT_SECRET win.
  GITHUB_CLIENT_ID: z.string().min(1).optional(),
  GITHUB_CLIENT_SECRET: z.string().min(1).optional(),
  // A TLS proxy in front of serve: its X-Forwarded-Proto says whether the browser came over https.
  AGENTICFIX_TRUST_PROXY: bool(false),
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
      const near = nearest(k, known);
      return `${k} is not a setting and is ignored${near ? ` (did you mean ${near}?)` : ''}`;
    });
}

/** The settings as the schema leaves them. */
export type Env = z.output<typeof ENV_SCHEMA>;

/** Names of environment variables that hold secrets: never passed to a sandbox, always redacted. */
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
  'CLIENT_SECRET',
  'GITHUB_CLIENT_SECRET',
  'OPENAI_API_KEY',
  'ANTHROPIC_API_KEY',
  'DEEPSEEK_API_KEY',
  'DASHSCOPE_API_KEY',
  'GEMINI_API_KEY',
] as const;
