import { newRunId } from '../trace/ids.js';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import {
  AFTER_VERDICT,
  MIGRATIONS,
  now,
  GITHUB_WRITE,
  RUN_ROW,
  updateColumns,
  withAttempt,
  type AttemptElement,
  type Claim,
  type DeliveryClaim,
  type GitHubWrite,
  type NewRun,
  type NewRunEvent,
  type PendingDelivery,
  RUN_EVENT_ROW,
  type RunEvent,
  type RunFilter,
  type RunRecord,
  type RunState,
  type RunStore,
  type RunOwner,
  type RunUpdate,
  ACTIVE_SQL,
} from './store.js';
import { holderGone, INSTANCE_ROW, newInstance, StoreInUseError, type InstanceHolder } from './instance.js';
import { checkSchema, pruneStatements, StoreDamagedError } from './schema.js';

/** The WHERE clause of a run filter, with `?` placeholders. */
function filterSql(f: RunFilter): { sql: string; args: unknown[] } {
  const set = (['owner', 'repo', 'state'] as const).filter((k) => f[k] !== undefined);
  return {
    sql: set.length > 0 ? `WHERE ${set.map((k) => `${k} = ?`).join(' AND ')}` : '',
    args: set.map((k) => f[k]),
  };
}

/** SQLite's default: a commit checkpoints the WAL once it holds this many pages. */
const WAL_CHECKPOINT_PAGES = 1000;

/**
 * The run store of a single process: embedded SQLite. Its calls are synchronous underneath, so each
 * method's work is done (and on disk) before its promise is returned.
 */
export class SqliteRunStore implements RunStore {
  private readonly db: Database.Database;
  /** Compiled statements by SQL text: compiling one costs more than running it (the webhook burst). */
  private readonly statements = new Map<string, Database.Statement>();
  private instance: InstanceHolder | null = null;

  constructor(private readonly file: string) {
    if (file !== ':memory:') mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file);
    try {
      this.db.pragma('journal_mode = WAL');
      // WAL with NORMAL sync survives a crash of the app (not of the machine) without an fsync per write.
      this.db.pragma('synchronous = NORMAL');
      this.db.pragma('busy_timeout = 5000');
      this.migrate();
    } catch (err) {
      if (this.db.open) this.db.close();
      const code = (err as { code?: unknown }).code;
      throw code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT'
        ? new StoreDamagedError(file, (err as Error).message)
        : err;
    }
  }

  private statement(sql: string): Database.Statement {
    let s = this.statements.get(sql);
    if (!s) this.statements.set(sql, (s = this.db.prepare(sql)));
    return s;
  }

  private migrate(): void {
    const version = this.db.pragma('user_version', { simple: true }) as number;
    checkSchema(this.file, version);
    for (let v = version; v < MIGRATIONS.length; v++) {
      this.db.transaction(() => {
        this.db.exec(MIGRATIONS[v]!);
        this.db.pragma(`user_version = ${v + 1}`);
      })();
    }
  }

  async claimDeliveries(batch: readonly DeliveryClaim[]): Promise<Claim[]> {
    const insert = this.statement(
      `INSERT OR IGNORE INTO deliveries (id, received_at, event, payload, body_sha256) VALUES (?, ?, ?, ?, ?)`,
    );
    const seen = this.statement('SELECT 1 FROM deliveries WHERE id = ?');
    // A commit that finds the WAL past its checkpoint size copies it into the database file and syncs
    // it: 5-18 ms every few batches of a burst against 1-2 ms for the batch itself (measured), while the
    // burst waits for its answers. Claims leave that to the next other write: routing the burst's
    // deliveries writes right after it.
    this.db.pragma('wal_autocheckpoint = 0');
    try {
      return this.db.transaction((): Claim[] => {
        const at = now();
        return batch.map((d) => {
          if (insert.run(d.id, at, d.event, d.body, d.sha256).changes === 1) return 'new';
          return seen.get(d.id) ? 'seen' : 'replay';
        });
      })();
    } finally {
      this.db.pragma(`wal_autocheckpoint = ${WAL_CHECKPOINT_PAGES}`);
    }
  }

  async finishDelivery(deliveryId: string): Promise<void> {
    this.statement('UPDATE deliveries SET done_at = ?, payload = NULL WHERE id = ?').run(now(), deliveryId);
  }

  async pendingDeliveries(): Promise<PendingDelivery[]> {
    return (
      this.statement(
        `SELECT id, event, payload, body_sha256 FROM deliveries WHERE done_at IS NULL
           ORDER BY received_at, id`,
      ).all() as { id: string; event: string; payload: string; body_sha256: string | null }[]
    ).map((d) => ({ ...d, payload: JSON.parse(d.payload) as unknown }));
  }

  async releaseDelivery(deliveryId: string): Promise<void> {
    this.statement('DELETE FROM deliveries WHERE id = ?').run(deliveryId);
  }

  async deliveryRecorded(deliveryId: string): Promise<boolean> {
    return this.statement('SELECT 1 FROM deliveries WHERE id = ?').get(deliveryId) !== undefined;
  }

  async pruneDeliveries(before: string): Promise<number> {
    return this.statement(
      `DELETE FROM deliveries WHERE received_at < ? AND done_at IS NOT NULL
           AND id NOT IN (SELECT delivery_id FROM runs WHERE state IN ${ACTIVE_SQL})`,
    ).run(before).changes;
  }

  async pruneRuns(before: string): Promise<number> {
    const statements = pruneStatements('?').map((sql) => this.statement(sql));
    return this.db.transaction(() => {
      let runs = 0; // the last statement's
      for (const s of statements) runs = s.run(before).changes;
      return runs;
    })();
  }

  async createRun(input: NewRun): Promise<RunRecord> {
    const id = newRunId();
    this.statement(
      `INSERT INTO runs (id, owner, repo, issue, installation_id, trigger, triggered_by, delivery_id,
           model, token_budget, base_commit, state, created_at, issue_title, issue_body, issue_updated_at,
           instance_id, pr_number, revision, head_commit, feedback, status_comment_id, attempts_asked)
         VALUES (@id, @owner, @repo, @issue, @installation_id, @trigger, @triggered_by, @delivery_id,
           @model, @token_budget, @base_commit, 'queued', @created_at, @issue_title, @issue_body,
           @issue_updated_at, @instance_id, @pr_number, @revision, @head_commit, @feedback,
           @status_comment_id, @attempts_asked)`,
    ).run({
      model: null,
      token_budget: null,
      attempts_asked: null,
      issue_title: null,
      issue_body: null,
      issue_updated_at: null,
      pr_number: null,
      revision: null,
      head_commit: null,
      status_comment_id: null,
      ...input,
      feedback: input.feedback ? JSON.stringify(input.feedback) : null,
      id,
      created_at: now(),
      instance_id: this.instance?.owner ?? null,
    });
    return this.row(id)!;
  }

  async get(id: string): Promise<RunRecord | null> {
    return this.row(id);
  }

  private row(id: string): RunRecord | null {
    const row = this.statement('SELECT * FROM runs WHERE id = ?').get(id);
    return row ? RUN_ROW.parse(row) : null;
  }

  async update(id: string, update: RunUpdate): Promise<RunRecord> {
    return this.updateNow(id, update);
  }

  async updateIf(id: string, owner: RunOwner, update: RunUpdate): Promise<RunRecord | null> {
    const set = updateColumns(update);
    const { changes } = this.statement(
      `UPDATE runs SET ${set.map(([k]) => `${k} = @${k}`).join(', ') || 'id = id'}
       WHERE id = @id AND state = @owner_state AND worker IS @owner_worker AND attempt = @owner_attempt`,
    ).run({
      ...Object.fromEntries(set),
      id,
      owner_state: owner.state,
      owner_worker: owner.worker,
      owner_attempt: owner.attempt,
    });
    const run = this.row(id);
    if (!run) throw new Error(`unknown run ${id}`);
    return changes > 0 ? run : null;
  }

  private updateNow(id: string, update: RunUpdate): RunRecord {
    const set = updateColumns(update);
    if (set.length > 0) {
      this.statement(`UPDATE runs SET ${set.map(([k]) => `${k} = @${k}`).join(', ')} WHERE id = @id`).run({
        ...Object.fromEntries(set),
        id,
      });
    }
    const run = this.row(id);
    if (!run) throw new Error(`unknown run ${id}`);
    return run;
  }

  async putAttempt(id: string, attempt: AttemptElement): Promise<AttemptElement[]> {
    return this.db.transaction(() => {
      const all = withAttempt(this.updateNow(id, {}).attempts, attempt);
      this.updateNow(id, { attempts: JSON.stringify(all) });
      return all;
    })();
  }

  async addComment(id: string, commentId: number): Promise<void> {
    this.statement(`UPDATE runs SET comment_ids = json_insert(comment_ids, '$[#]', ?) WHERE id = ?`).run(
      commentId,
      id,
    );
  }

  async forIssue(owner: string, repo: string, issue: number): Promise<RunRecord[]> {
    return this.statement(
      'SELECT * FROM runs WHERE owner = ? AND repo = ? AND issue = ? ORDER BY created_at DESC, id DESC',
    )
      .all(owner, repo, issue)
      .map((r) => RUN_ROW.parse(r));
  }

  async forPr(owner: string, repo: string, pr: number): Promise<RunRecord[]> {
    return this.statement(
      'SELECT * FROM runs WHERE owner = ? AND repo = ? AND pr_number = ? ORDER BY created_at DESC, id DESC',
    )
      .all(owner, repo, pr)
      .map((r) => RUN_ROW.parse(r));
  }

  async issueForPr(owner: string, repo: string, pr: number): Promise<number | null> {
    const row = this.statement(
      'SELECT issue FROM runs WHERE owner = ? AND repo = ? AND pr_number = ? LIMIT 1',
    ).get(owner, repo, pr) as { issue: number } | undefined;
    return row?.issue ?? null;
  }

  async list(state?: RunState): Promise<RunRecord[]> {
    const rows = state
      ? this.statement('SELECT * FROM runs WHERE state = ? ORDER BY created_at, id').all(state)
      : this.statement('SELECT * FROM runs ORDER BY created_at, id').all();
    return rows.map((r) => RUN_ROW.parse(r));
  }

  async recent(f: RunFilter): Promise<RunRecord[]> {
    const where = filterSql(f);
    return this.statement(
      `SELECT * FROM runs ${where.sql} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
    )
      .all(...where.args, f.limit, f.offset ?? 0)
      .map((r) => RUN_ROW.parse(r));
  }

  async appendEvents(runId: string, events: readonly NewRunEvent[]): Promise<void> {
    const last = this.statement('SELECT MAX(seq) AS seq FROM run_events WHERE run_id = ?');
    const insert = this.statement(
      'INSERT INTO run_events (run_id, seq, ts, type, body) VALUES (?, ?, ?, ?, ?)',
    );
    this.db.transaction(() => {
      let seq = (last.get(runId) as { seq: number | null }).seq ?? 0;
      for (const e of events) insert.run(runId, ++seq, e.ts, e.type, JSON.stringify(e.body));
    })();
  }

  async events(runId: string, afterSeq: number, limit: number): Promise<RunEvent[]> {
    return this.statement('SELECT * FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?')
      .all(runId, afterSeq, limit)
      .map((r) => RUN_EVENT_ROW.parse(r));
  }

  async markInterrupted(): Promise<RunRecord[]> {
    return this.db.transaction(() => {
      const rows = this.statement(
        `SELECT id, publish FROM runs WHERE state = 'running' ORDER BY created_at, id`,
      ).all() as { id: string; publish: string | null }[];
      const at = now();
      return rows.map(({ id, publish }) =>
        this.updateNow(
          id,
          publish === null
            ? { state: 'interrupted', stop_reason: 'interrupted', finished_at: at, error: 'app restarted' }
            : { state: 'publish_pending', error: AFTER_VERDICT },
        ),
      );
    })();
  }

  async acquireInstance(): Promise<void> {
    const me = newInstance(randomUUID());
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

  async heartbeat(): Promise<boolean> {
    if (!this.instance) return false;
    return (
      this.statement('UPDATE instance SET heartbeat_at = ? WHERE id = 1 AND owner = ?').run(
        now(),
        this.instance.owner,
      ).changes === 1
    );
  }

  async claimOutsiderReply(owner: string, repo: string, issue: number, intervalMs: number): Promise<boolean> {
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

  async queueWrite(w: Omit<GitHubWrite, 'attempts'>): Promise<void> {
    this.statement(
      `INSERT OR REPLACE INTO github_writes
           (id, run_id, installation_id, owner, repo, issue, comment_id, body, attempts, next_at)
         VALUES (@id, @run_id, @installation_id, @owner, @repo, @issue, @comment_id, @body, 0, @next_at)`,
    ).run(w);
  }

  async dueWrites(at: string): Promise<GitHubWrite[]> {
    return this.statement('SELECT * FROM github_writes WHERE next_at <= ? ORDER BY next_at, id')
      .all(at)
      .map((r) => GITHUB_WRITE.parse(r));
  }

  async deferWrite(id: string, nextAt: string): Promise<void> {
    this.statement('UPDATE github_writes SET attempts = attempts + 1, next_at = ? WHERE id = ?').run(
      nextAt,
      id,
    );
  }

  async removeWrite(id: string): Promise<void> {
    this.statement('DELETE FROM github_writes WHERE id = ?').run(id);
  }

  async close(): Promise<void> {
    if (this.instance) {
      this.statement('DELETE FROM instance WHERE id = 1 AND owner = ?').run(this.instance.owner);
      this.instance = null;
    }
    this.db.close();
  }
}
