import pg from 'pg';
import { missing, present, type Need } from './skip.js';

type Service = 'AGENTICFIX_TEST_REDIS_URL' | 'AGENTICFIX_TEST_DATABASE_URL';

/**
 * The URL of a service the distributed tests need (written by scripts/setup-services.sh), or null. In CI
 * an unset URL is a failure; elsewhere the tests that need it skip through `needService` (support/skip.ts).
 */
export function serviceUrl(name: Service): URL | null {
  const value = process.env[name];
  if (value) return new URL(value);
  missing(name, 'unset (run scripts/setup-services.sh and source its env file)');
  return null;
}

/** The service behind `name`, for `describeIf`/`itIf`. */
export function needService(name: Service): Need {
  return serviceUrl(name)
    ? present(name)
    : missing(name, 'unset (run scripts/setup-services.sh and source its env file)');
}

/** The settings that put serve and its workers on the test services, in a schema and a queue of their own. */
export interface ServicePlace {
  /** AGENTICFIX_REDIS_URL, _QUEUE_NAME, _DATABASE_URL and _DATABASE_SCHEMA. */
  env: Record<string, string>;
  schema: string;
  /** Drops the schema (the queue is left to Redis, as the tests always did). */
  drop(): Promise<void>;
}

/** A PostgreSQL schema and a Redis queue named `prefix`, this process and a random suffix (tests share both services). */
export function servicePlace(prefix: string): ServicePlace {
  const database = serviceUrl('AGENTICFIX_TEST_DATABASE_URL');
  const schema = `${prefix}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  return {
    env: {
      AGENTICFIX_DATABASE_URL: database?.href ?? '',
      AGENTICFIX_DATABASE_SCHEMA: schema,
      AGENTICFIX_REDIS_URL: serviceUrl('AGENTICFIX_TEST_REDIS_URL')?.href ?? '',
      AGENTICFIX_QUEUE_NAME: schema,
    },
    schema,
    async drop() {
      if (!database) return;
      const admin = new pg.Client({ connectionString: database.href });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.end();
    },
  };
}
