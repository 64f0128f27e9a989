import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { git } from '../../../src/workspace/git.js';
import { fakeDeps, report, startEmulatedApp, startEmulator, testConfig, waitFor } from '../../support/app.js';
import { calcRepo, calcRunEnded, labelledIssue } from '../../support/app-world.js';

const O = 'acme';
const R = 'overlap';

/** The commits in the mirror (referenced or not) whose message names an AgenticFix run. */
async function runCommits(mirror: string): Promise<string[]> {
  const all = await git(['cat-file', '--batch-all-objects', '--batch-check=%(objecttype) %(objectname)'], {
    cwd: mirror,
    env: { GIT_DIR: mirror },
  });
  const commits = all.stdout
    .split('\n')
    .filter((l) => l.startsWith('commit '))
    .map((l) => l.slice('commit '.length));
  const found: string[] = [];
  for (const id of commits) {
    const body = await git(['cat-file', 'commit', id], { cwd: mirror, env: { GIT_DIR: mirror } });
    if (body.stdout.includes('\nAgenticFix run ')) found.push(id);
  }
  return found;
}

describe('publishing a verified patch', () => {
  it('its commit is made in the mirror while the judge runs, and that commit is the one pushed', async () => {
    const emu = await startEmulator();
    const home = mkdtempSync(path.join(tmpdir(), 'publish-commit-'));
    let duringJudge: string[] = [];
    const app = await startEmulatedApp(emu, {
      config: testConfig(home),
      deps: {
        ...fakeDeps({ edits: () => ({ 'calc.py': 'def add(a, b):\n    return a + b\n' }) }),
        // The judge waits (up to 5 s) for the run's commit to appear in the mirror; before, it was made
        // only after the verdict.
        judge: async (o) => {
          const mirror = o.workspaces.mirrorPath(o.remote);
          for (let i = 0; i < 250 && duringJudge.length === 0; i++) {
            duringJudge = await runCommits(mirror);
            if (duringJudge.length === 0) await new Promise((r) => setTimeout(r, 20));
          }
          return report('verified', 'The stand-in judge accepts the patch.', o, []);
        },
      },
      sandbox: 'local',
    });
    try {
      const run = await calcRunEnded(app, emu, O, R);
      expect(run).toMatchObject({ state: 'done', verdict: 'verified' });
      expect(duringJudge).toHaveLength(1);
      expect(emu.branchHead(O, R, `agenticfix/issue-${run!.issue}`)).toBe(duringJudge[0]);
      expect(run!.pushed_commit).toBe(duringJudge[0]);
    } finally {
      await app.close();
      await emu.close();
      rmSync(home, { recursive: true, force: true });
    }
  }, 60_000);

  it("publishes while the judge's worktrees are given back (begun once git pushes), and the run ends only once they are", async () => {
    const emu = await startEmulator();
    const home = mkdtempSync(path.join(tmpdir(), 'publish-cleanup-'));
    let open = () => {};
    const cleanup = new Promise<void>((r) => (open = r));
    let handed = false;
    // What GitHub had been asked since the verdict, and the branch, when the cleanup was started.
    let atCleanup: { asked: string[]; branch: string | null } | null = null;
    const app = await startEmulatedApp(emu, {
      config: testConfig(home),
      deps: {
        ...fakeDeps({ edits: () => ({ 'calc.py': 'def add(a, b):\n    return a + b\n' }) }),
        // The stand-in judge's cleanup ends when the test says so.
        judge: async (o) => {
          const from = emu.requests.length;
          o.afterward?.(() => {
            const asked = emu.requests.slice(from).map((r) => `${r.method} ${r.path}`);
            atCleanup ??= { asked, branch: emu.branchHead(O, R, 'agenticfix/issue-1') };
            return cleanup;
          });
          handed = o.afterward !== undefined;
          return report('verified', 'The stand-in judge accepts the patch.', o, []);
        },
      },
      sandbox: 'local',
    });
    try {
      calcRepo(emu, O, R);
      emu.setWebhookUrl(app.url);
      const n = await labelledIssue(app, emu, O, R);
      // The draft and its comments are out while the cleanup still runs; the run is not over.
      await waitFor(() => emu.pulls.some((p) => p.pull?.head === `agenticfix/issue-${n}`));
      await waitFor(() => emu.comments(emu.pulls.find((p) => p.pull)!.number).length >= 3);
      expect(handed).toBe(true);
      expect((await app.store.forIssue(O, R, n))[0]!.state).toBe('running');
      // Before, the cleanup began at the verdict, ahead of publishing's first read and its push, whose
      // start it held up: now once git pushes (the issue was read, the branch is not there yet).
      expect(n).toBe(1);
      expect(atCleanup).toEqual({
        asked: expect.arrayContaining([`GET /repos/${O}/${R}/issues/1`]),
        branch: null,
      });
      // The push created the branch: no pull request can be open on it, so none is looked for.
      const pushed = emu.requests.findIndex((r) => r.path.endsWith('/git-receive-pack'));
      const pulls = emu.requests.slice(pushed).filter((r) => /\/pulls$/.test(r.path));
      expect(pulls.map((r) => r.method)).toEqual(['POST']);
      open();
      await app.idle();
      expect((await app.store.forIssue(O, R, n))[0]).toMatchObject({ state: 'done', verdict: 'verified' });
    } finally {
      open();
      await app.close();
      await emu.close();
      rmSync(home, { recursive: true, force: true });
    }
  }, 60_000);
});
