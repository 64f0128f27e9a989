import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { compose } from '../../../src/cli/compose.js';
import { judge, prepareWorktrees } from '../../../src/verify/judge.js';
import type { Worktree } from '../../../src/workspace/types.js';
import { git } from '../../../src/workspace/git.js';
import { tempDir, testConfig } from '../../support/app.js';

/** A patch of calc.py that does not apply: the judge ends once its worktrees are there, with no Docker. */
const REFUSED =
  'diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a * b\n+    return a + b\n';

/**
 * The judge takes over the cell worktrees made ahead of it (while the agent worked, issue 40) instead of
 * making four of its own, and removes them; worktrees that are not its own (another commit) go, and it
 * makes fresh ones.
 */
describe('the judge and the worktrees made ahead of it', () => {
  let home: string;
  let repo: string;
  const commits: string[] = [];
  beforeAll(async () => {
    home = tempDir('judge-worktrees-');
    repo = path.join(home, 'repo');
    await git(['init', '-q', '-b', 'main', repo], { cwd: home });
    for (const body of ['return a - b', 'return a - b  # again']) {
      writeFileSync(path.join(repo, 'calc.py'), `def add(a, b):\n    ${body}\n`);
      await git(['add', '-A'], { cwd: repo });
      await git(['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', body], { cwd: repo });
      commits.push((await git(['rev-parse', 'HEAD'], { cwd: repo })).stdout.trim());
    }
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  async function judgeWith(runId: string, preparedAt: string) {
    const config = testConfig(home);
    const parts = compose(config);
    const prepared = await prepareWorktrees({
      workspaces: parts.workspaces,
      remote: repo,
      baseCommit: preparedAt,
      runId,
    });
    const made: string[][] = [];
    const workspaces = Object.create(parts.workspaces) as typeof parts.workspaces;
    workspaces.createMany = async (remote, sha, ids) => {
      made.push([...ids]);
      return parts.workspaces.createMany(remote, sha, ids);
    };
    let taken = 0;
    const report = await judge({
      ...parts,
      workspaces,
      config,
      remote: repo,
      baseCommit: commits[0]!,
      patch: REFUSED,
      dockerfile: 'FROM scratch\n',
      testArgv: ['true'],
      runId,
      worktrees: async (): Promise<Worktree[]> => (taken++, prepared),
    });
    const left = readdirSync(config.worktreeDir).filter((n) => n.startsWith(runId));
    return { report, prepared, made, taken, left };
  }

  it('uses its own, makes none, and removes them', async () => {
    const { report, prepared, made, taken, left } = await judgeWith('run-a-verify', commits[0]!);
    expect(report.verdict).toBe('patch_does_not_apply');
    expect(taken).toBe(1);
    expect(made).toEqual([]);
    for (const wt of prepared) expect(report.commands.join('\n')).toContain(wt.path);
    expect(left).toEqual([]);
  }, 20_000);

  it('replaces worktrees at another commit with fresh ones at its base', async () => {
    const { report, made, left } = await judgeWith('run-b-verify', commits[1]!);
    expect(report.verdict).toBe('patch_does_not_apply');
    expect(report.base_commit).toBe(commits[0]);
    expect(made).toEqual([
      ['patched', 'patch_tests', 'patched_source', 'base'].map((c) => `run-b-verify-${c}`),
    ]);
    expect(left).toEqual([]);
  }, 20_000);
});
