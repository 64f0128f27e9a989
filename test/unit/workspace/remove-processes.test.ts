import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import { stagePath } from '../../../src/workspace/stage.js';
import { makeSourceRepo, tempDir } from '../../support/git-fixtures.js';
import { gitCalls } from '../../support/git-shim.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => ({ dir: root, cleanup } = await tempDir()));
afterAll(() => cleanup());

/**
 * Issue 40: the judge's four worktrees were given back by four `rm` processes (one a worktree set
 * aside, one more a stage) beside publishing, each holding the event loop while it started. One
 * removes them all; a tree that resists still gets its own second try.
 */
it("a judge's worktrees and their stages go in one rm process", async () => {
  const source = await makeSourceRepo(path.join(root, 'source'), { 'a.txt': 'a\n', 'd/b.txt': 'b\n' });
  const m = new GitWorkspaceManager({
    cacheDir: path.join(root, 'cache'),
    worktreeDir: path.join(root, 'worktrees'),
  });
  await m.mirror(source.path);
  const wts = await m.createMany(source.path, source.head, ['j1', 'j2', 'j3', 'j4']);
  mkdirSync(stagePath(wts[0]!.path)); // an export's stage beside one of them
  writeFileSync(path.join(stagePath(wts[0]!.path), 'f'), 'x');
  const calls = await gitCalls(path.join(root, 'shim'), () => m.removeMany(wts), [], 'rm');
  expect(calls).toHaveLength(1); // was 5
  expect(calls[0]).toMatch(/^-rf -- (\S+ ){4}\S+$/);
  expect(readdirSync(path.join(root, 'worktrees'))).toEqual([]);
  for (const wt of wts) expect(existsSync(wt.path)).toBe(false);
});
