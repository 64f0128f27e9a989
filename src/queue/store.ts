import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { z } from 'zod';
import { capMiddle } from '../trace/cap.js';
import { FEEDBACK, type Feedback } from './feedback.js';

/** Persistent record of every run and webhook delivery (embedded SQLite). Runs are never deleted. */

const RUN_STATES = ['queued', 'running', 'done', 'cancelled', 'superseded', 'interrupted', 'failed'] as const;
export type RunState = (typeof RUN_STATES)[number];

/** A run on the issue (label, rerun) or a revision of its pull request (command, review, mention, checks). */
export const TRIGGERS = ['label', 'rerun', 'revise', 'review', 'mention', 'checks'] as const;

// Built once: building a zod schema costs far more than parsing with it (it was built per row read).
const COMMENT_IDS = z.array(z.number().int());

const RUN_ROW = z.strictObject({
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

export type RunUpdate = Partial<
  Omit<
    RunRecord,
    | 'id'
    | 'owner'
    | 'repo'
    | 'issue'
    | 'installation_id'
    | 'delivery_id'
    | 'created_at'
    | 'comment_ids'
    | 'instance_id'
    | 'feedback'
  >
>;

/** Each entry moves the schema one version forward (PRAGMA user_version). Append only. */
const MIGRATIONS = [
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
];

/** How long an instance that stopped heart-beating keeps the store (a crash on another host, a hang). */
export const INSTANCE_STALE_MS = 30_000;

const INSTANCE_ROW = z.strictObject({
  id: z.literal(1),
  owner: z.string(),
  host: z.string(),
  pid: z.number().int(),
  started_at: z.string(),
  heartbeat_at: z.string(),
});
export type InstanceHolder = Omit<z.output<typeof INSTANCE_ROW>, 'id'>;

/** Another live instance already serves this store. */
export class StoreInUseError extends Error {
  constructor(
    readonly file: string,
    readonly holder: InstanceHolder,
  ) {
    const ago = Math.round((Date.now() - Date.parse(holder.heartbeat_at)) / 1000);
    super(
      `another AgenticFix instance (pid ${holder.pid} on ${holder.host}, started ${holder.started_at}, ` +
        `last heartbeat ${ago} s ago) serves the run store ${file}; stop it first, or give this instance ` +
        `its own AGENTICFIX_HOME / AGENTICFIX_DB_PATH. An instance that stopped without closing holds ` +
        `the store for at most ${INSTANCE_STALE_MS / 1000} s.`,
    );
    this.name = 'StoreInUseError';
  }
}

/** What `claimDelivery` found: a new delivery, one seen before under this id, or its body under another id. */
export type Claim = 'new' | 'seen' | 'replay';

export class RunStore {
  private readonly db: Database.Database;
  /** Compiled statements by SQL text: compiling one costs more than running it (the webhook burst). */
  private readonly statements = new Map<string, Database.Statement>();
  private seq = 0;
  private instance: InstanceHolder | null = null;

  constructor(private readonly file: string) {
    if (file !== ':memory:') mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    // WAL with NORMAL sync survives a crash of the app (not of the machine) without an fsync per write.
    this.db.pragma('synchronous = NORMAL');
    this.db.pragma('busy_timeout = 5000');
    this.migrate();
  }

  private statement(sql: string): Database.Statement {
    let s = this.statements.get(sql);
    if (!s) this.statements.set(sql, (s = this.db.prepare(sql)));
    return s;
  }

  private migrate(): void {
    const version = this.db.pragma('user_version', { simple: true }) as number;
    for (let v = version; v < MIGRATIONS.length; v++) {
      this.db.transaction(() => {
        this.db.exec(MIGRATIONS[v]!);
        this.db.pragma(`user_version = ${v + 1}`);
      })();
    }
  }

  /**
   * Records a webhook delivery with the SHA-256 of its signed body. `seen`: this delivery id was
   * recorded before (GitHub's "redeliver" reuses it); `replay`: the same signed body came before under
   * another delivery id. Only `new` may act. Hashes are kept as long as the deliveries (never pruned),
   * far beyond the days within which GitHub redelivers.
   */
  claimDelivery(deliveryId: string, event: string, payload: unknown, bodySha256: string | null): Claim {
    return this.db.transaction((): Claim => {
      const res = this.statement(
        `INSERT OR IGNORE INTO deliveries (id, received_at, event, payload, body_sha256)
           VALUES (?, ?, ?, ?, ?)`,
      ).run(deliveryId, now(), event, JSON.stringify(payload), bodySha256);
      if (res.changes === 1) return 'new';
      return this.statement('SELECT 1 FROM deliveries WHERE id = ?').get(deliveryId) ? 'seen' : 'replay';
    })();
  }

  /** The delivery's intake is over: its payload is no longer needed. */
  finishDelivery(deliveryId: string): void {
    this.statement('UPDATE deliveries SET done_at = ?, payload = NULL WHERE id = ?').run(now(), deliveryId);
  }

  /** Deliveries acknowledged but not taken in (the app stopped in between), oldest first. */
  pendingDeliveries(): { id: string; event: string; payload: unknown; body_sha256: string | null }[] {
    return (
      this.statement(
        `SELECT id, event, payload, body_sha256 FROM deliveries WHERE done_at IS NULL
           ORDER BY received_at, id`,
      ).all() as { id: string; event: string; payload: string; body_sha256: string | null }[]
    ).map((d) => ({ ...d, payload: JSON.parse(d.payload) as unknown }));
  }

  /**
   * Lets a redelivery of `deliveryId` act again (its first handling failed before doing anything); its
   * body is free again too, so at most one delivery of a signed body ever acts.
   */
  releaseDelivery(deliveryId: string): void {
    this.statement('DELETE FROM deliveries WHERE id = ?').run(deliveryId);
  }

  /** Records a new queued run; a second run for the same delivery id is refused by the schema. */
  createRun(input: NewRun): RunRecord {
    const id = this.newId();
    this.statement(
      `INSERT INTO runs (id, owner, repo, issue, installation_id, trigger, triggered_by, delivery_id,
           model, token_budget, base_commit, state, created_at, issue_title, issue_body, issue_updated_at,
           instance_id, pr_number, revision, head_commit, feedback, status_comment_id)
         VALUES (@id, @owner, @repo, @issue, @installation_id, @trigger, @triggered_by, @delivery_id,
           @model, @token_budget, @base_commit, 'queued', @created_at, @issue_title, @issue_body,
           @issue_updated_at, @instance_id, @pr_number, @revision, @head_commit, @feedback,
           @status_comment_id)`,
    ).run({
      model: null,
      token_budget: null,
      issue_title: null,
      issue_body: null,
      issue_updated_at: null,
      pr_number: null,
      revision: null,
      head_commit: null,
      status_comment_id: null,
      ...input,
      feedback: input.feedback ? JSON.stringify(input.feedback satisfies Feedback) : null,
      id,
      created_at: now(),
      instance_id: this.instance?.owner ?? null,
    });
    return this.get(id)!;
  }

  get(id: string): RunRecord | null {
    const row = this.statement('SELECT * FROM runs WHERE id = ?').get(id);
    return row ? RUN_ROW.parse(row) : null;
  }

  update(id: string, update: RunUpdate): RunRecord {
    const fields = update.error ? { ...update, error: capMiddle(update.error) } : update;
    const keys = Object.keys(fields).filter((k) => (fields as Record<string, unknown>)[k] !== undefined);
    if (keys.length > 0) {
      const set = keys.map((k) => `${k} = @${k}`).join(', ');
      this.statement(`UPDATE runs SET ${set} WHERE id = @id`).run({ ...fields, id });
    }
    const run = this.get(id);
    if (!run) throw new Error(`unknown run ${id}`);
    return run;
  }

  addComment(id: string, commentId: number): void {
    this.statement(`UPDATE runs SET comment_ids = json_insert(comment_ids, '$[#]', ?) WHERE id = ?`).run(
      commentId,
      id,
    );
  }

  /** Runs of one issue, newest first. */
  forIssue(owner: string, repo: string, issue: number): RunRecord[] {
    return this.statement(
      'SELECT * FROM runs WHERE owner = ? AND repo = ? AND issue = ? ORDER BY created_at DESC, id DESC',
    )
      .all(owner, repo, issue)
      .map((r) => RUN_ROW.parse(r));
  }

  /** Runs that worked on pull request `pr` (the ones that opened or updated it, and its revisions), newest first. */
  forPr(owner: string, repo: string, pr: number): RunRecord[] {
    return this.statement(
      'SELECT * FROM runs WHERE owner = ? AND repo = ? AND pr_number = ? ORDER BY created_at DESC, id DESC',
    )
      .all(owner, repo, pr)
      .map((r) => RUN_ROW.parse(r));
  }

  /** The issue whose run opened pull request `pr`, or null when the app did not open it. */
  issueForPr(owner: string, repo: string, pr: number): number | null {
    const row = this.statement(
      'SELECT issue FROM runs WHERE owner = ? AND repo = ? AND pr_number = ? LIMIT 1',
    ).get(owner, repo, pr) as { issue: number } | undefined;
    return row?.issue ?? null;
  }

  list(state?: RunState): RunRecord[] {
    const rows = state
      ? this.statement('SELECT * FROM runs WHERE state = ? ORDER BY created_at, id').all(state)
      : this.statement('SELECT * FROM runs ORDER BY created_at, id').all();
    return rows.map((r) => RUN_ROW.parse(r));
  }

  /** On start-up: runs a crash left queued or running become `interrupted`; returns them so their issues are told. */
  markInterrupted(): RunRecord[] {
    return this.db.transaction(() => {
      const rows = this.statement(
        `SELECT id FROM runs WHERE state IN ('queued', 'running') ORDER BY created_at, id`,
      ).all() as { id: string }[];
      const at = now();
      for (const { id } of rows) {
        this.update(id, {
          state: 'interrupted',
          stop_reason: 'interrupted',
          finished_at: at,
          error: 'app restarted',
        });
      }
      return rows.map(({ id }) => this.get(id)!);
    })();
  }

  /**
   * Makes this process the one instance serving the store, or throws StoreInUseError naming the live
   * holder. A holder is gone when its heartbeat is older than INSTANCE_STALE_MS or, on this host, when
   * its process no longer exists (so a restart after a crash is not held up).
   */
  acquireInstance(): void {
    const me: InstanceHolder = {
      owner: randomUUID(),
      host: hostname(),
      pid: process.pid,
      started_at: now(),
      heartbeat_at: now(),
    };
    this.db
      .transaction(() => {
        const row = this.statement('SELECT * FROM instance WHERE id = 1').get();
        const holder = row ? INSTANCE_ROW.parse(row) : null;
        if (holder && !holderGone(holder)) throw new StoreInUseError(this.file, holder);
        this.statement(
          `INSERT OR REPLACE INTO instance (id, owner, host, pid, started_at, heartbeat_at)
             VALUES (1, @owner, @host, @pid, @started_at, @heartbeat_at)`,
        ).run(me);
      })
      .immediate();
    this.instance = me;
  }

  /** Keeps this instance's claim fresh; false when another instance has taken the store over. */
  heartbeat(): boolean {
    if (!this.instance) return false;
    return (
      this.statement('UPDATE instance SET heartbeat_at = ? WHERE id = 1 AND owner = ?').run(
        now(),
        this.instance.owner,
      ).changes === 1
    );
  }

  /**
   * Claims the one reply per `intervalMs` that people without write access may get on an issue;
   * false when one was posted within the interval. Durable, so a restart does not reset it.
   */
  claimOutsiderReply(owner: string, repo: string, issue: number, intervalMs: number): boolean {
    const at = new Date();
    const since = new Date(at.getTime() - intervalMs).toISOString();
    return (
      this.statement(
        `INSERT INTO outsider_replies (owner, repo, issue, replied_at) VALUES (?, ?, ?, ?)
           ON CONFLICT (owner, repo, issue) DO UPDATE SET replied_at = excluded.replied_at
           WHERE replied_at <= ?`,
      ).run(owner, repo, issue, at.toISOString(), since).changes === 1
    );
  }

  /** Closes the database; the instance claim (if any) is given up first. */
  close(): void {
    if (this.instance) {
      this.statement('DELETE FROM instance WHERE id = 1 AND owner = ?').run(this.instance.owner);
      this.instance = null;
    }
    this.db.close();
  }

  /** Sortable, unique, readable: `r<time>-<seq><random>`. */
  private newId(): string {
    const t = Date.now().toString(36).padStart(9, '0');
    const s = (this.seq++ % 1296).toString(36).padStart(2, '0');
    return `r${t}-${s}${Math.random().toString(36).slice(2, 6)}`;
  }
}

function now(): string {
  return new Date().toISOString();
}

function holderGone(h: InstanceHolder): boolean {
  if (Date.now() - Date.parse(h.heartbeat_at) > INSTANCE_STALE_MS) return true;
  if (h.host !== hostname()) return false;
  // Our own pid: an earlier process that had it (a restarted container is pid 1 again), or another
  // store of this very process.
  if (h.pid === process.pid) return Date.parse(h.started_at) < performance.timeOrigin;
  try {
    process.kill(h.pid, 0); // signal 0: existence check only
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'EPERM'; // EPERM: alive, someone else's
  }
}
