import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import pg from 'pg';
import { PostgresRunStore } from '../../../src/store/postgres-store.js';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';
import { MIGRATIONS } from '../../../src/store/store.js';
import { needService, serviceUrl } from '../../support/services.js';
import { describeIf } from '../../support/skip.js';
import { claim, runStoreContract, type StoreBackend } from '../../support/store-contract.js';

describe('SqliteRunStore', () => {
  let dir = '';
  let file = '';
  const backend: StoreBackend = {
    async fresh() {
      dir = mkdtempSync(path.join(tmpdir(), 'store-'));
      file = path.join(dir, 'db', 'runs.sqlite');
    },
    async open() {
      return new SqliteRunStore(file);
    },
    async cleanup() {
      rmSync(dir, { recursive: true, force: true });
    },
    async writeHolder(h) {
      const db = new Database(file);
      db.prepare(
        `INSERT OR REPLACE INTO instance (id, owner, host, pid, started_at, heartbeat_at)
           VALUES (1, @owner, @host, @pid, @started_at, @heartbeat_at)`,
      ).run(h);
      db.close();
    },
    async schemaVersion(set) {
      const db = new Database(file);
      if (set !== undefined) db.pragma(`user_version = ${set}`);
      const version = db.pragma('user_version', { simple: true }) as number;
      db.close();
      return version;
    },
  };

  describe('contract', () => runStoreContract(backend));

  describe('SQLite only', () => {
    beforeEach(() => backend.fresh());
    afterEach(() => backend.cleanup());

    it('migrates the schema once and records its version', async () => {
      await new SqliteRunStore(file).close();
      await new SqliteRunStore(file).close();
      const db = new Database(file);
      expect(db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
      db.close();
    });

    test('a claimed delivery survives the process being killed right after the claim', async () => {
      // The real store (from dist/) in another process, SIGKILLed as soon as claimDeliveries returned:
      // what the webhook's 200 promises must already be on disk, not in a buffer of the dead process.
      const store = path.join(
        fileURLToPath(new URL('../../..', import.meta.url)),
        'dist/store/sqlite-store.js',
      );
      const script = `
        import { SqliteRunStore } from ${JSON.stringify(store)};
        const s = new SqliteRunStore(${JSON.stringify(file)});
        const [claim] = await s.claimDeliveries([{ id: 'd-crash', event: 'issues', body: '{"n":1}', sha256: 'f'.repeat(64) }]);
        process.stdout.write(claim + '\\n');
        process.kill(process.pid, 'SIGKILL');`;
      const child = await execa(process.execPath, ['--input-type=module', '-e', script], { reject: false });
      expect(child.signal).toBe('SIGKILL');
      expect(child.stdout).toBe('new');
      const s = new SqliteRunStore(file);
      expect(await s.pendingDeliveries()).toEqual([
        { id: 'd-crash', event: 'issues', payload: { n: 1 }, body_sha256: 'f'.repeat(64) },
      ]);
      expect(await claim(s, 'd-other', 'issues', { n: 1 }, 'f'.repeat(64))).toBe('replay');
      await s.close();
    });
  });
});

const database = serviceUrl('AGENTICFIX_TEST_DATABASE_URL');

describeIf(needService('AGENTICFIX_TEST_DATABASE_URL'))('PostgresRunStore', () => {
  const url = database?.toString() ?? '';
  let schema = '';
  // An administrative connection of the test: schemas per test, rows written as other processes would.
  const admin = new pg.Pool({ connectionString: url, max: 1 });
  afterAll(() => admin.end());
  const backend: StoreBackend = {
    async fresh() {
      schema = `test_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
    },
    open: () => PostgresRunStore.open({ url, schema, poolSize: 2 }),
    async cleanup() {
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    },
    async writeHolder(h) {
      await admin.query(
        `INSERT INTO ${schema}.instance (id, owner, host, pid, started_at, heartbeat_at)
           VALUES (1, $1, $2, $3, $4, $5)
           ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, host = excluded.host, pid = excluded.pid,
             started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at`,
        [h.owner, h.host, h.pid, h.started_at, h.heartbeat_at],
      );
    },
    async schemaVersion(set) {
      if (set !== undefined) await admin.query(`UPDATE ${schema}.schema_version SET version = $1`, [set]);
      return (await admin.query(`SELECT version FROM ${schema}.schema_version`)).rows[0].version;
    },
  };

  describe('contract', () => runStoreContract(backend));

  describe('PostgreSQL only', () => {
    beforeEach(() => backend.fresh());
    afterEach(() => backend.cleanup());

    it('migrates the schema once, records its version and keeps GitHub ids in BIGINT columns', async () => {
      await (await backend.open()).close();
      await (await backend.open()).close();
      const { rows } = await admin.query(`SELECT version FROM ${schema}.schema_version`);
      expect(rows).toEqual([{ version: MIGRATIONS.length }]);
      const types = await admin.query(
        `SELECT column_name, data_type FROM information_schema.columns
           WHERE table_schema = $1 AND table_name = 'runs' AND column_name IN ('status_comment_id', 'installation_id')
           ORDER BY column_name`,
        [schema],
      );
      expect(types.rows).toEqual([
        { column_name: 'installation_id', data_type: 'bigint' },
        { column_name: 'status_comment_id', data_type: 'bigint' },
      ]);
    });
  });
});
