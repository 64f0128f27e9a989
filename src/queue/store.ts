import { mkdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { z } from 'zod';
import { capMiddle } from '../trace/cap.js';

/** Persistent record of every run and webhook delivery (embedded SQLite). Runs are never deleted. */

const RUN_STATES = ['queued', 'running', 'done', 'cancelled', 'superseded', 'interrupted', 'failed'] as const;
export type RunState = (typeof RUN_STATES)[number];

const RUN_ROW = z.strictObject({
  id: z.string(),
  owner: z.string(),
  repo: z.string(),
  issue: z.number().int(),
  installation_id: z.number().int(),
  trigger: z.enum(['label', 'rerun']),
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
  comment_ids: z.string().transform((s) => z.array(z.number().int()).parse(JSON.parse(s))),
  patch_path: z.string().nullable(),
  run_dir: z.string().nullable(),
  superseded_by: z.string().nullable(),
  // The issue as it was when the run was triggered: the run works on this, never on a later edit.
  issue_title: z.string().nullable(),
  issue_body: z.string().nullable(),
  issue_updated_at: z.string().nullable(),
});

export type RunRecord = z.output<typeof RUN_ROW>;

export type NewRun = Pick<
  RunRecord,
  'owner' | 'repo' | 'issue' | 'installation_id' | 'trigger' | 'triggered_by' | 'delivery_id' | 'base_commit'
> &
  Partial<Pick<RunRecord, 'model' | 'token_budget' | 'issue_title' | 'issue_body' | 'issue_updated_at'>>;

export type RunUpdate = Partial<
  Omit<
    RunRecord,
    'id' | 'owner' | 'repo' | 'issue' | 'installation_id' | 'delivery_id' | 'created_at' | 'comment_ids'
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
];

export class RunStore {
  private readonly db: Database.Database;
  private seq = 0;

  constructor(file: string) {
    if (file !== ':memory:') mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    // WAL with NORMAL sync survives a crash of the app (not of the machine) without an fsync per write.
    this.db.pragma('synchronous = NORMAL');
    this.db.pragma('busy_timeout = 5000');
    this.migrate();
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

  /** Records a webhook delivery id; false if it was seen before (a redelivery). */
  claimDelivery(deliveryId: string, event: string, payload: unknown): boolean {
    const res = this.db
      .prepare('INSERT OR IGNORE INTO deliveries (id, received_at, event, payload) VALUES (?, ?, ?, ?)')
      .run(deliveryId, now(), event, JSON.stringify(payload));
    return res.changes === 1;
  }

  /** The delivery's intake is over: its payload is no longer needed. */
  finishDelivery(deliveryId: string): void {
    this.db.prepare('UPDATE deliveries SET done_at = ?, payload = NULL WHERE id = ?').run(now(), deliveryId);
  }

  /** Deliveries acknowledged but not taken in (the app stopped in between), oldest first. */
  pendingDeliveries(): { id: string; event: string; payload: unknown }[] {
    return (
      this.db
        .prepare('SELECT id, event, payload FROM deliveries WHERE done_at IS NULL ORDER BY received_at, id')
        .all() as { id: string; event: string; payload: string }[]
    ).map((d) => ({ id: d.id, event: d.event, payload: JSON.parse(d.payload) as unknown }));
  }

  /** Lets a redelivery of `deliveryId` act again (its first handling failed before doing anything). */
  releaseDelivery(deliveryId: string): void {
    this.db.prepare('DELETE FROM deliveries WHERE id = ?').run(deliveryId);
  }

  /** Records a new queued run; a second run for the same delivery id is refused by the schema. */
  createRun(input: NewRun): RunRecord {
    const id = this.newId();
    this.db
      .prepare(
        `INSERT INTO runs (id, owner, repo, issue, installation_id, trigger, triggered_by, delivery_id,
           model, token_budget, base_commit, state, created_at, issue_title, issue_body, issue_updated_at)
         VALUES (@id, @owner, @repo, @issue, @installation_id, @trigger, @triggered_by, @delivery_id,
           @model, @token_budget, @base_commit, 'queued', @created_at, @issue_title, @issue_body,
           @issue_updated_at)`,
      )
      .run({
        model: null,
        token_budget: null,
        issue_title: null,
        issue_body: null,
        issue_updated_at: null,
        ...input,
        id,
        created_at: now(),
      });
    return this.get(id)!;
  }

  get(id: string): RunRecord | null {
    const row = this.db.prepare('SELECT * FROM runs WHERE id = ?').get(id);
    return row ? RUN_ROW.parse(row) : null;
  }

  update(id: string, update: RunUpdate): RunRecord {
    const fields = update.error ? { ...update, error: capMiddle(update.error) } : update;
    const keys = Object.keys(fields).filter((k) => (fields as Record<string, unknown>)[k] !== undefined);
    if (keys.length > 0) {
      const set = keys.map((k) => `${k} = @${k}`).join(', ');
      this.db.prepare(`UPDATE runs SET ${set} WHERE id = @id`).run({ ...fields, id });
    }
    const run = this.get(id);
    if (!run) throw new Error(`unknown run ${id}`);
    return run;
  }

  addComment(id: string, commentId: number): void {
    this.db
      .prepare(`UPDATE runs SET comment_ids = json_insert(comment_ids, '$[#]', ?) WHERE id = ?`)
      .run(commentId, id);
  }

  /** Runs of one issue, newest first. */
  forIssue(owner: string, repo: string, issue: number): RunRecord[] {
    return this.db
      .prepare(
        'SELECT * FROM runs WHERE owner = ? AND repo = ? AND issue = ? ORDER BY created_at DESC, id DESC',
      )
      .all(owner, repo, issue)
      .map((r) => RUN_ROW.parse(r));
  }

  /** The issue whose run opened pull request `pr`, or null when the app did not open it. */
  issueForPr(owner: string, repo: string, pr: number): number | null {
    const row = this.db
      .prepare('SELECT issue FROM runs WHERE owner = ? AND repo = ? AND pr_number = ? LIMIT 1')
      .get(owner, repo, pr) as { issue: number } | undefined;
    return row?.issue ?? null;
  }

  list(state?: RunState): RunRecord[] {
    const rows = state
      ? this.db.prepare('SELECT * FROM runs WHERE state = ? ORDER BY created_at, id').all(state)
      : this.db.prepare('SELECT * FROM runs ORDER BY created_at, id').all();
    return rows.map((r) => RUN_ROW.parse(r));
  }

  /** On start-up: runs a crash left queued or running become `interrupted`; returns them so their issues are told. */
  markInterrupted(): RunRecord[] {
    return this.db.transaction(() => {
      const rows = this.db
        .prepare(`SELECT id FROM runs WHERE state IN ('queued', 'running') ORDER BY created_at, id`)
        .all() as { id: string }[];
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

  close(): void {
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
