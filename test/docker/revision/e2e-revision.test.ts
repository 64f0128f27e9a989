import { rmSync } from 'node:fs';
import path from 'node:path';
import {
  CALCULATOR_TEST_ARGV,
  calculatorFixCalls,
  calculatorRevisionCalls,
  calculatorScript,
  fixedCalculator,
  repoSource,
} from '../../../src/demo/calculator.js';
import type { GitHubEmulator } from '../../../src/emulator/github.js';
import { startScriptedModelServer, type ScriptedModelServer } from '../../../src/emulator/scripted-model.js';
import { branchFor } from '../../../src/publish/pr.js';
import { fileVersion } from '../../../src/tools/files.js';
import type { RunningApp } from '../../../src/app.js';
import { git } from '../../../src/workspace/git.js';
import { startEmulator, tempDir, testConfig } from '../../support/app.js';
import { needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { startDockerApp } from '../../support/e2e.js';

/**
 * Revisions end to end: signed webhooks from the GitHub emulator into the real app, the real agent
 * loop driven by the scripted model, the Docker sandbox, the judge and real git pushes.
 */

const O = 'octo';
const R = 'calculator';
const FILE = 'src/calculator.js';

/** src/calculator.js after the fix and revision 1 (the error message names the divisor). */
function revisedCalculator(): string {
  const edit = calculatorRevisionCalls().find((c) => c.name === 'edit_file')!.arguments as {
    old_text: string;
    new_text: string;
  };
  return fixedCalculator()[0].replace(edit.old_text, edit.new_text);
}

describeIf(await needDocker())('revisions through the real pipeline', () => {
  let emu: GitHubEmulator;
  let home: string;
  let app: RunningApp;
  let model: ScriptedModelServer;

  beforeAll(async () => {
    emu = await startEmulator();
    home = tempDir('e2e-revision-');
    const config = testConfig(path.join(home, 'app'));
    const more = 'revise_on: [command]\nci_feedback: { enabled: true, max_rounds: 1 }\n';
    emu.createRepo(O, R, { fromDir: repoSource(home, CALCULATOR_TEST_ARGV, { more }) });
    emu.setPermission(O, R, 'maint', 'write');
    emu.setPermission(O, R, 'visitor', 'read');
    // One scripted model serves the runs in order: the fix, revision 1, then a revision that breaks add.
    const revised = revisedCalculator();
    model = await startScriptedModelServer(
      [
        ...calculatorScript(config.sandbox.baseImage, calculatorFixCalls()),
        ...calculatorScript(config.sandbox.baseImage, calculatorRevisionCalls()),
        ...calculatorScript(config.sandbox.baseImage, [
          {
            name: 'edit_file',
            arguments: {
              path: FILE,
              old_text: '  return a + b;',
              new_text: '  return a + b + 1;',
              version: fileVersion(revised),
            },
          },
        ]),
      ],
      { model: 'scripted-e2e' },
    );
    app = await startDockerApp(emu, config, model.url, 'scripted-e2e');
  });
  afterAll(async () => {
    await app?.close();
    await model?.close();
    await emu?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it('revise keeps a maintainer commit and pushes a verified commit; a failing check suite leads to a regression that pushes nothing', async () => {
    const issue = emu.createIssue(O, R, { title: 'subtract and divide are wrong', user: 'rae' });
    await emu.label(O, R, issue, 'agenticfix', 'maint');
    await app.idle();
    const [first] = await app.store.forIssue(O, R, issue);
    expect(first).toMatchObject({ state: 'done', verdict: 'verified' });
    const pr = first!.pr_number!;
    const branch = branchFor(issue);
    const bot = () => emu.comments(pr).filter((c) => c.user === emu.botLogin);

    const human = emu.pushFiles(
      O,
      R,
      branch,
      { 'NOTES.md': 'Reviewed by maint.\n' },
      {
        message: 'Maintainer note',
        author: 'maint',
      },
    );
    const ask = '/agenticfix revise make the error message name the argument';
    await emu.comment(O, R, pr, ask, 'visitor');
    await app.idle();
    expect(await app.store.forIssue(O, R, issue)).toHaveLength(1);
    expect(bot().at(-1)!.body).toContain('Only people with write access');

    await emu.comment(O, R, pr, ask, 'maint');
    await app.idle();
    const r1 = (await app.store.forIssue(O, R, issue))[0]!;
    expect(r1).toMatchObject({ revision: 1, trigger: 'revise', verdict: 'verified', head_commit: human });
    const head = emu.branchHead(O, R, branch)!;
    expect(head).toBe(r1.pushed_commit);
    expect(emu.pullCommits(O, R, pr)).toEqual([first!.pushed_commit, human, head]);
    expect(emu.pulls.filter((p) => p.pull?.head === branch)).toHaveLength(1);
    const clone = tempDir('e2e-revision-clone-');
    await git(['clone', '--quiet', '--branch', branch, `${emu.url}/git/${O}/${R}.git`, clone], { cwd: home });
    const diff = (await git(['diff', first!.base_commit, 'HEAD'], { cwd: clone })).stdout;
    expect(diff).toContain('+Reviewed by maint.');
    expect(diff).toContain('the divisor b is 0');
    expect(diff).toContain('+  return a - b;');
    rmSync(clone, { recursive: true, force: true });
    const evidence = bot().find((c) => c.body.startsWith('## Revision 1\n'))!;
    expect(evidence.body).toContain(head);
    expect(evidence.body).toContain('verified');

    // CI fails on the new head: a revision starts from the failing run; the judge finds a regression.
    await emu.checkSuite(O, R, {
      branch,
      runs: [{ name: 'node', conclusion: 'failure', output: { summary: 'lint failed' } }],
    });
    await app.idle();
    const r2 = (await app.store.forIssue(O, R, issue))[0]!;
    expect(r2).toMatchObject({ revision: 2, trigger: 'checks', verdict: 'regression', pushed_commit: null });
    expect(emu.branchHead(O, R, branch)).toBe(head);
    const refused = bot().find((c) => c.body.startsWith('## Revision 2: nothing pushed'))!;
    expect(refused.body).toContain('Candidate patch');

    // max_rounds: 1 — another failing suite starts nothing.
    await emu.checkSuite(O, R, { branch, runs: [{ name: 'node', conclusion: 'failure' }] });
    await app.idle();
    expect(await app.store.forIssue(O, R, issue)).toHaveLength(3);
    expect(model.remaining()).toBe(0);
  }, 300_000); // three Docker runs (a fix, two revisions), each built and judged
});
