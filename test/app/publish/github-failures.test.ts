import { rmSync } from 'node:fs';
import { Writable } from 'node:stream';
import pino from 'pino';
import type { RunningApp } from '../../../src/app.js';
import type { FaultResponse, GitHubEmulator } from '../../../src/emulator/github.js';
import type { GitHub } from '../../../src/publish/github.js';
import { branchFor } from '../../../src/publish/pr.js';
import {
  CALC_DOCSTRING,
  CALC_FILES,
  CALC_FIX,
  CALC_TEST,
  fakeDeps,
  installationClient,
  startEmulatedApp,
  startEmulator,
  tempDir,
  testConfig,
  waitFor,
} from '../../support/app.js';

/**
 * GitHub's answers when things go away or break under a run (issue 26, item 4), through the
 * emulator's fault injection: a deleted issue, a deleted branch, a failed push, 502/504 and rate
 * limits. Each ends in a final state the issue or pull request is told about, never a crash, a silent
 * drop or a branch brought back.
 */

const O = 'acme';
const R = 'faulty';
/** Where issues are transferred: a repository of the same installation, and one of another account. */
const SIBLING = 'sibling';
const STRANGER = 'stranger-org';

describe('GitHub failing under a run', () => {
  let emu: GitHubEmulator;
  let app: RunningApp;
  let home: string;
  let gate: Promise<void> | undefined;
  let release: () => void = () => undefined;
  const deps = fakeDeps({
    edits: (o) => (o.issue.revision === undefined ? CALC_FIX : CALC_DOCSTRING),
    get gate() {
      return gate;
    },
  });
  /** The next repair waits in `working` until `release()`. */
  const hold = () => {
    gate = new Promise((r) => (release = r));
  };
  const letGo = () => {
    release();
    gate = undefined;
  };

  beforeAll(async () => {
    emu = await startEmulator();
    emu.createRepo(O, R, {
      files: {
        ...CALC_FILES,
        '.github/agenticfix.yml': `test: ${JSON.stringify(CALC_TEST)}\nrevise_on: [command]\nmax_revisions: 5\n`,
      },
    });
    emu.setPermission(O, R, 'maint', 'maintain');
    emu.createRepo(O, SIBLING, { files: CALC_FILES });
    emu.createRepo(STRANGER, 'elsewhere', { files: CALC_FILES });
    home = tempDir('github-failures-');
    app = await startEmulatedApp(emu, {
      config: testConfig(home, { AGENTICFIX_PUBLISH_RETRY_BASE_S: '0' }),
      deps,
      sandbox: 'local',
    });
    emu.setWebhookUrl(app.url);
  });
  afterAll(async () => {
    letGo();
    await app?.close();
    await emu?.close();
    rmSync(home, { recursive: true, force: true });
  });

  const latest = async (issue: number) => (await app.store.forIssue(O, R, issue))[0]!;
  const statusOf = async (issue: number) => {
    const id = (await latest(issue)).status_comment_id;
    return emu.comments(issue).find((c) => c.id === id)?.body ?? '';
  };
  /**
   * Labels a new issue and waits until its run is idle; `before` runs before the label, `during` while
   * the repair is held.
   */
  async function labelled(
    title: string,
    o: { before?: (issue: number) => void; during?: (issue: number) => void } = {},
  ) {
    const { before, during } = o;
    const n = emu.createIssue(O, R, { title, user: 'alice' });
    before?.(n);
    if (during) hold();
    const calls = deps.calls.length;
    await emu.label(O, R, n, 'agenticfix', 'maint');
    if (during) {
      await waitFor(() => deps.calls.length > calls);
      await waitFor(async () => (await statusOf(n)).includes('Working: step 1'));
      during(n);
      letGo();
    }
    await waitFor(async () => (await app.store.forIssue(O, R, n)).length === 1);
    await app.idle();
    return n;
  }

  // Found: the run went on, pushed a branch and opened a pull request for an issue that no longer exists.
  it('an issue deleted while its run works (410 Gone): nothing is pushed or opened, the run fails saying so', async () => {
    const n = await labelled('add() subtracts, then deleted', {
      during: (issue) => emu.deleteIssue(O, R, issue),
    });
    const run = await latest(n);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(new RegExp(`issue #${n} was deleted`));
    expect(run.pushed_commit).toBeNull();
    expect(emu.branchHead(O, R, branchFor(n))).toBeNull();
    expect(emu.pulls.filter((p) => p.pull?.head.startsWith(branchFor(n)))).toEqual([]);
  });

  it('an issue the app can no longer see (404: transferred away) before its run starts: the model is never asked', async () => {
    const calls = deps.calls.length;
    // The label's own look-ups pass; the run's first look at the issue gets a 404.
    const n = await labelled('add() subtracts, then transferred', {
      before: (issue) =>
        emu.failNext({ method: 'GET', path: new RegExp(`/repos/${O}/${R}/issues/${issue}$`) }, [
          { status: 404 },
        ]),
    });
    const run = await latest(n);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(new RegExp(`issue #${n} .*(deleted|transferred).*GitHub answered 404`));
    expect(deps.calls.length).toBe(calls);
    expect(await statusOf(n)).toContain('❌ Failed');
  });

  it("a run's reads before it starts go out together: the repository is read while the look at the issue is unanswered", async () => {
    const from = emu.requests.length;
    const n = await labelled('add() subtracts, read at once', {
      before: (issue) =>
        emu.holdNext({ method: 'GET', path: new RegExp(`/repos/${O}/${R}/issues/${issue}$`) }, 1500),
    });
    expect((await latest(n)).state).toBe('done');
    // The order they were answered in (the emulator records a request as it answers it; publishing
    // looks at the issue again).
    const answered = emu.requests
      .slice(from)
      .map((r) => `${r.method} ${r.path}`)
      .filter((r) => [`GET /repos/${O}/${R}`, `GET /repos/${O}/${R}/issues/${n}`].includes(r));
    expect(answered.slice(0, 2)).toEqual([`GET /repos/${O}/${R}`, `GET /repos/${O}/${R}/issues/${n}`]);
  });

  /** The app's requests about issue `n` (its comments included) from request `from` on. */
  const about = (n: number, from = 0) =>
    emu.requests
      .slice(from)
      .filter((r) => r.path.startsWith(`/repos/${O}/${R}/issues/${n}`))
      .map((r) => `${r.method} ${r.path.slice(`/repos/${O}/${R}`.length)} ${r.status}`);
  /** The run's GitHub writes kept for a later try (due at once: AGENTICFIX_PUBLISH_RETRY_BASE_S is 0). */
  const kept = async (run: string) =>
    (await app.store.dueWrites(new Date(Date.now() + 3600_000).toISOString())).filter(
      (w) => w.run_id === run,
    );

  // Found: the final status a locked issue refused (GitHub's 403) was kept and tried again without end
  // (403 counted as a rate limit); each status update posted again.
  it('an issue locked before its run starts (403 to comments): the run fails saying so, the model is never asked, nothing is retried without end', async () => {
    const calls = deps.calls.length;
    const n = await labelled('add() subtracts, then locked', {
      before: (issue) => emu.lockIssue(O, R, issue, 'too heated'),
    });
    const run = await latest(n);
    expect(run.state).toBe('failed');
    expect(run.error).toBe(
      `issue #${n} is locked as too heated: GitHub refuses the app's comments there; unlock it to let the app report; the run stopped before it started`,
    );
    expect(deps.calls.length).toBe(calls);
    expect(emu.comments(n)).toEqual([]);
    // The queued status was refused once; the final one is kept, tried once more, and dropped.
    const posts = () => about(n).filter((r) => r.startsWith('POST ')).length;
    expect(posts()).toBe(1);
    expect((await kept(run.id)).map((w) => w.id)).toEqual([`${run.id}:status`]);
    await app.runner.deliverWrites();
    expect(await kept(run.id)).toEqual([]);
    await app.runner.deliverWrites();
    expect(posts()).toBe(2);
    expect(about(n).filter((r) => r.startsWith('POST ') && !r.endsWith(' 403'))).toEqual([]);
  });

  it('an issue locked while its run works: nothing is pushed or opened, the run fails saying so', async () => {
    const n = await labelled('add() subtracts, locked meanwhile', {
      during: (issue) => emu.lockIssue(O, R, issue),
    });
    const run = await latest(n);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(new RegExp(`^issue #${n} is locked: .*; nothing was published`));
    expect(run.pushed_commit).toBeNull();
    expect(emu.branchHead(O, R, branchFor(n))).toBeNull();
    expect(emu.pulls.filter((p) => p.pull?.head.startsWith(branchFor(n)))).toEqual([]);
  });

  it('an issue transferred while its run works (GitHub’s 301 to the new place): nothing is published, the run names where it went', async () => {
    let moved = 0;
    const n = await labelled('add() subtracts, then transferred', {
      during: (issue) => (moved = emu.transferIssue(O, R, issue, { owner: O, repo: SIBLING })),
    });
    const run = await latest(n);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(
      new RegExp(
        `^issue #${n} was transferred \\(to ${emu.url}/${O}/${SIBLING}/issues/${moved}\\); nothing was published`,
      ),
    );
    expect(run.pushed_commit).toBeNull();
    expect(emu.pulls.filter((p) => p.pull?.head.startsWith(branchFor(n)))).toEqual([]);
    expect(about(n)).toContain(`GET /issues/${n} 301`);
    // The status comment went with the issue, out of reach of the old repository's URLs: its final
    // edit, refused (404), is tried once more and dropped.
    expect(emu.comments(moved, `${O}/${SIBLING}`)).toHaveLength(1);
    await app.runner.deliverWrites();
    expect(await kept(run.id)).toEqual([]);
  });

  it('an issue transferred out of the app’s sight while its run works (301, then 404): nothing is published, the run says so', async () => {
    const n = await labelled('add() subtracts, then transferred away', {
      during: (issue) => emu.transferIssue(O, R, issue, { owner: STRANGER, repo: 'elsewhere' }),
    });
    const run = await latest(n);
    expect(run.state).toBe('failed');
    expect(run.error).toMatch(
      new RegExp(
        `^issue #${n} was deleted or transferred out of the app’s sight \\(GitHub answered 404 .*; nothing was published`,
      ),
    );
    expect(emu.pulls.filter((p) => p.pull?.head.startsWith(branchFor(n)))).toEqual([]);
    await app.runner.deliverWrites();
    expect(await kept(run.id)).toEqual([]);
  });

  describe('a revision', () => {
    /** A pull request of the app's: its issue and number. */
    async function opened(title: string) {
      const n = await labelled(title);
      return { n, pr: (await latest(n)).pr_number! };
    }
    const prStatus = async (a: { n: number; pr: number }) => {
      const id = (await latest(a.n)).status_comment_id;
      return emu.comments(a.pr).find((c) => c.id === id)?.body ?? '';
    };
    /** `/agenticfix revise` on the pull request; `during` runs while its repair is held in `working`. */
    async function revise(a: { n: number; pr: number }, during: () => void) {
      hold();
      const calls = deps.calls.length;
      await emu.comment(O, R, a.pr, '/agenticfix revise add a docstring', 'maint');
      await waitFor(() => deps.calls.length > calls);
      await waitFor(async () => (await prStatus(a)).includes('Working: step 1'));
      during();
      letGo();
      await app.idle();
      return latest(a.n);
    }

    // Found: getBranch's 404 after the refused push crashed the run ("Not Found"); before the lease,
    // the push made the deleted branch again while its pull request stayed closed.
    it('whose branch is deleted while it runs: the branch is not made again; the status says it was deleted', async () => {
      const a = await opened('add() subtracts, branch deleted under a revision');
      const run = await revise(a, () => emu.deleteBranch(O, R, branchFor(a.n)));
      expect(run).toMatchObject({ revision: 1, state: 'done', pushed_commit: null });
      expect(emu.branchHead(O, R, branchFor(a.n))).toBeNull();
      const status = await prStatus(a);
      expect(status).toContain(`The branch \`${branchFor(a.n)}\` was deleted`);
      expect(status).toContain('Nothing was pushed');
    });

    // Found: a push GitHub answered 502 was reported as "the branch moved" (it had not).
    it('whose push GitHub answers 502: nothing pushed, the status says the push failed, not that the branch moved', async () => {
      const a = await opened('add() subtracts, push refused under a revision');
      const before = emu.branchHead(O, R, branchFor(a.n));
      const run = await revise(a, () =>
        emu.failNext({ method: 'POST', path: new RegExp(`/git/${O}/${R}.git/git-receive-pack$`) }, [
          { status: 502 },
        ]),
      );
      expect(run).toMatchObject({ revision: 1, state: 'done', pushed_commit: null });
      expect(emu.branchHead(O, R, branchFor(a.n))).toBe(before);
      const status = await prStatus(a);
      expect(status).toContain(`The push to \`${branchFor(a.n)}\` failed`);
      expect(status).toContain('502');
      expect(status).not.toContain('moved');
    });
  });

  // Found: the run failed with the error "Bad Gateway", which says neither who answered nor to what.
  it('502 on every try of a call the run needs: the run fails; the status names GitHub, the status and the call', async () => {
    const calls = deps.calls.length;
    emu.failNext({ method: 'GET', path: new RegExp(`^/repos/${O}/${R}$`) }, Array(4).fill({ status: 502 }));
    const n = await labelled('add() subtracts, GitHub down');
    const run = await latest(n);
    expect(run.state).toBe('failed');
    expect(deps.calls.length).toBe(calls);
    const status = await statusOf(n);
    // GitHub down is the infrastructure's failure, not the model's (issue 37).
    expect(status).toContain('⚠️ Infrastructure error');
    expect(status).toContain(`GitHub answered 502 to GET /repos/${O}/${R}`);
  });

  it('502 and 504 answers GitHub recovers from are retried: the run ends done with its pull request', async () => {
    emu.failNext({ method: 'GET', path: new RegExp(`^/repos/${O}/${R}$`) }, [
      { status: 502 },
      { status: 504 },
    ]);
    emu.failNext({ method: 'POST', path: new RegExp(`^/repos/${O}/${R}/pulls$`) }, [{ status: 504 }]);
    const n = await labelled('add() subtracts, GitHub flaky');
    const run = await latest(n);
    expect(run).toMatchObject({ state: 'done', verdict: 'verified' });
    expect(run.pr_number).not.toBeNull();
  });

  // Found: a 429 whose body does not say "secondary rate limit" was not retried at all, though GitHub
  // documents retry-after for it: the pull request was left for a later publishing try.
  it('429 with retry-after on opening the pull request: waited as told, then opened in the same run', async () => {
    emu.failNext({ method: 'POST', path: new RegExp(`^/repos/${O}/${R}/pulls$`) }, [
      { status: 429, headers: { 'retry-after': '2' }, body: { message: 'Too Many Requests' } },
    ]);
    const n = await labelled('add() subtracts, rate limited');
    expect(await latest(n)).toMatchObject({ state: 'done' });
  });
});

describe('rate limits as GitHub documents them', () => {
  let emu: GitHubEmulator;
  let gh: GitHub;
  const home = tempDir('github-limits-');
  const BASE = 20; // ms the client waits per second GitHub asks for
  const warnings: string[] = [];

  beforeAll(async () => {
    emu = await startEmulator();
    emu.createRepo(O, R, { files: CALC_FILES });
    const log = pino(
      { level: 'warn' },
      new Writable({
        write(line: Buffer, _enc, done) {
          warnings.push((JSON.parse(line.toString()) as { msg: string }).msg);
          done();
        },
      }),
    );
    gh = await installationClient(
      emu,
      testConfig(home, { AGENTICFIX_GITHUB_RETRY_BASE_MS: String(BASE) }),
      O,
      undefined,
      { log },
    );
  });
  afterAll(async () => {
    await emu?.close();
    rmSync(home, { recursive: true, force: true });
  });

  /** GET the repository once with `fault` answered first: the time it took and the requests sent. */
  async function through(fault: FaultResponse) {
    warnings.length = 0;
    const sent = emu.requests.length;
    emu.failNext({ method: 'GET', path: new RegExp(`^/repos/${O}/${R}$`) }, [fault]);
    const started = Date.now();
    const answer = await gh.rest.repos.get({ owner: O, repo: R }).then(
      (r) => r.status,
      (e: Error) => e.message,
    );
    const repoRequests = emu.requests.slice(sent).filter((r) => r.path === `/repos/${O}/${R}`);
    return { answer, ms: Date.now() - started, tries: repoRequests.length };
  }

  it('429 with retry-after: retried after that many seconds', async () => {
    const r = await through({
      status: 429,
      headers: { 'retry-after': '5' },
      body: { message: 'Too Many Requests' },
    });
    expect(r).toMatchObject({ answer: 200, tries: 2 });
    expect(r.ms).toBeGreaterThanOrEqual(5 * BASE);
    expect(warnings).toEqual([`GitHub answered 429 to GET /repos/${O}/${R}; retrying in ${5 * BASE} ms`]);
  });

  it('403 naming a secondary rate limit, without headers: retried after a minute', async () => {
    const r = await through({
      status: 403,
      body: {
        message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.',
      },
    });
    expect(r).toMatchObject({ answer: 200, tries: 2 });
    expect(r.ms).toBeGreaterThanOrEqual(60 * BASE);
  });

  it('403 with x-ratelimit-remaining 0 (primary limit): retried after x-ratelimit-reset', async () => {
    const reset = Math.ceil(Date.now() / 1000) + 3;
    const r = await through({
      status: 403,
      headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(reset) },
      body: { message: 'API rate limit exceeded for installation ID 1.' },
    });
    expect(r).toMatchObject({ answer: 200, tries: 2 });
    expect(r.ms).toBeGreaterThanOrEqual(3 * BASE);
  });

  it('a 403 that is no rate limit is final: not retried, and the error says what GitHub answered to what', async () => {
    const r = await through({ status: 403, body: { message: 'Resource not accessible by integration' } });
    expect(r).toMatchObject({
      answer: `GitHub answered 403 to GET /repos/${O}/${R}: Resource not accessible by integration`,
      tries: 1,
    });
  });
});
