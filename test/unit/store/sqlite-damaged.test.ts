import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError } from '../../../src/config/config.js';
import { openStore } from '../../../src/store/open-store.js';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';

/**
 * Faults, second round: a run store file damaged at start (a disk fault, a copy of the file alone taken
 * while the app wrote, a restore gone wrong). Serve and workers died with better-sqlite3's stack trace
 * ("SqliteError: file is not a database"), naming neither the file nor what to do. Now the commands say
 * so on one line (a ConfigError: exit 2) and leave the file as it is. A WAL torn by a crash is SQLite's
 * to drop: the store opens with what was committed to the database file.
 */

let dir: string;
beforeEach(() => (dir = mkdtempSync(path.join(tmpdir(), 'damaged-'))));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const open = (dbPath: string) =>
  openStore({ dbPath, databaseUrl: null, databaseSchema: 'public', app: { storeRetryMs: 0 } });

const refusal = (file: string) =>
  new RegExp(
    `^the run store ${file} is damaged \\((file is not a database|database disk image is malformed)\\): ` +
      `restore its backup \\(docs/operating\\.md: "Upgrading, backing up and restoring"\\), or move it ` +
      `and its -wal and -shm files aside to start with an empty store$`,
  );

it('a file that is no database: refused on one line naming it and what to do, left as it was', async () => {
  const file = path.join(dir, 'runs.sqlite');
  writeFileSync(file, 'not a database '.repeat(300));
  const before = readFileSync(file);
  const refused = await open(file).catch((err: unknown) => err);
  expect(refused).toBeInstanceOf(ConfigError); // was: SqliteError, printed with its stack
  expect((refused as Error).message).toMatch(refusal(file));
  expect(readFileSync(file).equals(before)).toBe(true);
});

it('a database cut short: refused the same way', async () => {
  const file = path.join(dir, 'runs.sqlite');
  await new SqliteRunStore(file).close();
  truncateSync(file, 1500); // past the header, into the first page
  await expect(open(file)).rejects.toThrow(refusal(file));
});

it('a WAL torn by a crash: the store opens with what the database file holds', async () => {
  const file = path.join(dir, 'runs.sqlite');
  const store = new SqliteRunStore(file);
  await store.claimDeliveries([{ id: 'd-1', event: 'issues', body: '{}', sha256: 'a'.repeat(64) }]);
  await store.close(); // checkpoints: the claim is in the database file
  writeFileSync(`${file}-wal`, Buffer.alloc(8192, 7));
  writeFileSync(`${file}-shm`, Buffer.alloc(32768, 9));
  const again = await open(file);
  expect((await again.pendingDeliveries()).map((d) => d.id)).toEqual(['d-1']);
  await again.close();
});
