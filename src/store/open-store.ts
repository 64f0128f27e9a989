import type { Config } from '../config/config.js';
import type { OutageLogger } from '../trace/outage.js';
import { patientStore } from './patient.js';
import type { RunStore } from './store.js';

/**
 * The configured run store: PostgreSQL when AGENTICFIX_DATABASE_URL is set, else SQLite at dbPath; its
 * run-state writes wait out outages (AGENTICFIX_STORE_RETRY_S), which are logged to `log`.
 */
export async function openStore(
  config: Pick<Config, 'dbPath' | 'databaseUrl' | 'databaseSchema'> & {
    app: Pick<Config['app'], 'storeRetryMs'>;
  },
  log?: OutageLogger,
): Promise<RunStore> {
  const patience = { retryMs: config.app.storeRetryMs, log };
  if (config.databaseUrl) {
    const { PostgresRunStore } = await import('./postgres-store.js');
    const store = await PostgresRunStore.open({ url: config.databaseUrl, schema: config.databaseSchema });
    return patientStore(store, { ...patience, service: 'postgresql' });
  }
  const { SqliteRunStore } = await import('./sqlite-store.js');
  return patientStore(new SqliteRunStore(config.dbPath), { ...patience, service: 'sqlite' });
}
