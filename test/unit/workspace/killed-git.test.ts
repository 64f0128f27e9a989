import { existsSync, readdirSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { git } from '../../../src/workspace/git.js';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import { commitAll, makeSourceRepo, tempDir, writeFiles } from '../../support/git-fixtures.js';

/**
 * Faults, second round: what a git process killed in a mirror leaves behind (serve or a worker killed,
 * or the fetch deadline's SIGKILL). Git has no stale-lock detection: a `refs/…/x.lock` or
 * `packed-refs.lock` left by a killed fetch made every later fetch of that repository fail ("Unable to
 * create '….lock': File exists"), so every run on it failed until someone deleted the file by hand. Every
 * writer of a mirror's refs runs under the mirror's lock (a fetch's `gc --auto` packs refs before it
 * detaches), so the lock files a holder of that lock finds there are a dead process's, and they go. Git's own files, planted as
 * a killed git leaves them: a kill lands inside a millisecond-long window only by luck.
 */

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => ({ dir: root, cleanup } = await tempDir()));
afterAll(async () => cleanup());

async function setup(name: string) {
  const source = await makeSourceRepo(path.join(root, `${name}-source`), { 'a.txt': 'one\n' });
  const m = new GitWorkspaceManager({
    cacheDir: path.join(root, `${name}-cache`),
    worktreeDir: path.join(root, `${name}-worktrees`),
  });
  return { source, m, mirror: await m.mirror(source.path) };
}

it("a fetch killed while it wrote refs: the next run's fetch clears its locks, temporary pack and half clone", async () => {
  const { source, m, mirror } = await setup('refs');
  await writeFiles(source.path, { 'a.txt': 'two\n' });
  const next = await commitAll(source.path, 'second');
  const left = [
    path.join(mirror, 'refs', 'heads', 'main.lock'),
    path.join(mirror, 'packed-refs.lock'),
    path.join(mirror, 'objects', 'pack', 'tmp_pack_Xa81Qz'),
  ];
  for (const file of left) await writeFile(file, 'half\n');
  const halfClone = `${mirror}.tmp-0badc0de`;
  await mkdir(path.join(halfClone, 'objects'), { recursive: true });

  const wt = await m.create(source.path, next, 'r-after-kill'); // was: "cannot lock ref 'refs/heads/main'"
  expect((await git(['rev-parse', 'HEAD'], { cwd: wt.path })).stdout.trim()).toBe(next);
  expect((await git(['rev-parse', 'main'], { cwd: mirror })).stdout.trim()).toBe(next);
  expect(left.concat(halfClone).filter((f) => existsSync(f))).toEqual([]);
  await m.remove(wt);
});

it("a worktree add killed mid-way (git's 'initializing' lock): its removal prunes it, so the mirror can be retired", async () => {
  const { source, m, mirror } = await setup('add');
  const wt = await m.create(source.path, source.head, 'r-killed-add');
  // What `git worktree add` holds until it is done; a kill before the end leaves it.
  await writeFile(path.join(wt.gitDir, 'locked'), 'initializing\n');

  expect(await m.removeOlderThan(-Infinity)).toEqual([wt.path]); // the start-up sweep
  const admin = path.join(mirror, 'worktrees');
  expect(existsSync(admin) ? readdirSync(admin) : []).toEqual([]); // was: [ 'r-killed-add' ], for ever
});
