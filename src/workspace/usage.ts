import { lstat, opendir } from 'node:fs/promises';
import path from 'node:path';

/**
 * Bytes under `dir` (links not followed), counting each file as the larger of its size and the space it
 * takes (a sparse file counts by its size: that is what git would read). Stops as soon as the total
 * passes `limit`, so checking a worktree that blew up costs no more than checking one at the limit.
 */
export async function diskUsage(dir: string, limit = Infinity): Promise<number> {
  let total = 0;
  const pending = [dir];
  while (pending.length > 0 && total <= limit) {
    const current = pending.pop()!;
    const handle = await opendir(current).catch(() => null); // removed meanwhile: nothing to count
    if (!handle) continue;
    for await (const entry of handle) {
      const p = path.join(current, entry.name);
      const st = await lstat(p).catch(() => null);
      if (!st) continue;
      total += Math.max(st.size, st.blocks * 512);
      if (st.isDirectory()) pending.push(p);
      if (total > limit) break; // leaving the loop closes the directory handle
    }
  }
  return total;
}
