import { randomBytes } from 'node:crypto';

let last = 0;

/**
 * The one run id format (runs/, the store, the judge, eval): time-sortable (UTC to the millisecond,
 * strictly increasing within a process, so ids made in one millisecond still sort in creation order),
 * unique across processes (random suffix), with the kind of run in front where it is not a repair
 * (`verify-…`, `eval-…`).
 */
export function newRunId(kind?: string): string {
  last = Math.max(Date.now(), last + 1);
  const id = `${new Date(last).toISOString().replace(/[-:.]/g, '')}-${randomBytes(4).toString('hex')}`;
  return kind ? `${kind}-${id}` : id;
}
