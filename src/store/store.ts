import { z } from 'zod';
import { capMiddle } from '../trace/cap.js';
import { FEEDBACK } from './feedback.js';

export {
  holderGone,
  INSTANCE_ROW,
  INSTANCE_STALE_MS,
  newInstance,
  StoreInUseError,
  type InstanceHolder,
} from './instance.js';

/**
 * Persistent record of every run and webhook delivery (deliveries are pruned after
 * AGENTICFIX_DELIVERY_MAX_AGE_D, runs after AGENTICFIX_RUNS_MAX_AGE_D). One interface, two implementations that pass
 * one contract suite (test/support/store-contract.ts): embedded SQLite for a single process
 * (sqlite-store.ts) and PostgreSQL shared by `serve` and workers on many machines (postgres-store.ts).
 * Both apply the same MIGRATIONS. Async because PostgreSQL is.
 */

export const RUN_STATES = [
  'queued',
  'running',
  'publish_pending', // judged; publishing failed and is tried again (pending.ts)
  'done',
  'cancelled',
  'superseded',
  'interrupted',
  'failed',
] as const;
export type RunState = (typeof RUN_STATES)[number];
/** A run not over yet: an issue has at most one (the queue supersedes the older). */
export const ACTIVE_STATES = ['queued', 'running'] as const satisfies readonly RunState[];
export const isActive = (state: RunState): boolean => (ACTIVE_STATES as readonly RunState[]).includes(state);
/** ACTIVE_STATES as an SQL list, for the stores' queries. */
export const ACTIVE_SQL = `(${ACTIVE_STATES.map((s) => `'${s}'`).join(', ')})`;
export const AFTER_VERDICT = 'the app stopped after the verdict: publishing is resumed'; // then publish_pending

/** A run on the issue (label, rerun) or a revision of its pull request (command, review, mention, checks). */
export const TRIGGERS = ['label', 'rerun', 'revise', 'review', 'mention', 'checks'] as const;

// Built once: building a zod schema costs far more than parsing with it (it was built per row read).
const COMMENT_IDS = z.array(z.number().int());

export const RUN_ROW = z.strictObject({
  id: z.string(),
  owner: z.string(),
  repo: z.string(),
  issue: z.number().int(),
  installation_id: z.number().int(),
  trigger: z.enum(TRIGGERS),
  triggered_by: z.string(),
  delivery_id: z.string(),
  model: z.string().nullable(), // comment override
  token_budget: z.number().int().nullable(), // comment override
  base_commit: z.string(),
  state: z.enum(RUN_STATES),
  stop_reason: z.string().nullable(),
  verdict: z.string().nullable(),
  tokens: z.number().int().nullable(),
  cost_usd: z.number().nullable(), // what the run's model requests cost; null: unknown (a model without a price)
  error: z.string().nullable(),
  created_at: z.string(),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
  pr_number: z.number().int().nullable(),
  status_comment_id: z.number().int().nullable(),
  comment_ids: z.string().transform((s) => COMMENT_IDS.parse(JSON.parse(s))),
  patch_path: z.string().nullable(),
  run_dir: z.string().nullable(),
  superseded_by: z.string().nullable(),
  // The issue as it was when the run was triggered: the run works on this, never on a later edit.
  issue_title: z.string().nullable(),
  issue_body: z.string().nullable(),
  issue_updated_at: z.string().nullable(),
  instance_id: z.string().nullable(), // the app instance that created the run
  // Revisions: the number on its pull request, the PR head it starts from, and the feedback as given.
  revision: z.number().int().nullable(),
  head_commit: z.string().nullable(),
  feedback: z
    .string()
    .nullable()
    .transform((s) => (s === null ? null : FEEDBACK.parse(JSON.parse(s)))),
  pushed_commit: z.string().nullable(), // the commit the run pushed to its branch
  worker: z.string().nullable(), // the worker that ran it (`host:pid` or AGENTICFIX_WORKER_ID); its run_dir is there
  publish: z.string().nullable(), // publish_pending: what publishing needs, as JSON (pipeline/pending.ts)
  attempts_asked: z.number().int().nullable(), // comment override of the repository's `attempts`
  attempts: z.string().nullable(), // each attempt's outcome, as JSON (pipeline/attempts.ts); null: one attempt
  // How often a worker took the run up (0: never): its owner with `worker` (RunStore.updateIf). Not `attempts`.
  attempt: z.number().int(),
});

export type RunRecord = z.output<typeof RUN_ROW>;

export type NewRun = Pick<
  RunRecord,
  'owner' | 'repo' | 'issue' | 'installation_id' | 'trigger' | 'triggered_by' | 'delivery_id' | 'base_commit'
> &
  Partial<
    Pick<
      RunRecord,
      | 'model'
      | 'token_budget'
      | 'attempts_asked'
      | 'issue_title'
      | 'issue_body'
      | 'issue_updated_at'
      | 'pr_number'
      | 'revision'
      | 'head_commit'
      | 'feedback'
      | 'status_comment_id'
    >
  >;

export const FIXED_COLUMNS = [
  'id',
  'owner',
  'repo',
  'issue',
  'installation_id',
  'delivery_id',
  'created_at',
  'comment_ids',
  'instance_id',
  'feedback',
] as const;

export type RunUpdate = Partial<Omit<RunRecord, (typeof FIXED_COLUMNS)[number]>>;

/** Who owns a run as it was read: a state change made on its strength holds only while this is still so. */
export type RunOwner = Pick<RunRecord, 'state' | 'worker' | 'attempt'>;
export const ownerOf = ({ state, worker, attempt }: RunOwner): RunOwner => ({ state, worker, attempt });

const UPDATABLE = new Set(
  Object.keys(RUN_ROW.shape).filter((k) => !(FIXED_COLUMNS as readonly string[]).includes(k)),
);

/**
 * The columns an update sets, in order, with their values; the error is capped. A key that is not an
 * updatable column throws: the names are spliced into SQL.
 */
export function updateColumns(update: RunUpdate): [string, unknown][] {
  const fields = update.error ? { ...update, error: capMiddle(update.error) } : update;
  const set = Object.entries(fields).filter(([, v]) => v !== undefined);
  for (const [k] of set) if (!UPDATABLE.has(k)) throw new Error(`not an updatable run column: ${k}`);
  return set;
}

/** One element of a run's `attempts` as the store sees it: its number and what the pipeline keeps. */
export type AttemptElement = { n: number } & Record<string, unknown>;
const ATTEMPT_ELEMENTS = z.array(z.looseObject({ n: z.number().int() }));

/** `attempts` (a run's column, JSON) with `attempt` set in place of the one of its number, in order. */
export function withAttempt(attempts: string | null, attempt: AttemptElement): AttemptElement[] {
  const all = attempts === null ? [] : ATTEMPT_ELEMENTS.parse(JSON.parse(attempts));
  return [...all.filter((a) => a.n !== attempt.n), attempt].sort((a, b) => a.n - b.n);
}

/**
 * A GitHub write that is never dropped (a run's final status edit, a final comment on its issue): kept
 * in the store until it lands, tried again with back-off by whichever process serves the store.
 */
export const GITHUB_WRITE = z.strictObject({
  /** `<run>:status` for a run's final status edit (a newer one replaces it), else unique. */
  id: z.string(),
  run_id: z.string(),
  installation_id: z.number().int(),
  owner: z.string(),
  repo: z.string(),
  issue: z.number().int(),
  /** The comment to edit; null: a new comment. */
  comment_id: z.number().int().nullable(),
  body: z.string(),
  attempts: z.number().int().min(0),
  next_at: z.string(),
});
export type GitHubWrite = z.output<typeof GITHUB_WRITE>;

/**
 * One event of a run as the store keeps it for run pages (src/web): trace events as the worker writes
 * them, status changes and the judge's report; `seq` orders a run's events, from 1.
 */
export const RUN_EVENT_ROW = z.strictObject({
  run_id: z.string(),
  seq: z.number().int().min(1),
  ts: z.string(),
  type: z.string(),
  body: z.string().transform((s) => z.record(z.string(), z.unknown()).parse(JSON.parse(s))),
});
export type RunEvent = z.output<typeof RUN_EVENT_ROW>;
/** An event to append: its fields (without ts and type) become the body. */
export type NewRunEvent = Pick<RunEvent, 'ts' | 'type' | 'body'>;

/** Filters of the run list; newest first, at most `limit`. */
export interface RunFilter {
  owner?: string;
  repo?: string;
  state?: RunState;
  limit: number;
  /** Newest runs skipped first: the run list's pages. */
  offset?: number;
}

/** A delivery acknowledged but not taken in yet. */
export interface PendingDelivery {
  id: string;
  event: string;
  payload: unknown;
  body_sha256: string | null;
}

/** What `claimDeliveries` found: a new delivery, one seen before under this id, or its body under another id. */
export type Claim = 'new' | 'seen' | 'replay';

/** A webhook delivery to record: `body` is the signed JSON text, kept until its intake is done. */
export interface DeliveryClaim {
  id: string;
  event: string;
  body: string;
  sha256: string | null;
}

export interface RunStore {
  /**
   * Records webhook deliveries (their signed body as it came, with its SHA-256) in one transaction: a
   * burst shares one commit. Per delivery: `seen` when its id was recorded before (GitHub's "redeliver"
   * reuses it); `replay` when the same signed body came before under another delivery id, also earlier
   * in the same batch. Only `new` may act. Hashes are kept as long as the deliveries (pruneDeliveries:
   * AGENTICFIX_DELIVERY_MAX_AGE_D), beyond the days within which GitHub redelivers.
   */
  claimDeliveries(batch: readonly DeliveryClaim[]): Promise<Claim[]>;
  /** The delivery's intake is over: its payload is no longer needed. */
  finishDelivery(deliveryId: string): Promise<void>;
  /** Deliveries acknowledged but not taken in (the app stopped in between), oldest first. */
  pendingDeliveries(): Promise<PendingDelivery[]>;
  /**
   * Lets a redelivery of `deliveryId` act again (its first handling failed before doing anything); its
   * body is free again too, so at most one delivery of a signed body ever acts.
   */
  releaseDelivery(deliveryId: string): Promise<void>;
  /**
   * Whether the endpoint recorded delivery `deliveryId` (after checking its signature): a worker runs
   * only runs that came from one, never a record written straight into the store.
   */
  deliveryRecorded(deliveryId: string): Promise<boolean>;
  /**
   * Forgets deliveries received before `before` (ISO time) whose intake is done and whose run, if any,
   * is over; returns how many. Only with the webhook's freshness check (an event older than the
   * retention is refused): a forgotten body could otherwise act again.
   */
  pruneDeliveries(before: string): Promise<number>;
  /**
   * Forgets the runs over before `before` (ISO time) with their events, kept writes and deliveries, in
   * one transaction; returns how many runs. With the run directories' retention (AGENTICFIX_RUNS_MAX_AGE_D).
   */
  pruneRuns(before: string): Promise<number>;
  /** Records a new queued run; a second run for the same delivery id is refused by the schema. */
  createRun(input: NewRun): Promise<RunRecord>;
  get(id: string): Promise<RunRecord | null>;
  /** Sets the given fields; throws for an unknown run. */
  update(id: string, update: RunUpdate): Promise<RunRecord>;
  /**
   * Compare-and-set: sets the fields only while the run's state, worker and attempt are still `owner`'s
   * (a stalled worker's late end never overwrites a newer attempt's); null when they are not. Throws
   * for an unknown run.
   */
  updateIf(id: string, owner: RunOwner, update: RunUpdate): Promise<RunRecord | null>;
  /**
   * Sets one element of the run's `attempts` (a JSON array of objects with their number `n`, kept in
   * order; pipeline/attempts.ts says what else they hold), atomically against other processes setting
   * theirs; returns all of them as stored. Throws for an unknown run.
   */
  putAttempt(id: string, attempt: AttemptElement): Promise<AttemptElement[]>;
  addComment(id: string, commentId: number): Promise<void>;
  /** Runs of one issue, newest first. */
  forIssue(owner: string, repo: string, issue: number): Promise<RunRecord[]>;
  /** Runs that worked on pull request `pr` (the ones that opened or updated it, and its revisions), newest first. */
  forPr(owner: string, repo: string, pr: number): Promise<RunRecord[]>;
  /** The issue whose run opened pull request `pr`, or null when the app did not open it. */
  issueForPr(owner: string, repo: string, pr: number): Promise<number | null>;
  /** All runs, or those in one state, oldest first. */
  list(state?: RunState): Promise<RunRecord[]>;
  /** Runs matching `filter`, newest first (the run list of the run pages). */
  recent(filter: RunFilter): Promise<RunRecord[]>;
  /**
   * Appends a run's events in order, numbered after those it has (bodies are kept as given: callers
   * cap them, see RunEventLog).
   */
  appendEvents(runId: string, events: readonly NewRunEvent[]): Promise<void>;
  /** A run's events after `afterSeq`, in order, at most `limit`. */
  events(runId: string, afterSeq: number, limit: number): Promise<RunEvent[]>;
  /** Start-up: runs a crash left running become `interrupted` (judged, with a publish record: `publish_pending`); queued stay queued. */
  markInterrupted(): Promise<RunRecord[]>;
  /**
   * Makes this process the one instance serving the store, or throws StoreInUseError naming the live
   * holder. A holder is gone when its heartbeat is older than INSTANCE_STALE_MS or, on this host, when
   * its process no longer exists (so a restart after a crash is not held up).
   */
  acquireInstance(): Promise<void>;
  /** Keeps this instance's claim fresh; false when another instance has taken the store over. */
  heartbeat(): Promise<boolean>;
  /**
   * Claims the one reply per `intervalMs` that people without write access may get on an issue;
   * false when one was posted within the interval. Durable, so a restart does not reset it.
   */
  claimOutsiderReply(owner: string, repo: string, issue: number, intervalMs: number): Promise<boolean>;
  /** Keeps a GitHub write until it lands; one under the same id is replaced (its tries start over). */
  queueWrite(write: Omit<GitHubWrite, 'attempts'>): Promise<void>;
  /** Writes due at `at` (ISO time), oldest due first. */
  dueWrites(at: string): Promise<GitHubWrite[]>;
  /** One more failed try of write `id`: the next is due at `nextAt`. */
  deferWrite(id: string, nextAt: string): Promise<void>;
  /** Write `id` landed (or can never land): it is forgotten. */
  removeWrite(id: string): Promise<void>;
  /** Closes the store; the instance claim (if any) is given up first. */
  close(): Promise<void>;
}

/**
 * Each entry moves the schema one version forward. Append only. Written in the SQL both engines
 * speak; PostgreSQL reads INTEGER as BIGINT (GitHub ids outgrow 32 bits), see postgres-store.ts.
 */
export const MIGRATIONS = [
  `CREATE TABLE runs (
     id TEXT PRIMARY KEY,
     owner TEXT NOT NULL, repo TEXT NOT NULL, issue INTEGER NOT NULL, installation_id INTEGER NOT NULL,
     trigger TEXT NOT NULL, triggered_by TEXT NOT NULL, delivery_id TEXT NOT NULL,
     model TEXT, token_budget INTEGER, base_commit TEXT NOT NULL,
     state TEXT NOT NULL, stop_reason TEXT, verdict TEXT, tokens INTEGER, error TEXT,
     created_at TEXT NOT NULL, started_at TEXT, finished_at TEXT,
     pr_number INTEGER, status_comment_id INTEGER, comment_ids TEXT NOT NULL DEFAULT '[]',
     patch_path TEXT, run_dir TEXT, superseded_by TEXT
   );
   CREATE INDEX runs_issue ON runs (owner, repo, issue, created_at);
   CREATE INDEX runs_state ON runs (state);
   CREATE UNIQUE INDEX runs_delivery ON runs (delivery_id);
   CREATE TABLE deliveries (id TEXT PRIMARY KEY, received_at TEXT NOT NULL);`,
  // A delivery keeps its payload until its intake is done, so a crash after the acknowledgement loses nothing.
  `ALTER TABLE deliveries ADD COLUMN event TEXT;
   ALTER TABLE deliveries ADD COLUMN payload TEXT;
   ALTER TABLE deliveries ADD COLUMN done_at TEXT;
   UPDATE deliveries SET done_at = received_at;`,
  // The issue snapshot taken at trigger time (runs recorded before have none).
  `ALTER TABLE runs ADD COLUMN issue_title TEXT;
   ALTER TABLE runs ADD COLUMN issue_body TEXT;
   ALTER TABLE runs ADD COLUMN issue_updated_at TEXT;`,
  // Replays: a signed body is taken in once, whatever delivery id it comes with. One instance per
  // store (the `instance` row), each run tagged with the instance that created it. Replies to people
  // without write access are rate-limited per issue.
  `ALTER TABLE deliveries ADD COLUMN body_sha256 TEXT;
   CREATE UNIQUE INDEX deliveries_body ON deliveries (body_sha256);
   ALTER TABLE runs ADD COLUMN instance_id TEXT;
   CREATE TABLE instance (
     id INTEGER PRIMARY KEY CHECK (id = 1),
     owner TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL,
     started_at TEXT NOT NULL, heartbeat_at TEXT NOT NULL
   );
   CREATE TABLE outsider_replies (
     owner TEXT NOT NULL, repo TEXT NOT NULL, issue INTEGER NOT NULL, replied_at TEXT NOT NULL,
     PRIMARY KEY (owner, repo, issue)
   );`,
  // Revisions of the app's pull requests.
  `ALTER TABLE runs ADD COLUMN revision INTEGER;
   ALTER TABLE runs ADD COLUMN head_commit TEXT;
   ALTER TABLE runs ADD COLUMN feedback TEXT;
   ALTER TABLE runs ADD COLUMN pushed_commit TEXT;`,
  // Workers on many machines: which one ran a run (its run directory stays on that machine).
  `ALTER TABLE runs ADD COLUMN worker TEXT;`,
  // GitHub writes that must land (pipeline/job.ts): a run's final status edit and final comments. What a
  // publish_pending run's publishing needs (pipeline/pending.ts), where any process serving the store finds it.
  `ALTER TABLE runs ADD COLUMN publish TEXT;
   CREATE TABLE github_writes (
     id TEXT PRIMARY KEY, run_id TEXT NOT NULL, installation_id INTEGER NOT NULL,
     owner TEXT NOT NULL, repo TEXT NOT NULL, issue INTEGER NOT NULL, comment_id INTEGER,
     body TEXT NOT NULL, attempts INTEGER NOT NULL, next_at TEXT NOT NULL
   );
   CREATE INDEX github_writes_due ON github_writes (next_at);`,
  // What a run cost in money (null: not known, a model without a price, or not finished).
  `ALTER TABLE runs ADD COLUMN cost_usd DOUBLE PRECISION;`,
  // Run pages: a run's events where serve finds them, whichever worker ran it.
  `CREATE TABLE run_events (
     run_id TEXT NOT NULL, seq INTEGER NOT NULL, ts TEXT NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL,
     PRIMARY KEY (run_id, seq)
   );
   CREATE INDEX runs_created ON runs (created_at);`,
  // Attempts (pipeline/attempts.ts): how many a rerun command asked for, and each one's outcome.
  `ALTER TABLE runs ADD COLUMN attempts_asked INTEGER;
   ALTER TABLE runs ADD COLUMN attempts TEXT;`,
  // One owner per run: each take-up by a worker counts, and the end it writes expects it (updateIf).
  `ALTER TABLE runs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;`,
];

export function now(): string {
  return new Date().toISOString();
}
