import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Octokit } from '@octokit/rest';
import { startGitHubEmulator, type GitHubEmulator } from '../../../src/emulator/github.js';
import type { GitHub } from '../../../src/publish/github.js';
import { resolvedThreads } from '../../../src/revision/feedback.js';

/**
 * The emulator's reviews, review comments, review requests and checks, read back through Octokit as
 * the app reads them, and the webhooks they deliver.
 */

const O = 'acme';
const R = 'calc';
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

describe('GitHub emulator: reviews and checks', () => {
  let emu: GitHubEmulator;
  let hooks: Server;
  const received: { event: string; body: Record<string, unknown> }[] = [];
  let gh: Octokit;
  let pr: number;

  beforeAll(async () => {
    hooks = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString('utf8')));
      req.on('end', () => {
        received.push({ event: String(req.headers['x-github-event']), body: JSON.parse(body) });
        res.end('ok');
      });
    });
    await new Promise<void>((r) => hooks.listen(0, '127.0.0.1', r));
    emu = await startGitHubEmulator({
      webhookSecret: 's',
      webhookUrl: `http://127.0.0.1:${(hooks.address() as AddressInfo).port}`,
    });
    emu.createRepo(O, R, { files: { 'calc.py': 'def add(a, b):\n    return a - b\n' } });
    emu.setPermission(O, R, 'maint', 'write');
    emu.pushFiles(
      O,
      R,
      'fix',
      { 'calc.py': 'def add(a, b):\n    return a + b\n' },
      {
        message: 'Fix add',
        author: 'dev',
      },
    );
    gh = new Octokit({ auth: emu.installationToken(O), baseUrl: emu.url, log: quiet });
    pr = (
      await gh.rest.pulls.create({ owner: O, repo: R, head: 'fix', base: 'main', title: 'Fix', draft: true })
    ).data.number;
  });
  afterAll(async () => {
    await emu?.close();
    await new Promise((r) => hooks?.close(r));
  });

  it('review requests are stateful and shown on the pull request', async () => {
    await gh.rest.pulls.requestReviewers({ owner: O, repo: R, pull_number: pr, reviewers: ['maint'] });
    expect(emu.requestedReviewers(O, R, pr)).toEqual(['maint']);
    const { data } = await gh.rest.pulls.get({ owner: O, repo: R, pull_number: pr });
    expect(data.requested_reviewers?.map((u) => u.login)).toEqual(['maint']);
    const refused = await gh.rest.pulls
      .requestReviewers({ owner: O, repo: R, pull_number: pr, reviewers: ['stranger'] })
      .catch((e: { status: number }) => e.status);
    expect(refused).toBe(422);
  });

  it('a review with inline comments: diff hunks, deliveries, replies in the thread, outdated after a push', async () => {
    received.length = 0;
    const res = await emu.review(O, R, pr, {
      user: 'maint',
      state: 'request_changes',
      body: 'Please document.',
      comments: [{ path: 'calc.py', line: 2, body: 'Docstring?' }],
    });
    expect(res.status).toBe(200);
    expect(received.map((d) => d.event)).toEqual(['pull_request_review_comment', 'pull_request_review']);
    expect(received[1]!.body).toMatchObject({ action: 'submitted', review: { state: 'changes_requested' } });
    expect(emu.requestedReviewers(O, R, pr)).toEqual([]); // reviewing answers the request
    expect(emu.reviews.map((r) => [r.user, r.state, r.pullNumber])).toEqual([
      ['maint', 'CHANGES_REQUESTED', pr],
    ]);

    const [review] = (await gh.rest.pulls.listReviews({ owner: O, repo: R, pull_number: pr })).data;
    expect(review).toMatchObject({
      state: 'CHANGES_REQUESTED',
      body: 'Please document.',
      user: { login: 'maint' },
    });
    const [comment] = (
      await gh.rest.pulls.listCommentsForReview({ owner: O, repo: R, pull_number: pr, review_id: review!.id })
    ).data;
    expect(comment).toMatchObject({ path: 'calc.py', line: 2, body: 'Docstring?' });
    expect(comment!.diff_hunk).toBe('@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b');

    const reply = await gh.rest.pulls.createReplyForReviewComment({
      owner: O,
      repo: R,
      pull_number: pr,
      comment_id: comment!.id,
      body: 'Done.',
    });
    expect(reply.data).toMatchObject({
      in_reply_to_id: comment!.id,
      path: 'calc.py',
      user: { login: emu.botLogin },
    });
    const nested = await gh.rest.pulls
      .createReplyForReviewComment({
        owner: O,
        repo: R,
        pull_number: pr,
        comment_id: reply.data.id,
        body: 'x',
      })
      .catch((e: { status: number }) => e.status);
    expect(nested).toBe(422);

    // Resolution is GraphQL-only, as on GitHub.
    const threads = `query ($owner: String!, $repo: String!, $pr: Int!) {
      repository(owner: $owner, name: $repo) { pullRequest(number: $pr) {
        reviewThreads(first: 100) { nodes { isResolved comments(first: 1) { nodes { databaseId } } } } } } }`;
    const resolved = async () =>
      (
        (await gh.graphql(threads, { owner: O, repo: R, pr })) as {
          repository: { pullRequest: { reviewThreads: { nodes: { isResolved: boolean }[] } } };
        }
      ).repository.pullRequest.reviewThreads.nodes.map((t) => t.isResolved);
    expect(await resolved()).toEqual([false]);
    emu.resolveThread(O, R, comment!.id);
    expect(await resolved()).toEqual([true]);
    emu.pushFiles(
      O,
      R,
      'fix',
      { 'calc.py': 'def add(a, b):\n    """Sum."""\n    return a + b\n' },
      {
        message: 'Docstring',
        author: 'dev',
      },
    );
    const after = (await gh.rest.pulls.listReviewComments({ owner: O, repo: R, pull_number: pr })).data;
    expect(after.find((c) => c.id === comment!.id)).toMatchObject({ line: null, original_line: 2 });
    expect((await gh.rest.pulls.listCommits({ owner: O, repo: R, pull_number: pr })).data).toHaveLength(2);
    expect(emu.pullCommits(O, R, pr)).toHaveLength(2);
  });

  // Found (issue 26): the app read the first 100 review threads only, so a resolved thread past them
  // reached the model as open; the emulator did not page them.
  it('review threads are paged as GitHub pages them (first ≤ 100, cursors), and the app reads every page', async () => {
    const comments = Array.from({ length: 101 }, (_, i) => ({ path: 'calc.py', line: 2, body: `t${i}` }));
    await emu.review(O, R, pr, { user: 'maint', state: 'comment', comments });
    const roots = emu.reviewComments(pr).filter((c) => c.inReplyTo === null);
    const last = roots.at(-1)!.id;
    emu.resolveThread(O, R, last);
    type Page = {
      repository: {
        pullRequest: {
          reviewThreads: {
            nodes: { isResolved: boolean }[];
            pageInfo: { hasNextPage: boolean; endCursor: string | null };
          };
        };
      };
    };
    const page = async (first: number, after: string | null) =>
      (
        (await gh.graphql(
          `query ($owner: String!, $repo: String!, $pr: Int!, $after: String) {
            repository(owner: $owner, name: $repo) { pullRequest(number: $pr) {
              reviewThreads(first: ${first}, after: $after) { nodes { isResolved } pageInfo { hasNextPage endCursor } } } } }`,
          { owner: O, repo: R, pr, after },
        )) as Page
      ).repository.pullRequest.reviewThreads;
    await expect(page(101, null)).rejects.toThrow('exceeds the `first` limit of 100 records');
    const one = await page(100, null);
    expect([one.nodes.length, one.pageInfo.hasNextPage]).toEqual([100, true]);
    const two = await page(100, one.pageInfo.endCursor);
    expect([two.nodes.length, two.pageInfo.hasNextPage]).toEqual([roots.length - 100, false]);
    expect(two.nodes.at(-1)).toMatchObject({ isResolved: true });
    expect((await resolvedThreads(gh as unknown as GitHub, O, R, pr)).has(last)).toBe(true);
  });

  it('check suites: completed only when every run is, with runs and annotations readable per commit', async () => {
    received.length = 0;
    const suite = await emu.checkSuite(O, R, {
      branch: 'fix',
      runs: [
        { name: 'slow', status: 'in_progress' },
        {
          name: 'unit',
          conclusion: 'failure',
          output: { summary: 'one failed', text: 'trace' },
          annotations: [{ path: 'calc.py', line: 3, message: 'wrong' }],
        },
      ],
    });
    expect(suite.delivery).toBeNull();
    const head = emu.branchHead(O, R, 'fix')!;
    const { data } = await gh.rest.checks.listForRef({ owner: O, repo: R, ref: head });
    expect(data.check_runs.map((c) => [c.name, c.status, c.conclusion])).toEqual([
      ['slow', 'in_progress', null],
      ['unit', 'completed', 'failure'],
    ]);
    const notes = await gh.rest.checks.listAnnotations({ owner: O, repo: R, check_run_id: suite.runs[1]! });
    expect(notes.data).toMatchObject([{ path: 'calc.py', start_line: 3, message: 'wrong' }]);

    const done = await emu.completeCheckRun(O, R, suite.runs[0]!, { conclusion: 'success' });
    expect(done?.status).toBe(200);
    expect(received.map((d) => d.event)).toEqual(['check_suite']);
    expect(received[0]!.body).toMatchObject({
      action: 'completed',
      check_suite: {
        head_sha: head,
        head_branch: 'fix',
        conclusion: 'failure',
        pull_requests: [{ number: pr }],
      },
      sender: { login: 'github-actions[bot]', type: 'Bot' },
    });
  });
});
