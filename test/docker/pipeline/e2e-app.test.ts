import { readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import Database from 'better-sqlite3';
import Docker from 'dockerode';
import type { Config } from '../../../src/config/config.js';
import {
  CALCULATOR_DIR,
  CALCULATOR_TEST_ARGV,
  calculatorFixCalls,
  calculatorScript,
  repoSource,
} from '../../../src/demo/calculator.js';
import type { GitHubEmulator } from '../../../src/emulator/github.js';
import {
  startScriptedModelServer,
  type ScriptedModelServer,
  type ScriptStep,
} from '../../../src/emulator/scripted-model.js';
import { LABEL, OWNER_LABEL } from '../../../src/environment/docker.js';
import { processOwner } from '../../../src/environment/lending.js';
import { LEASE_LABEL } from '../../../src/images/leases.js';
import { PARKED } from '../../../src/bench/app.js';
import { branchFor } from '../../../src/publish/pr.js';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';
import type { RunningApp } from '../../../src/app.js';
import { git } from '../../../src/workspace/git.js';
import { SECRET, startEmulatedApp, startEmulator, tempDir, testConfig } from '../../support/app.js';
import { needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { freePort, startChild, startDockerApp, until } from '../../support/e2e.js';
import { fileVersion } from '../../../src/tools/files.js';

/**
 * The product end to end: signed webhooks from the GitHub emulator into the real Probot app, the real
 * agent loop driven by the scripted model over HTTP, the Docker sandbox, the judge and real git pushes.
 */

const O = 'octo';
const FILE = 'src/calculator.js';
const docker = new Docker();
const WAIT_MS = 120_000;
const NEVER_ENDS = ['node', '-e', 'setTimeout(() => {}, 600000)'];

/** Edits of src/calculator.js applied one after another, each with the version it will find. */
function edits(pairs: [string, string][]) {
  let text = readFileSync(path.join(CALCULATOR_DIR, FILE), 'utf8');
  const calls: { name: string; arguments: Record<string, unknown> }[] = [
    { name: 'read_file', arguments: { path: FILE } },
  ];
  for (const [old_text, new_text] of pairs) {
    calls.push({
      name: 'edit_file',
      arguments: { path: FILE, old_text, new_text, version: fileVersion(text) },
    });
    text = text.replace(old_text, new_text);
  }
  return [...calls, { name: 'run_tests', arguments: {} }];
}

/**
 * This process's test containers (not image leases, which are containers that never run). The engine is
 * shared with the suites running beside this one and with other checkouts: theirs are not counted.
 */
const agentContainers = async () =>
  docker
    .listContainers({ all: true, filters: { label: [`${LABEL}=1`, `${OWNER_LABEL}=${processOwner()}`] } })
    .then((l) => l.filter((c) => !c.Labels[LEASE_LABEL]).length);
const engine = await needDocker();
let emu: GitHubEmulator;
let home: string;
beforeAll(async () => {
  emu = await startEmulator();
  home = tempDir('e2e-');
});
afterAll(async () => {
  await emu?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

describeIf(engine)(
  'label → verified draft PR, rerun, cancel, outsiders, redelivery, unverified results',
  () => {
    const R = 'calculator';
    let config: Config;
    let app: RunningApp;
    let model: ScriptedModelServer;
    const runsOf = (n: number, repo = R) => app.store.forIssue(O, repo, n);
    const bot = (n: number, repo = R) =>
      emu
        .comments(n, `${O}/${repo}`)
        .filter((c) => c.user === emu.botLogin)
        .map((c) => c.body);

    beforeAll(async () => {
      config = testConfig(path.join(home, 'app'));
      // One scripted model serves the runs of this block in order.
      const script: ScriptStep[] = [
        // 1. the fix
        ...calculatorScript(config.sandbox.baseImage, calculatorFixCalls()),
        // 2. the rerun: another correct fix, so the branch really moves
        ...calculatorScript(
          config.sandbox.baseImage,
          edits([
            ['  return b - a;', '  return -(b - a);'],
            [
              '  return a / b;',
              "  if (b === 0) throw new RangeError('no division by zero');\n  return a / b;",
            ],
          ]),
        ),
        // 3. a "fix" that breaks add: the judge finds a regression
        ...calculatorScript(config.sandbox.baseImage, edits([['  return a + b;', '  return a + b + 1;']])),
        // 4. a run whose tests hang until cancelled
        ...calculatorScript(config.sandbox.baseImage, [{ name: 'run_tests', arguments: {} }]),
      ];
      model = await startScriptedModelServer(script, { model: 'scripted-e2e' });
      emu.createRepo(O, R, { fromDir: repoSource(home, CALCULATOR_TEST_ARGV), private: true });
      emu.createRepo(O, 'slow', { fromDir: repoSource(home, NEVER_ENDS) });
      for (const repo of [R, 'slow']) {
        emu.setPermission(O, repo, 'maint', 'write');
        emu.setPermission(O, repo, 'visitor', 'read');
      }
      app = await startDockerApp(emu, config, model.url, 'scripted-e2e');
    });
    afterAll(async () => {
      await app?.close();
      await model?.close();
    });

    let issue = 0;
    let firstDelivery = '';
    let prNumber = 0;

    it('a maintainer labels an issue of a private repository: draft PR with evidence and the right diff', async () => {
      issue = emu.createIssue(O, R, {
        title: 'subtract and divide are wrong',
        body: 'see tests',
        user: 'rae',
      });
      const delivery = await emu.label(O, R, issue, 'agenticfix', 'maint');
      firstDelivery = delivery.id;
      expect(delivery.status).toBe(200);
      await app.idle();

      const [run] = await runsOf(issue);
      expect(run).toMatchObject({ state: 'done', verdict: 'verified', stop_reason: 'completed' });
      const pr = emu.pulls.find((p) => p.repo === `${O}/${R}` && p.pull?.head === branchFor(issue))!;
      expect(pr.pull).toMatchObject({ draft: true, base: 'main' });
      expect(run!.pr_number).toBe(pr.number);
      prNumber = pr.number;

      // The branch holds exactly the agent's patch on top of the pinned base commit.
      const head = emu.branchHead(O, R, branchFor(issue))!;
      const clone = tempDir('e2e-clone-');
      const token = emu.installationToken(O);
      const auth = [
        [
          'http.extraHeader',
          `Authorization: Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`,
        ],
      ] as const;
      await git(['clone', '--quiet', `${emu.url}/git/${O}/${R}.git`, clone], { cwd: home, config: auth });
      await git(['fetch', '--quiet', 'origin', `${branchFor(issue)}`], { cwd: clone, config: auth });
      expect((await git(['rev-parse', 'FETCH_HEAD^'], { cwd: clone })).stdout.trim()).toBe(run!.base_commit);
      const diff = (await git(['diff', '--binary', '--full-index', run!.base_commit, head], { cwd: clone }))
        .stdout;
      expect(diff).toBe(readFileSync(run!.patch_path!, 'utf8'));

      const [evidence, traceSummary, runConfig] = bot(pr.number);
      expect(evidence).toMatch(/^## Test evidence/);
      expect(evidence).toContain('`verified`');
      expect(traceSummary).toMatch(/^## Trace summary/);
      expect(traceSummary).toContain('build_environment');
      expect(runConfig).toMatch(/^## Run configuration/);
      expect(runConfig).toContain('scripted-e2e');
      const status = bot(issue);
      expect(status).toHaveLength(1);
      expect(status[0]).toContain('✅ Done');
      expect(await agentContainers()).toBe(0);
    });

    it('a redelivered webhook starts nothing new; an outsider gets a reply and nothing runs', async () => {
      await emu.redeliver(firstDelivery);
      const other = emu.createIssue(O, R, { title: 'another', user: 'rae' });
      await emu.label(O, R, other, 'agenticfix', 'visitor');
      await emu.comment(O, R, issue, '/agenticfix rerun', 'visitor');
      await app.idle();
      expect(await runsOf(issue)).toHaveLength(1);
      expect(await runsOf(other)).toHaveLength(0);
      expect(bot(other).join('\n')).toMatch(/write/i);
      expect(model.remaining()).toBeGreaterThan(0);
    });

    it('/agenticfix rerun on the PR runs again on a new branch and PR; the first branch is left as it was', async () => {
      const before = emu.branchHead(O, R, branchFor(issue));
      await emu.comment(O, R, prNumber, '/agenticfix rerun', 'maint');
      await app.idle();
      const runs = await runsOf(issue);
      expect(runs).toHaveLength(2);
      // Newest first.
      expect(runs[0]).toMatchObject({ trigger: 'rerun', verdict: 'verified' });
      expect(runs[0]!.pr_number).not.toBe(prNumber);
      expect(emu.branchHead(O, R, branchFor(issue))).toBe(before);
      expect(emu.branchHead(O, R, `${branchFor(issue)}-${runs[0]!.id}`)).toBe(runs[0]!.pushed_commit);
      expect(bot(prNumber).at(-1)).toContain(`opened #${runs[0]!.pr_number} for the same issue`);
      expect(readFileSync(runs[0]!.patch_path!, 'utf8')).toContain('-(b - a)');
    });

    it('an unverified result is reported on the issue with its patch, and no PR is opened', async () => {
      const n = emu.createIssue(O, R, { title: 'make add better', user: 'rae' });
      await emu.label(O, R, n, 'agenticfix', 'maint');
      await app.idle();
      expect((await runsOf(n))[0]).toMatchObject({ state: 'done', verdict: 'regression', pr_number: null });
      expect(emu.pulls.some((p) => p.repo === `${O}/${R}` && p.pull?.head === branchFor(n))).toBe(false);
      expect(emu.branchHead(O, R, branchFor(n))).toBeNull();
      const all = bot(n).join('\n');
      expect(all).toContain('regression');
      expect(all).toContain('<details>');
      expect(all).toContain('a + b + 1');
    });

    it('/agenticfix cancel stops the running container and publishes nothing', async () => {
      const n = emu.createIssue(O, 'slow', { title: 'slow tests', user: 'rae' });
      await emu.label(O, 'slow', n, 'agenticfix', 'maint');
      await until('the test container to run', async () => (await agentContainers()) > 0, WAIT_MS);
      const t0 = Date.now();
      await emu.comment(O, 'slow', n, '/agenticfix cancel', 'maint');
      await app.idle();
      expect(Date.now() - t0).toBeLessThan(30_000); // long before the 60 s test timeout
      expect(await agentContainers()).toBe(0);
      expect((await runsOf(n, 'slow'))[0]).toMatchObject({ state: 'cancelled' });
      expect(bot(n, 'slow').join('\n')).toContain('Cancelled');
      expect(emu.pulls.some((p) => p.repo === `${O}/slow`)).toBe(false);
      expect(emu.branchHead(O, 'slow', branchFor(n))).toBeNull();
    });
  },
);

describeIf(engine)('a crash mid-run (the served app killed with SIGKILL) is reported after restart', () => {
  it('marks the run interrupted and tells the issue', async () => {
    const crashHome = path.join(home, 'crash');
    const config = testConfig(crashHome);
    // The model answers the first steps, then keeps the run waiting: the crash lands mid-run.
    const model = await startScriptedModelServer([
      ...calculatorScript(config.sandbox.baseImage, []).slice(0, 1),
      { tool_calls: [{ name: 'read_file', arguments: { path: FILE } }] },
      { content: 'thinking', delay_ms: 120_000 },
    ]);
    emu.createRepo(O, 'crashy', { fromDir: repoSource(home, CALCULATOR_TEST_ARGV) });
    emu.setPermission(O, 'crashy', 'maint', 'write');
    const child = await serveInChild(crashHome, model.url);
    try {
      const n = emu.createIssue(O, 'crashy', { title: 'crash me', user: 'rae' });
      expect((await emu.label(O, 'crashy', n, 'agenticfix', 'maint')).status).toBe(200);
      // Completions only: serve's start-up check asks GET /v1/models first.
      const completions = () => model.requests.filter((r) => r.method === 'POST').length;
      await until('the run to be mid-way', () => completions() >= 3, WAIT_MS);
      child.kill('SIGKILL');
      await child.exited;

      const left = new SqliteRunStore(config.dbPath);
      expect((await left.forIssue(O, 'crashy', n))[0]).toMatchObject({ state: 'running' });
      await left.close();

      const restarted = await startEmulatedApp(emu, { config });
      await restarted.idle();
      expect((await restarted.store.forIssue(O, 'crashy', n))[0]).toMatchObject({ state: 'interrupted' });
      const said = emu
        .comments(n, `${O}/crashy`)
        .filter((c) => c.user === emu.botLogin)
        .map((c) => c.body)
        .join('\n');
      expect(said).toContain('interrupted');
      await restarted.close();
    } finally {
      child.kill('SIGKILL');
      await model.close();
    }
  });

  it('a burst of deliveries answered right before the kill is all recorded and taken in after restart', async () => {
    const burstHome = path.join(home, 'burst');
    const config = testConfig(burstHome);
    emu.createRepo(O, 'bursty', { fromDir: repoSource(home, CALCULATOR_TEST_ARGV) });
    emu.setPermission(O, 'bursty', 'maint', 'write');
    const issues = Array.from({ length: 40 }, (_, i) =>
      emu.createIssue(O, 'bursty', { title: `burst ${i}`, user: 'rae' }),
    );
    // A model endpoint that answers (serve's start-up check asks it) but only with 503: whatever runs start
    // in the child fail; what matters is what its answers promised.
    const failing = http.createServer((_, res) => res.writeHead(503).end());
    await new Promise<void>((r) => failing.listen(0, '127.0.0.1', r));
    const modelUrl = `http://127.0.0.1:${(failing.address() as AddressInfo).port}/v1`;
    const child = await serveInChild(burstHome, modelUrl);
    try {
      const answers = await Promise.all(issues.map((n) => emu.label(O, 'bursty', n, 'agenticfix', 'maint')));
      child.kill('SIGKILL'); // the moment the last 200 arrived
      await child.exited;
      expect(answers.map((a) => a.status)).toEqual(issues.map(() => 200));
      // Every answered delivery is on disk, whether its intake had started or not.
      const db = new Database(config.dbPath, { readonly: true });
      const recorded = db.prepare(`SELECT count(*) AS n FROM deliveries WHERE event = 'issues'`).get() as {
        n: number;
      };
      db.close();
      expect(recorded.n).toBe(issues.length);

      // After the restart each issue gets its one run (the repair parked: this test is about intake).
      const restarted = await startEmulatedApp(emu, { config, deps: PARKED });
      try {
        await until(
          'every delivery to be taken in',
          async () => (await restarted.store.pendingDeliveries()).length === 0,
          WAIT_MS,
        );
        for (const n of issues) expect(await restarted.store.forIssue(O, 'bursty', n)).toHaveLength(1);
      } finally {
        await restarted.close();
      }
    } finally {
      child.kill('SIGKILL');
      failing.close();
    }
    // It builds dist/ and starts a child first: on a loaded 2-CPU machine that alone took over 60 s.
  }, 300_000);
});

/** `agenticfix serve` from dist/ in its own process (so it can be SIGKILLed), receiving the emulator's webhooks. */
async function serveInChild(dir: string, modelUrl: string) {
  const port = await freePort();
  const { child, out } = startChild(emu, { role: 'serve', webhookSecret: SECRET, port }, dir, modelUrl, {
    LOG_LEVEL: 'info', // "agenticfix listening" is an info log line
  });
  await until('the served app to listen', () => out().includes('agenticfix listening'), 30_000);
  emu.setWebhookUrl(`http://127.0.0.1:${port}/api/github/webhooks`);
  return { kill: (signal: NodeJS.Signals) => child.kill(signal), exited: child.then(() => undefined) };
}
