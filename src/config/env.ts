import { z } from 'zod';
import { PROVIDERS } from './providers.js';
import { nearest } from './did-you-mean.js';

/**
 * Every setting the app reads from its environment, with its default, its check and its description
 * (`.describe`, last in each chain): the one schema the settings (config.ts), docs/configuration.md and
 * `.env.example` (settings-doc.ts) derive from. A new setting is one entry here.
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
  AGENTICFIX_HOME: z
    .string()
    .min(1)
    .default('.agenticfix')
    .describe('repository mirrors (`cache/`), worktrees (`worktrees/`), the run store'),
  AGENTICFIX_CACHE_DIR: z.string().min(1).optional().describe('repository mirrors (default: `<home>/cache`)'),
  AGENTICFIX_WORKTREE_DIR: z
    .string()
    .min(1)
    .optional()
    .describe('worktrees of runs (default: `<home>/worktrees`)'),
  AGENTICFIX_RUNS_DIR: z
    .string()
    .min(1)
    .default('runs')
    .describe(
      'one folder per run: `events.jsonl`, `state.json`, `result.json`, `final.patch`, `Dockerfile`, judge `report.json`/`report.md`',
    ),
  AGENTICFIX_HOST_HOME: z
    .string()
    .startsWith('/', 'must be an absolute path')
    .optional()
    .describe(
      'the app in a container: the Docker host path of the directory mounted at AGENTICFIX_HOME (bind sources are host paths)',
    ),
  // Tool limits
  AGENTICFIX_MAX_FILE_BYTES: int(MiB, 1).describe('largest file the tools read'),
  AGENTICFIX_MAX_READ_LINES: int(400, 1).describe('lines of one `read_file` page'),
  // A test run's limit is derived from the measured suite (see src/environment/time-limits.ts) within these.
  AGENTICFIX_MAX_TEST_TIMEOUT_S: int(1800, 1).describe(
    "ceiling of one test run's wall clock: the first full run of the default target measures the suite; later runs and the judge's cells get 5 × that time within the floor and this ceiling (a repository's `test_timeout_s` lowers it)",
  ),
  AGENTICFIX_MIN_TEST_TIMEOUT_S: int(60, 1).describe(
    'floor of a test limit derived from the measured suite (a floor above the ceiling is the ceiling)',
  ),
  AGENTICFIX_MAX_OUTPUT_BYTES: int(MiB, 1024).describe(
    'output kept of a test run: stdout and stderr each keep their first and last half of it',
  ),
  AGENTICFIX_MAX_LIST_ENTRIES: int(2000, 1).describe('entries of one listing'),
  AGENTICFIX_MAX_SCANNED_ENTRIES: int(20000, 1).describe('entries one search scans'),
  AGENTICFIX_MAX_WORKTREE_MB: int(1024, 1).describe(
    'a worktree larger than this after a test run ends the run (`disk_limit`, `fatal`, the worktree removed); one that cannot be measured counts as over',
  ),
  AGENTICFIX_MAX_WORKTREE_FILES: int(200_000, 1).describe(
    'a worktree with more entries (files, directories, links) than this after a test run ends the run',
  ),
  AGENTICFIX_MAX_PATCH_FILE_BYTES: int(10 * MiB, 1).describe(
    'new or changed files over this are left out of the patch (listed in `patch_skipped`)',
  ),
  AGENTICFIX_RUN_COMMAND_LOCAL: bool(false).describe(
    '`run_command` with the local sandbox, that is on the host (tests and trusted demos only)',
  ),
  // Docker sandbox
  AGENTICFIX_BASE_IMAGE: z
    .string()
    .min(1)
    .default('agenticfix/debian:bookworm')
    .describe('the local base image of environments'),
  AGENTICFIX_SANDBOX_MEMORY_MB: int(1024, 16).describe("a test container's memory"),
  AGENTICFIX_SANDBOX_CPUS: z.coerce.number().positive().default(1).describe("a test container's CPUs"),
  AGENTICFIX_SANDBOX_PIDS: int(256, 8).describe("a test container's process limit"),
  AGENTICFIX_SANDBOX_TMPFS_MB: int(256, 1).describe("a test container's /tmp"),
  // The OCI runtime of test and judge containers: `runc` leaves it to the engine's default, `runsc` is gVisor
  // (registered with dockerd; builds cannot use it: the classic builder's API has no runtime option).
  AGENTICFIX_RUNTIME: z
    .enum(['runc', 'runsc'])
    .default('runc')
    .describe(
      "OCI runtime of test and judge containers: `runc` (the engine's default) or `runsc` (gVisor, registered with dockerd; the start-up stops if the engine lacks it; builds cannot use it)",
    ),
  AGENTICFIX_BUILD_TIMEOUT_S: int(900, 1).describe(
    "wall clock of one image build (the engine's build is cancelled)",
  ),
  AGENTICFIX_BUILD_MAX_OUTPUT_MB: int(64, 1).describe(
    'build output past which the build is stopped (`build output cap`)',
  ),
  AGENTICFIX_BUILD_CONTEXT_MAX_MB: int(256, 1).describe(
    'worktree snapshot sent as build context (held in memory; a larger one fails the build)',
  ),
  AGENTICFIX_IMAGE_KEEP: int(20, 1).describe(
    'environment images kept, newest first (GC after every build; leased images are never removed)',
  ),
  AGENTICFIX_IMAGE_MAX_AGE_H: int(168, 1).describe('environment images older than this are removed'),
  // Build network: `isolated` (a bridge of its own behind rules the app installs), `preinstalled` (the same
  // bridge, rules installed by the operator with `agenticfix build-network`) or `unrestricted` (Docker's default bridge)
  AGENTICFIX_BUILD_NETWORK: z
    .enum(['isolated', 'preinstalled', 'unrestricted'])
    .default('isolated')
    .describe(
      "where builds run: `isolated` (the app installs the rules), `preinstalled` (the operator does, with `agenticfix build-network`) or `unrestricted` (Docker's default bridge); see the build network in docs/operating.md",
    ),
  AGENTICFIX_BUILD_DNS: z
    .string()
    .transform((v) => v.split(',').map((s) => s.trim()))
    .pipe(z.array(z.ipv4()).min(1))
    .optional()
    .describe(
      'comma-separated resolvers builds may reach on port 53 (default: the IPv4 nameservers of /etc/resolv.conf)',
    ),
  AGENTICFIX_BUILD_PROXY: z
    .string()
    .regex(/^[0-9.]+:\d{1,5}$/, 'expected <IPv4>:<port>')
    .transform((v) => ({
      host: v.slice(0, v.lastIndexOf(':')),
      port: Number(v.slice(v.lastIndexOf(':') + 1)),
    }))
    .pipe(z.strictObject({ host: z.ipv4(), port: z.number().int().min(1).max(65535) }))
    .optional()
    .describe(
      '`<IPv4>:<port>`: the only other destination builds may reach, given to them as `HTTP(S)_PROXY`',
    ),
  AGENTICFIX_BUILD_CA_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      'PEM bundle of extra certificate authorities trusted inside every build (networks that re-sign TLS; read at each build)',
    ),
  // The standard variables, used for builds when AGENTICFIX_BUILD_PROXY is unset (build arguments only).
  HTTPS_PROXY: z
    .string()
    .min(1)
    .optional()
    .describe(
      "builds' proxy when AGENTICFIX_BUILD_PROXY is unset: an `http://[user:password@]<IPv4>:<port>` URL, passed to builds as build arguments only (never to test containers, never recorded)",
    ),
  https_proxy: z.string().min(1).optional().describe('as HTTPS_PROXY'),
  HTTP_PROXY: z.string().min(1).optional().describe('as HTTPS_PROXY, when that is unset'),
  http_proxy: z.string().min(1).optional().describe('as HTTP_PROXY'),
  NO_PROXY: z.string().optional().describe('NO_PROXY for builds'),
  no_proxy: z.string().optional().describe('as NO_PROXY'),
  AGENTICFIX_IMAGE_MAX_GB: z.coerce
    .number()
    .positive()
    .default(20)
    .describe(
      'GC removes the oldest environment images while they hold more than this (bytes of their own layers)',
    ),
  AGENTICFIX_IMAGE_LEASE_TTL_S: int(600, 30).describe(
    'an image lease not renewed for this long belongs to a dead process and GC reclaims it',
  ),
  // Model
  AGENTICFIX_MODEL_PROVIDER: z
    .enum(PROVIDERS)
    .optional()
    .describe(
      "deepseek, openai, gemini, qwen (DashScope compatible mode), claude (Anthropic's OpenAI-compatible endpoint), ollama, vllm, llamacpp or custom",
    ),
  AGENTICFIX_MODEL_NAME: z
    .string()
    .min(1)
    .optional()
    .describe('model name (each preset has a default where one makes sense)'),
  AGENTICFIX_MODEL_API_KEY: z
    .string()
    .min(1)
    .optional()
    .describe('the key; never logged, traced, prompted or passed to a container'),
  AGENTICFIX_MODEL_BASE_URL: z.url().optional().describe("overrides the preset's URL (required for custom)"),
  AGENTICFIX_MODEL_TIMEOUT_S: int(120, 1).describe('one model request'),
  AGENTICFIX_MODEL_MAX_RETRIES: int(4, 0).describe('retries of a 429, 5xx or timed-out request'),
  AGENTICFIX_MODEL_RETRY_BASE_MS: int(1000, 0).describe(
    'first back-off of those retries; unit of the retry-after wait',
  ),
  AGENTICFIX_MODEL_MAX_REPLY_MB: int(16, 1).describe(
    'a model reply larger than this is refused as model_error before it is parsed',
  ),
  // Prices per model over the built-in table (src/config/prices.ts): JSON, or the path of a JSON file.
  AGENTICFIX_MODEL_PRICES: z
    .string()
    .min(1)
    .optional()
    .describe(
      'USD per million tokens by model over the built-in table (see Cost in docs/configuration.md): JSON, or the path of a JSON file',
    ),
  // Budgets
  AGENTICFIX_TOKEN_BUDGET: int(150_000, 1).describe('tokens of one run, as the service reports them'),
  AGENTICFIX_REQUEST_BUDGET: int(60, 1).describe('model requests of one run'),
  AGENTICFIX_TOOL_CALL_BUDGET: int(120, 1).describe('repository tool calls of one run (`finish` is none)'),
  AGENTICFIX_TIME_BUDGET_S: int(1800, 1).describe('wall clock of one run'),
  AGENTICFIX_TOKEN_RESERVE: int(12_000, 0).describe('tokens left when the model is told to wrap up'),
  // Operator ceilings: a repository config or a rerun command may lower budgets, never raise them past
  // these (default: the budgets above), and may name only allow-listed models.
  AGENTICFIX_MAX_TOKENS: z.coerce
    .number()
    .int()
    .min(1)
    .optional()
    .describe(
      'operator ceiling: a repository config or a rerun command may ask for less tokens, never more (default: the budget; below the budget stops the start-up)',
    ),
  AGENTICFIX_MAX_REQUESTS: z.coerce
    .number()
    .int()
    .min(1)
    .optional()
    .describe('ceiling of the request budget'),
  AGENTICFIX_MAX_TOOL_CALLS: z.coerce
    .number()
    .int()
    .min(1)
    .optional()
    .describe('ceiling of the tool call budget'),
  AGENTICFIX_MAX_TIME_S: z.coerce.number().int().min(1).optional().describe('ceiling of the time budget'),
  // A run's cost in USD: the budget and the ceiling a repository's `max_cost_usd` may lower (unset: none).
  AGENTICFIX_MAX_COST_USD: z.coerce
    .number()
    .positive()
    .finite()
    .optional()
    .describe(
      "USD a run may spend on model requests, and the ceiling of a repository's `max_cost_usd` (see Cost)",
    ),
  AGENTICFIX_MODEL_ALLOWLIST: z
    .string()
    .optional()
    .describe(
      'comma-separated models a repository config or a rerun command may choose (default: the configured one; empty when no name is configured and the provider has no default)',
    ),
  // Revisions per pull request and CI feedback rounds: the repository's default and ceiling.
  AGENTICFIX_MAX_REVISIONS: int(5, 0).describe(
    "revisions per pull request: a repository's default and ceiling (`max_revisions` may be lower; higher is refused by name)",
  ),
  AGENTICFIX_CI_FEEDBACK_MAX_ROUNDS: int(2, 1).describe(
    "CI feedback rounds: a repository's default and ceiling (`ci_feedback.max_rounds`)",
  ),
  // Check apps (slugs, comma-separated) whose failing runs may start a revision; default: GitHub
  // Actions only (a repository's ci_feedback.apps overrides it).
  AGENTICFIX_CHECK_APPS: z
    .string()
    .optional()
    .describe(
      "comma-separated check app slugs whose failing runs may start a revision (unset: github-actions only; a repository's `ci_feedback.apps` replaces it)",
    ),
  // Context policy
  AGENTICFIX_OBSERVATION_MAX_CHARS: int(12_000, 200).describe(
    'longest tool observation sent to the model (growing fields are cut to fit, by meaning for test output; `read_file` and `list_files` pages are made to fit it whole)',
  ),
  AGENTICFIX_KEEP_FULL_OBSERVATIONS: int(1, 1).describe('newest observations never compacted'),
  // Older whole observations compacted at once past this; low, because each compaction makes what follows
  // its start be paid for uncached again (the context benchmark measures it).
  AGENTICFIX_CONTEXT_COMPACT_TOKENS: int(100, 0).describe(
    'older whole observations are compacted together past this many tokens',
  ),
  AGENTICFIX_CONTEXT_POLICY: bool(true).describe('`false` sends the full history (benchmark baseline)'),
  // Agent loop
  AGENTICFIX_MAX_FORMAT_ERRORS: int(3, 1).describe('malformed replies in a row before the run stops'),
  AGENTICFIX_NO_EDIT_NUDGES: int(2, 0).describe('nudges to a model that does not edit before the run stops'),
  AGENTICFIX_LOOP_REPEAT: int(3, 2).describe('identical calls in a row counted as a loop'),
  // Verification
  AGENTICFIX_FLAKY_RERUNS: int(2, 0).describe('judge re-runs of failing cells'),
  AGENTICFIX_MAX_REPORT_MB: int(32, 1).describe('largest test report the judge reads'),
  // App
  AGENTICFIX_CONCURRENCY: int(2, 1).describe('concurrent runs of the app (or of one worker)'),
  // On SIGTERM (serve running runs, a worker): no more runs; running ones get this long to finish,
  // then a worker hands them back to the queue and serve ends them `interrupted`, telling the issue.
  AGENTICFIX_DRAIN_S: int(600, 0).describe(
    'on SIGTERM serve (running runs itself) and workers take no more runs and give running ones this long to finish; then a worker hands them back to the queue, serve ends them `interrupted` and tells their issues',
  ),
  AGENTICFIX_LABEL: z.string().min(1).default('agenticfix').describe('the trigger label'),
  // The handle review comments mention to ask for a revision (`revise_on: [mention]`).
  AGENTICFIX_MENTION: z
    .string()
    .regex(/^@[A-Za-z0-9][A-Za-z0-9-]{0,38}$/, 'an @handle')
    .default('@agenticfix')
    .describe('the handle review comments mention to ask for a revision (`revise_on: [mention]`)'),
  AGENTICFIX_DB_PATH: z
    .string()
    .min(1)
    .optional()
    .describe('the SQLite run store (default: `<home>/runs.sqlite`)'),
  // Distributed: the run store in PostgreSQL (instead of SQLite at AGENTICFIX_DB_PATH) ...
  AGENTICFIX_DATABASE_URL: z
    .url({ protocol: /^postgres(ql)?$/ })
    .optional()
    .describe('the run store in PostgreSQL (`postgres://…`) instead of SQLite'),
  AGENTICFIX_DATABASE_SCHEMA: z
    .string()
    .regex(/^[a-z_][a-z0-9_]*$/)
    .default('public')
    .describe('PostgreSQL schema of the run store'),
  // ... and the queue in Redis (BullMQ), served by `agenticfix worker` processes.
  AGENTICFIX_REDIS_URL: z
    .url({ protocol: /^rediss?$/ })
    .optional()
    .describe('the queue in Redis, run by `agenticfix worker` processes; needs AGENTICFIX_DATABASE_URL'),
  AGENTICFIX_QUEUE_NAME: z
    .string()
    .regex(/^[\w-]{1,64}$/)
    .default('agenticfix-runs')
    .describe("the queue's name in Redis"),
  AGENTICFIX_WORKER_ID: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe("a worker's name in the run store (`worker` column; default: host:pid)"),
  AGENTICFIX_WORKER_LOCK_MS: int(30_000, 500).describe(
    'a worker silent this long is dead: its runs end `interrupted` (their issues are told), or run again once',
  ),
  AGENTICFIX_REQUEUE_STALLED: bool(false).describe(
    "a dead worker's run is run again once (else it ends interrupted)",
  ),
  AGENTICFIX_INSTALLATION_CONCURRENCY: int(0, 0).describe(
    'runs of one installation at once across all workers, the others wait in the queue (0: no limit)',
  ),
  AGENTICFIX_INFRA_RETRIES: int(2, 0).describe(
    'a distributed run whose job failed for the infrastructure (GitHub or the engine unreachable: the job threw) goes back to the queue and is tried again',
  ),
  AGENTICFIX_INFRA_RETRY_BASE_MS: int(30_000, 0).describe(
    'the first wait before that; each next one doubles',
  ),
  AGENTICFIX_STATUS_EDIT_INTERVAL_MS: int(5000, 0).describe(
    'the status comment is edited at most this often (its final state always lands)',
  ),
  AGENTICFIX_KEEP_FAILED_WORKTREES: bool(true).describe(
    'keep the worktrees of runs that did not complete (only while AGENTICFIX_MIN_FREE_MB is free)',
  ),
  AGENTICFIX_WORKTREE_MAX_AGE_H: int(72, 1).describe(
    'worktrees not modified for this long are removed (at start-up and after each run)',
  ),
  AGENTICFIX_MIN_FREE_MB: int(512, 0).describe(
    'a run starts only with this much free where worktrees and run directories live (else the issue is told and nothing runs)',
  ),
  AGENTICFIX_RUNS_KEEP: int(500, 1).describe(
    "run directories kept, newest first, at start-up and hourly (a run's and its judge's `<id>-verify` count as one; those of runs going on are spared)",
  ),
  AGENTICFIX_RUNS_MAX_AGE_D: int(90, 1).describe('run directories older than this are removed'),
  AGENTICFIX_MIRROR_MAX_AGE_D: int(30, 1).describe(
    'a mirror in `cache/` no worktree was made from or fetched into for this long is removed, once it lends none',
  ),
  // Deliveries are forgotten after this, and an event older than this is refused (a replay of a
  // forgotten one); at least GitHub's redelivery window of 3 days, or a redelivery would be refused.
  AGENTICFIX_DELIVERY_MAX_AGE_D: int(7, 3).describe(
    "webhook deliveries (ids and body hashes, which stop replays) are forgotten this long after they came; an event older than this (GitHub's time, from the signed body) is refused; at least GitHub's redelivery window of 3 days",
  ),
  AGENTICFIX_GITHUB_WRITE_INTERVAL_MS: int(1000, 0).describe(
    "pace of GitHub writes beyond a burst (a run's handful go at once; 3x for notifying ones: at most 26 a minute, GitHub allows 80)",
  ),
  AGENTICFIX_GITHUB_RETRY_BASE_MS: int(1000, 0).describe('unit of Retry-After and of the 5xx back-off'),
  AGENTICFIX_GITHUB_TIMEOUT_MS: int(30_000, 100).describe(
    'one GitHub request; a timed-out one is retried with the 5xx back-off',
  ),
  AGENTICFIX_PUBLISH_RETRY_BASE_S: int(60, 0).describe(
    'a verified run whose publishing failed waits in `publish_pending`: first wait before publishing again, each next one doubled, ten tries (see docs/operating.md)',
  ),
  AGENTICFIX_WEBHOOK_MAX_BYTES: int(25_000_000, 1024).describe(
    'largest webhook body taken in (GitHub sends at most 25 MB); larger ones get 413 before any buffering or signature work',
  ),
  // All webhook bodies being read at once, and how long one may take: slow or unsigned senders cannot hold memory.
  AGENTICFIX_WEBHOOK_INFLIGHT_MB: int(64, 1).describe(
    'webhook bodies being read at once, all connections together; past it deliveries get 503',
  ),
  AGENTICFIX_WEBHOOK_BODY_TIMEOUT_S: int(30, 1).describe(
    'a webhook body not received within this is refused (408)',
  ),
  AGENTICFIX_OUTSIDER_REPLY_INTERVAL_S: int(3600, 0).describe(
    'people without write access get at most one reply per issue in this interval',
  ),
  // Observability: a worker's /healthz, /ping and /metrics listener (serve has them on its own port)
  AGENTICFIX_WORKER_PORT: int(3001, 0).describe(
    'where a worker answers /healthz, /ping and /metrics (serve answers them on its own port)',
  ),
  AGENTICFIX_WORKER_HOST: z.string().min(1).default('0.0.0.0').describe('the address of the worker listener'),
  // Run pages (src/web): where people reach serve, and the app's OAuth client for signing them in.
  AGENTICFIX_PUBLIC_URL: z
    .url({ protocol: /^https?$/ })
    .transform((u) => u.replace(/\/+$/, ''))
    .optional()
    .describe(
      "serve's address as people reach it (`https://…`): run pages are linked from the status and PR comments",
    ),
  CLIENT_ID: z
    .string()
    .min(1)
    .optional()
    .describe("the GitHub App's client ID: people sign in to the run pages with GitHub"),
  CLIENT_SECRET: z.string().min(1).optional().describe("the GitHub App's client secret (with CLIENT_ID)"),
  // The same client as `agenticfix setup` (Probot's manifest flow) writes it; CLIENT_ID/CLIENT_SECRET win.
  GITHUB_CLIENT_ID: z
    .string()
    .min(1)
    .optional()
    .describe('CLIENT_ID as `agenticfix setup` writes it (CLIENT_ID wins when both are set)'),
  GITHUB_CLIENT_SECRET: z
    .string()
    .min(1)
    .optional()
    .describe('CLIENT_SECRET as `agenticfix setup` writes it (CLIENT_SECRET wins)'),
  // A TLS proxy in front of serve: its X-Forwarded-Proto says whether the browser came over https.
  AGENTICFIX_TRUST_PROXY: bool(false).describe(
    'serve is behind a TLS proxy: its X-Forwarded-Proto decides whether sign-in cookies are `Secure` (set only when the proxy sets that header itself)',
  ),
  LOG_LEVEL: z
    .enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'])
    .default('info')
    .describe('as Probot: trace, debug, info, warn, error, fatal or silent'),
  // As Probot: `pretty` (readable lines) or `json` (one object a line, for collectors); default json
  LOG_FORMAT: z
    .enum(['pretty', 'json'])
    .default('json')
    .describe('as Probot: json (one object a line, for collectors) or pretty (readable lines)'),
  AGENTICFIX_CHECK_TIMEOUT_S: int(5, 1).describe(
    'each start-up check (model, Docker, Redis, PostgreSQL) waits this long',
  ),
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
