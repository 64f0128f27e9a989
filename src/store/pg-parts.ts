import pg from 'pg';

/** What the PostgreSQL store (postgres-store.ts) needs of the driver besides queries: its types and transactions. */

const INT8 = 20;
export const PG_TYPES = {
  // BIGINT (what INTEGER becomes here) arrives as a string by default; GitHub ids stay below 2^53.
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8
      ? (v: string) => Number(v)
      : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
};

/** Runs `work` on one connection in a transaction: committed when it resolves, rolled back when it throws. */
export async function inTransaction<T>(pool: pg.Pool, work: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    const result = await work(c);
    await c.query('COMMIT');
    return result;
  } catch (err) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    c.release();
  }
}
