import { calculatorScript, CALCULATOR_TEST_ARGV, repoSource } from '../../../src/demo/calculator.js';
import { startScriptedModelServer } from '../../../src/emulator/scripted-model.js';
import { branchFor } from '../../../src/publish/pr.js';
import { maxOverlap } from '../../../src/bench/stats.js';
import {
  needDistributed,
  OWNER as O,
  startDistributedWorld,
  type DistributedWorld,
} from '../../support/distributed-world.js';
import { until } from '../../support/e2e.js';
import { describeIf } from '../../support/skip.js';

/**
 * Scale-out end to end: `serve` (this process) takes signed webhooks from the GitHub emulator and
 * enqueues on Redis; two `agenticfix worker` processes (the built CLI, each with its own home) run the
 * runs against the real Docker sandbox, judge and publish; the run store is PostgreSQL.
 */

const REPOS = ['alpha', 'beta', 'gamma'];
const CONCURRENCY = 2;
const WAIT_MS = 240_000;

const needs = await needDistributed();
describeIf(needs)('serve + two workers (BullMQ, PostgreSQL)', () => {
  let world: DistributedWorld;

  beforeAll(async () => {
    world = await startDistributedWorld({
      name: 'e2e-scale',
      concurrency: CONCURRENCY,
      // Every run (each its own conversation) gets the whole fix.
      model: (config) =>
        startScriptedModelServer(calculatorScript(config.sandbox.baseImage), {
          model: 'scripted',
          perConversation: true,
        }),
      repos: {
        ...Object.fromEntries(
          REPOS.map((r) => [r, (home: string) => repoSource(home, CALCULATOR_TEST_ARGV)]),
        ),
        slow: (home) => repoSource(home, ['node', '-e', 'setTimeout(() => {}, 600000)']),
      },
    });
  }, 300_000);

  afterAll(() => world?.close(), 120_000);

  it('six labelled issues over three repositories: all verified, spread over both workers within their concurrency', async () => {
    const { emu, app, bot } = world;
    const issues = await Promise.all(
      REPOS.flatMap((repo) =>
        [1, 2].map(async (k) => ({
          repo,
          n: await world.labelled(repo, `${repo}: subtract is wrong (${k})`),
        })),
      ),
    );
    const runs = [];
    for (const { repo, n } of issues) runs.push(await world.runOf(repo, n, 600_000));
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
    const { emu, app, bot } = world;
    const n = emu.createIssue(O, 'slow', { title: 'slow: cancel me', user: 'rae' });
    const label = await emu.label(O, 'slow', n, 'agenticfix', 'maint');
    expect(label.status).toBe(200);
    const run = await world.whenTesting('slow', n, WAIT_MS);
    expect((await emu.redeliver(label.id)).status).toBe(200);
    // Not app.idle(): distributed, that waits for the running run to end.
    await until(
      'the redelivery to be taken in',
      async () => (await app.store.pendingDeliveries()).length === 0,
      WAIT_MS,
    );
    expect(await app.store.forIssue(O, 'slow', n)).toHaveLength(1);

    expect(await world.cancel('slow', n, run.id, 30_000)).toBeLessThan(30_000);
    await until('the issue to be told', () => bot('slow', n).some((b) => b.includes('Cancelled')), 30_000);
    expect(emu.branchHead(O, 'slow', branchFor(n))).toBeNull();
  }, 300_000);

  it('a worker killed mid-run leaves its run interrupted, and its issue is told', async () => {
    const { app, bot } = world;
    const n = await world.labelled('slow', 'slow: subtract is wrong');
    // The repository's tests never end: the run is mid-run once its test container runs.
    const run = await world.whenTesting('slow', n, WAIT_MS);
    const victim = world.workers.get(run.worker!)!;
    victim.child.kill('SIGKILL');
    await victim.child;
    await until(
      'the run to be interrupted',
      async () => (await app.store.get(run.id))!.state === 'interrupted',
      60_000,
    );
    expect(await app.store.get(run.id)).toMatchObject({
      stop_reason: 'interrupted',
      error: `its worker (${run.worker}) stopped`,
    });
    await until(
      'the issue to be told',
      () => bot('slow', n).some((b) => b.includes('was interrupted because its worker')),
      30_000,
    );
  }, 300_000);
});
