import { z } from 'zod';
import { PROVIDERS } from './providers.js';
import { nearest } from './did-you-mean.js';
import { SERVICE_SETTINGS } from './env-service.js';
import { bool, int, MiB } from './setting.js';

export { MiB };

/**
 * Every setting the app reads from its environment, with its default, its check and its description
 * (`.describe`, last in each chain): the one schema the settings (config.ts), docs/configuration.md and
 * `.env.example` (settings-doc.ts) derive from. A new setting is one entry here (or in env-service.ts).
 */
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
  // A repository's remote is untrusted: a huge or trickling one must not hold a worker or fill the disk.
  AGENTICFIX_FETCH_TIMEOUT_S: int(600, 1).describe(
    "wall clock of one clone or fetch of a repository's mirror: past it git and its helpers are killed, what they wrote is removed and the run fails",
  ),
  AGENTICFIX_FETCH_MAX_MB: int(4096, 1).describe(
    'growth of a mirror during one clone or fetch past which it is stopped the same way; a fetch lands in a quarantine beside the mirror and reaches it only within the caps (a clone over them is removed)',
  ),
  AGENTICFIX_FETCH_MAX_FILES: int(100_000, 1).describe(
    'files one clone or fetch of a mirror may write (each new or changed ref is one, each loose object one): past it, stopped the same way (a flood of refs)',
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
  AGENTICFIX_BUILD_LOCK_DIR: z
    .string()
    .min(1)
    .optional()
    .describe(
      'lock files by which processes sharing the Docker engine build one environment image once (default: `<home>/build-locks`); workers of one host with homes of their own name one shared directory',
    ),
  AGENTICFIX_ENGINE_CALL_TIMEOUT_S: int(30, 1).describe(
    'a Docker engine request that answers at once when the engine is well (create, start, kill, inspect, remove, list, disk usage) is given up after this long: a hung engine (it answers pings only) ends the run as an infrastructure error instead of holding it',
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
  AGENTICFIX_REVISION_MAX_DIFF_MB: int(16, 1).describe(
    "a revision's diff of the pull request against its base (of which the model sees head and tail) larger than this fails the revision run, unread",
  ),
  AGENTICFIX_MAX_ATTEMPTS: int(3, 1).describe(
    "ceiling of a repository's `attempts` and of `/agenticfix rerun attempts=N`: independent tries of one run, each repaired and judged on its own",
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
  // A stub that saves less costs more in re-reads (a turn each) than the result costs to carry, cached.
  // 80: the context benchmark bills least from 30 to 80 with no more re-reads (100 stubbed a listing late).
  AGENTICFIX_CONTEXT_STUB_MIN_SAVING_TOKENS: int(80, 0).describe(
    'an older observation is compacted only when its stub saves at least this many tokens',
  ),
  AGENTICFIX_CONTEXT_SMALL_WHOLE_MAX_TOKENS: int(4000, 0).describe(
    'older observations kept whole for being small are compacted together past this many tokens',
  ),
  // A window of code the model is working on is what it reads again once stubbed (a turn each).
  AGENTICFIX_CONTEXT_READ_WINDOW_MAX_TOKENS: int(1000, 0).describe(
    'a `read_file` result up to this many tokens stays whole until its file changes (0: off)',
  ),
  // Stubs that carry the lines a later call needs, so the model need not spend a turn reading them
  // again (the context benchmark counts those turns: src/bench/rereads.ts).
  AGENTICFIX_CONTEXT_STUB_HEAD_LINES: int(10, 0).describe(
    "a compacted `read_file` page that began at line 1 keeps the file's first this many lines (0: off)",
  ),
  AGENTICFIX_CONTEXT_SEARCH_AROUND_LINES: int(8, 0).describe(
    '`search_code` shows again this many lines either side of a match that lies in a compacted read of an unchanged file (0: off)',
  ),
  AGENTICFIX_CONTEXT_POLICY: bool(true).describe('`false` sends the full history (benchmark baseline)'),
  // Agent loop
  AGENTICFIX_MAX_FORMAT_ERRORS: int(3, 1).describe('malformed replies in a row before the run stops'),
  AGENTICFIX_NO_EDIT_NUDGES: int(2, 0).describe('nudges to a model that does not edit before the run stops'),
  AGENTICFIX_LOOP_REPEAT: int(3, 2).describe('identical calls in a row counted as a loop'),
  // Verification
  AGENTICFIX_FLAKY_RERUNS: int(2, 0).describe('judge re-runs of failing cells'),
  AGENTICFIX_MAX_REPORT_MB: int(32, 1).describe('largest test report the judge reads'),
  // The app as a service: serve, workers, the run store, GitHub, webhooks, run pages, logs.
  ...SERVICE_SETTINGS,
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
