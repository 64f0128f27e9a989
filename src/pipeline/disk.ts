import { existsSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import path from 'node:path';

/** Bytes free to this process on the emptiest filesystem holding one of `dirs` (made or not yet). */
export async function freeBytes(dirs: readonly string[]): Promise<number> {
  let free = Infinity;
  for (const dir of dirs) {
    let at = path.resolve(dir);
    while (!existsSync(at) && path.dirname(at) !== at) at = path.dirname(at);
    const s = await statfs(at);
    free = Math.min(free, s.bavail * s.bsize);
  }
  return free;
}

export const mebibytes = (bytes: number): number => Math.floor(bytes / (1024 * 1024));
