import type { RunningApp } from '../../../src/app.js';
import { branchFor } from '../../../src/publish/pr.js';
import type { RunRecord } from '../../../src/store/store.js';
import { readMarker } from '../../../src/trace/marker.js';
import {
  CALC_CONFIG,
  CALC_DOCSTRING,
  CALC_FIX,
  fakeDeps,
  localJudge,
  startEmulatedApp,
  waitFor,
} from '../../support/app.js';
import { calcRepo, startAppWorld, type AppWorld } from '../../support/app-world.js';

/**
 * A revision run whose process died (issue 37's leftover): at start-up it was never resumed, unlike a
 * first run, and its interruption comment said "Nothing was published" with its commit on the pull
 * request's branch. Each case lets a revision run until a store write where its process "dies" (the
 * write throws), leaves the run as a killed process leaves it (`running`), and starts a new process on
 * the same store and GitHub.
 */

const O = 'acme';
const R = 'revdied';

describe('a revision run whose process died', () => {
  let w: AppWorld;
  let app: RunningApp;
  const deps = {
    ...fakeDeps({ edits: (o) => (o.issue.revision === undefined ? CALC_FIX : CALC_DOCSTRING) }),
    judge: localJudge,
  };
  beforeAll(async () => {
    w = await startAppWorld({ deps, env: { AGENTICFIX_PUBLISH_RETRY_BASE_S: '0' } });
    app = w.app;
    calcRepo(w.emu, O, R, { config: `${CALC_CONFIG}revise_on: [command, changes_requested]\n` });
  });
  afterAll(async () => {
    await w.close(app);
  });

  /** The app's comments (or review comments) in `list` with `kind`'s marker of `run`. */
  const marked = (list: { user: string; body: string }[], run: string, kind: string) =>
    list.filter((c) => {
      const m = c.user === w.emu.botLogin ? readMarker(c.body) : null;
      return m?.run === run && m.kind === kind;
    });

  /**
   * An issue whose first run opened its pull request, then maint's review asking for changes with one
   * inline comment, its revision run "killed" at the first store write `dies` picks. Returns the
   * revision as the killed process left it (`running`, or `queued` as a stalled job put back leaves
   * it; its record due at once), and the pull request.
   */
  async function killedRevision(
    dies: (fields: object) => boolean,
    state: 'running' | 'queued' = 'running',
    beforeReview?: (branch: string) => void,
  ) {
    const n = w.emu.createIssue(O, R, { title: 'add() subtracts', user: 'alice' });
    await w.emu.label(O, R, n, 'agenticfix', 'maint');
    await app.idle();
    const [first] = await app.store.forIssue(O, R, n);
    expect(first).toMatchObject({ state: 'done', verdict: 'verified' });
    const pr = first!.pr_number!;
    beforeReview?.(branchFor(n));
    const { store } = app;
    const update = store.update.bind(store);
    const addComment = store.addComment.bind(store);
    let died = false;
    const kill = async <T>(id: string, fields: object, write: () => Promise<T>) => {
      const revision = id !== first!.id && (await store.get(id))?.revision != null;
      if (revision && !died && dies(fields)) {
        await write(); // the write lands; the process dies before its next step
        died = true;
        throw new Error('killed');
      }
      return write();
    };
    store.update = (id, fields) => kill(id, fields, () => update(id, fields));
    store.addComment = (id, comment) => kill(id, { comment }, () => addComment(id, comment));
    try {
      await w.emu.review(O, R, pr, {
        user: 'maint',
        state: 'request_changes',
        body: 'Document it.',
        comments: [{ path: 'calc.py', line: 1, body: 'Give add() a docstring.' }],
      });
      await app.idle();
    } finally {
      store.update = update;
      store.addComment = addComment;
    }
    expect(died).toBe(true);
    const revision = (await app.store.forIssue(O, R, n))[0]!;
    expect(revision.revision).toBe(1);
    // What a killed process leaves: the run `running`, its publishing record (if any) as first stored.
    const record = revision.publish
      ? JSON.stringify({ ...JSON.parse(revision.publish), attempts: 0, next_at: new Date().toISOString() })
      : null;
    await app.store.update(revision.id, {
      state,
      error: null,
      finished_at: null,
      publish: record,
    });
    return { n, pr, first: first!, revision };
  }

  /** The process dies; a new one starts on the same home, store and GitHub. */
  async function restart(): Promise<void> {
    await app.close();
    app = await startEmulatedApp(w.emu, { config: w.config, deps, sandbox: 'local' });
    w.emu.setWebhookUrl(app.url);
  }

  const endOf = async (run: RunRecord): Promise<RunRecord> => {
    await waitFor(async () => !['running', 'publish_pending'].includes((await app.store.get(run.id))!.state));
    await app.idle();
    return (await app.store.get(run.id))!;
  };

  it('after its push and its evidence comment: resumed at start-up, nothing pushed or posted twice', async () => {
    // Dies right after its evidence comment landed on the pull request, before it was recorded.
    const { pr, first, revision } = await killedRevision((f) => 'comment' in f);
    const pushed = w.emu.branchHead(O, R, branchFor(first.issue))!;
    expect(pushed).not.toBe(first.pushed_commit);
    expect(marked(w.emu.comments(pr), revision.id, 'revision')).toHaveLength(1);
    expect(w.emu.reviewComments(pr).filter((c) => c.user === w.emu.botLogin)).toEqual([]);
    // A maintainer pushes on top of the revision's commit before the app is back.
    const human = w.emu.pushFiles(
      O,
      R,
      branchFor(first.issue),
      { 'NOTES.md': 'add adds\n' },
      { message: 'Note', author: 'maint' },
    );
    const asked = deps.calls.length;

    await restart();
    const ended = await endOf(revision);
    const comments = w.emu.comments(pr);
    // The issue's finding: the pull request read "Nothing was published" with the commit on its branch.
    expect(comments.some((c) => c.body.includes('Nothing was published'))).toBe(false);
    expect(ended).toMatchObject({ state: 'done', verdict: 'verified', pushed_commit: pushed, publish: null });
    expect(deps.calls.length).toBe(asked); // the model is not run again
    // The commit on the branch is the one pushed before the process died, pushed once.
    expect(w.emu.pullCommits(O, R, pr)).toEqual([first.pushed_commit, pushed, human]);
    expect(marked(comments, revision.id, 'revision')).toHaveLength(1);
    const replies = w.emu.reviewComments(pr).filter((c) => c.user === w.emu.botLogin);
    expect(replies.map((c) => readMarker(c.body)?.kind)).toEqual([expect.stringMatching(/^reply-\d+$/)]);
    expect(replies[0]!.body).toContain(`Addressed in ${pushed} (revision 1).`);
    expect(marked(comments, revision.id, 'interrupted')).toEqual([]);
    const status = comments.find((c) => c.id === ended.status_comment_id)!;
    expect(status.body).toContain('✅ Done');
    expect(status.body).toContain(`Commit ${pushed} pushed`);
    expect(w.emu.pulls.find((p) => p.number === pr)!.body).toContain(pushed.slice(0, 12));
  }, 120_000);

  // GitHub lists a pull request's commits 100 a page and 250 at most: the revision's commit, 302nd, was
  // past what was read, and the revision was said to be lost ("the branch moved") while on the branch.
  it('after its push, on a pull request of 300 maintainer commits and one on top: resumed as pushed', async () => {
    const long = (branch: string) =>
      w.emu.pushCommits(O, R, branch, 300, { file: 'NOTES.md', author: 'maint' });
    const { pr, first, revision } = await killedRevision((f) => 'comment' in f, 'running', long);
    const pushed = w.emu.branchHead(O, R, branchFor(first.issue))!;
    const human = w.emu.pushFiles(
      O,
      R,
      branchFor(first.issue),
      { 'TODO.md': 'x\n' },
      { message: 'Todo', author: 'maint' },
    );
    await restart();
    const ended = await endOf(revision);
    expect(ended).toMatchObject({ state: 'done', verdict: 'verified', pushed_commit: pushed, publish: null });
    const commits = w.emu.pullCommits(O, R, pr);
    expect(commits).toHaveLength(303);
    expect(commits.slice(-2)).toEqual([pushed, human]);
    const comments = w.emu.comments(pr);
    expect(marked(comments, revision.id, 'unverified')).toEqual([]);
    expect(marked(comments, revision.id, 'revision')).toHaveLength(1);
    expect(comments.find((c) => c.id === ended.status_comment_id)!.body).toContain(`Commit ${pushed} pushed`);
  }, 120_000);

  it('after storing its verified commit, before the push: resumed at start-up, the commit pushed once', async () => {
    // Dies right after the record of its verified commit is stored, before it pushes.
    const { pr, first, revision } = await killedRevision((f) => 'publish' in f);
    const head = w.emu.branchHead(O, R, branchFor(first.issue));
    expect(head).toBe(first.pushed_commit); // nothing was pushed
    await restart();
    const ended = await endOf(revision);
    const pushed = w.emu.branchHead(O, R, branchFor(first.issue))!;
    expect(ended).toMatchObject({ state: 'done', verdict: 'verified', pushed_commit: pushed, publish: null });
    expect(w.emu.pullCommits(O, R, pr)).toEqual([first.pushed_commit, pushed]);
    expect(marked(w.emu.comments(pr), revision.id, 'revision')).toHaveLength(1);
    expect(marked(w.emu.comments(pr), revision.id, 'interrupted')).toEqual([]);
  }, 120_000);

  it('after storing its verified commit, the branch moved before the restart: nothing overwritten, and it says so', async () => {
    const { pr, first, revision } = await killedRevision((f) => 'publish' in f);
    const human = w.emu.pushFiles(
      O,
      R,
      branchFor(first.issue),
      { 'NOTES.md': 'add adds\n' },
      { message: 'Note', author: 'maint' },
    );
    await restart();
    const ended = await endOf(revision);
    expect(ended).toMatchObject({ state: 'done', verdict: 'verified', pushed_commit: null, publish: null });
    expect(w.emu.pullCommits(O, R, pr)).toEqual([first.pushed_commit, human]);
    const [said, ...more] = marked(w.emu.comments(pr), revision.id, 'unverified');
    expect(more).toEqual([]);
    expect(said!.body).toContain(`the branch moved to ${human} meanwhile`);
    const status = w.emu.comments(pr).find((c) => c.id === ended.status_comment_id)!;
    expect(status.body).toContain('Nothing was pushed.');
  }, 120_000);

  // Distributed, a stalled job is put back once (AGENTICFIX_REQUEUE_STALLED): the run starts again.
  it('put back in the queue after its push: run again, it publishes the recorded commit, not a second one', async () => {
    const { pr, first, revision } = await killedRevision((f) => 'comment' in f, 'queued');
    const pushed = w.emu.branchHead(O, R, branchFor(first.issue))!;
    const asked = deps.calls.length;
    await restart();
    const ended = await endOf(revision);
    const comments = w.emu.comments(pr);
    // Run again from the start, it was refused its push (the branch "moved" to its own commit) and said nothing was pushed.
    expect(marked(comments, revision.id, 'unverified')).toEqual([]);
    expect(ended).toMatchObject({ state: 'done', verdict: 'verified', pushed_commit: pushed, publish: null });
    expect(deps.calls.length).toBe(asked); // the model is not run again
    expect(w.emu.pullCommits(O, R, pr)).toEqual([first.pushed_commit, pushed]);
    expect(marked(comments, revision.id, 'revision')).toHaveLength(1);
    expect(comments.find((c) => c.id === ended.status_comment_id)!.body).toContain(`Commit ${pushed} pushed`);
  }, 120_000);

  it('before its verdict: interrupted, and the pull request is told nothing was pushed and how to ask again', async () => {
    const { pr, first, revision } = await killedRevision((f) => 'verdict' in f);
    await restart();
    const ended = await endOf(revision);
    expect(ended).toMatchObject({ state: 'interrupted', pushed_commit: null });
    expect(w.emu.branchHead(O, R, branchFor(first.issue))).toBe(first.pushed_commit);
    const [said, ...more] = marked(w.emu.comments(pr), revision.id, 'interrupted');
    expect(more).toEqual([]);
    expect(said!.body).toContain('Nothing was pushed to the pull request.');
    // `/agenticfix rerun` on a pull request would start a run for an "issue" of the pull request's number.
    expect(said!.body).toContain('`/agenticfix revise');
    expect(said!.body).not.toContain('rerun');
    const status = w.emu.comments(pr).find((c) => c.id === ended.status_comment_id)!;
    expect(status.body).toContain('⚠️ Interrupted');
  }, 120_000);
});
