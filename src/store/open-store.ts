import type { Config } from '../config/config.js';
import type { RunStore } from './store.js';

/** The configured run store: PostgreSQL when AGENTICFIX_DATABASE_URL is set, else SQLite at dbPath. */
export async function openStore(
  config: Pick<Config, 'dbPath' | 'databaseUrl' | 'databaseSchema'>,
): Promise<RunStore> {
  if (config.databaseUrl) {
    const { PostgresRunStore } = await import('./postgres-store.js');
    return PostgresRunStore.open({ url: config.databaseUrl, schema: config.databaseSchema });
  }
  const { SqliteRunStore } = await import('./sqlite-store.js');
  return new SqliteRunStore(config.dbPath);
}
