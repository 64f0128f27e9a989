import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { compose } from '../../../src/cli/compose.js';
import { judge } from '../../../src/verify/judge.js';
import { git } from '../../../src/workspace/git.js';
import { tempDir, testConfig } from '../../support/app.js';

/**
 * The judge's worktrees are given back beside publishing when its caller takes their cleanup
 * (`afterward`, issue 40): the verdict is not held up by them, their removal begins only when the
 * caller starts it, and they are all gone once it resolves. A patch that does not apply ends the judge
 * after its four worktrees were made, with no Docker.
 */
describe('the judge hands its cleanup to its caller', () => {
  let home: string;
  beforeAll(() => {
    home = tempDir('judge-cleanup-');
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('returns its verdict before its worktrees go; the handed start removes them all', async () => {
    const repo = path.join(home, 'repo');
    await git(['init', '-q', '-b', 'main', repo], { cwd: home });
    writeFileSync(path.join(repo, 'calc.py'), 'def add(a, b):\n    return a - b\n');
    await git(['add', '-A'], { cwd: repo });
    await git(['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'base'], { cwd: repo });
    const base = (await git(['rev-parse', 'HEAD'], { cwd: repo })).stdout.trim();
    const config = testConfig(home);
    const worktrees = () => readdirSync(config.worktreeDir).filter((n) => n.startsWith('run-j-verify'));
    // The worktrees' removal is not even asked for before the caller starts it.
    const parts = compose(config);
    let asked = 0;
    const workspaces = Object.create(parts.workspaces) as typeof parts.workspaces;
    workspaces.removeMany = async (wts) => {
      asked++;
      return parts.workspaces.removeMany(wts);
    };
    let start: (() => Promise<void>) | null = null;
    const report = await judge({
      ...parts,
      workspaces,
      config,
      remote: repo,
      baseCommit: base,
      patch:
        'diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a * b\n+    return a + b\n',
      dockerfile: 'FROM scratch\n',
      testArgv: ['true'],
      runId: 'run-j-verify',
      afterward: (s) => (start = s),
    });
    expect(report.verdict).toBe('patch_does_not_apply');
    expect(start).not.toBeNull();
    await new Promise((r) => setImmediate(r));
    expect(asked).toBe(0);
    expect(worktrees().length).toBe(4);
    const cleanup = start!();
    expect(start!()).toBe(cleanup); // started once
    await cleanup;
    expect(asked).toBe(1);
    expect(worktrees()).toEqual([]);
    expect(existsSync(path.join(config.worktreeDir, 'run-j-verify-patched'))).toBe(false);
  }, 20_000);
});
