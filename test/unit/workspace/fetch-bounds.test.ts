import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import path from 'node:path';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import { commitAll, makeSourceRepo, tempDir, writeFiles } from '../../support/git-fixtures.js';

/**
 * Red team: the mirror's `git clone --mirror` / `git fetch` had no deadline and no size cap. A remote
 * that trickles (or never answers) held the run's worker slot and the mirror's lock for ever; a huge
 * one filled the disk that the store, the mirrors and every other run share. Now past
 * AGENTICFIX_FETCH_TIMEOUT_S git and its helpers (its process group) are killed, past
 * AGENTICFIX_FETCH_MAX_MB of growth the same; what they wrote goes and the run gets a WorkspaceError.
 */

const MiB = 1024 * 1024;
let root: string;
let cleanup: () => Promise<void>;

beforeAll(async () => ({ dir: root, cleanup } = await tempDir()));
afterAll(() => cleanup());

const manager = (name: string, fetch?: { timeoutMs: number; maxBytes: number }) =>
  new GitWorkspaceManager({
    cacheDir: path.join(root, `${name}-cache`),
    worktreeDir: path.join(root, `${name}-worktrees`),
    limits: { maxWorktreeBytes: 64 * MiB, maxWorktreeEntries: 1000, ...(fetch && { fetch }) },
  });

/** What git left in a cache dir, its lock files aside. */
const leftIn = async (dir: string) => (await readdir(dir)).filter((n) => !n.endsWith('.lock'));

it('a remote that never answers: the clone is killed at the deadline, with its helper, and nothing stays', async () => {
  // A loopback "git server" that takes the request and never answers (a trickle of nothing).
  const sockets = new Set<Socket>();
  const server = http.createServer(() => undefined);
  server.on('connection', (s) => sockets.add(s).size && s.on('close', () => sockets.delete(s)));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const remote = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hostile/repo.git`;
  try {
    const m = manager('trickle', { timeoutMs: 1000, maxBytes: 64 * MiB });
    const started = Date.now();
    await expect(m.create(remote, 'a'.repeat(40), 'r-trickle')).rejects.toThrow(
      /^the clone of http:\/\/127\.0\.0\.1:\d+\/hostile\/repo\.git was stopped: it took longer than 1 s \(AGENTICFIX_FETCH_TIMEOUT_S\)$/,
    ); // was: waited for ever
    expect(Date.now() - started).toBeLessThan(5000);
    // git-remote-http (git's child) held the connection: killed with git, it is closed.
    for (let i = 0; i < 50 && sockets.size > 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(sockets.size).toBe(0);
    expect(await leftIn(path.join(root, 'trickle-cache'))).toEqual([]);
  } finally {
    server.closeAllConnections();
    server.close();
  }
}, 15_000);

it('a repository past the size cap: a clone is stopped and removed, a fetch stopped, the run told why', async () => {
  // Random bytes do not compress: a 3 MiB blob is 3 MiB in any pack.
  const source = await makeSourceRepo(path.join(root, 'big-source'), { 'README.md': '# demo\n' });
  await writeFiles(source.path, { 'blob.bin': randomBytes(3 * MiB) });
  const big = await commitAll(source.path, 'big');

  const capped = manager('big', { timeoutMs: 60_000, maxBytes: MiB });
  await expect(capped.create(source.path, big, 'r-big')).rejects.toThrow(
    /^the clone of .*big-source was stopped: it grew past 1 MB \(AGENTICFIX_FETCH_MAX_MB\)$/,
  ); // was: cloned
  expect(await leftIn(path.join(root, 'big-cache'))).toEqual([]);
  expect(existsSync(path.join(root, 'big-worktrees', 'r-big'))).toBe(false);

  // A mirror cloned within the cap: fetching a commit past it is stopped the same way.
  const fresh = await makeSourceRepo(path.join(root, 'fetch-source'), { 'README.md': '# demo\n' });
  const m = manager('fetch2', { timeoutMs: 60_000, maxBytes: MiB });
  await m.create(fresh.path, fresh.head, 'r-small'); // within the cap
  await writeFiles(fresh.path, { 'blob.bin': randomBytes(3 * MiB) });
  const grown = await commitAll(fresh.path, 'big');
  await expect(m.create(fresh.path, grown, 'r-grown')).rejects.toThrow(
    /^the fetch of .*fetch-source was stopped: it grew past 1 MB \(AGENTICFIX_FETCH_MAX_MB\)$/,
  ); // was: fetched and checked out
  expect(existsSync(path.join(root, 'fetch2-worktrees', 'r-grown'))).toBe(false);
  const packs = await readdir(path.join(m.mirrorPath(fresh.path), 'objects', 'pack'));
  expect(packs.filter((n) => n.startsWith('tmp_'))).toEqual([]);
}, 30_000);
