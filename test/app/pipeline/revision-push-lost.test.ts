import { branchFor } from '../../../src/publish/pr.js';
import { readMarker } from '../../../src/trace/marker.js';
import { CALC_CONFIG, CALC_DOCSTRING, CALC_FIX, fakeDeps, localJudge } from '../../support/app.js';
import { calcRepo, startAppWorld, type AppWorld } from '../../support/app-world.js';

/**
 * A revision's push that landed while its answer was lost (the connection dropped after GitHub moved the
 * branch): the branch then stood at the revision's own commit, which was read as "the branch moved while
 * the revision ran". The change was replayed on its own commit, did not apply, and the pull request was
 * told nothing was pushed while the commit was on its branch, unrecorded.
 */

const O = 'acme';
const R = 'pushlost';

describe('a revision whose push landed but whose answer was lost', () => {
  let w: AppWorld;
  const deps = {
    ...fakeDeps({ edits: (o) => (o.issue.revision === undefined ? CALC_FIX : CALC_DOCSTRING) }),
    judge: localJudge,
  };
  beforeAll(async () => {
    w = await startAppWorld({ deps });
    calcRepo(w.emu, O, R, { config: `${CALC_CONFIG}revise_on: [command, changes_requested]\n` });
  });
  afterAll(async () => {
    await w.close();
  });

  it('counts as pushed: recorded, said on the pull request, nothing replayed or pushed twice', async () => {
    const n = w.emu.createIssue(O, R, { title: 'add() subtracts', user: 'alice' });
    await w.emu.label(O, R, n, 'agenticfix', 'maint');
    await w.app.idle();
    const [first] = await w.app.store.forIssue(O, R, n);
    expect(first).toMatchObject({ state: 'done', verdict: 'verified' });
    const pr = first!.pr_number!;
    const calls = deps.calls.length;

    // The revision's push reaches GitHub, which updates the branch; the answer never comes back.
    w.emu.failNext({ method: 'POST', path: /\/git-receive-pack$/ }, [{ status: 502, landed: true }]);
    await w.emu.review(O, R, pr, { user: 'maint', state: 'request_changes', body: 'Document it.' });
    await w.app.idle();

    const lost = w.emu.requests.filter((r) => r.status === 502 && r.path.endsWith('/git-receive-pack'));
    expect(lost).toHaveLength(1);
    const pushed = w.emu.branchHead(O, R, branchFor(n))!;
    expect(w.emu.pullCommits(O, R, pr)).toEqual([first!.pushed_commit, pushed]);
    const revision = (await w.app.store.forIssue(O, R, n))[0]!;
    expect(revision).toMatchObject({
      revision: 1,
      state: 'done',
      verdict: 'verified',
      pushed_commit: pushed,
    });
    expect(deps.calls.length).toBe(calls + 1); // the model ran once for the revision
    const mine = (kind: string) =>
      w.emu.comments(pr).filter((c) => {
        const m = c.user === w.emu.botLogin ? readMarker(c.body) : null;
        return m?.run === revision.id && m.kind === kind;
      });
    expect(mine('unverified')).toEqual([]);
    expect(mine('revision')).toHaveLength(1);
    const status = w.emu.comments(pr).find((c) => c.id === revision.status_comment_id)!;
    expect(status.body).toContain(`Commit ${pushed} pushed`);
  }, 120_000);
});
