import { newRunId } from '../trace/ids.js';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import {
  AFTER_VERDICT,
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
import { migratePostgres, pruneStatements } from './schema.js';
import { inTransaction, PG_TYPES } from './pg-parts.js';

/**
 * The run store shared by `serve` and the workers of many machines: PostgreSQL, with the schema and
 * migrations of the SQLite store. Columns keep SQLite's types (timestamps as ISO text, comment ids as
 * JSON text) so that rows parse with the one RUN_ROW schema.
 */

export interface PostgresStoreOptions {
  /** `postgres://user:password@host:port/database` */
  url: string;
  /** The schema holding the tables (its own per deployment or test); created when missing. */
  schema?: string;
  /** Connections this process keeps at most. */
  poolSize?: number;
}

export class PostgresRunStore implements RunStore {
  private instance: InstanceHolder | null = null;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly where: string,
  ) {}

  /** Connects and brings the schema to the newest version. */
  static async open(o: PostgresStoreOptions): Promise<PostgresRunStore> {
    const schema = o.schema ?? 'public';
    if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`invalid schema name: ${schema}`);
    const pool = new pg.Pool({
      connectionString: o.url,
      max: o.poolSize ?? 4,
      // A server that holds connections (stopped, not down) fails a connection attempt rather than hanging it.
      connectionTimeoutMillis: 10_000,
      types: PG_TYPES,
      options: `-c search_path=${schema}`,
      application_name: 'agenticfix',
    });
    // An idle client's error (server restarted) shows on its next query; unheard, it stops the process.
    pool.on('error', () => {});
    const url = new URL(o.url);
    const store = new PostgresRunStore(pool, `postgres://${url.host}${url.pathname} (schema ${schema})`);
    try {
      await store.migrate(schema);
    } catch (err) {
      await pool.end();
      throw err;
    }
    return store;
  }

  private async migrate(schema: string): Promise<void> {
    await this.transaction((c) => migratePostgres(c, schema, this.where));
  }

  private transaction<T>(work: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, work);
  }

  async claimDeliveries(batch: readonly DeliveryClaim[]): Promise<Claim[]> {
    return this.transaction(async (c) => {
      const at = now();
      const claims: Claim[] = [];
      for (const d of batch) {
        // No conflict target: a known id and a known body both leave the row alone.
        const res = await c.query(
          `INSERT INTO deliveries (id, received_at, event, payload, body_sha256) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT DO NOTHING`,
          [d.id, at, d.event, d.body, d.sha256],
        );
        if (res.rowCount === 1) claims.push('new');
        else {
          const seen = await c.query('SELECT 1 FROM deliveries WHERE id = $1', [d.id]);
          claims.push(seen.rowCount === 1 ? 'seen' : 'replay');
        }
      }
      return claims;
    });
  }

  async finishDelivery(deliveryId: string): Promise<void> {
    await this.pool.query('UPDATE deliveries SET done_at = $1, payload = NULL WHERE id = $2', [
      now(),
      deliveryId,
    ]);
  }

  async pendingDeliveries(): Promise<PendingDelivery[]> {
    const { rows } = await this.pool.query<{
      id: string;
      event: string;
      payload: string;
      body_sha256: string | null;
    }>(
      `SELECT id, event, payload, body_sha256 FROM deliveries WHERE done_at IS NULL
         ORDER BY received_at, id`,
    );
    return rows.map((d) => ({ ...d, payload: JSON.parse(d.payload) as unknown }));
  }

  async releaseDelivery(deliveryId: string): Promise<void> {
    await this.pool.query('DELETE FROM deliveries WHERE id = $1', [deliveryId]);
  }

  async deliveryRecorded(deliveryId: string): Promise<boolean> {
    return (await this.pool.query('SELECT 1 FROM deliveries WHERE id = $1', [deliveryId])).rowCount === 1;
  }

  async pruneDeliveries(before: string): Promise<number> {
    const res = await this.pool.query(
      `DELETE FROM deliveries WHERE received_at < $1 AND done_at IS NOT NULL
           AND id NOT IN (SELECT delivery_id FROM runs WHERE state IN ${ACTIVE_SQL})`,
      [before],
    );
    return res.rowCount ?? 0;
  }

  async pruneRuns(before: string): Promise<number> {
    return this.transaction(async (c) => {
      let runs = 0; // the last statement's
      for (const sql of pruneStatements('$1')) runs = (await c.query(sql, [before])).rowCount ?? 0;
      return runs;
    });
  }

  async createRun(input: NewRun): Promise<RunRecord> {
    const { rows } = await this.pool.query(
      `INSERT INTO runs (id, owner, repo, issue, installation_id, trigger, triggered_by, delivery_id,
           model, token_budget, base_commit, state, created_at, issue_title, issue_body, issue_updated_at,
           instance_id, pr_number, revision, head_commit, feedback, status_comment_id, attempts_asked)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'queued', $12, $13, $14, $15, $16,
           $17, $18, $19, $20, $21, $22)
         RETURNING *`,
      [
        newRunId(),
        input.owner,
        input.repo,
        input.issue,
        input.installation_id,
        input.trigger,
        input.triggered_by,
        input.delivery_id,
        input.model ?? null,
        input.token_budget ?? null,
        input.base_commit,
        now(),
        input.issue_title ?? null,
        input.issue_body ?? null,
        input.issue_updated_at ?? null,
        this.instance?.owner ?? null,
        input.pr_number ?? null,
        input.revision ?? null,
        input.head_commit ?? null,
        input.feedback ? JSON.stringify(input.feedback) : null,
        input.status_comment_id ?? null,
        input.attempts_asked ?? null,
      ],
    );
    return RUN_ROW.parse(rows[0]);
  }

  async get(id: string): Promise<RunRecord | null> {
    const { rows } = await this.pool.query('SELECT * FROM runs WHERE id = $1', [id]);
    return rows[0] ? RUN_ROW.parse(rows[0]) : null;
  }

  async update(id: string, update: RunUpdate): Promise<RunRecord> {
    const set = updateColumns(update);
    const { rows } =
      set.length > 0
        ? await this.pool.query(
            `UPDATE runs SET ${set.map(([k], i) => `${k} = $${i + 2}`).join(', ')} WHERE id = $1 RETURNING *`,
            [id, ...set.map(([, v]) => v)],
          )
        : await this.pool.query('SELECT * FROM runs WHERE id = $1', [id]);
    if (!rows[0]) throw new Error(`unknown run ${id}`);
    return RUN_ROW.parse(rows[0]);
  }

  async updateIf(id: string, owner: RunOwner, update: RunUpdate): Promise<RunRecord | null> {
    const set = updateColumns(update);
    const { rows } = await this.pool.query(
      `UPDATE runs SET ${set.map(([k], i) => `${k} = $${i + 5}`).join(', ') || 'id = id'} WHERE id = $1 AND state = $2 AND worker IS NOT DISTINCT FROM $3 AND attempt = $4 RETURNING *`,
      [id, owner.state, owner.worker, owner.attempt, ...set.map(([, v]) => v)],
    );
    if (!rows[0] && !(await this.get(id))) throw new Error(`unknown run ${id}`);
    return rows[0] ? RUN_ROW.parse(rows[0]) : null;
  }

  async putAttempt(id: string, attempt: AttemptElement): Promise<AttemptElement[]> {
    return this.transaction(async (c) => {
      const { rows } = await c.query('SELECT attempts FROM runs WHERE id = $1 FOR UPDATE', [id]);
      if (!rows[0]) throw new Error(`unknown run ${id}`);
      const all = withAttempt((rows[0] as { attempts: string | null }).attempts, attempt);
      await c.query('UPDATE runs SET attempts = $2 WHERE id = $1', [id, JSON.stringify(all)]);
      return all;
    });
  }

  async addComment(id: string, commentId: number): Promise<void> {
    await this.pool.query(
      'UPDATE runs SET comment_ids = (comment_ids::jsonb || to_jsonb($1::bigint))::text WHERE id = $2',
      [commentId, id],
    );
  }

  forIssue(owner: string, repo: string, issue: number): Promise<RunRecord[]> {
    return this.runsOf('issue', owner, repo, issue);
  }

  forPr(owner: string, repo: string, pr: number): Promise<RunRecord[]> {
    return this.runsOf('pr_number', owner, repo, pr);
  }

  private async runsOf(column: 'issue' | 'pr_number', owner: string, repo: string, n: number) {
    const { rows } = await this.pool.query(
      `SELECT * FROM runs WHERE owner = $1 AND repo = $2 AND ${column} = $3 ORDER BY created_at DESC, id DESC`,
      [owner, repo, n],
    );
    return rows.map((r) => RUN_ROW.parse(r));
  }

  async issueForPr(owner: string, repo: string, pr: number): Promise<number | null> {
    const { rows } = await this.pool.query<{ issue: number }>(
      'SELECT issue FROM runs WHERE owner = $1 AND repo = $2 AND pr_number = $3 LIMIT 1',
      [owner, repo, pr],
    );
    return rows[0]?.issue ?? null;
  }

  async list(state?: RunState): Promise<RunRecord[]> {
    const { rows } = state
      ? await this.pool.query('SELECT * FROM runs WHERE state = $1 ORDER BY created_at, id', [state])
      : await this.pool.query('SELECT * FROM runs ORDER BY created_at, id');
    return rows.map((r) => RUN_ROW.parse(r));
  }

  async recent(f: RunFilter): Promise<RunRecord[]> {
    const set = (['owner', 'repo', 'state'] as const).filter((k) => f[k] !== undefined);
    const where = set.length > 0 ? `WHERE ${set.map((k, i) => `${k} = $${i + 1}`).join(' AND ')}` : '';
    const { rows } = await this.pool.query(
      `SELECT * FROM runs ${where} ORDER BY created_at DESC, id DESC LIMIT $${set.length + 1} OFFSET $${set.length + 2}`,
      [...set.map((k) => f[k]), f.limit, f.offset ?? 0],
    );
    return rows.map((r) => RUN_ROW.parse(r));
  }

  async appendEvents(runId: string, events: readonly NewRunEvent[]): Promise<void> {
    if (events.length === 0) return;
    const column = (f: (e: NewRunEvent) => string) => events.map(f);
    await this.transaction(async (c) => {
      // One writer per run; the row lock keeps a second one (a run taken over) from numbering alike.
      await c.query('SELECT 1 FROM runs WHERE id = $1 FOR UPDATE', [runId]);
      await c.query(
        `INSERT INTO run_events (run_id, seq, ts, type, body)
           SELECT $1, (SELECT COALESCE(MAX(seq), 0) FROM run_events WHERE run_id = $1) + n, e.ts, e.type, e.body
           FROM unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS e(ts, type, body, n)`,
        [runId, column((e) => e.ts), column((e) => e.type), column((e) => JSON.stringify(e.body))],
      );
    });
  }

  async events(runId: string, afterSeq: number, limit: number): Promise<RunEvent[]> {
    const { rows } = await this.pool.query(
      'SELECT * FROM run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3',
      [runId, afterSeq, limit],
    );
    return rows.map((r) => RUN_EVENT_ROW.parse(r));
  }

  async markInterrupted(): Promise<RunRecord[]> {
    const { rows } = await this.pool.query(
      `UPDATE runs SET
           state = CASE WHEN publish IS NULL THEN 'interrupted' ELSE 'publish_pending' END,
           stop_reason = CASE WHEN publish IS NULL THEN 'interrupted' ELSE stop_reason END,
           finished_at = CASE WHEN publish IS NULL THEN $1 END,
           error = CASE WHEN publish IS NULL THEN 'app restarted' ELSE $2 END
         WHERE state = 'running' RETURNING *`,
      [now(), AFTER_VERDICT],
    );
    return rows
      .map((r) => RUN_ROW.parse(r))
      .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
  }

  async acquireInstance(): Promise<void> {
    const me = newInstance(randomUUID());
    await this.transaction(async (c) => {
      // Serialises two instances starting at once: the second sees the first's row.
      await c.query('LOCK TABLE instance IN EXCLUSIVE MODE');
      const { rows } = await c.query('SELECT * FROM instance WHERE id = 1');
      const holder = rows[0] ? INSTANCE_ROW.parse(rows[0]) : null;
      if (holder && !holderGone(holder)) throw new StoreInUseError(this.where, holder);
      await c.query(
        `INSERT INTO instance (id, owner, host, pid, started_at, heartbeat_at) VALUES (1, $1, $2, $3, $4, $5)
           ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, host = excluded.host, pid = excluded.pid,
             started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at`,
        [me.owner, me.host, me.pid, me.started_at, me.heartbeat_at],
      );
    });
    this.instance = me;
  }

  async heartbeat(): Promise<boolean> {
    if (!this.instance) return false;
    const res = await this.pool.query('UPDATE instance SET heartbeat_at = $1 WHERE id = 1 AND owner = $2', [
      now(),
      this.instance.owner,
    ]);
    return res.rowCount === 1;
  }

  async claimOutsiderReply(owner: string, repo: string, issue: number, intervalMs: number): Promise<boolean> {
    const at = new Date();
    const since = new Date(at.getTime() - intervalMs).toISOString();
    const res = await this.pool.query(
      `INSERT INTO outsider_replies (owner, repo, issue, replied_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (owner, repo, issue) DO UPDATE SET replied_at = excluded.replied_at
         WHERE outsider_replies.replied_at <= $5`,
      [owner, repo, issue, at.toISOString(), since],
    );
    return res.rowCount === 1;
  }

  async queueWrite(w: Omit<GitHubWrite, 'attempts'>): Promise<void> {
    await this.pool.query(
      `INSERT INTO github_writes
           (id, run_id, installation_id, owner, repo, issue, comment_id, body, attempts, next_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9)
         ON CONFLICT (id) DO UPDATE SET run_id = excluded.run_id, installation_id = excluded.installation_id,
           owner = excluded.owner, repo = excluded.repo, issue = excluded.issue,
           comment_id = excluded.comment_id, body = excluded.body, attempts = 0, next_at = excluded.next_at`,
      [w.id, w.run_id, w.installation_id, w.owner, w.repo, w.issue, w.comment_id, w.body, w.next_at],
    );
  }

  async dueWrites(at: string): Promise<GitHubWrite[]> {
    const { rows } = await this.pool.query(
      'SELECT * FROM github_writes WHERE next_at <= $1 ORDER BY next_at, id',
      [at],
    );
    return rows.map((r) => GITHUB_WRITE.parse(r));
  }

  async deferWrite(id: string, nextAt: string): Promise<void> {
    await this.pool.query('UPDATE github_writes SET attempts = attempts + 1, next_at = $1 WHERE id = $2', [
      nextAt,
      id,
    ]);
  }

  async removeWrite(id: string): Promise<void> {
    await this.pool.query('DELETE FROM github_writes WHERE id = $1', [id]);
  }

  async close(): Promise<void> {
    if (this.instance) {
      await this.pool.query('DELETE FROM instance WHERE id = 1 AND owner = $1', [this.instance.owner]);
      this.instance = null;
    }
    await this.pool.end();
  }
}
