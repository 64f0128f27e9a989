import { ENV_SCHEMA, type EnvName } from './env.js';
import { BUILTIN_PRICES } from './prices.js';

/**
 * One line per setting, for the README's table and `.env.example` (`scripts/settings-doc.mjs` writes both;
 * a test keeps them in sync). Keyed by the schema, so a new setting without a line fails the type check.
 */
const DOCS: Record<EnvName, string> = {
  AGENTICFIX_HOME: 'repository mirrors (`cache/`), worktrees (`worktrees/`), the run store',
  AGENTICFIX_CACHE_DIR: 'repository mirrors (default: `<home>/cache`)',
  AGENTICFIX_WORKTREE_DIR: 'worktrees of runs (default: `<home>/worktrees`)',
  AGENTICFIX_RUNS_DIR: 'one folder per run: events, state, result, patch, Dockerfile, judge reports',
  AGENTICFIX_HOST_HOME:
    'the app in a container: the Docker host path of the directory mounted at AGENTICFIX_HOME',
  AGENTICFIX_MAX_FILE_BYTES: 'largest file the tools read',
  AGENTICFIX_MAX_READ_LINES: 'lines of one `read_file` page',
  AGENTICFIX_MAX_TEST_TIMEOUT_S: "ceiling of one test run's wall clock",
  AGENTICFIX_MIN_TEST_TIMEOUT_S: 'floor of a test limit derived from the measured suite',
  AGENTICFIX_MAX_OUTPUT_BYTES: 'output kept of a test run (first and last half of each stream)',
  AGENTICFIX_MAX_LIST_ENTRIES: 'entries of one listing',
  AGENTICFIX_MAX_SCANNED_ENTRIES: 'entries one search scans',
  AGENTICFIX_MAX_WORKTREE_MB: 'a worktree larger than this after a test run ends the run',
  AGENTICFIX_MAX_WORKTREE_FILES:
    'a worktree with more entries (files, directories, links) than this after a test run ends the run',
  AGENTICFIX_MAX_PATCH_FILE_BYTES: 'new or changed files over this are left out of the patch',
  AGENTICFIX_RUN_COMMAND_LOCAL:
    '`run_command` with the local sandbox, that is on the host (trusted demos only)',
  AGENTICFIX_BASE_IMAGE: 'the local base image of environments',
  AGENTICFIX_SANDBOX_MEMORY_MB: "a test container's memory",
  AGENTICFIX_SANDBOX_CPUS: "a test container's CPUs",
  AGENTICFIX_SANDBOX_PIDS: "a test container's process limit",
  AGENTICFIX_SANDBOX_TMPFS_MB: "a test container's /tmp",
  AGENTICFIX_RUNTIME: 'OCI runtime of test and judge containers: `runc` or `runsc` (gVisor)',
  AGENTICFIX_BUILD_TIMEOUT_S: 'wall clock of one image build',
  AGENTICFIX_BUILD_MAX_OUTPUT_MB: 'build output past which the build is stopped',
  AGENTICFIX_BUILD_CONTEXT_MAX_MB: 'worktree snapshot sent as build context (held in memory)',
  AGENTICFIX_IMAGE_KEEP: 'environment images kept, newest first',
  AGENTICFIX_IMAGE_MAX_AGE_H: 'environment images older than this are removed',
  AGENTICFIX_BUILD_NETWORK:
    'where builds run: `isolated`, `preinstalled` or `unrestricted` (see Build network)',
  AGENTICFIX_BUILD_DNS: 'comma-separated resolvers builds may reach (default: those of /etc/resolv.conf)',
  AGENTICFIX_BUILD_PROXY: '`<IPv4>:<port>`: the only other destination builds may reach',
  AGENTICFIX_BUILD_CA_FILE: 'PEM bundle of extra certificate authorities trusted inside every build',
  HTTPS_PROXY: "builds' proxy when AGENTICFIX_BUILD_PROXY is unset (build arguments only)",
  https_proxy: 'as HTTPS_PROXY',
  HTTP_PROXY: 'as HTTPS_PROXY, when that is unset',
  http_proxy: 'as HTTP_PROXY',
  NO_PROXY: 'NO_PROXY for builds',
  no_proxy: 'as NO_PROXY',
  AGENTICFIX_IMAGE_MAX_GB: 'environment images GC removes the oldest of while they hold more',
  AGENTICFIX_IMAGE_LEASE_TTL_S: 'an image lease not renewed for this long is reclaimed',
  AGENTICFIX_MODEL_PROVIDER: 'deepseek, openai, gemini, qwen, claude, ollama, vllm, llamacpp or custom',
  AGENTICFIX_MODEL_NAME: 'model name (each preset has a default where one makes sense)',
  AGENTICFIX_MODEL_API_KEY: 'the key; never logged, traced, prompted or passed to a container',
  AGENTICFIX_MODEL_BASE_URL: "overrides the preset's URL (required for custom)",
  AGENTICFIX_MODEL_TIMEOUT_S: 'one model request',
  AGENTICFIX_MODEL_MAX_RETRIES: 'retries of a 429, 5xx or timed-out request',
  AGENTICFIX_MODEL_RETRY_BASE_MS: 'first back-off of those retries; unit of the retry-after wait',
  AGENTICFIX_MODEL_MAX_REPLY_MB:
    'a model reply larger than this is refused as model_error before it is parsed',
  AGENTICFIX_MODEL_PRICES:
    'USD per million tokens by model over the built-in table (see Cost): JSON, or the path of a JSON file',
  AGENTICFIX_TOKEN_BUDGET: 'tokens of one run, as the service reports them',
  AGENTICFIX_REQUEST_BUDGET: 'model requests of one run',
  AGENTICFIX_TOOL_CALL_BUDGET: 'repository tool calls of one run',
  AGENTICFIX_TIME_BUDGET_S: 'wall clock of one run',
  AGENTICFIX_TOKEN_RESERVE: 'tokens left when the model is told to wrap up',
  AGENTICFIX_MAX_TOKENS: 'ceiling a repository config or a command may ask for (default: the budget)',
  AGENTICFIX_MAX_REQUESTS: 'ceiling of the request budget',
  AGENTICFIX_MAX_TOOL_CALLS: 'ceiling of the tool call budget',
  AGENTICFIX_MAX_TIME_S: 'ceiling of the time budget',
  AGENTICFIX_MAX_COST_USD:
    "USD a run may spend on model requests, and the ceiling of a repository's `max_cost_usd` (see Cost)",
  AGENTICFIX_MODEL_ALLOWLIST:
    'comma-separated models a repository or a command may choose (default: the configured one)',
  AGENTICFIX_MAX_REVISIONS: "revisions per pull request: a repository's default and ceiling",
  AGENTICFIX_MAX_ATTEMPTS:
    "ceiling of a repository's `attempts` and of `/agenticfix rerun attempts=N`: independent tries of one run",
  AGENTICFIX_CI_FEEDBACK_MAX_ROUNDS: "CI feedback rounds: a repository's default and ceiling",
  AGENTICFIX_CHECK_APPS:
    'comma-separated check apps whose failing runs may start a revision (unset: github-actions only)',
  AGENTICFIX_OBSERVATION_MAX_CHARS: 'longest tool observation sent to the model',
  AGENTICFIX_KEEP_FULL_OBSERVATIONS: 'newest observations never compacted',
  AGENTICFIX_CONTEXT_COMPACT_TOKENS: 'older whole observations are compacted together past this many tokens',
  AGENTICFIX_CONTEXT_POLICY: '`false` sends the full history (benchmark baseline)',
  AGENTICFIX_MAX_FORMAT_ERRORS: 'malformed replies in a row before the run stops',
  AGENTICFIX_NO_EDIT_NUDGES: 'nudges to a model that does not edit before the run stops',
  AGENTICFIX_LOOP_REPEAT: 'identical calls in a row counted as a loop',
  AGENTICFIX_FLAKY_RERUNS: 'judge re-runs of failing cells',
  AGENTICFIX_MAX_REPORT_MB: 'largest test report the judge reads',
  AGENTICFIX_CONCURRENCY: 'concurrent runs of the app (or of one worker)',
  AGENTICFIX_DRAIN_S:
    'on SIGTERM running runs get this long to finish; then a worker hands them back to the queue, serve ends them `interrupted` and tells their issues',
  AGENTICFIX_LABEL: 'the trigger label',
  AGENTICFIX_MENTION: 'the handle review comments mention to ask for a revision',
  AGENTICFIX_DB_PATH: 'the SQLite run store (default: `<home>/runs.sqlite`)',
  AGENTICFIX_DATABASE_URL: 'the run store in PostgreSQL (`postgres://…`) instead of SQLite',
  AGENTICFIX_DATABASE_SCHEMA: 'PostgreSQL schema of the run store',
  AGENTICFIX_REDIS_URL:
    'the queue in Redis, run by `agenticfix worker` processes; needs AGENTICFIX_DATABASE_URL',
  AGENTICFIX_QUEUE_NAME: "the queue's name in Redis",
  AGENTICFIX_WORKER_ID: "a worker's name in the run store (default: host:pid)",
  AGENTICFIX_WORKER_LOCK_MS: 'a worker silent this long is dead: its runs stalled',
  AGENTICFIX_REQUEUE_STALLED: "a dead worker's run is run again once (else it ends interrupted)",
  AGENTICFIX_INSTALLATION_CONCURRENCY: 'runs of one installation at once across workers (0: no limit)',
  AGENTICFIX_INFRA_RETRIES: 'a distributed run whose job failed for the infrastructure is tried again',
  AGENTICFIX_INFRA_RETRY_BASE_MS: 'the first wait before that; each next one doubles',
  AGENTICFIX_STATUS_EDIT_INTERVAL_MS: 'the status comment is edited at most this often',
  AGENTICFIX_KEEP_FAILED_WORKTREES: 'keep the worktrees of runs that did not complete',
  AGENTICFIX_WORKTREE_MAX_AGE_H: 'worktrees not modified for this long are removed',
  AGENTICFIX_MIN_FREE_MB: 'a run starts only with this much free where worktrees and runs live',
  AGENTICFIX_RUNS_KEEP: 'run directories kept, newest first',
  AGENTICFIX_RUNS_MAX_AGE_D: 'run directories older than this are removed',
  AGENTICFIX_MIRROR_MAX_AGE_D: 'a mirror no run used for this long is removed',
  AGENTICFIX_GITHUB_WRITE_INTERVAL_MS: 'pace of GitHub writes beyond a burst (3x for notifying ones)',
  AGENTICFIX_GITHUB_RETRY_BASE_MS: 'unit of Retry-After and of the 5xx back-off',
  AGENTICFIX_GITHUB_TIMEOUT_MS: 'one GitHub request; a timed-out one is retried',
  AGENTICFIX_PUBLISH_RETRY_BASE_S: 'a judged run whose publishing failed: first wait, doubling',
  AGENTICFIX_WEBHOOK_MAX_BYTES: 'largest webhook body taken in (GitHub sends at most 25 MB)',
  AGENTICFIX_WEBHOOK_INFLIGHT_MB:
    'webhook bodies being read at once, all connections together; past it deliveries get 503',
  AGENTICFIX_WEBHOOK_BODY_TIMEOUT_S: 'a webhook body not received within this is refused (408)',
  AGENTICFIX_OUTSIDER_REPLY_INTERVAL_S:
    'people without write access get at most one reply per issue in this interval',
  AGENTICFIX_DELIVERY_MAX_AGE_D:
    'webhook deliveries are forgotten this long after they came; older events are refused (at least 3)',
  AGENTICFIX_CHECK_TIMEOUT_S: 'each start-up check (model, Docker, Redis, PostgreSQL) waits this long',
  AGENTICFIX_WORKER_PORT:
    'where a worker answers /healthz, /ping and /metrics (serve answers them on its own port)',
  AGENTICFIX_WORKER_HOST: 'the address of the worker listener',
  AGENTICFIX_PUBLIC_URL:
    "serve's address as people reach it (`https://…`): run pages are linked from the status and PR comments",
  CLIENT_ID: "the GitHub App's client ID: people sign in to the run pages with GitHub",
  CLIENT_SECRET: "the GitHub App's client secret (with CLIENT_ID)",
  GITHUB_CLIENT_ID: 'CLIENT_ID as `agenticfix setup` writes it (CLIENT_ID wins when both are set)',
  GITHUB_CLIENT_SECRET: 'CLIENT_SECRET as `agenticfix setup` writes it (CLIENT_SECRET wins)',
  AGENTICFIX_TRUST_PROXY:
    'serve is behind a TLS proxy: its X-Forwarded-Proto decides whether sign-in cookies are `Secure` (set only when the proxy sets that header itself)',
  LOG_LEVEL: 'as Probot: trace, debug, info, warn, error, fatal or silent',
  LOG_FORMAT: 'as Probot: json (one object a line, for collectors) or pretty (readable lines)',
};

/** Each setting's name, its default as the app reads it (null: unset) and its line. */
export function settings(): { name: EnvName; default: string | null; doc: string }[] {
  return (Object.keys(ENV_SCHEMA.shape) as EnvName[]).map((name) => {
    const parsed = ENV_SCHEMA.shape[name].safeParse(undefined);
    const value: unknown = parsed.success ? parsed.data : undefined;
    return { name, default: value === undefined ? null : String(value), doc: DOCS[name] };
  });
}

const cell = (s: string) => s.replace(/\|/g, '\\|');

/** The README's table of every setting, between the markers. */
export function settingsTable(): string {
  return [
    '| variable | default | |',
    '|---|---|---|',
    ...settings().map(
      (s) =>
        `| \`${s.name}\` | ${s.default === null ? 'unset' : `\`${cell(s.default)}\``} | ${cell(s.doc)} |`,
    ),
  ].join('\n');
}

/** `.env.example`: every setting commented out with its default. */
export function envExample(): string {
  const app = [
    '# The GitHub App (required by serve and worker; `agenticfix doctor` checks them)',
    'APP_ID=',
    '# PRIVATE_KEY="-----BEGIN RSA PRIVATE KEY-----\\n…"',
    'PRIVATE_KEY_PATH=',
    'WEBHOOK_SECRET=',
    '# WEBHOOK_PROXY_URL=',
    '# GHE_HOST=',
    '# PORT=3000',
    '# HOST=0.0.0.0',
    '',
    '# AgenticFix settings (generated from src/config/config.ts by `node scripts/settings-doc.mjs`)',
  ];
  return `${[...app, ...settings().flatMap((s) => [`# ${s.doc}`, `# ${s.name}=${s.default ?? ''}`])].join('\n')}\n`;
}

export const TABLE_START = '<!-- settings:start (generated by `node scripts/settings-doc.mjs`) -->';
export const TABLE_END = '<!-- settings:end -->';

/** `text` with what is between the markers replaced by `content`. */
function between(text: string, startMarker: string, endMarker: string, content: string): string {
  const start = text.indexOf(startMarker);
  const end = text.indexOf(endMarker);
  if (start < 0 || end < start) throw new Error(`README.md has no ${startMarker} … ${endMarker} markers`);
  return `${text.slice(0, start + startMarker.length)}\n${content}\n${text.slice(end)}`;
}

/** The README with its settings table replaced by the generated one. */
export function withSettingsTable(readme: string): string {
  return between(readme, TABLE_START, TABLE_END, settingsTable());
}

export const PRICES_START = '<!-- prices:start (generated by `node scripts/settings-doc.mjs`) -->';
export const PRICES_END = '<!-- prices:end -->';

/** The README's table of the built-in prices (src/config/prices.ts), USD per million tokens. */
export function pricesTable(): string {
  return [
    '| model | input | cached input | output |',
    '|---|---|---|---|',
    ...Object.entries(BUILTIN_PRICES).map(
      ([m, x]) => `| \`${m}\` | ${x.input} | ${x.cached_input} | ${x.output} |`,
    ),
  ].join('\n');
}

/** The README with its table of built-in prices replaced by the generated one. */
export function withPricesTable(readme: string): string {
  return between(readme, PRICES_START, PRICES_END, pricesTable());
}
