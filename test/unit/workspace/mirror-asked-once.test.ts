import { execFileSync } from 'node:child_process';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import { makeSourceRepo, tempDir } from '../../support/git-fixtures.js';

let root: string;
let cleanup: () => Promise<void>;
const PATH = process.env.PATH;
beforeAll(async () => ({ dir: root, cleanup } = await tempDir()));
afterAll(async () => {
  process.env.PATH = PATH;
  await cleanup();
});

/**
 * A worktree of a commit the mirror holds asks git once whether it is there (issue 40: every git call
 * is a process on the path from the label to the agent's first step; it asked twice). Seen through a
 * `git` first on PATH that logs its arguments, then runs git.
 */
it('a worktree of a commit the mirror has asks for the commit once', async () => {
  const source = await makeSourceRepo(path.join(root, 'source'), { 'a.txt': 'a\n' });
  const m = new GitWorkspaceManager({
    cacheDir: path.join(root, 'cache'),
    worktreeDir: path.join(root, 'worktrees'),
  });
  await m.mirror(source.path);
  const bin = path.join(root, 'bin');
  const log = path.join(root, 'git.log');
  const real = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
  execFileSync('mkdir', ['-p', bin]);
  writeFileSync(path.join(bin, 'git'), `#!/bin/sh\necho "$*" >> '${log}'\nexec '${real}' "$@"\n`);
  chmodSync(path.join(bin, 'git'), 0o755);
  writeFileSync(log, '');
  process.env.PATH = `${bin}:${PATH}`;
  try {
    const wt = await m.create(source.path, source.head, 'run-once');
    expect(readFileSync(path.join(wt.path, 'a.txt'), 'utf8')).toBe('a\n');
  } finally {
    process.env.PATH = PATH;
  }
  const asked = readFileSync(log, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('cat-file -e'));
  expect(asked).toEqual([`cat-file -e ${source.head}^{commit}`]);
});
