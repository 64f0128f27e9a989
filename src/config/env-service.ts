import { z } from 'zod';
import { bool, int } from './setting.js';

/**
 * The settings of the app as a service (serve, workers, the run store, GitHub, webhooks, run pages, logs):
 * part of ENV_SCHEMA (env.ts), kept apart only for the files' length. A new setting is one entry here or there.
 */
export const SERVICE_SETTINGS = {
  // App
  AGENTICFIX_CONCURRENCY: int(2, 1).describe(
    "concurrent runs of the app (or of one worker); a run's attempts beyond its first take free slots too, so attempts run side by side where there is room",
  ),
  AGENTICFIX_INSTALLATION_CONCURRENCY: int(0, 0).describe(
    "runs of one installation at once (serve's, or across all workers), the others wait in the queue; a run's attempts running beside it count too (0: no limit)",
  ),
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
  AGENTICFIX_INFRA_RETRIES: int(2, 0).describe(
    'a distributed run whose job failed for the infrastructure (GitHub or the engine unreachable: the job threw) goes back to the queue and is tried again',
  ),
  AGENTICFIX_INFRA_RETRY_BASE_MS: int(30_000, 0).describe(
    'the first wait before that; each next one doubles',
  ),
  AGENTICFIX_STORE_RETRY_S: int(300, 0).describe(
    'a run-state write the store cannot take for now (PostgreSQL down, SQLite locked) is tried again with back-off for this long in all; then serve ends the run `interrupted` and tells its issue',
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
    "a request's body not received within this after its headers is refused (408) and its connection closed: a webhook delivery's, and any request's on every port the app listens on",
  ),
  // Each port the app listens on: every connection holds a file descriptor, and idle ones cost a visitor nothing.
  AGENTICFIX_HTTP_MAX_CONNECTIONS: int(4096, 1).describe(
    "open connections at once of each port the app listens on (serve's: webhooks, run pages, /healthz; a worker's /healthz and /metrics; setup's page); past it a new one is closed unanswered. Room for a burst of 1,000 deliveries at once; keep it under the process's hard file limit (Node raises its soft limit to that; systemd: LimitNOFILE)",
  ),
  AGENTICFIX_HTTP_HEADERS_TIMEOUT_S: int(10, 1).describe(
    "a connection to any port the app listens on that has not sent a request's headers within this is answered 408 and closed (GitHub, browsers and Prometheus send them at once)",
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
};
