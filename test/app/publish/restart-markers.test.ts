import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RunningApp } from '../../../src/app.js';
import type { GitHubEmulator } from '../../../src/emulator/github.js';
import { postComment } from '../../../src/publish/github.js';
import { renderStatus, type StatusState } from '../../../src/publish/status.js';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';
import type { RunRecord, RunUpdate } from '../../../src/store/store.js';
import { markerText, readMarker, withMarker } from '../../../src/trace/marker.js';
import { sha256 } from '../../../src/trace/trace.js';
import { USAGE } from '../../../src/webhook/commands.js';
import {
  calcFixScript,
  installationClient,
  startEmulatedApp,
  testConfig,
  waitFor,
} from '../../support/app.js';
import { calcRepo, SCRIPTED_DEPS, startAppWorld, type AppWorld } from '../../support/app-world.js';

/**
 * Writes that landed while their process died before recording them (issue 37, item 6, across a
 * restart): a NEW process on the same home, store and GitHub finds the app's own write by its marker
 * and does not make it twice; a marker anyone else wrote stays ignored.
 */

const O = 'acme';
const R = 'restart';
const SCRIPT = calcFixScript('Changed `add` to add.');

/** The app again on `w`'s home, store and emulator: a new process after the first one died. */
async function restart(w: AppWorld): Promise<RunningApp> {
  const app = await startEmulatedApp(w.emu, {
    config: w.config,
    deps: SCRIPTED_DEPS,
    model: { kind: 'url', baseUrl: w.model!.url, name: 'scripted' },
    sandbox: 'local',
  });
  w.emu.setWebhookUrl(app.url);
  return app;
}

/** The app's comments on `n` that carry `kind`'s marker of `run`. */
const marked = (emu: GitHubEmulator, n: number, run: string, kind: string) =>
  emu
    .comments(n, `${O}/${R}`)
    .filter((c) => c.user === emu.botLogin)
    .filter((c) => {
      const m = readMarker(c.body);
      return m?.run === run && m.kind === kind;
    });

describe('across a restart', () => {
  /**
   * What a process that died leaves: issue `n`'s run recorded with `fields` and, when `status` is
   * given, its status comment posted (GitHub has it) but its id never recorded.
   */
  async function leftBehind(w: AppWorld, fields: RunUpdate, status?: StatusState): Promise<RunRecord> {
    const n = w.emu.createIssue(O, R, { title: 'add() subtracts', user: 'alice' });
    const before = new SqliteRunStore(w.config.dbPath);
    const run = await before.createRun({
      owner: O,
      repo: R,
      issue: n,
      installation_id: w.emu.installationId(O),
      trigger: 'label',
      triggered_by: 'maint',
      delivery_id: `died-${n}`,
      base_commit: w.emu.branchHead(O, R, 'main')!,
      issue_title: 'add() subtracts',
      issue_body: 'add(2, 3) gives -1.',
      issue_updated_at: new Date().toISOString(),
    });
    await before.update(run.id, fields);
    await before.close();
    if (status) {
      // The issue's author typed the status comment's marker first: it is not the app's comment.
      await w.emu.comment(O, R, n, `forged\n\n${markerText({ run: run.id, kind: 'status' })}`, 'alice');
      const gh = await installationClient(w.emu, w.config, O);
      await postComment(gh, { owner: O, repo: R, issue: n }, renderStatus(run.id, run.base_commit, status));
    }
    return run;
  }

  let w: AppWorld;
  let app: RunningApp;
  beforeEach(async () => {
    w = await startAppWorld({ script: SCRIPT, env: { AGENTICFIX_PUBLISH_RETRY_BASE_S: '0' } });
    calcRepo(w.emu, O, R);
    app = w.app;
  });
  afterEach(async () => {
    await w.close(app);
  });

  /** The first process dies (it only leaves its store behind) and a new one starts. */
  async function died(): Promise<void> {
    await w.app.close();
    app = await restart(w);
  }

  // Item 2: embedded mode interrupted such a run at start-up; distributed serve's reconcile enqueues it.
  it('a run recorded queued but never enqueued (the process died in between) runs at the next start', async () => {
    const run = await leftBehind(w, {});
    await died();
    await waitFor(async () => (await app.store.get(run.id))?.state === 'done', 30_000);
    await app.idle();
    expect(await app.store.get(run.id)).toMatchObject({ state: 'done', pr_number: run.issue + 1 });
    expect(marked(w.emu, run.issue, run.id, 'status').map((c) => c.body)).toEqual([
      expect.stringContaining('### AgenticFix: ✅ Done'),
    ]);
  });

  it('a queued run whose status comment landed unrecorded: the next process edits that comment, posts none', async () => {
    const run = await leftBehind(w, {}, { phase: 'queued' });
    await died();
    await waitFor(async () => (await app.store.get(run.id))?.state === 'done', 30_000);
    await app.idle();
    const [status, ...more] = marked(w.emu, run.issue, run.id, 'status');
    expect(more).toEqual([]);
    expect(status!.body).toContain('### AgenticFix: ✅ Done');
    expect(await app.store.get(run.id)).toMatchObject({ status_comment_id: status!.id });
    // alice's comment with the same marker is neither edited nor taken for the app's.
    const forged = w.emu.comments(run.issue, `${O}/${R}`).filter((c) => c.user === 'alice');
    expect(forged.map((c) => c.body)).toEqual([expect.stringMatching(/^forged\n/)]);
  });

  it('a running run whose status comment landed unrecorded: interrupted, and that comment says so', async () => {
    const run = await leftBehind(w, { state: 'running' }, { phase: 'working', step: 3 });
    await died();
    await app.idle();
    expect(await app.store.get(run.id)).toMatchObject({ state: 'interrupted' });
    const [status, ...more] = marked(w.emu, run.issue, run.id, 'status');
    expect(more).toEqual([]);
    expect(status!.body).toContain('### AgenticFix: ⚠️ Interrupted');
    expect(marked(w.emu, run.issue, run.id, 'interrupted')).toHaveLength(1);
  });

  it('publishing again after a try that posted the evidence: one evidence comment, trace and configuration', async () => {
    const first = w.app;
    const n = w.emu.createIssue(O, R, { title: 'add() subtracts', user: 'alice' });
    const pr = n + 1;
    // The evidence lands; the trace comment after it is refused: publishing waits to be tried again.
    w.emu.failNext({ method: 'POST', path: new RegExp(`/issues/${pr}/comments$`), after: 1 }, [
      { status: 422, body: { message: 'Validation Failed' } },
    ]);
    await w.emu.label(O, R, n, 'agenticfix', 'maint');
    await waitFor(async () => (await first.store.forIssue(O, R, n))[0]?.state === 'publish_pending', 30_000);
    await first.idle();
    const [run] = await first.store.forIssue(O, R, n);
    expect(marked(w.emu, pr, run!.id, 'evidence')).toHaveLength(1);
    await died();
    await waitFor(async () => (await app.store.get(run!.id))?.state === 'done', 30_000);
    await app.idle();
    expect(w.emu.pulls.map((p) => p.number)).toEqual([pr]);
    for (const kind of ['evidence', 'trace', 'config'])
      expect(marked(w.emu, pr, run!.id, kind)).toHaveLength(1);
  });
});

describe('a command taken in again after a restart', () => {
  it('its reply, made before the process died, is found by its marker and not made twice', async () => {
    const w = await startAppWorld();
    let app = w.app;
    try {
      calcRepo(w.emu, O, R);
      const n = w.emu.createIssue(O, R, { title: 'help?', user: 'alice' });
      // maint's command, its webhook delivered elsewhere: the store below is what the app received.
      const sink = createServer((_req, res) => res.end());
      await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
      w.emu.setWebhookUrl(`http://127.0.0.1:${(sink.address() as AddressInfo).port}/`);
      await w.emu.comment(O, R, n, '/agenticfix help', 'maint');
      sink.close();
      const command = w.emu.comments(n, `${O}/${R}`)[0]!;
      // What a process that replied and died before finishing the delivery leaves: the delivery still
      // to be taken in, and its reply on the issue.
      const id = 'replied-then-died';
      const payload = {
        action: 'created',
        comment: {
          id: command.id,
          body: '/agenticfix help',
          user: { login: 'maint' },
          created_at: new Date().toISOString(),
        },
        issue: { number: n },
        repository: { name: R, owner: { login: O }, default_branch: 'main' },
        sender: { login: 'maint', type: 'User' },
        installation: { id: w.emu.installationId(O) },
      };
      const before = new SqliteRunStore(w.config.dbPath);
      await before.claimDeliveries([
        { id, event: 'issue_comment', body: JSON.stringify(payload), sha256: null },
      ]);
      await before.close();
      const gh = await installationClient(w.emu, w.config, O);
      const mark = { run: id, kind: `reply-${sha256(USAGE).slice(0, 16)}` };
      await postComment(gh, { owner: O, repo: R, issue: n }, USAGE, { mark });
      await w.app.close();
      app = await startEmulatedApp(w.emu, { config: w.config, sandbox: 'local' });
      await waitFor(async () => (await app.store.pendingDeliveries()).length === 0);
      await app.idle();
      // Taken in: the command got its reaction, and its reply is the one made before.
      expect(w.emu.requests.filter((r) => r.path.endsWith(`/comments/${command.id}/reactions`))).not.toEqual(
        [],
      );
      const replies = w.emu.comments(n, `${O}/${R}`).filter((c) => c.user === w.emu.botLogin);
      expect(replies.map((c) => readMarker(c.body))).toEqual([mark]);
    } finally {
      await w.close(app);
    }
  });
});

describe('review replies', () => {
  const TIMEOUT = 400;
  const HOLD = 2 * TIMEOUT;
  let w: AppWorld;
  beforeAll(async () => {
    w = await startAppWorld();
    calcRepo(w.emu, O, R);
  });
  afterAll(async () => {
    await w.close();
  });

  /**
   * A pull request with maint's review comment on calc.py, the thread's first comment, and the app's
   * client replying in it: its timeout TIMEOUT, its back-off before a retry longer than a HOLD.
   */
  async function thread(branch: string) {
    const gh = await installationClient(w.emu, w.config, O);
    const replier = await installationClient(
      w.emu,
      testConfig(w.home, {
        AGENTICFIX_GITHUB_TIMEOUT_MS: String(TIMEOUT),
        AGENTICFIX_GITHUB_RETRY_BASE_MS: String(3 * HOLD),
      }),
      O,
    );
    w.emu.pushFiles(
      O,
      R,
      branch,
      { 'calc.py': 'def add(a, b):\n    return a + b\n' },
      { message: 'Fix', author: 'dev' },
    );
    const pr = (await gh.rest.pulls.create({ owner: O, repo: R, head: branch, base: 'main', title: 'Fix' }))
      .data.number;
    await w.emu.reviewComment(O, R, pr, { user: 'maint', body: 'Name it sum?', path: 'calc.py', line: 1 });
    const root = w.emu.reviewComments(pr).find((c) => c.user === 'maint')!;
    const reply = (body: string) =>
      replier.rest.pulls.createReplyForReviewComment({
        owner: O,
        repo: R,
        pull_number: pr,
        comment_id: root.id,
        body,
      });
    return { pr, root, reply };
  }
  const replies = /\/pulls\/\d+\/comments\/\d+\/replies$/;
  const sent = () => w.emu.requests.filter((r) => r.method === 'POST' && replies.test(r.path));

  it('a reply whose POST timed out but landed is found by its marker and not posted again', async () => {
    const { pr, root, reply } = await thread('reply-landed');
    const before = sent().length;
    // Held past the client's timeout; it lands during the back-off, before the retry would be sent.
    w.emu.holdNext({ method: 'POST', path: replies }, HOLD);
    const mark = { run: 'r-reply', kind: `reply-${root.id}` };
    const { data } = await reply(withMarker('Addressed.', mark));
    expect(sent().length - before).toBe(1);
    const mine = w.emu.reviewComments(pr).filter((c) => c.user === w.emu.botLogin);
    expect(mine.map((c) => c.id)).toEqual([data.id]);
    expect(readMarker(mine[0]!.body)).toEqual(mark);
  });

  it('a marker someone else wrote in the thread is never taken for the app’s reply', async () => {
    const { pr, root, reply } = await thread('reply-forged');
    const mark = { run: 'r-forged-reply', kind: `reply-${root.id}` };
    await w.emu.reviewComment(O, R, pr, {
      user: 'mallory',
      body: withMarker('I am the reply', mark),
      inReplyTo: root.id,
    });
    const forged = w.emu.reviewComments(pr).find((c) => c.user === 'mallory')!;
    w.emu.failNext({ method: 'POST', path: replies }, [{ status: 502 }]);
    const { data } = await reply(withMarker('Addressed.', mark));
    expect(data.id).not.toBe(forged.id);
    expect(w.emu.reviewComments(pr).map((c) => c.user)).toEqual(['maint', 'mallory', w.emu.botLogin]);
  });
});
