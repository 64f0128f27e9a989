import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { DockerEnvironmentBuilder } from '../../../src/images/builder.js';
import type { SandboxFactory } from '../../../src/environment/types.js';
import { gradeInstance } from '../../../src/verify/task.js';
import type { VerificationReport } from '../../../src/verify/types.js';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import { testConfig } from '../../support/app.js';
import { makeSourceRepo, tempDir } from '../../support/git-fixtures.js';

/**
 * Red team (after issue 35): grading a task puts the files its test patch touches back to the base;
 * one the base lacks was removed with fs.rm at `<worktree>/<path>`, which follows a symbolic link on
 * the way. The candidate patch (the model's) is applied first, and may make a directory of that path a
 * link to anywhere on the host: the host file of that name there was deleted. Git removes it now, and
 * git never goes through a link in the tree.
 */

let dir: string;
let cleanup: () => Promise<void>;
let outside: string;
let source: { path: string; head: string };
beforeAll(async () => {
  ({ dir, cleanup } = await tempDir());
  outside = path.join(dir, 'outside');
  mkdirSync(outside);
  source = await makeSourceRepo(path.join(dir, 'source'), { 'tests/test_old.py': 'def test_old(): pass\n' });
});
afterAll(() => cleanup());

/** A patch that creates `file` (mode 100644, or a link with 120000) holding `line`. */
const creates = (file: string, line: string, mode = '100644') =>
  [
    `diff --git a/${file} b/${file}`,
    `new file mode ${mode}`,
    '--- /dev/null',
    `+++ b/${file}`,
    '@@ -0,0 +1 @@',
    `+${line}`,
    ...(mode === '120000' ? ['\\ No newline at end of file'] : []),
    '',
  ].join('\n');

/** Grades the candidate against a test patch that adds `testFile`; no engine (the build step fails). */
async function grade(n: number, candidate: string, testFile: string): Promise<VerificationReport> {
  const config = testConfig(path.join(dir, `home-${n}`));
  const refuse = () => {
    throw new Error('no engine in this test');
  };
  return gradeInstance(
    {
      instance_id: `links-${n}`,
      repo: source.path,
      base_commit: source.head,
      problem_statement: 'x',
      test_patch: creates(testFile, 'def test_new(): pass'),
      FAIL_TO_PASS: [`${testFile}::test_new`],
      PASS_TO_PASS: [],
      test_command: ['pytest'],
      dockerfile: 'FROM scratch\n',
    },
    candidate,
    config,
    {
      workspaces: new GitWorkspaceManager({ cacheDir: config.cacheDir, worktreeDir: config.worktreeDir }),
      images: new Proxy({}, { get: () => refuse }) as unknown as DockerEnvironmentBuilder,
      sandboxes: { local: refuse, container: refuse } as unknown as SandboxFactory,
      outDir: path.join(dir, `report-${n}`),
    },
  );
}

describe('grading a task: resetting test files never leaves the worktree', () => {
  it("a candidate that makes the test patch's new directory a link out of the tree: the host file there stays", async () => {
    const victim = path.join(outside, 'test_new.py');
    writeFileSync(victim, 'the host keeps this\n');
    const report = await grade(1, creates('tests/new', outside, '120000'), 'tests/new/test_new.py');
    expect(existsSync(victim)).toBe(true); // was deleted
    expect(report.verdict).toBe('infra_error');
    expect(report.reason).toMatch(/test_patch does not apply.*beyond a symbolic link/s);
  });

  it('a candidate that wrote its own copy of a new test file: it is removed and the test patch applies', async () => {
    const report = await grade(
      2,
      creates('tests/test_new.py', 'def test_new(): assert False'),
      'tests/test_new.py',
    );
    expect(report.reason).not.toMatch(/test_patch does not apply/);
    expect(report.commands).toContain('git apply --binary (test_patch)');
  });
});
