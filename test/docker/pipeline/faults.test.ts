import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { statfs } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { execa, execaSync } from 'execa';
import type { RunningApp } from '../../../src/app.js';
import type { Config } from '../../../src/config/config.js';
import type { GitHubEmulator } from '../../../src/emulator/github.js';
import type { ScriptedModelServer } from '../../../src/emulator/scripted-model.js';
import { prepareHost, sweepEngine } from '../../../src/pipeline/startup.js';
import { ImageLeases } from '../../../src/images/leases.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { describeIf, itIf, missing, present, type Need } from '../../support/skip.js';
import { calcFixScript, CALC_FIX, fakeDeps, report, testConfig, waitFor } from '../../support/app.js';
import { compose } from '../../../src/cli/compose.js';
import { calcRepo, labelledIssue, startAppWorld, type AppWorld } from '../../support/app-world.js';

/**
 * Nothing is lost when the world fails (issue 31): each fault ends the run in a final state, with its
 * record, its issue told and its space given back.
 */

const engine = await needDocker();
const O = 'acme';
const MiB = 1024 * 1024;

/**
 * A 30 MB tmpfs (root, or passwordless sudo as in CI): a disk that really fills. Elsewhere the case is
 * skipped loudly; in CI a mount that fails is a failure.
 */
function mountTmpfs(dir: string): Need {
  const sudo = process.getuid?.() === 0 ? [] : ['sudo', '-n'];
  const owner = `uid=${process.getuid?.() ?? 0},gid=${process.getgid?.() ?? 0}`;
  const argv = [...sudo, 'mount', '-t', 'tmpfs', '-o', `size=30m,${owner}`, 'tmpfs', dir];
  const res = execaSync(argv[0]!, argv.slice(1), { reject: false });
  const what = 'a tmpfs mount (root, or passwordless sudo)';
  return res.exitCode === 0 ? present(what) : missing(what, res.stderr);
}
const unmount = (dir: string) => {
  const argv = [...(process.getuid?.() === 0 ? [] : ['sudo', '-n']), 'umount', dir];
  execaSync(argv[0]!, argv.slice(1), { reject: false });
};
const freeMb = async (dir: string) => {
  const s = await statfs(dir);
  return (s.bavail * s.bsize) / MiB;
};

const diskDir = mkdtempSync(path.join(tmpdir(), 'faults-disk-'));
const mounted = mountTmpfs(diskDir);
afterAll(() => {
  if (mounted.ok) unmount(diskDir);
  rmSync(diskDir, { recursive: true, force: true });
});

describeIf(mounted)('a full disk (AGENTICFIX_HOME on a 30 MB tmpfs)', () => {
  const R = 'disk';
  let world: AppWorld;
  let emu: GitHubEmulator;
  let app: RunningApp;
  let model: ScriptedModelServer;
  let config: Config;

  beforeAll(async () => {
    world = await startAppWorld({
      home: diskDir,
      env: { AGENTICFIX_MIN_FREE_MB: '5' },
      script: [
        { tool_calls: [{ name: 'run_tests', arguments: {} }] },
        { tool_calls: [{ name: 'finish', arguments: { summary: 'never reached' } }] },
      ],
    });
    ({ emu, app, config } = world);
    model = world.model!;
    // The test command fills the disk from inside the run's worktree, as a runaway test would, then
    // gives a little back: the run's next writes then succeed, as they did when the judge's worktrees,
    // made beside the agent, failed on the full disk and were removed (the run went on to its model).
    const fill = [
      'sh',
      '-c',
      'head -c 200000 /dev/zero > spare.bin; head -c 64000000 /dev/zero > fill.bin; rm spare.bin; exit 1',
    ];
    calcRepo(emu, O, R, { config: `test: ${JSON.stringify(fill)}\n` });
  });
  afterAll(() => world?.close());

  it('ends the run failed with result.json, tells the issue and gives the space back', async () => {
    const n = await labelledIssue(app, emu, O, R);
    await app.idle();

    const [run] = await app.store.forIssue(O, R, n);
    expect(run).toMatchObject({ state: 'failed' });
    expect(run!.error).toMatch(/no space left on device/i);
    const result = JSON.parse(readFileSync(path.join(config.runsDir, run!.id, 'result.json'), 'utf8')) as {
      success: boolean;
      error: string;
    };
    expect(result.success).toBe(false);
    expect(result.error).toMatch(/no space left on device/i);
    // The issue's status comment says so (it was stuck at "Working" before): the host's disk, not the
    // model's work, so an infrastructure error (issue 37).
    const status = emu.comments(n).find((c) => c.id === run!.status_comment_id)!;
    expect(status.body).toContain('⚠️ Infrastructure error');
    expect(status.body).toMatch(/no space left on device/i);
    // The worktree that filled the disk is gone, and with it the space.
    expect(existsSync(path.join(config.worktreeDir, run!.id))).toBe(false);
    expect(await freeMb(diskDir)).toBeGreaterThan(20);
  }, 120_000);

  it('refuses a run while less than AGENTICFIX_MIN_FREE_MB is free, and says so on the issue', async () => {
    const fillFile = path.join(diskDir, 'operator-file.bin');
    // Leaves 3 MB: room for the store, not for a run.
    const fill = Math.floor((await freeMb(diskDir)) - 3) * MiB;
    await execa('sh', ['-c', `head -c ${fill} /dev/zero > ${fillFile}`]);
    try {
      expect(await freeMb(diskDir)).toBeLessThan(5);
      const n = emu.createIssue(O, R, { title: 'add() subtracts again', user: 'alice' });
      await emu.label(O, R, n, 'agenticfix', 'maint');
      await waitFor(async () => (await app.store.forIssue(O, R, n)).length === 1);
      await app.idle();
      const [run] = await app.store.forIssue(O, R, n);
      expect(run).toMatchObject({ state: 'failed' });
      expect(run!.error).toMatch(/MB are free .*\(AGENTICFIX_MIN_FREE_MB\)/);
      const refusal = emu.comments(n).find((c) => c.id === run!.status_comment_id);
      expect(refusal?.body).toContain('Not enough disk space; nothing was run.');
      expect(model.remaining()).toBe(1); // the model was not asked again
    } finally {
      rmSync(fillFile, { force: true });
    }
  }, 60_000);
});

describe('retention (disk stays bounded)', () => {
  it('AGENTICFIX_RUNS_KEEP=2 with five runs leaves the two newest runs (each with its judge’s directory); old unused mirrors go', async () => {
    const home = mkdtempSync(path.join(tmpdir(), 'faults-retention-'));
    try {
      const config = testConfig(home, { AGENTICFIX_RUNS_KEEP: '2', AGENTICFIX_MIRROR_MAX_AGE_D: '30' });
      const day = 86_400_000;
      const at = (p: string, ageMs: number) =>
        utimesSync(p, (Date.now() - ageMs) / 1000, (Date.now() - ageMs) / 1000);
      // Each run has its own directory and its judge's (issue 37: RUNS_KEEP=2 kept one run).
      const runs = ['r1', 'r2', 'r3', 'r4', 'r5'].flatMap((id, i) =>
        [id, `${id}-verify`].map((name, j) => {
          const dir = path.join(config.runsDir, name);
          mkdirSync(dir, { recursive: true });
          writeFileSync(path.join(dir, 'result.json'), '{}');
          at(dir, (5 - i) * 60_000 - j * 1000); // r5 is the newest, each judge's after its run
          return dir;
        }),
      );
      // A mirror unused for 40 days, one used 40 days ago but lending a worktree, one used yesterday.
      const mirror = (name: string, ageMs: number, worktree = false) => {
        const dir = path.join(config.cacheDir, `${name}.git`);
        mkdirSync(path.join(dir, 'objects'), { recursive: true });
        if (worktree) mkdirSync(path.join(dir, 'worktrees', 'r9'), { recursive: true });
        if (worktree) at(path.join(dir, 'worktrees'), ageMs);
        at(dir, ageMs);
        return dir;
      };
      const unused = mirror('unused', 40 * day);
      const lending = mirror('lending', 40 * day, true);
      const recent = mirror('recent', day);

      const cleanup = await prepareHost({ config, workspaces: compose(config).workspaces, docker: false });

      expect(readdirSync(config.runsDir).sort()).toEqual(['r4', 'r4-verify', 'r5', 'r5-verify']);
      expect(cleanup.retained.run_dirs.sort()).toEqual(runs.slice(0, 6).sort());
      expect(existsSync(unused)).toBe(false);
      expect(existsSync(lending)).toBe(true);
      expect(existsSync(recent)).toBe(true);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe('infrastructure is not the model’s fault', () => {
  // Issue 31: the judge's infra_error was posted under "✅ Done".
  it('a judge that could not run ends the status comment on "Infrastructure error", not "Done"', async () => {
    const deps = fakeDeps({ edits: () => CALC_FIX });
    const world = await startAppWorld({
      deps: { ...deps, judge: async (o) => report('infra_error', 'The Docker engine went away.', o, []) },
    });
    const { emu, app } = world;
    try {
      calcRepo(emu, O, 'infra');
      const n = await labelledIssue(app, emu, O, 'infra');
      await app.idle();
      const [run] = await app.store.forIssue(O, 'infra', n);
      const status = emu.comments(n).find((c) => c.id === run!.status_comment_id)!;
      expect(status.body).toContain('### AgenticFix: ⚠️ Infrastructure error');
      expect(status.body).not.toContain('✅ Done');
      expect(status.body).toContain('The Docker engine went away.');
    } finally {
      await world.close();
    }
  });
});

describe('publishing through a GitHub outage', () => {
  const R = 'outage';
  let world: AppWorld;
  let emu: GitHubEmulator;
  let app: RunningApp;
  let model: ScriptedModelServer;
  let home: string;

  beforeAll(async () => {
    world = await startAppWorld({
      // Due at once: the test says when "later" is.
      env: { AGENTICFIX_PUBLISH_RETRY_BASE_S: '0' },
      script: calcFixScript('Changed `add` to add.'),
    });
    ({ emu, app, home } = world);
    model = world.model!;
    calcRepo(emu, O, R);
  });
  afterAll(() => world?.close());

  // Issue 31: the branch was pushed, no PR opened, the run `failed` and only a rerun (the whole repair) helped.
  it('4×502 on POST /pulls, then 503 on comments: publishing waits in the store and is resumed without the run directory, the model never runs again', async () => {
    const completions = () => model.requests.filter((r) => r.path === '/v1/chat/completions').length;
    emu.failNext(
      { method: 'POST', path: new RegExp(`/repos/${O}/${R}/pulls$`) },
      Array(4).fill({ status: 502 }),
    );
    const n = await labelledIssue(app, emu, O, R);
    await app.idle();

    let [run] = await app.store.forIssue(O, R, n);
    expect(run).toMatchObject({ state: 'publish_pending', verdict: 'verified', pr_number: null });
    expect(run!.error).toMatch(/publishing failed/);
    const pushed = emu.branchHead(O, R, `agenticfix/issue-${n}`);
    expect(pushed).toBe(run!.pushed_commit);
    expect(emu.pulls).toHaveLength(0);
    const status = () => emu.comments(n).find((c) => c.id === run!.status_comment_id)!.body;
    expect(status()).toContain('⏳ Publishing pending');
    const asked = completions();
    expect(asked).toBe(3);

    // What publishing needs is in the store: it resumes where neither the run directory nor the mirror
    // is (distributed, another machine ran the run).
    expect(JSON.parse(run!.publish!)).toMatchObject({ attempts: 1, patch: expect.stringContaining('a + b') });
    rmSync(path.join(home, 'runs', run!.id), { recursive: true, force: true });
    rmSync(path.join(home, 'cache'), { recursive: true, force: true });

    // GitHub is back for pulls, not yet for comments: the PR opens, its evidence cannot be posted.
    emu.failNext({ method: 'POST', path: /\/issues\/\d+\/comments$/ }, Array(4).fill({ status: 503 }));
    await app.runner.resumePublishing();
    [run] = await app.store.forIssue(O, R, n);
    expect(run).toMatchObject({ state: 'publish_pending' });
    expect(emu.pulls).toHaveLength(1);

    // And then everything answers.
    await app.runner.resumePublishing();
    await app.idle();
    [run] = await app.store.forIssue(O, R, n);
    expect(run).toMatchObject({ state: 'done', error: null, pr_number: emu.pulls[0]!.number });
    expect(emu.pulls).toHaveLength(1);
    expect(emu.branchHead(O, R, `agenticfix/issue-${n}`)).toBe(pushed); // the pushed branch reused
    const prComments = emu.comments(emu.pulls[0]!.number).map((c) => c.body);
    expect(prComments.some((b) => b.startsWith('## Test evidence'))).toBe(true);
    expect(status()).toContain('✅ Done');
    expect(completions()).toBe(asked);
    expect(run!.publish).toBeNull();
  }, 120_000);
});

describe('final status and comments through a GitHub outage', () => {
  const R = 'finals';
  let world: AppWorld;
  let emu: GitHubEmulator;
  let app: RunningApp;
  const EDITS = { method: 'PATCH', path: /\/issues\/comments\/\d+$/ };
  const POSTS = { method: 'POST', path: /\/issues\/\d+\/comments$/ };
  // Every try of one write fails: the first and the client's three retries.
  const outage = Array(4).fill({ status: 503 });
  let issue = 0;

  beforeAll(async () => {
    const deps = fakeDeps({ edits: () => CALC_FIX });
    world = await startAppWorld({
      env: { AGENTICFIX_PUBLISH_RETRY_BASE_S: '0' },
      deps: {
        ...deps,
        judge: async (o) => report('verified', 'The failing test passes now.', o, []),
        // Once `issue`'s status shows the judging, GitHub fails the status edits: the final "Done" meets the outage.
        renderEvidence: async () => {
          if (issue === 0) return 'Verdict verified.';
          await waitFor(() => emu.comments(issue).some((c) => c.body.includes('⏳ Verifying')));
          emu.failNext(EDITS, outage);
          issue = 0;
          return 'Verdict verified.';
        },
      },
    });
    ({ emu, app } = world);
    calcRepo(emu, O, R);
  });
  afterAll(() => world?.close());

  // Issue 31: the final status edit was dropped on a 5xx (the issue stayed at "⏳ Verifying").
  it('a final status edit that meets 503s is kept in the store and lands once GitHub answers', async () => {
    const n = (issue = emu.createIssue(O, R, { title: 'add() subtracts', user: 'alice' }));
    await emu.label(O, R, n, 'agenticfix', 'maint');
    await waitFor(async () => (await app.store.forIssue(O, R, n)).length === 1);
    await app.idle();
    const [run] = await app.store.forIssue(O, R, n);
    expect(run).toMatchObject({ state: 'done', pr_number: emu.pulls[0]!.number });
    const status = () => emu.comments(n).find((c) => c.id === run!.status_comment_id)!.body;
    expect(status()).not.toContain('✅ Done'); // as found: the outage ate the last edit
    const kept = await app.store.dueWrites(new Date(Date.now() + 3600_000).toISOString());
    expect(kept).toMatchObject([{ id: `${run!.id}:status`, comment_id: run!.status_comment_id }]);

    await app.runner.deliverWrites();
    expect(status()).toContain('✅ Done');
    expect(status()).toContain(`Draft pull request #${run!.pr_number} opened.`);
    expect(await app.store.dueWrites(new Date(Date.now() + 3600_000).toISOString())).toEqual([]);
  }, 60_000);

  it('an interrupted run’s report (status edit and comment) waits out the outage, then lands once', async () => {
    const n = emu.createIssue(O, R, { title: 'add() subtracts again', user: 'alice' });
    await emu.label(O, R, n, 'agenticfix', 'maint');
    await waitFor(async () => (await app.store.forIssue(O, R, n)).length === 1);
    await app.idle();
    const [run] = await app.store.forIssue(O, R, n);
    const before = emu.comments(n).length;
    emu.failNext(EDITS, outage);
    emu.failNext(POSTS, outage);
    await app.runner.reportInterrupted(run!, 'its worker stopped'); // neither write throws
    expect(emu.comments(n)).toHaveLength(before);

    // Still failing at the first retry: the writes stay, tried again later.
    emu.failNext(EDITS, outage);
    emu.failNext(POSTS, outage);
    await app.runner.deliverWrites();
    expect(emu.comments(n)).toHaveLength(before);
    const kept = await app.store.dueWrites(new Date(Date.now() + 3600_000).toISOString());
    expect(kept.map((w) => w.attempts)).toEqual([1, 1]);

    await app.runner.deliverWrites();
    await app.runner.deliverWrites(); // nothing twice
    const comments = emu.comments(n);
    expect(comments).toHaveLength(before + 1);
    expect(comments.at(-1)!.body).toContain(
      `AgenticFix run \`${run!.id}\` was interrupted because its worker stopped`,
    );
    expect(comments.find((c) => c.id === run!.status_comment_id)!.body).toContain('⚠️ Interrupted');
    expect((await app.store.get(run!.id))!.comment_ids).toContain(comments.at(-1)!.id);
  }, 60_000);
});

describe('image leases of a holder that is gone (a real engine)', () => {
  // Issue 31: a lease container outlived an engine restart; its holder label (host/pid) was one no
  // sweep could read, so it stayed until its TTL ran out.
  itIf(engine)(
    'the engine sweep clears them at once; a live holder’s lease stays',
    async () => {
      const docker = new Docker();
      const image = (await docker.getImage(BASE_IMAGE).inspect()).Id;
      const run = `lease-${randomUUID().slice(0, 8)}`;
      // A holder that takes a lease and dies without releasing it (its engine was gone at the run's end).
      const root = fileURLToPath(new URL('../../..', import.meta.url));
      const leases = path.join(root, 'dist/images/leases.js');
      const script = `
      import Docker from 'dockerode';
      import { ImageLeases } from ${JSON.stringify(leases)};
      await new ImageLeases(new Docker(), 3_600_000, 30_000).acquire('${run}-dead', '${image}');
      process.kill(process.pid, 'SIGKILL');`;
      const child = await execa(process.execPath, ['--input-type=module', '-e', script], {
        reject: false,
        cwd: root,
      });
      expect(child.signal).toBe('SIGKILL');
      const mine = new ImageLeases(docker, 3_600_000, 30_000);
      await mine.acquire(`${run}-live`, image);
      try {
        const dead = (await ImageLeases.list(docker, 30_000)).find((l) => l.run === `${run}-dead`)!;
        expect(dead.expires).toBeGreaterThan(Date.now() + 3_000_000); // GC would keep it for the hour
        expect(await sweepEngine()).toContain(dead.container);
        const left = (await ImageLeases.list(docker, 30_000)).map((l) => l.run);
        expect(left).not.toContain(`${run}-dead`);
        expect(left).toContain(`${run}-live`);
      } finally {
        await mine.release(`${run}-live`);
        await mine.release(`${run}-dead`); // on the old code, the lease the sweep left
      }
    },
    60_000,
  );
});

describe('deliveries are pruned, and events older than the delivery retention are refused', () => {
  // Issue 31: deliveries were never pruned; pruning alone would let a forgotten signed body act again.
  it('a signed delivery whose event is older than AGENTICFIX_DELIVERY_MAX_AGE_D starts nothing', async () => {
    const world = await startAppWorld({
      env: { AGENTICFIX_DELIVERY_MAX_AGE_D: '3' },
      deps: fakeDeps({ edits: () => CALC_FIX }),
    });
    const { emu, app } = world;
    try {
      calcRepo(emu, O, 'old');
      const n = emu.createIssue(O, 'old', { title: 'add() subtracts', user: 'alice' });
      await emu.label(O, 'old', n, 'bug', 'maint'); // a genuine delivery whose payload is reused
      const payload = JSON.parse(emu.deliveries.at(-1)!.body);
      payload.label = { name: 'agenticfix' };
      // What a replay of a delivery pruned after the retention looks like: its event is that old.
      payload.issue.updated_at = new Date(Date.now() - 3.1 * 86_400_000).toISOString();
      const stale = await emu.deliver('issues', payload);
      expect(stale.status).toBe(200); // answered, recorded, not acted on
      await app.idle();
      expect(await app.store.forIssue(O, 'old', n)).toEqual([]);
      expect(await app.store.pendingDeliveries()).toEqual([]); // its intake is over

      // The same event within the retention (GitHub's redelivery window is 3 days) does start a run.
      payload.issue.updated_at = new Date(Date.now() - 2.9 * 86_400_000).toISOString();
      expect((await emu.deliver('issues', payload)).status).toBe(200);
      await waitFor(async () => (await app.store.forIssue(O, 'old', n)).length === 1);
      await app.idle();
    } finally {
      await world.close();
    }
  }, 60_000);
});
