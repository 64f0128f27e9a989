import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { JudgeOptions } from '../../../src/verify/types.js';
import type { Worktree } from '../../../src/workspace/types.js';
import { REAL_JOB_DEPS } from '../../../src/pipeline/job.js';
import {
  CALC_FIX,
  fakeDeps,
  report,
  startEmulatedApp,
  startEmulator,
  testConfig,
  waitFor,
} from '../../support/app.js';
import { calcRepo, labelledIssue } from '../../support/app-world.js';

const O = 'acme';
const CELLS = ['patched', 'patch_tests', 'patched_source', 'base'];

/** The judge's worktrees of `runId` under the worktree dir, each checked out (its calc.py there). */
const judgeWorktrees = (dir: string, runId: string) =>
  CELLS.map((cell) => path.join(dir, `${runId}-verify-${cell}`)).filter((p) =>
    existsSync(path.join(p, 'calc.py')),
  );

/**
 * A run whose stand-in repair waits in `working` until the test opens it: the judge's worktrees are
 * looked for while the agent works. Returns what the stand-in judge was handed.
 */
async function gatedRun(edits: Record<string, string>, repo: string) {
  const emu = await startEmulator();
  const home = mkdtempSync(path.join(tmpdir(), 'judge-ahead-'));
  const config = testConfig(home);
  let open = () => {};
  const gate = new Promise<void>((r) => (open = r));
  let handed: Worktree[] | null | undefined;
  const app = await startEmulatedApp(emu, {
    config,
    deps: {
      ...fakeDeps({ edits: () => edits, gate }),
      prepareJudge: REAL_JOB_DEPS.prepareJudge,
      // The stand-in judge takes the worktrees made ahead and gives them back, as the judge does.
      judge: async (o: JudgeOptions) => {
        handed = o.worktrees ? await o.worktrees() : undefined;
        if (handed) await o.workspaces.removeMany(handed);
        return report('verified', 'The stand-in judge accepts the patch.', o, []);
      },
    },
    sandbox: 'local',
  });
  const close = async () => {
    open();
    await app.close();
    await emu.close();
    rmSync(home, { recursive: true, force: true });
  };
  try {
    calcRepo(emu, O, repo);
    emu.setWebhookUrl(app.url);
    const n = await labelledIssue(app, emu, O, repo);
    const runId = (await app.store.forIssue(O, repo, n))[0]!.id;
    // Before, the judge made them only once the repair had ended: none while the agent works.
    await waitFor(() => judgeWorktrees(config.worktreeDir, runId).length === CELLS.length);
    open();
    await app.idle();
    const run = (await app.store.forIssue(O, repo, n))[0]!;
    return { run, handed, left: readdirSync(config.worktreeDir).filter((f) => f.startsWith(runId)), close };
  } catch (err) {
    await close();
    throw err;
  }
}

describe("the judge's worktrees are checked out while the agent works", () => {
  it('and handed to the judge at the base commit', async () => {
    const { run, handed, left, close } = await gatedRun(CALC_FIX, 'ahead');
    try {
      expect(run).toMatchObject({ state: 'done', verdict: 'verified' });
      expect(handed?.map((wt) => wt.runId)).toEqual(CELLS.map((cell) => `${run.id}-verify-${cell}`));
      expect(handed?.every((wt) => wt.baseCommit === run.base_commit)).toBe(true);
      expect(left).toEqual([]);
    } finally {
      await close();
    }
  }, 60_000);

  it('and removed when no judge runs (an empty patch)', async () => {
    const { run, handed, left, close } = await gatedRun({}, 'ahead-empty');
    try {
      expect(run.state).toBe('failed');
      expect(handed).toBeUndefined(); // the judge never ran
      expect(left).toEqual([]);
    } finally {
      await close();
    }
  }, 60_000);
});
