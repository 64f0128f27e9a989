import type { ResultPromise } from 'execa';
import { rmSync } from 'node:fs';
import path from 'node:path';
import Docker from 'dockerode';
import pg from 'pg';
import { calculatorScript, CALCULATOR_TEST_ARGV, repoSource } from '../../../src/demo/calculator.js';
import type { GitHubEmulator } from '../../../src/emulator/github.js';
import { startScriptedModelServer, type ScriptedModelServer } from '../../../src/emulator/scripted-model.js';
import { RUN_LABEL } from '../../../src/environment/docker.js';
import { LEASE_LABEL } from '../../../src/images/leases.js';
import { sweepContainers } from '../../../src/environment/startup.js';
import { branchFor } from '../../../src/publish/pr.js';
import type { RunRecord } from '../../../src/store/store.js';
import { maxOverlap } from '../../../src/bench/stats.js';
import type { RunningApp } from '../../../src/app.js';
import { startEmulatedApp, startEmulator, tempDir, testConfig } from '../../support/app.js';
import { needDocker } from '../../support/docker.js';
import { startChild, until } from '../../support/e2e.js';
import { needService, serviceUrl } from '../../support/services.js';
import { describeIf, needAll } from '../../support/skip.js';

/**
 * Scale-out end to end: `serve` (this process) takes signed webhooks from the GitHub emulator and
 * enqueues on Redis; two `agenticfix worker` processes (the built CLI, each with its own home) run the
 * runs against the real Docker sandbox, judge and publish; the run store is PostgreSQL.
 */

const O = 'octo';
const REPOS = ['alpha', 'beta', 'gamma'];
const CONCURRENCY = 2;
const redis = serviceUrl('AGENTICFIX_TEST_REDIS_URL');
const database = serviceUrl('AGENTICFIX_TEST_DATABASE_URL');
const WAIT_MS = 240_000;

const needs = needAll(
  await needDocker(),
  needService('AGENTICFIX_TEST_REDIS_URL'),
  needService('AGENTICFIX_TEST_DATABASE_URL'),
);
describeIf(needs)('serve + two workers (BullMQ, PostgreSQL)', () => {
  let emu: GitHubEmulator;
  let home: string;
  let model: ScriptedModelServer;
  let app: RunningApp;
  const schema = `e2e_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const queueName = `e2e-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const workers = new Map<string, { child: ResultPromise; out: () => string }>();
  const bot = (repo: string, n: number) =>
    emu
      .comments(n, `${O}/${repo}`)
      .filter((c) => c.user === emu.botLogin)
      .map((c) => c.body);

  const distributedEnv = {
    AGENTICFIX_DATABASE_URL: database?.toString() ?? '',
    AGENTICFIX_DATABASE_SCHEMA: schema,
    AGENTICFIX_REDIS_URL: redis?.toString() ?? '',
    AGENTICFIX_QUEUE_NAME: queueName,
    // Short, so a killed worker's run is found within seconds.
    AGENTICFIX_WORKER_LOCK_MS: '4000',
  };

  function startWorker(id: string): void {
    const role = { role: 'worker', workerId: id, concurrency: CONCURRENCY } as const;
    workers.set(id, startChild(emu, role, path.join(home, id), model.url, distributedEnv));
  }

  beforeAll(async () => {
    emu = await startEmulator();
    home = tempDir('e2e-scale-');
    const config = testConfig(path.join(home, 'serve'), distributedEnv);
    // Every run (each its own conversation) gets the whole fix.
    model = await startScriptedModelServer(calculatorScript(config.sandbox.baseImage), {
      model: 'scripted',
      perConversation: true,
    });
    for (const repo of REPOS) {
      emu.createRepo(O, repo, { fromDir: repoSource(home, CALCULATOR_TEST_ARGV) });
      emu.setPermission(O, repo, 'maint', 'write');
    }
    emu.createRepo(O, 'slow', { fromDir: repoSource(home, ['node', '-e', 'setTimeout(() => {}, 600000)']) });
    emu.setPermission(O, 'slow', 'maint', 'write');
    app = await startEmulatedApp(emu, { config });
    emu.setWebhookUrl(app.url);
    for (const id of ['w1', 'w2']) startWorker(id);
    for (const [id, w] of workers)
      await until(`${id} to take runs`, () => w.out().includes('taking runs'), 60_000);
  }, 300_000);

  afterAll(async () => {
    for (const w of workers.values()) w.child.kill('SIGTERM');
    await Promise.all([...workers.values()].map((w) => w.child));
    await app?.close();
    await model?.close();
    await emu?.close();
    await sweepContainers(new Docker()); // what the killed worker left
    if (database) {
      const admin = new pg.Client({ connectionString: database.toString() });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.end();
    }
    if (home) rmSync(home, { recursive: true, force: true });
  }, 120_000);

  it('six labelled issues over three repositories: all verified, spread over both workers within their concurrency', async () => {
    const issues = REPOS.flatMap((repo) =>
      [1, 2].map((k) => ({
        repo,
        n: emu.createIssue(O, repo, { title: `${repo}: subtract is wrong (${k})`, user: 'rae' }),
      })),
    );
    for (const { repo, n } of issues)
      expect((await emu.label(O, repo, n, 'agenticfix', 'maint')).status).toBe(200);
    await until(
      'all six runs to end',
      async () => {
        const runs = await Promise.all(issues.map(({ repo, n }) => app.store.forIssue(O, repo, n)));
        return runs.every((r) => r.length === 1 && r[0]!.finished_at !== null);
      },
      600_000,
    );

    const runs = (await Promise.all(issues.map(({ repo, n }) => app.store.forIssue(O, repo, n)))).map(
      (r) => r[0]!,
    );
    for (const run of runs) expect(run).toMatchObject({ state: 'done', verdict: 'verified' });
    for (const [i, { repo, n }] of issues.entries()) {
      const pr = emu.pulls.find((p) => p.repo === `${O}/${repo}` && p.pull?.head === branchFor(n));
      expect(pr?.pull).toMatchObject({ draft: true });
      expect(runs[i]!.pr_number).toBe(pr!.number);
      // One status comment per issue: serve posts it, the worker edits the same one.
      const status = bot(repo, n);
      expect(status).toHaveLength(1);
      expect(status[0]).toContain('✅ Done');
    }
    expect([...new Set(runs.map((r) => r.worker))].sort()).toEqual(['w1', 'w2']);
    for (const id of ['w1', 'w2'])
      expect(maxOverlap(runs.filter((r) => r.worker === id))).toBeLessThanOrEqual(CONCURRENCY);
    // Run pages (issue 29): what a worker ran is in the shared store, where serve reads it, with
    // serve's own queued status.
    for (const run of runs) {
      const events = await app.store.events(run.id, 0, 10_000);
      const types = new Set(events.map((e) => e.type));
      for (const t of ['status', 'run_start', 'tool_end', 'model_reply', 'repair_result', 'verification'])
        expect([run.id, types.has(t)]).toEqual([run.id, true]);
      expect(events.some((e) => e.type === 'status' && e.body.phase === 'queued')).toBe(true);
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    }
  }, 900_000);

  it('a redelivered webhook starts nothing; /agenticfix cancel stops the container on the worker holding the run', async () => {
    const n = emu.createIssue(O, 'slow', { title: 'slow: cancel me', user: 'rae' });
    const label = await emu.label(O, 'slow', n, 'agenticfix', 'maint');
    expect(label.status).toBe(200);
    let run: RunRecord | undefined;
    const testing = async (id: string) =>
      (await new Docker().listContainers({ filters: { label: [`${RUN_LABEL}=${id}`] } })).filter(
        (c) => !c.Labels[LEASE_LABEL],
      );
    await until(
      'the run to test on a worker',
      async () => {
        run = (await app.store.forIssue(O, 'slow', n))[0];
        return run?.state === 'running' && (await testing(run.id)).length > 0;
      },
      WAIT_MS,
    );
    expect((await emu.redeliver(label.id)).status).toBe(200);
    // Not app.idle(): distributed, that waits for the running run to end.
    await until(
      'the redelivery to be taken in',
      async () => (await app.store.pendingDeliveries()).length === 0,
      WAIT_MS,
    );
    expect(await app.store.forIssue(O, 'slow', n)).toHaveLength(1);

    const t0 = Date.now();
    await emu.comment(O, 'slow', n, '/agenticfix cancel', 'maint');
    await until(
      'the run to be cancelled',
      async () => (await app.store.get(run!.id))!.state === 'cancelled',
      30_000,
    );
    await until('its test container to be gone', async () => (await testing(run!.id)).length === 0, 30_000);
    expect(Date.now() - t0).toBeLessThan(30_000);
    await until('the issue to be told', () => bot('slow', n).some((b) => b.includes('Cancelled')), 30_000);
    expect(emu.branchHead(O, 'slow', branchFor(n))).toBeNull();
  }, 300_000);

  it('a worker killed mid-run leaves its run interrupted, and its issue is told', async () => {
    const n = emu.createIssue(O, 'slow', { title: 'slow: subtract is wrong', user: 'rae' });
    expect((await emu.label(O, 'slow', n, 'agenticfix', 'maint')).status).toBe(200);
    // The repository's tests never end: the run is mid-run once its test container runs.
    let run: RunRecord | undefined;
    await until(
      'the run to test',
      async () => {
        run = (await app.store.forIssue(O, 'slow', n))[0];
        if (run?.state !== 'running') return false;
        const testing = await new Docker().listContainers({ filters: { label: [`${RUN_LABEL}=${run.id}`] } });
        return testing.some((c) => !c.Labels[LEASE_LABEL]);
      },
      WAIT_MS,
    );
    const victim = workers.get(run!.worker!)!;
    victim.child.kill('SIGKILL');
    await victim.child;
    await until(
      'the run to be interrupted',
      async () => (await app.store.get(run!.id))!.state === 'interrupted',
      60_000,
    );
    expect(await app.store.get(run!.id)).toMatchObject({
      stop_reason: 'interrupted',
      error: `its worker (${run!.worker}) stopped`,
    });
    await until(
      'the issue to be told',
      () => bot('slow', n).some((b) => b.includes('was interrupted because its worker')),
      30_000,
    );
  }, 300_000);
});
