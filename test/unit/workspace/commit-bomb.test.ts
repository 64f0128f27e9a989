import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { git } from '../../../src/workspace/git.js';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import { makeSourceRepo, tempDir } from '../../support/git-fixtures.js';

/**
 * Red team (after issue 35): the base commit is checked out on the host (`git reset --hard`) before
 * any limit is looked at, and a git pack is compressed with each blob stored once, whatever number of
 * paths name it. A repository whose tree names one 1 MiB blob of zeros at 40 paths is a push of a few
 * KB and a 40 MiB checkout; at 100,000 paths of GitHub's largest file (100 MB) it is 10 TB, and the
 * disk that the store, the mirrors and every other run share is full. The same for a tree of millions
 * of empty files. The tree is now measured from git's objects first: over AGENTICFIX_MAX_WORKTREE_MB or
 * _FILES, nothing is checked out and the run is told why.
 */

const MiB = 1024 * 1024;
let root: string;
let cleanup: () => Promise<void>;
let source: string;

/** A commit on the source repo whose tree names `blob` (content) at `count` paths. */
async function bomb(content: Buffer, count: number, message: string): Promise<string> {
  const sha = (await git(['hash-object', '-w', '--stdin'], { cwd: source, input: content })).stdout.trim();
  const lines = Array.from({ length: count }, (_, i) => `100644 ${sha}\tbomb/f${i}\n`).join('');
  await git(['read-tree', '--empty'], { cwd: source });
  await git(['update-index', '--index-info'], { cwd: source, input: lines });
  await git(['commit', '-q', '-m', message], { cwd: source });
  return (await git(['rev-parse', 'HEAD'], { cwd: source })).stdout.trim();
}

beforeAll(async () => {
  ({ dir: root, cleanup } = await tempDir());
  source = (await makeSourceRepo(path.join(root, 'source'), { 'README.md': '# demo\n' })).path;
});
afterAll(() => cleanup());

const manager = (name: string) =>
  new GitWorkspaceManager({
    cacheDir: path.join(root, `${name}-cache`),
    worktreeDir: path.join(root, `${name}-worktrees`),
    limits: { maxWorktreeBytes: 8 * MiB, maxWorktreeEntries: 1000 },
  });

describe('a base commit over the worktree limits is never checked out', () => {
  it('one 1 MiB blob at 40 paths (40 MiB) under an 8 MiB limit: refused before a file is written', async () => {
    const head = await bomb(Buffer.alloc(MiB), 40, 'bytes bomb');
    const packed = (await git(['count-objects', '-v'], { cwd: source })).stdout;
    expect(Number(/size: (\d+)/.exec(packed)?.[1])).toBeLessThan(1024); // KiB of loose objects: under 1 MiB
    const m = manager('bytes');
    await expect(m.create(source, head, 'r-bytes')).rejects.toThrow(
      /is not checked out: its files come to more than 8 MB \(AGENTICFIX_MAX_WORKTREE_MB\)/,
    ); // was: 40 MiB checked out
    expect(existsSync(path.join(root, 'bytes-worktrees', 'r-bytes'))).toBe(false);
    // The judge's worktrees too.
    await expect(m.createMany(source, head, ['r-j1', 'r-j2'])).rejects.toThrow(/MAX_WORKTREE_MB/);
    expect(await readdir(path.join(root, 'bytes-worktrees'))).toEqual([]);
  });

  it('2,000 empty files under a 1,000 entry limit: refused', async () => {
    const head = await bomb(Buffer.alloc(0), 2000, 'entries bomb');
    await expect(manager('entries').create(source, head, 'r-entries')).rejects.toThrow(
      /more than 1000 files and directories \(AGENTICFIX_MAX_WORKTREE_FILES\)/,
    );
  });

  it('a tree within the limits is checked out as before', async () => {
    const head = await bomb(Buffer.alloc(64 * 1024), 40, 'within'); // 2.5 MiB, 41 entries
    const wt = await manager('within').create(source, head, 'r-within');
    expect((await readdir(path.join(wt.path, 'bomb'))).length).toBe(40);
  });
});
