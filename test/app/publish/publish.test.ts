import { readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import type { GitHubEmulator } from '../../../src/emulator/github.js';
import type { RepairResult } from '../../../src/agent/types.js';
import { appOctokit, editComment, githubSpacingWaitMs, postComment } from '../../../src/publish/github.js';
import { besideTheJob, NOTIFYING_BURST, pacer } from '../../../src/publish/pacing.js';
import { branchFor, pushPatch, upsertDraftPr, withSection } from '../../../src/publish/pr.js';
import {
  collapsed,
  cutMiddle,
  fitBody,
  evidenceComment,
  GITHUB_BODY_LIMIT,
  prBody,
  prTitle,
  traceComment,
  unverifiedComment,
} from '../../../src/publish/render.js';
import { StatusComment } from '../../../src/publish/status.js';
import { inert } from '../../../src/verify/untrusted.js';
import type { RunRecord } from '../../../src/store/store.js';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import { git } from '../../../src/workspace/git.js';
import {
  CALC_FILES,
  installationClient,
  report,
  startEmulator,
  tempDir,
  testConfig,
} from '../../support/app.js';

const run = {
  id: 'r1',
  base_commit: 'b'.repeat(40),
  triggered_by: 'alice',
  trigger: 'label',
  model: null,
} as RunRecord;
const result = (over: Partial<RepairResult> = {}): RepairResult => ({
  run_id: 'r1',
  stop_reason: 'completed',
  base_commit: 'b'.repeat(40),
  patch: '',
  patch_path: '/x/final.patch',
  patch_skipped: [],
  trace_path: '/x/events.jsonl',
  result_path: '/x/result.json',
  run_dir: '/x',
  dockerfile: null,
  image_id: null,
  summary: 'fixed',
  tokens: { prompt: 10, completion: 5, cached: 0, total: 15 },
  cost_usd: null,
  requests: 1,
  tool_calls: 1,
  duration_ms: 1000,
  phases_ms: { workspace: 200, environment: 300, agent: 4500, patch_and_cleanup: 50 },
  model_name: 'm',
  suite_ms: null,
  prompt_hash: 'h',
  last_test: null,
  worktree_path: null,
  error: null,
  ...over,
});

// Issue 10, item 9: model-written text went into the PR body and comments as it was.
describe('model-written text is inert', () => {
  const ZWJ = '\u200d';
  const CLOSING =
    /\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s*(?:[\w.-]+\/[\w.-]+#\d+|#\d+|https?:\/\/\S+\/issues\/\d+)/gi;

  it.each([
    'Fixes #12',
    'fixed: #12',
    'Closes acme/other#7',
    'resolves https://github.com/acme/calc/issues/3',
    'RESOLVED #3',
    'close#3',
  ])('breaks the closing keyword in %s', (text) => {
    const out = inert(text);
    expect(out.match(CLOSING)).toBeNull();
    expect(out.replaceAll(ZWJ, '')).toBe(text); // only invisible changes
  });

  it('leaves words that merely contain a keyword, and plain references, alone', () => {
    expect(inert('prefixes #3 and see #4')).toBe('prefixes #3 and see #4');
  });

  it('breaks mentions, links, images, autolinks, tags and entities', () => {
    const out = inert(
      'cc @admin and @acme/security: [docs](https://evil.example/x) ![p](https://e.example/p.png) ' +
        '<https://evil.example/y> www.evil.example [ref]: https://evil.example <img src=x> &#64;admin a@b.example',
    );
    expect(out).not.toMatch(/(^|[^\w])@[A-Za-z0-9]/);
    expect(out).not.toMatch(/\]\(|\]:|https?:\/\/|<https?|<img|www\.|&#64;/);
    expect(out).toContain('&lt;img src=x>');
    expect(out).toContain('&amp;#64;admin');
    // Readable: only zero-width joiners and escapes were added.
    expect(out.replaceAll(ZWJ, '')).toContain('[docs](https://evil.example/x)');
  });

  it("keeps the app's own closing keyword and HTML where its own markup needs them", () => {
    const body = prBody({
      issue: 5,
      run,
      result: result({ summary: 'Fixes #1 for @admin, see https://evil.example' }),
      report: report('verified', 'ok', { runId: 'j', remote: 'r', baseCommit: 'b' } as never, []),
    });
    expect(body.match(CLOSING)).toEqual(['Fixes #5']);
    expect(body).not.toContain('https://');
    const evidence = evidenceComment(
      run,
      '<details><summary>x</summary>\n\n`@admin` closes #2\n\n</details>',
    );
    expect(evidence).toContain('<details><summary>x</summary>');
    expect(evidence.match(CLOSING)).toBeNull();
    expect(evidence).not.toMatch(/@admin/);
    // Titles and commit messages are plain text: only keywords and mentions change there.
    expect(prTitle({ number: 5, title: 'Crash <b>, closes #1 (@admin)' })).toBe(
      `Fix #5: Crash <b>, c${ZWJ}loses #1 (@${ZWJ}admin)`,
    );
  });

  it('the trace comment breaks them in the stop error, and the issue comment in the reason and evidence', () => {
    const trace = traceComment(run, result({ error: 'model said: fixes #9 @admin' }), '');
    expect(trace.match(CLOSING)).toBeNull();
    expect(trace).not.toMatch(/@admin/);
    const comment = unverifiedComment({
      run,
      result: result(),
      report: report(
        'regression',
        'test `t` (closes #4) failed',
        { runId: 'j', remote: 'r', baseCommit: 'b' } as never,
        [],
      ),
      evidence: 'fixes #3 [x](https://e.example)',
    });
    expect(comment.match(CLOSING)).toBeNull();
    expect(comment).not.toMatch(/https?:\/\//);
  });
});

describe('rendering', () => {
  it('cuts the middle of long text, keeping head and tail, and says what was cut', () => {
    const text = Array.from({ length: 1000 }, (_, i) => `line ${i}`).join('\n');
    const cut = cutMiddle(text, 500);
    expect(cut.text.length).toBeLessThanOrEqual(520);
    expect(cut.text.startsWith('line 0\n')).toBe(true);
    expect(cut.text.endsWith('line 999')).toBe(true);
    expect(cut.note).toMatch(/^\d+ of 1000 lines \(\d+ characters\) were cut from the middle/);
    expect(cutMiddle('short', 500)).toEqual({ text: 'short', note: null });
  });

  it('fences content with a fence longer than any backtick run inside it', () => {
    const block = collapsed('log', 'a ```` b', 10_000);
    expect(block).toContain('`````\na ```` b\n`````');
    expect(block).toMatch(/^<details><summary>log<\/summary>/);
  });

  it('keeps the trace comment under the limit, cutting the event log inside <details> with a note', () => {
    const events = Array.from({ length: 3000 }, (_, i) =>
      JSON.stringify({
        type: 'tool_end',
        seq: i,
        name: 'read_file',
        args: { path: `f${i}.py` },
        result: { success: i % 2 === 0, error_code: 'not_found' },
        duration_ms: 2,
        pad: 'x'.repeat(60),
      }),
    ).join('\n');
    const body = traceComment(run, result(), events);
    expect(body.length).toBeLessThanOrEqual(GITHUB_BODY_LIMIT);
    expect(body).toContain('## Trace summary');
    expect(body).toContain('| 1 | `read_file` | `{"path":"f0.py"}` | ok | 2 |');
    expect(body).toContain('| 2 | `read_file` | `{"path":"f1.py"}` | failed (`not_found`) | 2 |');
    expect(body).toContain('2850 more tool calls are in the event log below.');
    expect(body).toMatch(/<details><summary>Full event log \(3000 events\)<\/summary>/);
    expect(body).toMatch(
      /\d+ of 3000 lines \(\d+ characters\) were cut from the middle to fit GitHub's 65536-character limit/,
    );
    expect(body).toContain('"seq":0,');
    expect(body).toContain('"seq":2999,');
    expect(body.trimEnd().endsWith('</details>')).toBe(true);
  });

  it('says where the time went: phases in order, the agent split by the tools that took wall time', () => {
    const events = [
      { type: 'tool_end', name: 'build_environment', args: {}, result: { success: true }, duration_ms: 2100 },
      { type: 'tool_end', name: 'run_tests', args: {}, result: { success: true }, duration_ms: 700 },
      { type: 'tool_end', name: 'run_tests', args: {}, result: { success: true }, duration_ms: 600 },
      { type: 'tool_end', name: 'read_file', args: {}, result: { success: true }, duration_ms: 3 },
    ]
      .map((e) => JSON.stringify(e))
      .join('\n');
    expect(traceComment(run, result(), events)).toContain(
      '- Time by phase: workspace 0.2 s · environment 0.3 s · agent 4.5 s (`build_environment` 2.1 s, `run_tests` 1.3 s) · patch_and_cleanup 0.1 s',
    );
  });

  it('puts a huge candidate patch in a collapsed block within the limit', () => {
    const patch = 'diff --git a/x b/x\n' + Array.from({ length: 20000 }, (_, i) => `+line ${i}`).join('\n');
    const body = unverifiedComment({
      run,
      result: result({ patch }),
      report: report(
        'regression',
        'The test fails with the patch.',
        { baseCommit: 'b', remote: 'r' } as never,
        [],
      ),
      evidence: 'E'.repeat(100_000),
    });
    expect(body.length).toBeLessThanOrEqual(GITHUB_BODY_LIMIT);
    expect(body).toContain('**Verdict: `regression`**');
    expect(body).toContain('<details><summary>Candidate patch</summary>');
    expect(body).toContain('+line 0\n');
    expect(body).toContain('+line 19999');
    expect(body).toMatch(/lines \(\d+ characters\) were cut/);
  });

  it('fitBody cuts the tail and closes an open fence', () => {
    const body = 'head\n```\n' + 'x'.repeat(100_000);
    const fitted = fitBody(body);
    expect(fitted.length).toBeLessThanOrEqual(GITHUB_BODY_LIMIT);
    expect(fitted).toMatch(/\n```\n\n> \[!NOTE\]\n> \d+ characters were cut from the end/);
  });
});

describe("the app's section of a pull request description", () => {
  it('is appended once, then replaced in place, leaving what others wrote around it', () => {
    const first = withSection('Summary\n', 'rev 1');
    expect(first).toBe('Summary\n\n<!-- agenticfix:revisions -->\nrev 1\n<!-- /agenticfix:revisions -->');
    const edited = `${first}\n\nA maintainer's note.`;
    const second = withSection(edited, 'rev 1\nrev 2');
    expect(second).toBe(edited.replace('rev 1', 'rev 1\nrev 2'));
    expect(second.match(/agenticfix:revisions -->/g)).toHaveLength(2);
  });
});

describe('pacing of GitHub writes', () => {
  it('lets a burst pass at once, then spaces calls; an idle spell refills the burst', () => {
    const pace = pacer(1000, 3);
    expect([0, 0, 0, 0, 0].map((t) => pace(t))).toEqual([0, 0, 0, 1000, 2000]);
    // The fifth call went out at 2000 and is owed until 5000: three more pass at 5000 at once.
    expect([5000, 5000, 5000, 5000].map((t) => pace(t))).toEqual([0, 0, 0, 1000]);
    expect(pace(20_000)).toBe(0);
    // A burst of one is plain spacing.
    const spaced = pacer(300, 1);
    expect([0, 100, 1000].map((t) => spaced(t))).toEqual([0, 200, 0]);
  });
});

describe('status edits beside the job', () => {
  it('take a free slot only: a status edit never holds the next write of the job back', () => {
    const pace = pacer(1000, 1);
    expect(pace(0)).toBe(0); // the job's write
    expect(pace(0, true)).toBe(1000); // a status edit: asks again in 1000 ms, reserving nothing
    expect(pace(10)).toBe(990); // the job's next write (before, 1990: behind the status edit)
    expect(pace(1000, true)).toBe(1000); // still taken by the job's write
    expect(pace(2000, true)).toBe(0); // free: the status edit takes it
    expect(pace(2000)).toBe(1000);
  });

  it("are the app's comment edits, as sent and as route templates; nothing else yields", () => {
    expect(besideTheJob('PATCH', '/repos/acme/calc/issues/comments/42')).toBe(true);
    expect(besideTheJob('PATCH', '/repos/%7Bowner%7D/%7Brepo%7D/issues/comments/%7Bcomment_id%7D')).toBe(
      true,
    );
    expect(besideTheJob('POST', '/repos/acme/calc/issues/7/comments')).toBe(false);
    expect(besideTheJob('PATCH', '/repos/acme/calc/pulls/7')).toBe(false);
    expect(besideTheJob('PATCH', '/repos/acme/calc/issues/7')).toBe(false);
  });
});

describe('GitHub calls against the emulator', () => {
  let emu: GitHubEmulator;
  let home: string;
  beforeAll(async () => {
    emu = await startEmulator();
    emu.createRepo('acme', 'calc', { files: CALC_FILES });
    emu.createRepo('beta', 'calc', { files: CALC_FILES });
    home = tempDir('publish-');
  });
  afterAll(async () => {
    await emu.close();
    rmSync(home, { recursive: true, force: true });
  });

  it('retries 5xx and secondary rate limits, and shortens a body GitHub calls too long', async () => {
    const gh = await installationClient(emu, testConfig(home), 'acme');
    const n = emu.createIssue('acme', 'calc', { title: 't', user: 'alice' });
    emu.failNext({ method: 'POST', path: /\/issues\/\d+\/comments$/ }, [
      { status: 502 },
      {
        status: 403,
        headers: { 'retry-after': '1' },
        body: { message: 'You have exceeded a secondary rate limit.' },
      },
      { status: 422, body: { message: 'Validation Failed: body is too long (maximum is 65536 characters)' } },
    ]);
    const id = await postComment(gh, { owner: 'acme', repo: 'calc', issue: n }, 'y'.repeat(60_000));
    const posted = emu.comments(n);
    expect(posted.map((c) => c.id)).toEqual([id]);
    expect(posted[0]!.body.length).toBeLessThan(60_000);
    expect(posted[0]!.body).toMatch(/characters were cut from the end/);
    const statuses = emu.requests
      .filter((r) => r.path.endsWith(`/issues/${n}/comments`))
      .map((r) => r.status);
    expect(statuses).toEqual([502, 403, 422, 201]);
  });

  it('waits out a primary rate limit until its reset, and does not retry what a retry cannot change', async () => {
    const gh = await installationClient(emu, testConfig(home), 'acme');
    const n = emu.createIssue('acme', 'calc', { title: 'limits', user: 'alice' });
    const ref = { owner: 'acme', repo: 'calc', issue: n };
    emu.failNext({ method: 'POST', path: /\/issues\/\d+\/comments$/ }, [
      {
        status: 403,
        headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(Math.floor(Date.now() / 1000)) },
        body: { message: 'API rate limit exceeded' },
      },
    ]);
    await postComment(gh, ref, 'after the reset');
    emu.failNext({ method: 'POST', path: /\/issues\/\d+\/comments$/ }, [
      { status: 403, body: { message: 'Resource not accessible by integration' } },
    ]);
    await expect(postComment(gh, ref, 'refused')).rejects.toMatchObject({ status: 403 });
    const statuses = emu.requests
      .filter((r) => r.path.endsWith(`/issues/${n}/comments`))
      .map((r) => r.status);
    expect(statuses).toEqual([403, 201, 403]);
    expect(emu.comments(n).map((c) => c.body)).toEqual(['after the reset']);
  });

  /** A client for `owner` whose warnings land in `lines`. */
  const logged = (owner: string, baseUrl?: string) => {
    const lines: string[] = [];
    const log = pino(
      { level: 'warn' },
      new Writable({
        write(line: Buffer, _enc, done) {
          lines.push(JSON.parse(line.toString()).msg as string);
          done();
        },
      }),
    );
    const config = testConfig(home);
    return { lines, client: installationClient(emu, config, owner, appOctokit(config), { log, baseUrl }) };
  };

  it('a failing token request is retried by its own layer only, and logged with its URL filled in', async () => {
    const { lines, client } = logged('acme');
    const gh = await client;
    const id = emu.installationId('acme');
    const seen = emu.requests.length;
    // Four failures: the token request's own retries. Nested in the permission check's retries, as
    // before, a fifth token request was made (and 16 with GitHub down: 76 s until intake gave up).
    emu.failNext({ method: 'POST', path: /\/access_tokens$/ }, Array(4).fill({ status: 502 }));
    await expect(
      gh.rest.repos.getCollaboratorPermissionLevel({ owner: 'acme', repo: 'calc', username: 'alice' }),
    ).rejects.toMatchObject({ status: 502 });
    expect(emu.requests.slice(seen).map((r) => `${r.method} ${r.path} ${r.status}`)).toEqual(
      Array(4).fill(`POST /app/installations/${id}/access_tokens 502`),
    );
    expect(lines).toEqual(
      [5, 20, 45].map(
        (ms) => `GitHub answered 502 to POST /app/installations/${id}/access_tokens; retrying in ${ms} ms`,
      ),
    );
  });

  it('a connection GitHub never answered is logged as that, not as a 500 from GitHub', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const { lines, client } = logged('acme', `http://127.0.0.1:${port}`);
    const gh = await client;
    await expect(gh.rest.repos.get({ owner: 'acme', repo: 'calc' })).rejects.toMatchObject({ status: 500 });
    const id = emu.installationId('acme');
    expect(lines).toHaveLength(3);
    // Octokit's reason (`connect ECONNREFUSED` under node; jest's module sandbox hides it) in brackets.
    for (const line of lines)
      expect(line).toMatch(
        new RegExp(
          `^GitHub could not be reached for POST /app/installations/${id}/access_tokens \\(.+\\); retrying in \\d+ ms$`,
        ),
      );
  });

  // Found when a run's first reads went out together: its token, asked for first with a cold cache, went
  // to api.github.com (Probot gives the app's auth a request without the base URL), so the run failed;
  // on GitHub Enterprise Server every token asked for that way would go to github.com with the app's JWT.
  it('an installation token asked for before any other request comes from the configured GitHub', async () => {
    const outside: string[] = [];
    const fetch = globalThis.fetch;
    // Nothing leaves this machine: a request anywhere but the emulator is refused and named.
    globalThis.fetch = (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      if (url.startsWith(emu.url)) return fetch(input, init);
      outside.push(url);
      return Promise.reject(new Error(`refused by the test: ${url}`));
    };
    try {
      const gh = await installationClient(emu, testConfig(home), 'acme');
      const { token } = (await gh.auth({ type: 'installation' })) as { token: string };
      expect(outside).toEqual([]);
      expect(emu.requests.at(-1)).toMatchObject({
        method: 'POST',
        path: `/app/installations/${emu.installationId('acme')}/access_tokens`,
        status: 201,
      });
      expect(token).toMatch(/\S{8,}/);
    } finally {
      globalThis.fetch = fetch;
    }
  });

  // Issue 31: a GitHub answer that took 60 s was waited for (no client timeout).
  it('cuts off a request GitHub does not answer in AGENTICFIX_GITHUB_TIMEOUT_MS, retrying it like a 5xx', async () => {
    const gh = await installationClient(
      emu,
      testConfig(home, { AGENTICFIX_GITHUB_TIMEOUT_MS: '200' }),
      'acme',
    );
    const n = emu.createIssue('acme', 'calc', { title: 'slow', user: 'alice' });
    await gh.rest.issues.get({ owner: 'acme', repo: 'calc', issue_number: n }); // the token, before the latency
    const before = emu.requests.length;
    emu.setLatency(2000);
    try {
      const started = Date.now();
      await expect(
        gh.rest.issues.get({ owner: 'acme', repo: 'calc', issue_number: n }),
      ).rejects.toMatchObject({
        status: 500,
      });
      // Four tries of 200 ms and the back-off between them, well before the 2 s answer.
      expect(Date.now() - started).toBeLessThan(1500);
      await new Promise((r) => setTimeout(r, 2100)); // the emulator records answers once sent
      expect(emu.requests.length - before).toBe(4);
    } finally {
      emu.setLatency(0);
    }
  });

  it('paces notifying writes beyond the burst, per installation, through the client the app uses', async () => {
    const every = 200; // notifying writes: 3 x the write interval
    const config = testConfig(home, { AGENTICFIX_GITHUB_WRITE_INTERVAL_MS: String(every) });
    const Octokit = appOctokit(config);
    const gh = await installationClient(emu, config, 'acme', Octokit);
    const n = emu.createIssue('acme', 'calc', { title: 'paced', user: 'alice' });
    const ref = { owner: 'acme', repo: 'calc', issue: n };
    const waited0 = githubSpacingWaitMs();
    const sent: number[] = [];
    for (let i = 0; i < NOTIFYING_BURST; i++) {
      sent.push(Date.now());
      await postComment(gh, ref, `burst ${i}`);
    }
    expect(githubSpacingWaitMs() - waited0).toBe(0);
    // Another installation has a burst of its own.
    const other = await installationClient(emu, config, 'beta', Octokit);
    const m = emu.createIssue('beta', 'calc', { title: 'not paced', user: 'bob' });
    await postComment(other, { owner: 'beta', repo: 'calc', issue: m }, 'at once');
    expect(githubSpacingWaitMs() - waited0).toBe(0);
    const t0 = sent[0]!;
    for (let i = 0; i < 2; i++) await postComment(gh, ref, `paced ${i}`);
    // The burst is spent: the two after it go out one and two spacings after the first.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2 * 3 * every);
    expect(githubSpacingWaitMs() - waited0).toBeGreaterThan(0);
    expect(emu.comments(n)).toHaveLength(NOTIFYING_BURST + 2);
  });

  it('status comment: one comment, edits rate-limited, the last state always lands', async () => {
    const gh = await installationClient(emu, testConfig(home), 'acme');
    const n = emu.createIssue('acme', 'calc', { title: 't', user: 'alice' });
    const created: number[] = [];
    const status = new StatusComment({
      gh: async () => gh,
      ref: { owner: 'acme', repo: 'calc', issue: n },
      runId: 'r42',
      baseCommit: 'c'.repeat(40),
      intervalMs: 300,
      onCreated: (id) => void created.push(id),
    });
    status.update({ phase: 'queued' });
    for (let step = 1; step <= 30; step++) {
      status.update({
        phase: 'working',
        step,
        tokensUsed: step * 100,
        tokenBudget: 5000,
        lastTest: 'failed',
      });
      await new Promise((r) => setTimeout(r, 10));
    }
    await status.settled();
    const edits = () =>
      emu.requests.filter((r) => r.method === 'PATCH' && r.path.includes('/issues/comments/'));
    expect(emu.comments(n)).toHaveLength(1);
    expect(created).toEqual([emu.comments(n)[0]!.id]);
    expect(edits().length).toBeGreaterThanOrEqual(1);
    expect(edits().length).toBeLessThanOrEqual(3); // ~300 ms of updates at one edit per 300 ms
    expect(emu.comments(n)[0]!.body).toContain('step 30, 3000 of 5000 tokens, last test run: failed');
    await status.final({ phase: 'done', detail: 'Verdict `verified`.' });
    const body = emu.comments(n)[0]!.body;
    expect(body).toContain('### AgenticFix: ✅ Done');
    expect(body).toContain('- [x] Verifying');
    expect(body).toContain('Run `r42`');
  });

  it('pushes with a per-call header, leaves no token on disk, and a rerun opens a new branch and PR, never replacing a commit', async () => {
    const config = testConfig(home);
    const gh = await installationClient(emu, config, 'acme');
    const { data: repo } = await gh.rest.repos.get({ owner: 'acme', repo: 'calc' });
    const base = emu.branchHead('acme', 'calc', repo.default_branch)!;
    const workspaces = new GitWorkspaceManager({
      cacheDir: config.cacheDir,
      worktreeDir: config.worktreeDir,
    });
    const patch = (to: string) =>
      `diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return ${to}\n`;
    const branch = branchFor(3);
    const push = (p: string, id: string) =>
      pushPatch({
        gh,
        workspaces,
        cloneUrl: repo.clone_url,
        baseCommit: base,
        patch: p,
        branch,
        message: 'Fix #3',
        runId: id,
      });

    // The git services asked for since `watch()`, but their ref adverts: a push alone, no look at the
    // branches (ls-remote, an upload-pack) before it.
    const watch =
      (from = emu.requests.length) =>
      () =>
        emu.requests
          .slice(from)
          .filter((r) => r.path.startsWith('/git/') && !r.path.endsWith('/info/refs'))
          .map((r) => r.path.split('/').pop());
    await workspaces.mirror(repo.clone_url, [], base); // the mirror's clone is not the push's

    let asked = watch();
    const first = await push(patch('a + b'), 'run-a');
    expect(first).toEqual({ ok: true, commit: expect.stringMatching(/^[0-9a-f]{40}$/), branch });
    expect(asked()).toEqual(['git-receive-pack']);
    expect(emu.branchHead('acme', 'calc', branch)).toBe(first.ok && first.commit);
    const pr1 = await upsertDraftPr(gh, {
      owner: 'acme',
      repo: 'calc',
      branch,
      base: repo.default_branch,
      title: 'Fix #3: t',
      body: 'one',
    });
    expect(pr1.created).toBe(true);

    // The branch exists: the second run's commit goes to a branch of its own; the first stays as it was.
    // git refused the first name on the lease before sending a pack: one pack, to the second name.
    asked = watch();
    const second = await push(patch('b + a'), 'run-b');
    expect(asked()).toEqual(['git-receive-pack']);
    expect(second).toEqual({
      ok: true,
      commit: expect.stringMatching(/^[0-9a-f]{40}$/),
      branch: `${branch}-run-b`,
    });
    expect(emu.branchHead('acme', 'calc', branch)).toBe(first.ok && first.commit);
    expect(emu.branchHead('acme', 'calc', `${branch}-run-b`)).toBe(second.ok && second.commit);
    const pr2 = await upsertDraftPr(gh, {
      owner: 'acme',
      repo: 'calc',
      branch: `${branch}-run-b`,
      base: repo.default_branch,
      title: 'Fix #3: t',
      body: 'two',
    });
    expect(pr2.created).toBe(true);
    expect(emu.pulls.find((p) => p.number === pr1.number)).toMatchObject({ body: 'one' });
    // The list answered before the pull request was opened (another delivery's run won the race):
    // GitHub refuses a second one with 422, and the open one is updated.
    emu.failNext({ method: 'GET', path: /\/pulls$/ }, [{ status: 200, body: [] }]);
    const raced = await upsertDraftPr(gh, {
      owner: 'acme',
      repo: 'calc',
      branch: `${branch}-run-b`,
      base: repo.default_branch,
      title: 'Fix #3: t',
      body: 'three',
    });
    expect(raced).toMatchObject({ number: pr2.number, created: false });
    expect(emu.pulls.find((p) => p.number === pr2.number)).toMatchObject({ body: 'three' });
    // Both names taken: the push says so and creates nothing. (Not the first patch again: within the
    // same second it makes the first commit again, which git finds already there, not refused.)
    expect(await push(patch('(a + b)'), 'run-b')).toEqual({
      ok: false,
      error: `the branches ${branch} and ${branch}-run-b exist already`,
    });

    const broken = await push(
      'diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n',
      'run-c',
    );
    expect(broken).toEqual({ ok: false, error: expect.stringContaining('does not apply') });

    // Nothing the app wrote to disk holds the token or the header.
    const { token } = (await gh.auth({ type: 'installation' })) as { token: string };
    const basic = Buffer.from(`x-access-token:${token}`).toString('base64');
    for (const file of walk(home)) {
      const text = readFileSync(file, 'latin1');
      expect(text.includes(token) || text.includes(basic) || /extraheader/i.test(text)).toBe(false);
    }
    expect(
      (await git(['config', '--list', '--show-origin'], { cwd: config.cacheDir, allowFail: true })).stdout,
    ).not.toMatch(/extraheader/i);
  });

  it('a refused push reports an error without the token', async () => {
    const config = testConfig(home);
    const gh = await installationClient(emu, config, 'acme');
    const { data: repo } = await gh.rest.repos.get({ owner: 'acme', repo: 'calc' });
    const base = emu.branchHead('acme', 'calc', repo.default_branch)!;
    emu.revokeTokens();
    const { token } = (await gh.auth({ type: 'installation' })) as { token: string };
    const res = await pushPatch({
      gh,
      workspaces: new GitWorkspaceManager({ cacheDir: config.cacheDir, worktreeDir: config.worktreeDir }),
      cloneUrl: repo.clone_url,
      baseCommit: base,
      patch:
        'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# calc\n+# calc!\n',
      branch: branchFor(4),
      message: 'x',
      runId: 'run-d',
    });
    expect(res.ok).toBe(false);
    expect(!res.ok && res.error).toMatch(/git push failed/);
    expect(!res.ok && res.error).not.toContain(token);
    expect(emu.branchHead('acme', 'calc', branchFor(4))).toBeNull();
  });

  it('editComment shortens and retries when GitHub answers 422 too long', async () => {
    const gh = await installationClient(emu, testConfig(home), 'acme');
    const n = emu.createIssue('acme', 'calc', { title: 't', user: 'alice' });
    const ref = { owner: 'acme', repo: 'calc', issue: n };
    const id = await postComment(gh, ref, 'first');
    emu.failNext({ method: 'PATCH', path: /\/issues\/comments\/\d+$/ }, [
      { status: 422, body: { message: 'Validation Failed: body is too long (maximum is 65536 characters)' } },
    ]);
    await editComment(gh, ref, id, 'z'.repeat(60_000));
    const body = emu.comments(n)[0]!.body;
    expect(body.length).toBeLessThan(60_000);
    expect(body.startsWith('zzz')).toBe(true);
    expect(/characters were cut from the end/.test(body)).toBe(true);
  });
});

function* walk(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    const st = statSync(p);
    if (st.isDirectory()) yield* walk(p);
    else if (st.isFile()) yield p;
  }
}
