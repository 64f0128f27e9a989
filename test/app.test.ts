import { rmSync } from 'node:fs';
import type { GitHubEmulator } from '../src/emulator/github.js';
import { branchFor } from '../src/publish/pr.js';
import { RunStore } from '../src/queue/store.js';
import { startApp, type RunningApp } from '../src/webhook/server.js';
import type { Config } from '../src/config/config.js';
import {
  APP_ID,
  CALC_CONFIG,
  CALC_FILES,
  CALC_FIX,
  fakeDeps,
  PRIVATE_KEY,
  quietLog,
  SECRET,
  startEmulator,
  tempDir,
  testConfig,
  waitFor,
} from './app-support.js';

/**
 * The app end to end through a real HTTP GitHub emulator: signed webhooks, installation tokens, git
 * pushes. The pipeline stages are fast stand-ins that still clone, edit, diff and run the test command.
 */

const O = 'acme';
const R = 'calc';

describe('AgenticFix app through the GitHub emulator', () => {
  let emu: GitHubEmulator;
  let app: RunningApp;
  let home: string;
  let config: Config;
  let gate: { promise?: Promise<void>; release?: () => void } = {};
  const deps = fakeDeps({
    edits: (o, call) => {
      if (o.issue.title.includes('wrong')) return { 'calc.py': 'def add(a, b):\n    return a * b\n' };
      if (o.issue.title.includes('workflow'))
        return { ...CALC_FIX, '.github/workflows/ci.yml': 'on: push\n' };
      // A rerun writes a different (still correct) fix, so the branch really moves.
      return call % 2 === 0 ? CALC_FIX : { 'calc.py': 'def add(a, b):\n    return b + a\n' };
    },
    get gate() {
      return gate.promise;
    },
  });

  const start = (cfg: Config) =>
    startApp({
      config: cfg,
      appId: APP_ID,
      privateKey: PRIVATE_KEY,
      webhookSecret: SECRET,
      baseUrl: emu.url,
      port: 0,
      deps,
      sandbox: 'local',
      log: quietLog,
    });

  beforeAll(async () => {
    emu = await startEmulator();
    emu.createRepo(O, R, { files: { ...CALC_FILES, '.github/agenticfix.yml': CALC_CONFIG } });
    emu.setPermission(O, R, 'maint', 'maintain');
    emu.setPermission(O, R, 'reader', 'read');
    home = tempDir('app-test-');
    config = testConfig(home);
    app = await start(config);
    emu.setWebhookUrl(app.url);
  });
  afterAll(async () => {
    await app?.close();
    await emu?.close();
    rmSync(home, { recursive: true, force: true });
  });

  const runsOf = (issue: number) => app.store.forIssue(O, R, issue);
  const botComments = (n: number) => emu.comments(n).filter((c) => c.user === emu.botLogin);
  const pullFor = (issue: number) => emu.pulls.filter((p) => p.pull?.head === branchFor(issue));

  it('a writer labels an issue: the run is recorded, verified, pushed and opened as a draft PR with evidence', async () => {
    const n = emu.createIssue(O, R, {
      title: 'add() subtracts',
      body: 'add(2, 3) returns -1',
      user: 'alice',
    });
    const t0 = Date.now();
    const res = await emu.label(O, R, n, 'agenticfix', 'maint');
    expect(res.status).toBe(200);
    expect(Date.now() - t0).toBeLessThan(3000); // the handler only records the delivery and hands it on
    await app.idle();
    expect(runsOf(n)).toHaveLength(1);

    const [run] = runsOf(n);
    expect(run).toMatchObject({
      state: 'done',
      verdict: 'verified',
      trigger: 'label',
      triggered_by: 'maint',
      stop_reason: 'completed',
    });
    expect(run!.base_commit).toBe(emu.branchHead(O, R, 'main'));
    expect(deps.calls.at(-1)).toMatchObject({
      baseCommit: run!.base_commit,
      testArgv: expect.arrayContaining(['python3']),
      sandbox: 'local',
    });

    const pulls = pullFor(n);
    expect(pulls).toHaveLength(1);
    const pr = pulls[0]!;
    expect(run!.pr_number).toBe(pr.number);
    expect(pr.title).toBe(`Fix #${n}: add() subtracts`);
    expect(pr.pull).toMatchObject({ draft: true, base: 'main' });
    expect(pr.body).toContain(`Fixes #${n}`);
    expect(pr.body).toContain('**Verdict: `verified`**');
    expect(emu.branchHead(O, R, branchFor(n))).toMatch(/^[0-9a-f]{40}$/);

    const prComments = botComments(pr.number).map((c) => c.body);
    expect(prComments).toHaveLength(3);
    expect(prComments[0]).toMatch(/^## Test evidence/);
    expect(prComments[1]).toMatch(/^## Trace summary/);
    expect(prComments[1]).toContain('| 1 | `write_file` | `{"path":"calc.py"}` | ok | 3 |');
    expect(prComments[2]).toMatch(/^## Run configuration/);
    expect(prComments[2]).toContain('Prompt version: `p1234`');

    const status = botComments(n);
    expect(status).toHaveLength(1); // one status comment, edited in place
    expect(status[0]!.id).toBe(run!.status_comment_id);
    expect(status[0]!.body).toContain('### AgenticFix: ✅ Done');
    expect(status[0]!.body).toContain(`Draft pull request #${pr.number} opened`);
    expect(status[0]!.body).toContain(`Run \`${run!.id}\``);
    expect(run!.comment_ids).toHaveLength(3);
  });

  it('redelivering the label webhook does not start a second run', async () => {
    const n = emu.createIssue(O, R, { title: 'add() subtracts again', user: 'alice' });
    const first = await emu.label(O, R, n, 'agenticfix', 'maint');
    await app.idle();
    const again = await emu.redeliver(first.id);
    expect(again.status).toBe(200);
    await app.idle();
    expect(runsOf(n)).toHaveLength(1);
  });

  it('someone without write access gets a polite reply and nothing runs', async () => {
    const n = emu.createIssue(O, R, { title: 'please fix', user: 'reader' });
    await emu.label(O, R, n, 'agenticfix', 'reader');
    await emu.comment(O, R, n, '/agenticfix rerun', 'reader');
    await app.idle();
    expect(runsOf(n)).toHaveLength(0);
    const replies = botComments(n).map((c) => c.body);
    // The two deliveries are taken in concurrently: their replies may land in either order.
    expect(replies).toHaveLength(2);
    expect(replies).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/Only people with write access to this repository can start AgenticFix/),
        expect.stringMatching(/can rerun AgenticFix/),
      ]),
    );
  });

  it('another label does nothing', async () => {
    const n = emu.createIssue(O, R, { title: 'x', user: 'alice' });
    await emu.label(O, R, n, 'bug', 'maint');
    await app.idle();
    expect(runsOf(n)).toHaveLength(0);
    expect(botComments(n)).toHaveLength(0);
  });

  it('a webhook with a bad signature is refused and nothing runs', async () => {
    const n = emu.createIssue(O, R, { title: 'forged', user: 'alice' });
    await emu.label(O, R, n, 'bug', 'maint'); // a genuine delivery whose payload we reuse
    const payload = JSON.parse(emu.deliveries.at(-1)!.body);
    payload.label = { name: 'agenticfix' };
    const forged = await emu.deliver('issues', payload, { signature: 'sha256=' + '0'.repeat(64) });
    expect(forged.status).toBeGreaterThanOrEqual(400);
    await app.idle();
    expect(runsOf(n)).toHaveLength(0);
    // The same payload, correctly signed, does start a run: the signature alone made the difference.
    const genuine = await emu.deliver('issues', payload);
    expect(genuine.status).toBe(200);
    await app.idle();
    expect(runsOf(n)).toHaveLength(1);
  });

  it('bot comments are ignored, commands get 👀, unknown commands get usage', async () => {
    const n = emu.createIssue(O, R, { title: 'commands', user: 'alice' });
    await emu.comment(O, R, n, '/agenticfix rerun', 'helper[bot]', { isBot: true });
    await emu.comment(O, R, n, '/agenticfix frobnicate', 'maint');
    await emu.comment(O, R, n, '/agenticfix status', 'reader');
    await app.idle();
    expect(runsOf(n)).toHaveLength(0);
    const replies = botComments(n).map((c) => c.body);
    expect(replies[0]).toMatch(
      /did not understand that: unknown command `frobnicate`[\s\S]*\/agenticfix rerun \[model=<name>\]/,
    );
    expect(replies[1]).toBe('AgenticFix has not run on this issue yet.');
    const humanComments = emu.comments(n).filter((c) => c.user !== emu.botLogin);
    const reacted = emu.reactions
      .filter((r) => humanComments.some((c) => c.id === r.commentId))
      .map((r) => [r.commentId, r.content]);
    expect(reacted).toEqual([[humanComments[2]!.id, 'eyes']]); // only the recognised command
  });

  it('a rerun on the PR (with a model override) updates the same branch and PR', async () => {
    const n = emu.createIssue(O, R, { title: 'rerun me', user: 'alice' });
    await emu.label(O, R, n, 'agenticfix', 'maint');
    await app.idle();
    const pr = pullFor(n)[0]!;
    const head1 = emu.branchHead(O, R, branchFor(n));
    const cmd = await emu.comment(
      O,
      R,
      pr.number,
      '/agenticfix rerun model=other-model budget=5000',
      'maint',
    );
    expect(cmd.status).toBe(200);
    await app.idle();
    const runs = runsOf(n);
    expect(runs.map((r) => r.state)).toEqual(['done', 'done']);
    expect(runs[0]).toMatchObject({
      trigger: 'rerun',
      model: 'other-model',
      token_budget: 5000,
      pr_number: pr.number,
    });
    expect(deps.calls.at(-1)!.budgets?.tokens).toBe(5000);
    expect(pullFor(n)).toHaveLength(1);
    expect(emu.branchHead(O, R, branchFor(n))).not.toBe(head1);
    expect(emu.pulls.find((p) => p.number === pr.number)!.body).toContain(runs[0]!.id);
    expect(botComments(pr.number).at(-1)!.body).toContain('Model: `other-model` (set by the rerun command)');
    expect(
      emu.reactions.some(
        (r) => r.content === 'eyes' && emu.comments(pr.number).some((c) => c.id === r.commentId),
      ),
    ).toBe(true);
  });

  it('cancel stops the running run; the status comment says so and nothing is published', async () => {
    let release!: () => void;
    gate = { promise: new Promise<void>((r) => (release = r)) };
    try {
      const n = emu.createIssue(O, R, { title: 'slow one', user: 'alice' });
      await emu.label(O, R, n, 'agenticfix', 'maint');
      await waitFor(
        () => runsOf(n)[0]?.state === 'running' && (botComments(n)[0]?.body.includes('step 1') ?? false),
      );
      await emu.comment(O, R, n, '/agenticfix cancel', 'maint');
      await app.idle();
      expect(runsOf(n)[0]).toMatchObject({ state: 'cancelled', stop_reason: 'cancelled', pr_number: null });
      expect(botComments(n)[0]!.body).toContain('⏹️ Cancelled');
      expect(pullFor(n)).toHaveLength(0);
    } finally {
      release();
      gate = {};
    }
  });

  it('a new label while a run is active supersedes it', async () => {
    let release!: () => void;
    gate = { promise: new Promise<void>((r) => (release = r)) };
    try {
      const n = emu.createIssue(O, R, { title: 'twice', user: 'alice' });
      await emu.label(O, R, n, 'agenticfix', 'maint');
      await waitFor(() => runsOf(n)[0]?.state === 'running');
      await emu.label(O, R, n, 'agenticfix', 'maint');
      await waitFor(() => runsOf(n).some((r) => r.state === 'superseded'));
      release();
      await app.idle();
      const [newer, older] = runsOf(n);
      expect(older).toMatchObject({ state: 'superseded', superseded_by: newer!.id });
      expect(newer).toMatchObject({ state: 'done', verdict: 'verified' });
      expect(pullFor(n)).toHaveLength(1);
    } finally {
      release();
      gate = {};
    }
  });

  it('an unverified result is reported on the issue with the patch, and no PR is opened', async () => {
    const n = emu.createIssue(O, R, { title: 'wrong fix please', user: 'alice' });
    await emu.label(O, R, n, 'agenticfix', 'maint');
    await app.idle();
    expect(runsOf(n)[0]).toMatchObject({ state: 'done', verdict: 'regression', pr_number: null });
    const report = botComments(n).find((c) => c.body.startsWith('## AgenticFix: no pull request'))!;
    expect(report.body).toContain('**Verdict: `regression`**');
    expect(report.body).toContain('<details><summary>Candidate patch</summary>');
    expect(report.body).toContain('+    return a * b');
    expect(pullFor(n)).toHaveLength(0);
    expect(emu.branchHead(O, R, branchFor(n))).toBeNull();
  });

  it('a verified patch that touches .github/workflows is never pushed, and the comment says why', async () => {
    const n = emu.createIssue(O, R, { title: 'workflow too', user: 'alice' });
    await emu.label(O, R, n, 'agenticfix', 'maint');
    await app.idle();
    expect(runsOf(n)[0]).toMatchObject({ state: 'done', verdict: 'verified', pr_number: null });
    const report = botComments(n).find((c) => c.body.startsWith('## AgenticFix: no pull request'))!;
    expect(report.body).toContain('`.github/workflows/ci.yml`, which the app never pushes');
    expect(report.body).toContain('+on: push');
    expect(emu.branchHead(O, R, branchFor(n))).toBeNull();
    expect(pullFor(n)).toHaveLength(0);
  });

  it('an invalid repository config is reported on the issue', async () => {
    emu.createRepo(O, 'broken', {
      files: { ...CALC_FILES, '.github/agenticfix.yml': 'test: "pytest -q"\nbudgets: { tokens: -1 }\n' },
    });
    emu.setPermission(O, 'broken', 'maint', 'write');
    const n = emu.createIssue(O, 'broken', { title: 'x', user: 'alice' });
    await emu.label(O, 'broken', n, 'agenticfix', 'maint');
    await app.idle();
    const [run] = app.store.forIssue(O, 'broken', n);
    expect(run).toMatchObject({ state: 'failed' });
    const bodies = emu
      .comments(n, `${O}/broken`)
      .filter((c) => c.user === emu.botLogin)
      .map((c) => c.body);
    const report = bodies.find((b) => b.startsWith('## AgenticFix: configuration error'))!;
    expect(report).toContain('`test`');
    expect(report).toContain('`budgets.tokens`');
    expect(bodies.find((b) => b.includes('❌ Failed'))).toBeDefined();
  });

  it('a delivery acknowledged just before a crash is taken in at the next start', async () => {
    const crashHome = tempDir('app-ack-crash-');
    const crashConfig = testConfig(crashHome);
    const n = emu.createIssue(O, R, { title: 'add() subtracts', user: 'alice' });
    // What a process killed right after answering the webhook leaves behind: the claimed delivery.
    const before = new RunStore(crashConfig.dbPath);
    const payload = {
      action: 'labeled',
      issue: { number: n },
      label: { name: 'agenticfix' },
      repository: { name: R, owner: { login: O }, default_branch: 'main' },
      sender: { login: 'maint', type: 'User' },
      installation: { id: emu.installationId(O) },
    };
    expect(before.claimDelivery('acked-then-crashed', 'issues', payload, null)).toBe('new');
    before.close();

    const restarted = await start(crashConfig);
    try {
      await restarted.idle();
      expect(restarted.store.forIssue(O, R, n)).toEqual([
        expect.objectContaining({ delivery_id: 'acked-then-crashed', trigger: 'label', state: 'done' }),
      ]);
      expect(restarted.store.pendingDeliveries()).toEqual([]);
    } finally {
      await restarted.close();
      rmSync(crashHome, { recursive: true, force: true });
    }
  });

  it('after a crash, runs left in flight are marked interrupted and their issues are told', async () => {
    const crashHome = tempDir('app-crash-');
    const crashConfig = testConfig(crashHome);
    const n = emu.createIssue(O, R, { title: 'crash', user: 'alice' });
    // What a killed process leaves behind: a run recorded as running.
    const before = new RunStore(crashConfig.dbPath);
    const run = before.createRun({
      owner: O,
      repo: R,
      issue: n,
      installation_id: emu.installationId(O),
      trigger: 'label',
      triggered_by: 'maint',
      delivery_id: 'crashed-delivery',
      base_commit: emu.branchHead(O, R, 'main')!,
    });
    before.update(run.id, { state: 'running' });
    before.close();

    const restarted = await start(crashConfig);
    try {
      expect(restarted.store.get(run.id)).toMatchObject({ state: 'interrupted' });
      const told = botComments(n).map((c) => c.body);
      expect(told).toHaveLength(1);
      expect(told[0]).toContain(`AgenticFix run \`${run.id}\` was interrupted because the app restarted`);
    } finally {
      await restarted.close();
      rmSync(crashHome, { recursive: true, force: true });
    }
  });
});
