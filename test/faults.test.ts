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
import { execa, execaSync } from 'execa';
import type { RunningApp } from '../src/app.js';
import type { Config } from '../src/config/config.js';
import type { GitHubEmulator } from '../src/emulator/github.js';
import { startScriptedModelServer, type ScriptedModelServer } from '../src/emulator/scripted-model.js';
import { REAL_JOB_DEPS } from '../src/pipeline/job.js';
import { prepareHost } from '../src/pipeline/startup.js';
import {
  CALC_CONFIG,
  CALC_FILES,
  CALC_FIX,
  fakeDeps,
  localJudge,
  report,
  startEmulatedApp,
  startEmulator,
  testConfig,
  waitFor,
} from './app-support.js';
import { fileVersion } from '../src/tools/files.js';

/**
 * Nothing is lost when the world fails (issue 31): each fault ends the run in a final state, with its
 * record, its issue told and its space given back.
 */

const O = 'acme';
const MiB = 1024 * 1024;

/**
 * A 30 MB tmpfs (root, or passwordless sudo as in CI): a disk that really fills. Elsewhere the case is
 * skipped loudly; in CI a mount that fails is a failure.
 */
function mountTmpfs(dir: string): boolean {
  const sudo = process.getuid?.() === 0 ? [] : ['sudo', '-n'];
  const owner = `uid=${process.getuid?.() ?? 0},gid=${process.getgid?.() ?? 0}`;
  const argv = [...sudo, 'mount', '-t', 'tmpfs', '-o', `size=30m,${owner}`, 'tmpfs', dir];
  const res = execaSync(argv[0]!, argv.slice(1), { reject: false });
  if (res.exitCode === 0) return true;
  if (process.env.CI) throw new Error(`a tmpfs mount is required in CI: ${res.stderr}`);
  console.warn(`\n!!! cannot mount a tmpfs: SKIPPING the full-disk test (${res.stderr}) !!!\n`);
  return false;
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
  if (mounted) unmount(diskDir);
  rmSync(diskDir, { recursive: true, force: true });
});

(mounted ? describe : describe.skip)('a full disk (AGENTICFIX_HOME on a 30 MB tmpfs)', () => {
  const R = 'disk';
  let emu: GitHubEmulator;
  let app: RunningApp;
  let model: ScriptedModelServer;
  let config: Config;

  beforeAll(async () => {
    emu = await startEmulator();
    // The test command fills the disk from inside the run's worktree, as a runaway test would.
    const fill = ['sh', '-c', 'head -c 64000000 /dev/zero > fill.bin; exit 1'];
    emu.createRepo(O, R, {
      files: { ...CALC_FILES, '.github/agenticfix.yml': `test: ${JSON.stringify(fill)}\n` },
    });
    emu.setPermission(O, R, 'maint', 'maintain');
    model = await startScriptedModelServer([
      { tool_calls: [{ name: 'run_tests', arguments: {} }] },
      { tool_calls: [{ name: 'finish', arguments: { summary: 'never reached' } }] },
    ]);
    config = testConfig(diskDir, { AGENTICFIX_MIN_FREE_MB: '5' });
    app = await startEmulatedApp(emu, {
      config,
      deps: { ...REAL_JOB_DEPS, judge: localJudge, renderEvidence: (r) => `Verdict ${r.verdict}.` },
      model: { kind: 'url', baseUrl: model.url, name: 'scripted' },
      sandbox: 'local',
    });
    emu.setWebhookUrl(app.url);
  });
  afterAll(async () => {
    await app?.close();
    await model?.close();
    await emu?.close();
  });

  it('ends the run failed with result.json, tells the issue and gives the space back', async () => {
    const n = emu.createIssue(O, R, { title: 'add() subtracts', user: 'alice' });
    await emu.label(O, R, n, 'agenticfix', 'maint');
    await waitFor(async () => (await app.store.forIssue(O, R, n)).length === 1);
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
    // The issue's status comment says so (it was stuck at "Working" before).
    const status = emu.comments(n).find((c) => c.id === run!.status_comment_id)!;
    expect(status.body).toContain('❌ Failed');
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
  it('AGENTICFIX_RUNS_KEEP=2 with five runs leaves the two newest run directories; old unused mirrors go', async () => {
    const home = mkdtempSync(path.join(tmpdir(), 'faults-retention-'));
    try {
      const config = testConfig(home, { AGENTICFIX_RUNS_KEEP: '2', AGENTICFIX_MIRROR_MAX_AGE_D: '30' });
      const day = 86_400_000;
      const at = (p: string, ageMs: number) =>
        utimesSync(p, (Date.now() - ageMs) / 1000, (Date.now() - ageMs) / 1000);
      const runs = ['r1', 'r2', 'r3', 'r4', 'r5'].map((id, i) => {
        const dir = path.join(config.runsDir, id);
        mkdirSync(dir, { recursive: true });
        writeFileSync(path.join(dir, 'result.json'), '{}');
        at(dir, (5 - i) * 60_000); // r5 is the newest
        return dir;
      });
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

      const cleanup = await prepareHost({ config, docker: false });

      expect(readdirSync(config.runsDir).sort()).toEqual(['r4', 'r5']);
      expect(cleanup.retained.run_dirs.sort()).toEqual(runs.slice(0, 3));
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
    const emu = await startEmulator();
    const home = mkdtempSync(path.join(tmpdir(), 'faults-infra-'));
    const deps = fakeDeps({ edits: () => CALC_FIX });
    const app = await startEmulatedApp(emu, {
      config: testConfig(home),
      deps: { ...deps, judge: async (o) => report('infra_error', 'The Docker engine went away.', o, []) },
      sandbox: 'local',
    });
    try {
      emu.createRepo(O, 'infra', { files: { ...CALC_FILES, '.github/agenticfix.yml': CALC_CONFIG } });
      emu.setPermission(O, 'infra', 'maint', 'maintain');
      emu.setWebhookUrl(app.url);
      const n = emu.createIssue(O, 'infra', { title: 'add() subtracts', user: 'alice' });
      await emu.label(O, 'infra', n, 'agenticfix', 'maint');
      await waitFor(async () => (await app.store.forIssue(O, 'infra', n)).length === 1);
      await app.idle();
      const [run] = await app.store.forIssue(O, 'infra', n);
      const status = emu.comments(n).find((c) => c.id === run!.status_comment_id)!;
      expect(status.body).toContain('### AgenticFix: ⚠️ Infrastructure error');
      expect(status.body).not.toContain('✅ Done');
      expect(status.body).toContain('The Docker engine went away.');
    } finally {
      await app.close();
      await emu.close();
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe('publishing through a GitHub outage', () => {
  const R = 'outage';
  let emu: GitHubEmulator;
  let app: RunningApp;
  let model: ScriptedModelServer;
  let home: string;
  const WRONG = CALC_FILES['calc.py'];

  beforeAll(async () => {
    emu = await startEmulator();
    emu.createRepo(O, R, { files: { ...CALC_FILES, '.github/agenticfix.yml': CALC_CONFIG } });
    emu.setPermission(O, R, 'maint', 'maintain');
    model = await startScriptedModelServer([
      { tool_calls: [{ name: 'read_file', arguments: { path: 'calc.py' } }] },
      {
        tool_calls: [
          {
            name: 'edit_file',
            arguments: {
              path: 'calc.py',
              old_text: 'a - b',
              new_text: 'a + b',
              version: fileVersion(WRONG),
            },
          },
        ],
      },
      { tool_calls: [{ name: 'finish', arguments: { summary: 'Changed `add` to add.' } }] },
    ]);
    home = mkdtempSync(path.join(tmpdir(), 'faults-outage-'));
    app = await startEmulatedApp(emu, {
      // Due at once: the test says when "later" is.
      config: testConfig(home, { AGENTICFIX_PUBLISH_RETRY_BASE_S: '0' }),
      deps: { ...REAL_JOB_DEPS, judge: localJudge, renderEvidence: (r) => `Verdict ${r.verdict}.` },
      model: { kind: 'url', baseUrl: model.url, name: 'scripted' },
      sandbox: 'local',
    });
    emu.setWebhookUrl(app.url);
  });
  afterAll(async () => {
    await app?.close();
    await model?.close();
    await emu?.close();
    rmSync(home, { recursive: true, force: true });
  });

  // Issue 31: the branch was pushed, no PR opened, the run `failed` and only a rerun (the whole repair) helped.
  it('4×502 on POST /pulls, then 503 on comments: publishing waits and is resumed, the model never runs again', async () => {
    const completions = () => model.requests.filter((r) => r.path === '/v1/chat/completions').length;
    emu.failNext(
      { method: 'POST', path: new RegExp(`/repos/${O}/${R}/pulls$`) },
      Array(4).fill({ status: 502 }),
    );
    const n = emu.createIssue(O, R, { title: 'add() subtracts', user: 'alice' });
    await emu.label(O, R, n, 'agenticfix', 'maint');
    await waitFor(async () => (await app.store.forIssue(O, R, n)).length === 1);
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
    expect(existsSync(path.join(home, 'runs', run!.id, 'publish.json'))).toBe(false);
  }, 120_000);
});
