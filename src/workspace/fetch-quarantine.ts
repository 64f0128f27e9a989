import { copyFile, cp, mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { withinFetchLimits, type FetchLimits } from './fetch-bounds.js';
import { git, type GitConfig } from './git.js';
import { besideMirror } from './leftovers.js';

/**
 * A fetch into a shared mirror lands in a quarantine first: a bare repository beside the mirror that
 * borrows the mirror's objects (objects/info/alternates) and starts with a copy of its refs, so git
 * negotiates as from the mirror and writes only what is new. Once the fetch ended within the limits,
 * its objects move into the mirror (renames on one filesystem) and the mirror's refs follow the
 * quarantine's; refused or failed, the quarantine goes whole and the mirror is as it was. Before, a
 * fetch refused at its end (one that finished between two checks of the watcher) left its objects in
 * the mirror: a hostile remote could grow the disk by up to a check's worth each time.
 *
 * The caller holds the mirror's lock throughout (nothing else writes the mirror or its quarantines)
 * and has cleared what a dead fetch left (./leftovers.ts).
 */

/**
 * Fetches `remote` into `mirror` through a quarantine; returns null once it landed, else why it was
 * refused (a setting named). A failure of git's own is thrown, the mirror unchanged.
 */
export async function fetchQuarantined(
  mirror: string,
  remote: string,
  auth: GitConfig,
  limits: FetchLimits | undefined,
): Promise<string | null> {
  const q = besideMirror(mirror, 'fetch');
  try {
    await seed(mirror, q);
    // The mirror's refs as they stand (nothing else writes them under the lock), read while git fetches.
    const current = refsIn(mirror);
    current.catch(() => undefined); // awaited below, or the fetch failed first
    let updates = '';
    const fetch = async (signal?: AbortSignal) => {
      // Not --quiet: git names each ref it changed on stderr, and says nothing when nothing changed.
      const res = await git(['fetch', '--prune', '--no-write-fetch-head', '--', remote, '+refs/*:refs/*'], {
        cwd: q,
        // No maintenance in the quarantine: the mirror's own runs after its refs moved.
        config: [...auth, ['maintenance.auto', 'false'], ['gc.auto', '0']],
        signal,
      });
      updates = res.stderr;
    };
    const why = await withinFetchLimits(q, limits, fetch);
    if (why !== null || updates.trim() === '') return why;
    const moved = await moveObjects(path.join(q, 'objects'), path.join(mirror, 'objects'));
    await followRefs(mirror, await current, q);
    // The upkeep git's own fetch would have run in the mirror (repacking once objects pile up).
    if (moved) await git(['maintenance', 'run', '--auto', '--quiet'], { cwd: mirror });
    return null;
  } finally {
    await rm(q, { recursive: true, force: true });
  }
}

/** The quarantine: the mirror's config (object format), HEAD and refs, its objects borrowed. */
async function seed(mirror: string, q: string): Promise<void> {
  await mkdir(path.join(q, 'objects', 'info'), { recursive: true });
  await mkdir(path.join(q, 'objects', 'pack'));
  await writeFile(path.join(q, 'objects', 'info', 'alternates'), `${path.join(mirror, 'objects')}\n`);
  await Promise.all([
    copyFile(path.join(mirror, 'config'), path.join(q, 'config')),
    copyFile(path.join(mirror, 'HEAD'), path.join(q, 'HEAD')),
    copyFile(path.join(mirror, 'packed-refs'), path.join(q, 'packed-refs')).catch(absent),
    cp(path.join(mirror, 'refs'), path.join(q, 'refs'), { recursive: true, verbatimSymlinks: true }),
  ]);
}

/**
 * Sets the mirror's refs to the quarantine's (new, moved and pruned ones) in one transaction of git's,
 * each update checked against the value read: every object they name is in the mirror already.
 */
async function followRefs(mirror: string, now: Map<string, string>, q: string): Promise<void> {
  const next = await refsIn(q);
  let updates = '';
  for (const [ref, oid] of next) {
    const was = now.get(ref);
    if (was === undefined) updates += `create ${ref} ${oid}\n`;
    else if (was !== oid) updates += `update ${ref} ${oid} ${was}\n`;
  }
  for (const [ref, oid] of now) if (!next.has(ref)) updates += `delete ${ref} ${oid}\n`;
  if (updates !== '') await git(['update-ref', '--no-deref', '--stdin'], { cwd: mirror, input: updates });
}

async function refsIn(repo: string): Promise<Map<string, string>> {
  const out = (await git(['for-each-ref', '--format=%(objectname) %(refname)'], { cwd: repo })).stdout;
  const refs = new Map<string, string>();
  for (const line of out.split('\n')) {
    const space = line.indexOf(' ');
    if (space > 0) refs.set(line.slice(space + 1), line.slice(0, space));
  }
  return refs;
}

/**
 * Moves the quarantine's packs and loose objects into the mirror's object store. A pack's index goes
 * last: git sees a pack through its index, so a crash mid-way leaves no half pack visible.
 */
async function moveObjects(from: string, to: string): Promise<boolean> {
  const index = (n: string) => (n.endsWith('.idx') ? 1 : 0);
  const moves = (await readdir(path.join(from, 'pack')))
    .filter((n) => /^pack-[0-9a-f]+\.(?:pack|rev|idx)$/.test(n))
    .sort((a, b) => index(a) - index(b))
    .map((n) => path.join('pack', n));
  for (const dir of (await readdir(from)).filter((n) => /^[0-9a-f]{2}$/.test(n))) {
    await mkdir(path.join(to, dir), { recursive: true });
    for (const n of await readdir(path.join(from, dir)))
      if (/^[0-9a-f]{38,62}$/.test(n)) moves.push(path.join(dir, n));
  }
  for (const rel of moves) await rename(path.join(from, rel), path.join(to, rel));
  return moves.length > 0;
}

function absent(err: unknown): void {
  if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
}
