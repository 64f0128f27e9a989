import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../../../src/config/config.js';
import { repoSource } from '../../../src/demo/calculator.js';
import type { GitHubEmulator } from '../../../src/emulator/github.js';
import { startScriptedModelServer, type ScriptedModelServer } from '../../../src/emulator/scripted-model.js';
import { branchFor } from '../../../src/publish/pr.js';
import type { RunningApp } from '../../../src/app.js';
import { startEmulator, tempDir, testConfig } from '../../support/app.js';
import { machineCa } from '../../support/ca.js';
import { needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { startDockerApp } from '../../support/e2e.js';
import { NODE_FIXTURE, nodeDockerfile, RUNNER_ARGV } from '../../support/node.js';
import { fileVersion } from '../../../src/tools/files.js';

/**
 * A JavaScript repository whose tests need a devDependency from the npm registry (jest, from the lockfile)
 * repaired end to end: label → the model builds its environment as the task text says → fix → the judge's
 * per-test evidence → draft PR. On this machine npm is reached through the egress CA
 * (AGENTICFIX_BUILD_CA_FILE); on a machine without one the same test runs with the setting unset.
 */

const O = 'octo';
const R = 'slugger';
const BUGGY = ".replace(/^-/, '');";
const FIXED = ".replace(/^-|-$/g, '');";
const engine = await needDocker();
let emu: GitHubEmulator;
let home: string;
let config: Config;
let app: RunningApp;
let model: ScriptedModelServer;

beforeAll(async () => {
  emu = await startEmulator();
  home = tempDir('e2e-node-');
  const ca = machineCa(home);
  config = testConfig(path.join(home, 'app'), ca ? { AGENTICFIX_BUILD_CA_FILE: ca } : {});
  const source = readFileSync(path.join(NODE_FIXTURE, 'slug.js'), 'utf8');
  model = await startScriptedModelServer(
    [
      { name: 'build_environment', arguments: { dockerfile: nodeDockerfile(config.sandbox.baseImage) } },
      { name: 'run_tests', arguments: {} },
      { name: 'read_file', arguments: { path: 'slug.js' } },
      {
        name: 'edit_file',
        arguments: {
          path: 'slug.js',
          old_text: BUGGY,
          new_text: FIXED,
          version: fileVersion(source),
        },
      },
      { name: 'run_tests', arguments: {} },
      { name: 'finish', arguments: { summary: 'slugify drops a trailing dash too' } },
    ].map((c) => ({ tool_calls: [c] })),
    { model: 'scripted-node' },
  );
  emu.createRepo(O, R, { fromDir: repoSource(home, RUNNER_ARGV.jest, { fixture: NODE_FIXTURE }) });
  emu.setPermission(O, R, 'maint', 'write');
  app = await startDockerApp(emu, config, model.url, 'scripted-node');
});
afterAll(async () => {
  await app?.close();
  await model?.close();
  await emu?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

describeIf(engine)('a JavaScript repository whose tests need npm packages, end to end', () => {
  it('is repaired, verified with per-test ids and opened as a draft PR', async () => {
    const issue = emu.createIssue(O, R, {
      title: 'slugify leaves a trailing dash',
      body: "slugify('Hello, World!') returns 'hello-world-'",
      user: 'rae',
    });
    await emu.label(O, R, issue, 'agenticfix', 'maint');
    await app.idle();

    const [run] = await app.store.forIssue(O, R, issue);
    expect(run).toMatchObject({ state: 'done', verdict: 'verified', stop_reason: 'completed' });
    // The task text told the model how a Node project is set up, from its lockfile.
    const task = (model.requests[0]!.body as { messages: { content: string }[] }).messages[1]!.content;
    expect(task).toContain('This is a Node project');
    // Issue 40: the Node.js language image is named first, with its version, and the recipe starts FROM it.
    expect(task).toMatch(/Base images available locally: agenticfix\/node:22 \(Node\.js 22\.\d+\.\d+;/);
    expect(task).toContain('    FROM agenticfix/node:22\n');
    expect(task).toContain('COPY package.json package-lock.json ./');
    // Before the fix the model saw jest's failure by test id.
    const firstRun = (model.requests[2]!.body as { messages: { role: string; content: string }[] }).messages
      .filter((m) => m.role === 'tool')
      .at(-1)!.content;
    expect(JSON.parse(firstRun).data).toMatchObject({ status: 'failed', summary: { failed: 1, passed: 2 } });

    const pr = emu.pulls.find((p) => p.repo === `${O}/${R}` && p.pull?.head === branchFor(issue))!;
    expect(pr.pull).toMatchObject({ draft: true });
    const [evidence, , runConfig] = emu
      .comments(pr.number, `${O}/${R}`)
      .filter((c) => c.user === emu.botLogin)
      .map((c) => c.body);
    expect(evidence).toMatch(/^## Test evidence/);
    expect(evidence).toContain('`verified`');
    expect(evidence).toContain('test/jest/slug.test.js > slugify > drops trailing punctuation');
    // Whether builds used a proxy or an extra CA is on record, never their values.
    const ca = config.sandbox.buildNetwork.caFile !== undefined;
    expect(runConfig).toContain(`- Build network: proxy no, extra CA ${ca ? 'yes' : 'no'}`);
    if (ca) expect(runConfig).not.toContain(config.sandbox.buildNetwork.caFile);

    // The judge keeps its report beside the run's own directory.
    const report = JSON.parse(
      readFileSync(path.join(config.runsDir, `${run!.id}-verify`, 'report.json'), 'utf8'),
    );
    expect(report.cells).toHaveLength(4);
    for (const cell of report.cells) expect(cell).toMatchObject({ runner: 'jest', per_test: true });
    const ids = (name: string) =>
      report.cells
        .find((c: { name: string }) => c.name === name)
        .results.map((r: { id: string }) => r.id)
        .sort();
    expect(ids('patched')).toEqual(ids('base'));
  }, 900_000);
});
