import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';

/**
 * Issue 40 (acknowledgement p99): a commit that finds the WAL past SQLite's checkpoint size copies it
 * into the database file and syncs it (a 1,000-delivery claim took 38-48 ms instead of 5, measured),
 * and a claim is what a burst's answers wait for.
 */
test('claiming deliveries never checkpoints the WAL into the database file; the next other write does', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'checkpoint-'));
  const file = path.join(dir, 'runs.db');
  const store = new SqliteRunStore(file);
  try {
    const before = statSync(file).size;
    // 1,200 deliveries of 4 KB: past the 1,000 pages (4 MB) at which a commit checkpoints.
    const body = JSON.stringify({ pad: 'x'.repeat(4096) });
    const ids: string[] = [];
    for (let batch = 0; batch < 6; batch++) {
      const claims = Array.from({ length: 200 }, (_, i) => {
        const id = `d-${batch}-${i}`;
        ids.push(id);
        return { id, event: 'issues', body, sha256: createHash('sha256').update(id).digest('hex') };
      });
      expect(await store.claimDeliveries(claims)).toEqual(claims.map(() => 'new'));
    }
    expect(statSync(`${file}-wal`).size).toBeGreaterThan(4096 * 1000);
    expect(statSync(file).size).toBe(before);
    await store.finishDelivery(ids[0]!);
    expect(statSync(file).size).toBeGreaterThan(4096 * 1000);
    // Nothing claimed is lost on the way: every delivery but the finished one is still pending.
    expect((await store.pendingDeliveries()).map((d) => d.id).sort()).toEqual(ids.slice(1).sort());
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
