import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { appendFileSync, readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Writable } from 'node:stream';
import { Octokit } from '@octokit/rest';
import pino from 'pino';
import { z } from 'zod';
import type { GitHubEmulator } from '../../../src/emulator/github.js';
import { branchFor } from '../../../src/publish/pr.js';
import type { JudgeOptions } from '../../../src/verify/types.js';
import { EVENTS, isHandled } from '../../../src/webhook/events.js';
import type { RunningApp } from '../../../src/app.js';
import {
  CALC_FILES,
  CALC_FIX,
  CALC_TEST,
  fakeDeps,
  report,
  startEmulatedApp,
  startEmulator,
  tempDir,
  testConfig,
  waitFor,
} from '../../support/app.js';
import {
  checkGraphql,
  checkRecorded,
  DESCRIPTIONS,
  description,
  OperationChecker,
  type SentRequest,
  stricterThanGitHub,
  webhookSchema,
  type Schema,
} from '../../support/github-description.js';

/**
 * The app against GitHub as GitHub documents it: the payload schemas against GitHub's webhook
 * description, every published example payload of a handled event through the running app. Every
 * emulator's requests and answers are checked as it closes (support/contract-setup.ts), here and in
 * every other suite.
 */

interface Example {
  action: string;
  [key: string]: unknown;
}
const EXAMPLES = (
  createRequire(import.meta.url)('@octokit/webhooks-examples') as {
    name: string;
    examples: Example[];
  }[]
).filter((e) => isHandled(e.name));
/** Each handled event and its one action. */
const HANDLED: Record<string, string> = Object.fromEntries(
  Object.entries(EVENTS).map(([event, row]) => [event, row.action]),
);

/**
 * This suite's own figures for `npm run contract`, appended to AGENTICFIX_CONTRACT_SUMMARY beside each
 * emulator's (the requests and answers checked).
 */
const summary = { payload_examples: 0, violations: 0 };
afterAll(() => {
  const file = process.env.AGENTICFIX_CONTRACT_SUMMARY;
  if (file) appendFileSync(file, `${JSON.stringify({ suite: 'contract.test.ts', ...summary })}\n`);
});

describe.each(DESCRIPTIONS)('payload schemas against the %s description', (name) => {
  it.each(Object.entries(HANDLED))(
    '%s.%s: requires nothing GitHub does not always send and takes every value it may',
    (event, action) => {
      const ours = z.toJSONSchema(EVENTS[event as keyof typeof EVENTS].schema, { io: 'input' }) as Schema;
      const doc = description(name);
      // Every delivery to an app names its installation; the description, shared with repository
      // webhooks, has it optional.
      const found = stricterThanGitHub(doc, ours, webhookSchema(doc, event, action), '', ['installation']);
      summary.violations += found.length;
      expect(found).toEqual([]);
    },
  );
  // The event time the freshness check reads (a delivery without it is refused). Installation events
  // are taken without one: creating a missing label again is harmless.
  it.each(Object.entries(HANDLED).filter(([event]) => EVENTS[event as keyof typeof EVENTS].time))(
    '%s.%s: its event time is always sent',
    (event, action) => {
      const ours = z.toJSONSchema(EVENTS[event as keyof typeof EVENTS].time!, { io: 'input' }) as Schema;
      const doc = description(name);
      const found = stricterThanGitHub(doc, ours, webhookSchema(doc, event, action), '', []);
      summary.violations += found.length;
      expect(found).toEqual([]);
    },
  );
});

// Issue 39, item 5: the events were four maps in two files; now one row each, and app.yml subscribes to them.
describe('the webhook table', () => {
  it('app.yml subscribes to every event of the table, and to no other (installation events reach every app)', () => {
    const manifest = readFileSync(fileURLToPath(new URL('../../../app.yml', import.meta.url)), 'utf8');
    const subscribed = /^default_events:\n((?: {2}- \w+\n)+)/m.exec(manifest)![1]!.match(/\w+/g);
    const ours = Object.keys(EVENTS).filter((e) => !e.startsWith('installation'));
    expect(subscribed).toEqual(ours);
  });
});

describe('the contract checks refuse what GitHub does not document', () => {
  const checker = new OperationChecker('api.github.com');
  const sent = (r: Partial<SentRequest>): SentRequest => ({
    method: 'GET',
    rawPath: '/repos/acme/calc',
    query: '',
    body: undefined,
    status: 200,
    ...r,
  });

  it('an unknown operation, a missing or mistyped parameter, an undocumented query, a bad body', () => {
    expect(checker.checkRequest(sent({}))).toEqual([]);
    expect(checker.checkRequest(sent({ rawPath: '/repos/acme/calc/nonsense' }))).toEqual([
      'GET /repos/acme/calc/nonsense: no such operation in api.github.com',
    ]);
    const comments = '/repos/acme/calc/issues/1/comments';
    expect(checker.checkRequest(sent({ method: 'POST', rawPath: comments, body: { text: 'hi' } }))).toEqual([
      "POST /repos/{owner}/{repo}/issues/{issue_number}/comments: body / must have required property 'body'",
    ]);
    expect(checker.checkRequest(sent({ method: 'POST', rawPath: comments }))).toEqual([
      'POST /repos/{owner}/{repo}/issues/{issue_number}/comments: body missing',
    ]);
    expect(checker.checkRequest(sent({ rawPath: '/repos/acme/calc/issues/one' }))[0]).toMatch(
      /path parameter issue_number=one is not/,
    );
    expect(checker.checkRequest(sent({ rawPath: comments, query: '?per_page=100&pages=2' }))).toEqual([
      'GET /repos/{owner}/{repo}/issues/{issue_number}/comments: undocumented query parameter pages',
    ]);
  });

  it('an answer without what GitHub always sends, or a success GitHub does not document', () => {
    const answer = (status: number, body: unknown) =>
      checker.checkResponse(
        sent({ method: 'POST', rawPath: '/repos/acme/calc/issues/1/comments', status, response: { body } }),
      );
    expect(answer(201, { id: 1 }).problems).toContain(
      "POST /repos/{owner}/{repo}/issues/{issue_number}/comments → 201: / must have required property 'node_id'",
    );
    expect(answer(200, {}).problems).toEqual([
      'POST /repos/{owner}/{repo}/issues/{issue_number}/comments → 200: undocumented status',
    ]);
  });

  it("a GraphQL document or variables outside GitHub's schema", () => {
    expect(checkGraphql({ query: '{ viewer { login } }' })).toEqual([]);
    expect(checkGraphql({ query: '{ viewer { nonsense } }' })).toEqual([
      'POST /graphql: Cannot query field "nonsense" on type "User".',
    ]);
    expect(
      checkGraphql({
        query: 'query ($n: Int!) { viewer { repositories(first: $n) { totalCount } } }',
        variables: {},
      }),
    ).toEqual(['POST /graphql: Variable "$n" of required type "Int!" was not provided.']);
  });
});

describe('the emulator in the states runs meet, as GitHub documents them', () => {
  let emu: GitHubEmulator;
  let gh: Octokit;
  const quiet = { debug() {}, info() {}, warn() {}, error() {} };
  beforeAll(async () => {
    emu = await startEmulator();
    for (const repo of ['here', 'there']) emu.createRepo('octo', repo, { files: CALC_FILES });
    gh = new Octokit({ auth: emu.installationToken('octo'), baseUrl: emu.url, log: quiet });
  });
  afterAll(() => emu?.close());
  /** The emulator's answers since `from`, as method, path and status. */
  const answers = (from: number) => emu.requests.slice(from).map((r) => `${r.method} ${r.path} ${r.status}`);
  const status = (p: Promise<unknown>) =>
    p.then(
      () => 200,
      (e: { status: number }) => e.status,
    );

  // Found by the check: a pull request whose head branch was deleted named no head commit
  // (`head.sha: null`, which GitHub's description does not allow); GitHub keeps naming it.
  it('a pull request whose branch was deleted still names its head commit', async () => {
    const head = emu.pushFiles('octo', 'here', 'fix', CALC_FIX, { message: 'fix', author: 'dev' });
    const pr = await gh.rest.pulls.create({
      owner: 'octo',
      repo: 'here',
      head: 'fix',
      base: 'main',
      title: 'Fix',
    });
    emu.deleteBranch('octo', 'here', 'fix');
    const { data } = await gh.rest.pulls.get({ owner: 'octo', repo: 'here', pull_number: pr.data.number });
    expect(data).toMatchObject({ state: 'closed', head: { ref: 'fix', sha: head } });
    expect(checkRecorded(emu.requests).problems).toEqual([]);
  });

  it('a transferred issue: 301 to where it went for the issue, 404 for its comments', async () => {
    const n = emu.createIssue('octo', 'here', { title: 'moved', user: 'alice' });
    const moved = emu.transferIssue('octo', 'here', n, { owner: 'octo', repo: 'there' });
    const from = emu.requests.length;
    const { data } = await gh.rest.issues.get({ owner: 'octo', repo: 'here', issue_number: n });
    expect(data).toMatchObject({ number: moved, title: 'moved' });
    expect(data.repository_url).toBe(`${emu.url}/repos/octo/there`);
    const comment = { owner: 'octo', repo: 'here', issue_number: n, body: 'hello' };
    expect(await status(gh.rest.issues.createComment(comment))).toBe(404);
    expect(answers(from)).toEqual([
      `GET /repos/octo/here/issues/${n} 301`,
      `GET /repos/octo/there/issues/${moved} 200`,
      `POST /repos/octo/here/issues/${n}/comments 404`,
    ]);
    expect(checkRecorded(emu.requests).problems).toEqual([]);
  });

  it("a locked issue: the app's comments are refused with GitHub's 403, the issue says it is locked", async () => {
    const n = emu.createIssue('octo', 'here', { title: 'heated', user: 'alice' });
    emu.lockIssue('octo', 'here', n, 'too heated');
    const { data } = await gh.rest.issues.get({ owner: 'octo', repo: 'here', issue_number: n });
    expect(data).toMatchObject({ locked: true, active_lock_reason: 'too heated' });
    await expect(
      gh.rest.issues.createComment({ owner: 'octo', repo: 'here', issue_number: n, body: 'hello' }),
    ).rejects.toMatchObject({ status: 403, message: expect.stringContaining('issue is locked') });
    expect(emu.comments(n, 'octo/here')).toEqual([]);
    expect(checkRecorded(emu.requests).problems).toEqual([]);
  });
});

const O = 'acme';
const R = 'calc';
const WRITER = 'maint';
const CONFIG = [
  `test: ${JSON.stringify(CALC_TEST)}`,
  'revise_on: [command, changes_requested, mention]',
  'max_revisions: 100',
  'ci_feedback: { enabled: true, max_rounds: 10 }',
  '',
].join('\n');

describe("GitHub's example payloads through the app", () => {
  let emu: GitHubEmulator;
  let app: RunningApp;
  let home: string;
  let sink: Server;
  const warnings: string[] = [];
  let issue = 0;
  let pr = 0;

  beforeAll(async () => {
    emu = await startEmulator();
    emu.createRepo(O, R, { files: { ...CALC_FILES, '.github/agenticfix.yml': CONFIG } });
    emu.setPermission(O, R, WRITER, 'maintain');
    home = tempDir('contract-test-');
    const log = pino(
      { level: 'warn' },
      new Writable({
        write(line: Buffer, _enc, done) {
          if (process.env.DEBUG_CONTRACT) process.stderr.write(line);
          else warnings.push(line.toString());
          done();
        },
      }),
    );
    const deps = {
      ...fakeDeps({
        // Each run writes a fix other than the last one, so every revision moves the branch.
        edits: (_o, call) =>
          call % 2 === 0
            ? { 'calc.py': 'def add(a, b):\n    return a + b\n' }
            : { 'calc.py': 'def add(a, b):\n    return b + a\n' },
      }),
      // What the app does with a verdict is the point here, not how it was reached.
      judge: async (o: JudgeOptions) => report('verified', 'The stand-in judge accepts every patch.', o, []),
    };
    app = await startEmulatedApp(emu, {
      // Every example may start a revision: the operator allows as many as the config asks for.
      config: testConfig(home, { AGENTICFIX_MAX_REVISIONS: '100', AGENTICFIX_CI_FEEDBACK_MAX_ROUNDS: '10' }),
      deps,
      sandbox: 'local',
      log,
    });
    sink = createServer((_req, res) => res.end());
    await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
    emu.setWebhookUrl(app.url);
  });
  afterAll(async () => {
    await app?.close();
    await emu?.close();
    await new Promise((resolve) => sink?.close(resolve));
    rmSync(home, { recursive: true, force: true });
  });

  /** Deliveries of what the test itself sets up (a CI report, a review to point at) do not reach the app. */
  async function offstage<T>(work: () => Promise<T>): Promise<T> {
    emu.setWebhookUrl(`http://127.0.0.1:${(sink.address() as AddressInfo).port}/`);
    try {
      return await work();
    } finally {
      emu.setWebhookUrl(app.url);
    }
  }

  /**
   * The example as GitHub would send it to this app: about the emulator's repository, from its
   * installation, sent by a maintainer, happening now; everything else as published.
   */
  function adapt(event: string, ex: Example): Record<string, unknown> {
    const p = structuredClone(ex) as Record<string, Record<string, unknown>>;
    p.installation = { id: emu.installationId(O), node_id: 'MDIzOkluc3RhbGxhdGlvbjE=' };
    // Installation events name no repository.
    if (p.repository)
      p.repository = {
        ...p.repository,
        name: R,
        full_name: `${O}/${R}`,
        owner: { ...(p.repository.owner as object), login: O },
        default_branch: 'main',
      };
    p.sender = { ...p.sender, login: WRITER, type: 'User' };
    // Happening now: the app refuses events older than AGENTICFIX_DELIVERY_MAX_AGE_D (EVENTS' time).
    const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    const times = {
      issue: 'updated_at',
      comment: 'created_at',
      review: 'submitted_at',
      check_suite: 'updated_at',
    };
    for (const [object, field] of Object.entries(times))
      if (typeof p[object]?.[field] === 'string') p[object] = { ...p[object], [field]: now };
    if (p.pull_request) p.pull_request = { ...p.pull_request, updated_at: now };
    return { event, ...p };
  }

  const runs = () => app.store.forIssue(O, R, issue);
  /** Delivers the payload; then waits until `done` holds, else until the app is idle. */
  const deliver = async (event: string, payload: Record<string, unknown>, done?: () => Promise<boolean>) => {
    const { event: _e, ...body } = payload;
    const res = await emu.deliver(event, body);
    expect(res.status).toBe(200);
    await (done ? waitFor(done, 60_000) : app.idle());
    summary.payload_examples += 1;
  };
  const prHead = () => emu.branchHead(O, R, branchFor(issue))!;

  /** The example's repositories (or one of its own shape) as the emulator's repository. */
  const ours = (listed: unknown) =>
    ((listed as object[] | undefined) ?? [{}])
      .slice(0, 1)
      .map((r) => ({ ...r, name: R, full_name: `${O}/${R}` }));
  const labelled = () => emu.repoLabels(O, R).some((l) => l.name === 'agenticfix');

  /** Each handled action, what the adapted example must make the app do. */
  const acted: Record<string, (ex: Example) => Promise<void>> = {
    // Installed: the trigger label is made where it is missing (the first time), found after.
    installation: async (ex) => {
      const p = adapt('installation', ex);
      p.repositories = ours(p.repositories);
      await deliver('installation', p);
      expect(labelled()).toBe(true);
    },
    installation_repositories: async (ex) => {
      const p = adapt('installation_repositories', ex);
      p.repositories_added = ours(p.repositories_added);
      await deliver('installation_repositories', p);
      expect(labelled()).toBe(true);
    },
    issues: async (ex) => {
      issue = emu.createIssue(O, R, { title: 'add() subtracts', body: 'add(2, 3) is -1', user: 'alice' });
      const p = adapt('issues', ex);
      p.issue = { ...(p.issue as object), number: issue };
      p.label = { ...(p.label as object), name: 'agenticfix' };
      await deliver('issues', p);
      expect((await runs()).map((r) => r.trigger)).toEqual(['label']);
      pr = (await runs())[0]!.pr_number!;
      expect(pr).toBeGreaterThan(0);
    },
    issue_comment: async (ex) => {
      const p = adapt('issue_comment', ex);
      const on = (p.issue as { pull_request?: unknown }).pull_request ? pr : issue;
      p.issue = { ...(p.issue as object), number: on };
      // The comment must exist: the app reacts to it.
      await offstage(() => emu.comment(O, R, on, '/agenticfix status', WRITER));
      p.comment = { ...(p.comment as object), id: emu.comments(on).at(-1)!.id, body: '/agenticfix status' };
      const before = emu.comments(on).length;
      await deliver('issue_comment', p);
      const replies = emu.comments(on).slice(before);
      expect(replies.map((c) => [c.user, c.body.split(' ').slice(0, 3).join(' ')])).toEqual([
        [emu.botLogin, 'Latest AgenticFix run'],
      ]);
    },
    pull_request_review: async (ex) => {
      const p = adapt('pull_request_review', ex);
      p.pull_request = { ...(p.pull_request as object), number: pr };
      p.review = { ...(p.review as object), state: 'changes_requested' };
      await expectRevision(p, 'review');
    },
    pull_request_review_comment: async (ex) => {
      const p = adapt('pull_request_review_comment', ex);
      // The comment's review must exist: the app reads it to leave a changes-requested review to that event.
      await offstage(() => emu.review(O, R, pr, { user: WRITER, state: 'comment', body: 'see below' }));
      const review = emu.reviews.at(-1)!;
      p.pull_request = { ...(p.pull_request as object), number: pr };
      p.comment = {
        ...(p.comment as object),
        body: '@agenticfix please say which numbers',
        pull_request_review_id: review.id,
      };
      await expectRevision(p, 'mention');
    },
    check_suite: async (ex) => {
      // A maintainer's commit: the app revises a head's failing checks once.
      emu.pushFiles(
        O,
        R,
        branchFor(issue),
        { 'NOTES.md': `${Date.now()}\n` },
        { message: 'notes', author: WRITER },
      );
      const made = await offstage(() =>
        emu.checkSuite(O, R, { branch: branchFor(issue), runs: [{ name: 'test', conclusion: 'failure' }] }),
      );
      const p = adapt('check_suite', ex);
      const suite = p.check_suite as { pull_requests: object[] };
      // The example names a suite of its own: the app reads only the runs of the suite delivered, on the
      // pull request's branch, so the adapted payload names the one just made, with the conclusion its
      // one failing run gives it (the app acts on no suite GitHub says passed).
      p.check_suite = {
        ...suite,
        id: made.id,
        conclusion: 'failure',
        head_branch: branchFor(issue),
        head_sha: prHead(),
        pull_requests: suite.pull_requests.map((q) => ({ ...q, number: pr })),
      };
      // A suite with no pull request (a push to a branch without one) asks nothing of the app.
      await expectRevision(p, suite.pull_requests.length > 0 ? 'checks' : null);
    },
  };

  /**
   * Delivers and expects one new run with `trigger` (not waiting for it: the next revision supersedes
   * it), or none.
   */
  async function expectRevision(p: Record<string, unknown>, trigger: string | null) {
    const before = (await runs()).length;
    await deliver(p.event as string, p, trigger ? async () => (await runs()).length > before : undefined);
    const after = await runs();
    expect(after.slice(0, after.length - before).map((r) => r.trigger)).toEqual(trigger ? [trigger] : []);
  }

  // Handled actions first (in the order a pull request needs), then the rest, which must be ignored.
  const order = [
    'installation',
    'installation_repositories',
    'issues',
    'issue_comment',
    'pull_request_review',
    'pull_request_review_comment',
    'check_suite',
  ];
  const cases = EXAMPLES.flatMap((e) =>
    e.examples.map((ex, i) => ({ event: e.name, action: ex.action, i, ex })),
  ).sort(
    (a, b) =>
      Number(HANDLED[a.event] !== a.action) - Number(HANDLED[b.event] !== b.action) ||
      order.indexOf(a.event) - order.indexOf(b.event),
  );

  it.each(cases)('$event $action, example $i', async ({ event, action, ex }) => {
    if (HANDLED[event] === action) await acted[event]!(ex);
    else {
      const before = (await runs()).length;
      const comments = emu.comments(issue).length;
      await deliver(event, adapt(event, ex));
      expect((await runs()).length).toBe(before);
      expect(emu.comments(issue)).toHaveLength(comments);
    }
    expect(warnings).toEqual([]);
  });

  it('every request the app sent is an operation of both descriptions, and every answer is as they document', () => {
    const found = checkRecorded(emu.requests);
    expect(found.problems).toEqual([]);
    expect(found.requests).toBeGreaterThan(100);
  });
});
