import { closeSync, constants, fstatSync, openSync, readSync, realpathSync, type Stats } from 'node:fs';
import path from 'node:path';

/**
 * The one way the host reads a file that a container (or the model) could have touched. A plain
 * read follows a planted symlink to a host file and blocks on a planted FIFO; this one does not
 * follow the last component, cannot block (O_NONBLOCK), checks on the open handle that it is a
 * regular file, and reads at most `maxBytes`.
 */
const FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

export type SafeRead =
  | {
      ok: true;
      buf: Buffer;
      stat: Stats;
      /** The file had more than `maxBytes`; `buf` holds the first ones. */ truncated: boolean;
    }
  | { ok: false; reason: string };

const refuse = (reason: string): SafeRead => ({ ok: false, reason });

/**
 * Reads a regular file through one descriptor. `expect` (an earlier lstat) must describe the very
 * file that was opened, not one swapped in since.
 */
export function readRegularFile(abs: string, maxBytes: number, expect?: Stats): SafeRead {
  let fd: number;
  try {
    fd = openSync(abs, FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return refuse(
      code === 'ELOOP' ? 'a symbolic link' : code === 'ENOENT' ? 'missing' : `unreadable (${code})`,
    );
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return refuse('not a regular file');
    if (expect && (stat.dev !== expect.dev || stat.ino !== expect.ino)) return refuse('replaced while read');
    const buf = Buffer.allocUnsafe(Math.min(stat.size, maxBytes));
    let n = 0;
    while (n < buf.length) {
      const r = readSync(fd, buf, n, buf.length - n, n);
      if (r === 0) break;
      n += r;
    }
    return { ok: true, buf: buf.subarray(0, n), stat, truncated: stat.size > maxBytes };
  } catch (err) {
    return refuse(`unreadable (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  } finally {
    closeSync(fd);
  }
}

/**
 * Reads `rel` (normalised, no `..`) below `root`, also refusing it when one of its directories was
 * replaced by a link that leads elsewhere (O_NOFOLLOW guards only the last component).
 */
export function readBelow(root: string, rel: string, maxBytes: number): SafeRead {
  const abs = path.join(root, rel);
  try {
    if (realpathSync(path.dirname(abs)) !== path.join(realpathSync(root), path.dirname(rel)))
      return refuse('reached through a symbolic link');
  } catch {
    return refuse('missing');
  }
  return readRegularFile(abs, maxBytes);
}
