import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import lockfile from 'proper-lockfile';
import { git } from '../../../src/workspace/git.js';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import { commitAll, makeSourceRepo, tempDir, writeFiles } from '../../support/git-fixtures.js';

/**
 * Red team: a fetch into the shared mirror that grew past AGENTICFIX_FETCH_MAX_MB but finished between
 * two checks of the watcher was refused, yet its objects stayed in the mirror: each such run grew the
 * host's disk by up to a check's worth, with objects nobody asked for. Now a fetch lands in a
 * quarantine beside the mirror (borrowing its objects) and reaches the mirror only within the caps; a
 * refused one goes whole. A flood of refs is stopped at AGENTICFIX_FETCH_MAX_FILES; refs with hostile
 * names are skipped by git itself (that test passed on the old code too: it guards the new path).
 */

const MiB = 1024 * 1024;
let root: string;
let cleanup: () => Promise<void>;

beforeAll(async () => ({ dir: root, cleanup } = await tempDir()));
afterAll(() => cleanup());

const manager = (name: string, maxFiles = 1000) =>
  new GitWorkspaceManager({
    cacheDir: path.join(root, `${name}-cache`),
    worktreeDir: path.join(root, `${name}-worktrees`),
    limits: {
      maxWorktreeBytes: 64 * MiB,
      maxWorktreeEntries: 1000,
      fetch: { timeoutMs: 60_000, maxBytes: MiB, maxFiles },
    },
  });

/** Every object in a mirror's own store, sorted (what the disk holds, reachable or not). */
const objectsOf = async (mirror: string) =>
  (await git(['cat-file', '--batch-all-objects', '--batch-check=%(objectname)'], { cwd: mirror })).stdout
    .split('\n')
    .filter(Boolean);
const refsOf = async (mirror: string) =>
  (await git(['for-each-ref', '--format=%(refname)'], { cwd: mirror })).stdout.split('\n').filter(Boolean);
/** What is in a cache dir besides the mirror and its lock: quarantines, half clones. */
const strays = async (cacheDir: string) =>
  (await readdir(cacheDir)).filter((n) => !n.endsWith('.git') && !n.endsWith('.lock'));

it('a fetch past the cap that ends between two checks leaves the mirror as it was, quarantine gone', async () => {
  const source = await makeSourceRepo(path.join(root, 'bomb-source'), { 'README.md': '# demo\n' });
  const m = manager('bomb');
  await m.create(source.path, source.head, 'r-first');
  const mirror = m.mirrorPath(source.path);
  const before = await objectsOf(mirror);

  // A tag on a 3 MiB blob (random: no pack shrinks it) and a commit: a local fetch takes milliseconds.
  await writeFiles(source.path, { 'bomb.bin': randomBytes(3 * MiB) });
  const blob = (await git(['hash-object', '-w', 'bomb.bin'], { cwd: source.path })).stdout.trim();
  await git(['tag', 'bomb', blob], { cwd: source.path });
  await writeFiles(source.path, { 'README.md': '# grown\n' });
  const grown = await commitAll(source.path, 'grown');
  await expect(m.create(source.path, grown, 'r-grown')).rejects.toThrow(
    /^the fetch of .*bomb-source was stopped: it grew past 1 MB \(AGENTICFIX_FETCH_MAX_MB\)$/,
  );
  expect(await objectsOf(mirror)).toEqual(before); // was: what the refused fetch wrote stayed
  expect(await refsOf(mirror)).not.toContain('refs/tags/bomb');
  expect(await strays(path.join(root, 'bomb-cache'))).toEqual([]);
  expect(existsSync(path.join(root, 'bomb-worktrees', 'r-grown'))).toBe(false);
}, 30_000);

it('a good fetch lands whole (thin pack, pruned ref) and later runs reuse it without the remote', async () => {
  const source = await makeSourceRepo(path.join(root, 'good-source'), {
    'README.md': '# demo\n',
    'lib.txt': 'line\n'.repeat(2000),
  });
  await git(['tag', 'old'], { cwd: source.path });
  const m = manager('good');
  await m.create(source.path, source.head, 'r-1');
  const mirror = m.mirrorPath(source.path);

  // A small change to a large file: git sends it as a delta against what the mirror has (a thin pack),
  // with over 100 new objects so git keeps a pack (fewer would come as loose objects).
  const packs = async () =>
    (await readdir(path.join(mirror, 'objects', 'pack'))).filter((n) => n.endsWith('.idx'));
  const packsBefore = await packs();
  const many = Object.fromEntries(Array.from({ length: 120 }, (_, i) => [`many/f${i}.txt`, `${i}\n`]));
  await writeFiles(source.path, { ...many, 'lib.txt': 'line\n'.repeat(2000) + 'one more\n' });
  const next = await commitAll(source.path, 'next');
  await git(['tag', '-d', 'old'], { cwd: source.path });
  await git(['tag', 'new'], { cwd: source.path });
  const wt = await m.create(source.path, next, 'r-2');
  expect(await git(['log', '-1', '--format=%H'], { cwd: wt.path, env: { GIT_DIR: wt.gitDir } })).toEqual(
    expect.objectContaining({ stdout: `${next}\n` }),
  );
  expect(await refsOf(mirror)).toEqual(['refs/heads/main', 'refs/tags/new']);
  expect((await packs()).length).toBe(packsBefore.length + 1);
  await git(['fsck', '--connectivity-only', '--no-dangling'], { cwd: mirror }); // throws when incomplete
  expect(await strays(path.join(root, 'good-cache'))).toEqual([]);

  // The remote gone: a later run at that commit is served by the mirror alone.
  await rename(source.path, `${source.path}-gone`);
  await m.create(source.path, next, 'r-3');
  expect(await strays(path.join(root, 'good-cache'))).toEqual([]);
}, 30_000);

it('a flood of refs is stopped at AGENTICFIX_FETCH_MAX_FILES and none reaches the mirror', async () => {
  const source = await makeSourceRepo(path.join(root, 'flood-source'), { 'README.md': '# demo\n' });
  const m = manager('flood', 100);
  await m.create(source.path, source.head, 'r-1');
  const mirror = m.mirrorPath(source.path);
  const refs = Array.from({ length: 300 }, (_, i) => `create refs/flood/r${i} HEAD\n`).join('');
  await git(['update-ref', '--stdin'], { cwd: source.path, input: refs });
  await writeFiles(source.path, { 'README.md': '# more\n' });
  const next = await commitAll(source.path, 'more');
  await expect(m.create(source.path, next, 'r-2')).rejects.toThrow(
    /^the fetch of .*flood-source was stopped: it wrote more than 100 files \(AGENTICFIX_FETCH_MAX_FILES\)$/,
  ); // was: 300 refs written into the mirror
  expect(await refsOf(mirror)).toEqual(['refs/heads/main']);
  expect(await strays(path.join(root, 'flood-cache'))).toEqual([]);
}, 30_000);

it('runs of one repository fetching at once each land, through the mirror lock', async () => {
  const source = await makeSourceRepo(path.join(root, 'both-source'), { 'README.md': '# demo\n' });
  const [a, b] = [manager('both'), manager('both')]; // two processes sharing a cache dir
  await a.create(source.path, source.head, 'r-0');
  await git(['checkout', '-q', '-b', 'side'], { cwd: source.path });
  await writeFiles(source.path, { 'side.txt': 'side\n' });
  const side = await commitAll(source.path, 'side');
  await git(['checkout', '-q', 'main'], { cwd: source.path });
  await writeFiles(source.path, { 'main.txt': 'main\n' });
  const main = await commitAll(source.path, 'main');
  const made = await Promise.all([a.create(source.path, side, 'r-a'), b.create(source.path, main, 'r-b')]);
  expect(made.map((w) => w.baseCommit)).toEqual([side, main]);
  expect(await refsOf(a.mirrorPath(source.path))).toEqual(['refs/heads/main', 'refs/heads/side']);
  expect(await strays(path.join(root, 'both-cache'))).toEqual([]);
}, 30_000);

it("a dead fetch's quarantine goes at start-up (not while its mirror's lock is held) or at the next fetch", async () => {
  const source = await makeSourceRepo(path.join(root, 'dead-source'), { 'README.md': '# demo\n' });
  const m = manager('dead');
  await m.create(source.path, source.head, 'r-1');
  const mirror = m.mirrorPath(source.path);
  const leftover = async (name: string) => {
    const dir = `${mirror}.${name}`;
    await mkdir(path.join(dir, 'objects', 'pack'), { recursive: true });
    await writeFile(path.join(dir, 'objects', 'pack', 'tmp_pack_x'), randomBytes(1024));
    return dir;
  };
  const dead = await leftover('fetch-0badf00d');
  const halfClone = await leftover('tmp-0badf00d');

  const release = await lockfile.lock(mirror, { realpath: false, lockfilePath: `${mirror}.lock` });
  expect(await m.removeFetchLeftovers()).toEqual([]); // a live fetch's, as far as the lock says
  expect(existsSync(dead)).toBe(true);
  await release();
  expect((await m.removeFetchLeftovers()).sort()).toEqual([dead, halfClone].sort());
  expect(await strays(path.join(root, 'dead-cache'))).toEqual([]);

  // One found by the next fetch of its mirror (the fetch holds the lock) goes then; the mirror works.
  const again = await leftover('fetch-0badcafe');
  await writeFiles(source.path, { 'README.md': '# next\n' });
  const next = await commitAll(source.path, 'next');
  await m.create(source.path, next, 'r-2');
  expect(existsSync(again)).toBe(false);
  expect(await strays(path.join(root, 'dead-cache'))).toEqual([]);
}, 30_000);

it('refs with hostile names from a remote never land: git skips them, the good ones land', async () => {
  // A loopback "git server" that only advertises refs: the commit they name is in the mirror already,
  // so git asks for no pack. Their names try to leave refs/ or to collide with git's own files.
  const source = await makeSourceRepo(path.join(root, 'names-source'), { 'README.md': '# demo\n' });
  const pkt = (s: string) => `${(s.length + 4).toString(16).padStart(4, '0')}${s}`;
  const hostile = ['refs/../config', 'refs/heads/x/../../../HEAD', 'refs/heads/a..b', 'refs/heads/x.lock'];
  const server = http.createServer((req, res) => {
    if (!req.url?.startsWith('/evil.git/info/refs')) return void res.writeHead(404).end();
    const caps = 'multi_ack_detailed side-band-64k thin-pack ofs-delta agent=evil';
    const refs = [
      `${source.head} refs/heads/main\0${caps}\n`,
      `${source.head} refs/heads/side\n`, // a good one, to show the advertisement was read
      ...hostile.map((n) => `${source.head} ${n}\n`),
    ];
    res.writeHead(200, { 'Content-Type': 'application/x-git-upload-pack-advertisement' });
    res.end(`${pkt('# service=git-upload-pack\n')}0000${refs.map(pkt).join('')}0000`);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const remote = `http://127.0.0.1:${(server.address() as AddressInfo).port}/evil.git`;
  try {
    const m = manager('names');
    const mirror = m.mirrorPath(remote);
    await mkdir(path.dirname(mirror), { recursive: true });
    await git(['clone', '--mirror', '--quiet', source.path, mirror], { cwd: root });
    const config = await readFile(path.join(mirror, 'config'), 'utf8');
    await m.mirror(remote); // git skips each funny ref ("Ignoring funny ref") and takes the rest
    expect(await refsOf(mirror)).toEqual(['refs/heads/main', 'refs/heads/side']);
    expect(await readFile(path.join(mirror, 'config'), 'utf8')).toBe(config);
    expect(await readFile(path.join(mirror, 'HEAD'), 'utf8')).toBe('ref: refs/heads/main\n');
    expect(await strays(path.dirname(mirror))).toEqual([]);
  } finally {
    server.close();
  }
}, 30_000);
