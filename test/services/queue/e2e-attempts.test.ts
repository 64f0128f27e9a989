import type { ResultPromise } from 'execa';
import { rmSync } from 'node:fs';
import path from 'node:path';
import Docker from 'dockerode';
import pg from 'pg';
import {
  calculatorAttemptCalls,
  calculatorScript,
  CALCULATOR_TEST_ARGV,
  repoSource,
} from '../../../src/demo/calculator.js';
import type { GitHubEmulator } from '../../../src/emulator/github.js';
import { startScriptedModelServer, type ScriptedModelServer } from '../../../src/emulator/scripted-model.js';
import { RUN_LABEL } from '../../../src/environment/docker.js';
import { sweepContainers } from '../../../src/environment/startup.js';
import { LEASE_LABEL } from '../../../src/images/leases.js';
import { recordedAttempts } from '../../../src/pipeline/attempts.js';
import { branchFor } from '../../../src/publish/pr.js';
import type { RunningApp } from '../../../src/app.js';
import type { RunRecord } from '../../../src/store/store.js';
import { startEmulatedApp, startEmulator, tempDir, testConfig } from '../../support/app.js';
import { needDocker } from '../../support/docker.js';
import { startChild, until } from '../../support/e2e.js';
import { needService, serviceUrl } from '../../support/services.js';
import { describeIf, needAll } from '../../support/skip.js';

/**
 * Attempts as jobs (issue 41, item 2): `serve` (this process) enqueues on Redis, two `agenticfix
 * worker` processes (the built CLI) take the run and its attempts, each attempt a job of its own on
 * whichever worker is free, in the real Docker sandbox; the run store is PostgreSQL. The scripted model
 * hands each attempt's conversation one of three scripts (a regression, a verified fix with a comment,
 * the smallest verified fix), in the order the attempts start.
 */

const O = 'octo';
const redis = serviceUrl('AGENTICFIX_TEST_REDIS_URL');
const database = serviceUrl('AGENTICFIX_TEST_DATABASE_URL');
const WAIT_MS = 300_000;

const needs = needAll(
  await needDocker(),
  needService('AGENTICFIX_TEST_REDIS_URL'),
  needService('AGENTICFIX_TEST_DATABASE_URL'),
);
describeIf(needs)('attempts as jobs: serve + two workers (BullMQ, PostgreSQL)', () => {
  let emu: GitHubEmulator;
  let home: string;
  let model: ScriptedModelServer;
  let app: RunningApp;
  const schema = `e2e_att_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const queueName = `e2e-att-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const workers = new Map<string, { child: ResultPromise; out: () => string }>();
  const bot = (repo: string, n: number) =>
    emu
      .comments(n, `${O}/${repo}`)
      .filter((c) => c.user === emu.botLogin)
      .map((c) => c.body);
  const env = {
    AGENTICFIX_DATABASE_URL: database?.toString() ?? '',
    AGENTICFIX_DATABASE_SCHEMA: schema,
    AGENTICFIX_REDIS_URL: redis?.toString() ?? '',
    AGENTICFIX_QUEUE_NAME: queueName,
    AGENTICFIX_WORKER_LOCK_MS: '4000',
  };

  beforeAll(async () => {
    emu = await startEmulator();
    home = tempDir('e2e-attempts-');
    const config = testConfig(path.join(home, 'serve'), env);
    const base = config.sandbox.baseImage;
    model = await startScriptedModelServer([], {
      model: 'scripted',
      instances: [1, 2, 3].map((k) => calculatorScript(base, calculatorAttemptCalls(k), `attempt ${k}`)),
    });
    const more = 'attempts: 3\n';
    emu.createRepo(O, 'calc', { fromDir: repoSource(home, CALCULATOR_TEST_ARGV, { more }) });
    emu.createRepo(O, 'slow', {
      fromDir: repoSource(home, ['node', '-e', 'setTimeout(() => {}, 600000)'], { more }),
    });
    for (const repo of ['calc', 'slow']) emu.setPermission(O, repo, 'maint', 'write');
    app = await startEmulatedApp(emu, { config });
    emu.setWebhookUrl(app.url);
    for (const id of ['w1', 'w2']) {
      const role = { role: 'worker', workerId: id, concurrency: 2 } as const;
      workers.set(id, startChild(emu, role, path.join(home, id), model.url, env));
    }
    for (const [id, w] of workers)
      await until(`${id} to take runs`, () => w.out().includes('taking runs'), 60_000);
  }, 300_000);

  afterAll(async () => {
    for (const w of workers.values()) w.child.kill('SIGTERM');
    await Promise.all([...workers.values()].map((w) => w.child));
    await app?.close();
    await model?.close();
    await emu?.close();
    await sweepContainers(new Docker());
    if (database) {
      const admin = new pg.Client({ connectionString: database.toString() });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.end();
    }
    if (home) rmSync(home, { recursive: true, force: true });
  }, 120_000);

  it('three attempts run on both workers, each judged on its own; one pull request with the smallest verified patch', async () => {
    const n = emu.createIssue(O, 'calc', { title: 'subtract is wrong', user: 'rae' });
    expect((await emu.label(O, 'calc', n, 'agenticfix', 'maint')).status).toBe(200);
    let run: RunRecord | undefined;
    await until(
      'the run to end',
      async () => ((run = (await app.store.forIssue(O, 'calc', n))[0])?.finished_at ?? null) !== null,
      WAIT_MS,
    );
    expect(run).toMatchObject({ state: 'done', verdict: 'verified' });
    const attempts = recordedAttempts(run!);
    // Each attempt's verdict in the store, with the worker that ran it: both workers ran attempts.
    expect(attempts.map((a) => a.verdict).sort()).toEqual(['regression', 'verified', 'verified']);
    expect(new Set(attempts.map((a) => a.worker))).toEqual(new Set(['w1', 'w2']));
    const verified = attempts.filter((a) => a.verdict === 'verified');
    const smallest = verified.reduce((a, b) => (a.changed_lines <= b.changed_lines ? a : b));
    expect(verified[0]!.changed_lines).not.toBe(verified[1]!.changed_lines);
    expect(attempts.filter((a) => a.published)).toEqual([smallest]);
    expect(attempts.every((a) => a.publish === undefined)).toBe(true); // dropped with the choice
    // One draft pull request, of the smallest patch, with a table of three attempts.
    const prs = emu.pulls.filter((p) => p.repo === `${O}/calc` && p.pull?.head === branchFor(n));
    expect(prs).toHaveLength(1);
    expect(run!.pr_number).toBe(prs[0]!.number);
    expect(run!.patch_path).toContain(`${smallest.run_id}/`);
    const evidence = bot('calc', run!.pr_number!).find((b) => b.startsWith('## Test evidence'))!;
    expect(evidence.split('\n').filter((l) => /^\| \d/.test(l))).toHaveLength(3);
    const status = bot('calc', n);
    expect(status).toHaveLength(1);
    expect(status[0]).toContain(`Attempt ${smallest.n} of 3 published`);
  }, 600_000);

  it('/agenticfix cancel stops every attempt, on both workers', async () => {
    const n = emu.createIssue(O, 'slow', { title: 'slow: cancel me', user: 'rae' });
    expect((await emu.label(O, 'slow', n, 'agenticfix', 'maint')).status).toBe(200);
    let run: RunRecord | undefined;
    const testing = async () =>
      (await new Docker().listContainers({ filters: { label: [RUN_LABEL] } })).filter(
        (c) => !c.Labels[LEASE_LABEL] && c.Labels[RUN_LABEL]!.startsWith(`${run!.id}-a`),
      );
    // The repository's tests never end: every attempt is mid-run once it tests.
    await until(
      'the three attempts to test',
      async () => {
        run = (await app.store.forIssue(O, 'slow', n))[0];
        return run?.state === 'running' && (await testing()).length === 3;
      },
      WAIT_MS,
    );
    const t0 = Date.now();
    await emu.comment(O, 'slow', n, '/agenticfix cancel', 'maint');
    await until(
      'the run to be cancelled',
      async () => (await app.store.get(run!.id))!.state === 'cancelled',
      60_000,
    );
    await until('every attempt container to be gone', async () => (await testing()).length === 0, 30_000);
    expect(Date.now() - t0).toBeLessThan(60_000);
    const attempts = recordedAttempts((await app.store.get(run!.id))!);
    expect(attempts.map((a) => a.verdict)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(new Set(attempts.map((a) => a.worker))).toEqual(new Set(['w1', 'w2']));
    expect(emu.branchHead(O, 'slow', branchFor(n))).toBeNull();
  }, 600_000);
});
