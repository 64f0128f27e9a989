import type pg from 'pg';
import { ConfigError } from '../config/config.js';
import { buildInfo } from '../config/version.js';
import { MIGRATIONS } from './store.js';

/**
 * The store's schema against this release: an older release never writes to a store a newer one has
 * migrated (it would write rows the newer schema does not expect, or undo its version), and what
 * retention forgets of a run (its rows go with its run directory).
 */

/** A store migrated by a newer release than this one: the commands say so on one line (exit 2). */
export class StoreTooNewError extends ConfigError {
  constructor(where: string, found: number) {
    super(
      `the run store ${where} has schema version ${found}, newer than this AgenticFix ` +
        `${buildInfo().version} knows (schema version ${MIGRATIONS.length}): a newer release migrated it. ` +
        `Run that release (or a later one), or restore the backup taken before the upgrade (docs/operating.md: "Upgrading").`,
    );
    this.name = 'StoreTooNewError';
  }
}

/** A SQLite store file that is no database or is malformed: one line (exit 2), the file left as it is. */
export class StoreDamagedError extends ConfigError {
  constructor(where: string, why: string) {
    super(
      `the run store ${where} is damaged (${why}): restore its backup (docs/operating.md: "Upgrading, ` +
        `backing up and restoring"), or move it and its -wal and -shm files aside to start with an empty store`,
    );
    this.name = 'StoreDamagedError';
  }
}

/** Throws StoreTooNewError when the store's schema `found` is newer than this release's. */
export function checkSchema(where: string, found: number): void {
  if (found > MIGRATIONS.length) throw new StoreTooNewError(where, found);
}

/** Final runs whose end (or, never started, whose record) is older than the placeholder `p`. */
const over = (p: string) =>
  `SELECT id FROM runs WHERE state NOT IN ('queued', 'running', 'publish_pending')
     AND COALESCE(finished_at, created_at) < ${p}`;

/**
 * What pruneRuns deletes, in order, in one transaction: the runs' events (their attempts' too, kept
 * under `<run>-a<n>`: pipeline/attempts.ts), kept GitHub writes and deliveries, then the runs. `p` is
 * the engine's placeholder for the cut-off time.
 */
export const pruneStatements = (p: string): string[] => [
  `DELETE FROM run_events WHERE run_id IN (${over(p)})`,
  `DELETE FROM run_events WHERE EXISTS (SELECT 1 FROM (${over(p)}) o
     WHERE substr(run_events.run_id, 1, length(o.id) + 2) = o.id || '-a')`,
  `DELETE FROM github_writes WHERE run_id IN (${over(p)})`,
  `DELETE FROM deliveries WHERE done_at IS NOT NULL AND id IN (SELECT delivery_id FROM runs WHERE id IN (${over(p)}))`,
  `DELETE FROM runs WHERE id IN (${over(p)})`,
];

/** SQLite's INTEGER is 64 bits wide, PostgreSQL's 32: GitHub comment ids already need more. */
const toPostgres = (sql: string) => sql.replace(/\bINTEGER\b/g, 'BIGINT');

/** Two processes starting at once (serve and a worker) migrate one after the other. */
const MIGRATION_LOCK = 0x61676678; // "agfx"

/**
 * Brings a PostgreSQL schema to this release's version within the caller's transaction (all the
 * migrations or none), or throws StoreTooNewError and changes nothing.
 */
export async function migratePostgres(c: pg.PoolClient, schema: string, where: string): Promise<void> {
  await c.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
  await c.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
  await c.query('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)');
  const { rows } = await c.query<{ version: number }>('SELECT version FROM schema_version');
  const version = rows[0]?.version ?? 0;
  checkSchema(where, version);
  for (let v = version; v < MIGRATIONS.length; v++) await c.query(toPostgres(MIGRATIONS[v]!));
  if (rows.length === 0) await c.query('INSERT INTO schema_version VALUES ($1)', [MIGRATIONS.length]);
  else await c.query('UPDATE schema_version SET version = $1', [MIGRATIONS.length]);
}
