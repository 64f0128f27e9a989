import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, readlinkSync, statSync, utimesSync } from 'node:fs';
import { mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { worktreeGit } from '../../../src/workspace/git.js';
import { markLent, removeStage, stagePath, syncStage, wasLent } from '../../../src/workspace/stage.js';
import { removeTree } from '../../../src/workspace/tree.js';
import { tempDir, writeFiles } from '../../support/git-fixtures.js';

/** The stage (src/workspace/stage.ts): the only way the host reads a lent worktree, as data. */

const OPTS = {
  maxFileBytes: 64,
  gitlinks: new Set(['vendor/lib']),
  excludedNames: new Set(['node_modules']),
};

let tmp: { dir: string; cleanup: () => Promise<void> };
let n = 0;
beforeAll(async () => {
  tmp = await tempDir('agenticfix-stage-');
});
afterAll(() => removeTree(tmp.dir));

async function tree(files: Record<string, string>): Promise<string> {
  const wt = path.join(tmp.dir, `wt-${++n}`);
  await mkdir(wt);
  await writeFiles(wt, files);
  return wt;
}

const staged = (wt: string, rel: string) => path.join(stagePath(wt), rel);

describe('syncStage', () => {
  it('leaves out what lies deeper than PATH_MAX (issue 35), also a directory only the stage could not name', async () => {
    const wt = await tree({ 'top.txt': 'top\n' });
    // Directories of 200 bytes, the last one sized so that its path in the worktree is 4,093 bytes:
    // within PATH_MAX there, past it in the stage (whose name is longer), then 40 levels more.
    const names: string[] = [];
    let length = Buffer.byteLength(wt);
    while (4093 - length > 201) {
      names.push('d'.repeat(200));
      length += 201;
    }
    names.push('e'.repeat(4093 - length - 1), ...Array<string>(40).fill('f'.repeat(200)));
    execFileSync(
      'sh',
      ['-c', 'for n in "$@"; do mkdir "$n" && cd -P "$n" || exit 1; done; echo deep > f', 'sh', ...names],
      {
        cwd: wt,
      },
    );
    const s = await syncStage(wt, OPTS);
    expect(readFileSync(staged(wt, 'top.txt'), 'utf8')).toBe('top\n');
    const deep = names.slice(0, names.findIndex((n) => n.startsWith('e')) + 1).join('/');
    expect(s.skipped).toEqual([{ path: deep, bytes: 0, reason: 'too_deep' }]);
    expect(s.excluded).toEqual([deep]);
    await removeStage(wt);
    expect(existsSync(stagePath(wt))).toBe(false);
  });

  it('copies regular files, directories and link text; leaves out .git at any depth, gitlinks, large and special files', async () => {
    const wt = await tree({
      '.git': 'gitdir: /somewhere\n',
      'src/a.py': 'a\n',
      'big.bin': 'x'.repeat(100),
      'nested/.git/config': '[core]\n',
      'nested/code.py': 'n\n',
      'Upper/.GIT/HEAD': 'x\n',
      'vendor/lib/file': 'sub\n',
      'node_modules/m/index.js': 'm\n',
    });
    await symlink('/etc/passwd', path.join(wt, 'leak'));
    execFileSync('mkfifo', [path.join(wt, 'pipe')]);
    const s = await syncStage(wt, OPTS);
    expect(readFileSync(staged(wt, 'src/a.py'), 'utf8')).toBe('a\n');
    expect(readlinkSync(staged(wt, 'leak'))).toBe('/etc/passwd');
    for (const absent of ['.git', 'nested', 'Upper', 'vendor/lib', 'node_modules', 'big.bin', 'pipe'])
      expect(existsSync(staged(wt, absent))).toBe(false);
    expect(s.skipped).toEqual(
      expect.arrayContaining([
        { path: 'nested/', bytes: 0, reason: 'repository' },
        { path: 'Upper/', bytes: 0, reason: 'repository' },
        { path: 'pipe', bytes: 0, reason: 'special' },
      ]),
    );
    expect(s.large).toEqual([{ path: 'big.bin', abs: path.join(wt, 'big.bin'), bytes: 100 }]);
    expect(s.excluded.sort()).toEqual(['Upper', 'big.bin', 'nested', 'pipe']);
  });

  it('follows changes between syncs: same size and mtime, type changes, deletions; never through a replaced directory', async () => {
    const wt = await tree({ 'f.txt': 'one\n', 'd/inner.txt': 'in\n', 'gone.txt': 'g\n', 'x/y.txt': 'y\n' });
    const outside = path.join(tmp.dir, `outside-${n}`);
    await writeFiles(outside, { 'inner.txt': 'host file\n' });
    await syncStage(wt, OPTS);
    // Same size, mtime put back: the change time still moves, so the new content is copied.
    const { mtime } = statSync(path.join(wt, 'f.txt'));
    await writeFile(path.join(wt, 'f.txt'), 'two\n');
    utimesSync(path.join(wt, 'f.txt'), mtime, mtime);
    // A directory becomes a link to a host directory holding a file of the same name; a file a directory.
    await rm(path.join(wt, 'd'), { recursive: true });
    await symlink(outside, path.join(wt, 'd'));
    await rm(path.join(wt, 'gone.txt'));
    await rm(path.join(wt, 'x'), { recursive: true });
    await writeFile(path.join(wt, 'x'), 'now a file\n');
    await syncStage(wt, OPTS);
    expect(readFileSync(staged(wt, 'f.txt'), 'utf8')).toBe('two\n');
    expect(lstatSync(staged(wt, 'd')).isSymbolicLink()).toBe(true);
    expect(existsSync(staged(wt, 'gone.txt'))).toBe(false);
    expect(readFileSync(staged(wt, 'x'), 'utf8')).toBe('now a file\n');
    // Removing the stale d/inner.txt must not have gone through the new link.
    expect(readFileSync(path.join(outside, 'inner.txt'), 'utf8')).toBe('host file\n');
    // The executable bit is what git records of a mode.
    execFileSync('chmod', ['755', path.join(wt, 'x')]);
    await syncStage(wt, OPTS);
    expect(statSync(staged(wt, 'x')).mode & 0o111).not.toBe(0);
  });

  it('a lent worktree is refused to worktreeGit, and removeStage takes its stage and mark away', async () => {
    const wt = await tree({ 'a.txt': 'a\n' });
    await markLent(wt);
    expect(wasLent(wt)).toBe(true);
    await expect(worktreeGit({ path: wt, gitDir: wt }, ['status'])).rejects.toThrow(
      /was lent to a container/,
    );
    await syncStage(wt, OPTS);
    await removeStage(wt);
    expect(existsSync(stagePath(wt))).toBe(false);
    expect(wasLent(wt)).toBe(false);
  });
});
