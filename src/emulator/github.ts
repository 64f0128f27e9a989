/**
 * A local GitHub for AgenticFix's tests and demo: a real HTTP server with the REST endpoints the app
 * calls, smart-HTTP git over real bare repositories, signed webhook deliveries, request recording and
 * fault injection. Tests drive it through the control methods of the returned object.
 *
 * Only the control methods send webhooks: changes made through the REST API (the app's own comments,
 * labels, pull requests) do not echo back as deliveries.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { AppAuth, parseAuthorization } from './github-auth.js';
import {
  branchExists,
  commitFiles,
  commitMany,
  commitsBetween,
  createBareRepo,
  diffHunk,
  discard,
  git,
  resolveCommit,
  serveGitHttp,
} from './github-git.js';
import { ManifestFlow } from './github-manifest.js';
import { createRouter, type Reply } from './github-routes.js';
import { OAuthFlow, type OAuthClient } from './github-oauth.js';
import { Shapes } from './github-shapes.js';
import {
  EmulatorState,
  timestamp,
  type CommentRecord,
  type IssueRecord,
  type LabelRecord,
  type LockReason,
  type Permission,
  type ReactionRecord,
  type RepoRecord,
  type CheckRunRecord,
  type CheckSuiteRecord,
  type ReviewCommentRecord,
  type ReviewRecord,
} from './github-state.js';
import { WebhookSender, type DeliveryResult, type StoredDelivery } from './github-webhooks.js';

export type {
  Permission,
  LockReason,
  IssueRecord,
  CommentRecord,
  ReactionRecord,
  ReviewRecord,
  ReviewCommentRecord,
} from './github-state.js';
export type { DeliveryResult, StoredDelivery } from './github-webhooks.js';
export { signBody } from './github-webhooks.js';

export interface GitHubEmulatorOptions {
  webhookUrl?: string;
  webhookSecret: string;
  appId?: number;
  /** When given, app JWTs must be RS256-signed by the matching private key. */
  publicKeyPem?: string;
  /** Where bare repositories live; a temporary directory (removed on close) by default. */
  dataDir?: string;
  /** Where to listen (default 127.0.0.1, any free port); the address is also the URL's host. */
  host?: string;
  port?: number;
}

export interface RecordedRequest {
  method: string;
  /** Percent-decoded path without the query string. */
  path: string;
  query: string;
  status: number;
  /** Parsed JSON request body (undefined for none or for git traffic). */
  body: unknown;
  /** The path as sent, percent-encoding kept (a `{path}` parameter may hold an encoded slash). */
  rawPath: string;
  /** What the emulator answered, for REST (undefined for git traffic). */
  response?: { headers: Record<string, string>; body: unknown };
  /** Answered by `failNext`: the test's answer, not the emulator's. */
  fault?: true;
}

export interface FaultMatch {
  method?: string;
  /** Tested against the percent-decoded request path without its query string. */
  path: RegExp;
  /** failNext: this many matching requests are let through first (the second comment on a path fails). */
  after?: number;
}

export interface FaultResponse {
  status: number;
  /**
   * The request is made as sent first (a push lands, a comment is posted), and only its answer is this
   * one: an answer lost after GitHub acted, as when the connection drops on the way back.
   */
  landed?: true;
  headers?: Record<string, string>;
  body?: unknown;
}

export interface CreatedRepo {
  cloneUrl: string;
  bareDir: string;
  headSha: string;
}

export interface GitHubEmulator {
  /** Base URL for Octokit/Probot `baseUrl`. */
  readonly url: string;
  readonly appId: number;
  readonly botLogin: string;
  /** The app's OAuth client (CLIENT_ID, CLIENT_SECRET) for signing users in (github-oauth.ts). */
  readonly oauth: OAuthClient;
  createRepo(
    owner: string,
    name: string,
    opts?: { fromDir?: string; files?: Record<string, string>; defaultBranch?: string; private?: boolean },
  ): CreatedRepo;
  setPermission(owner: string, repo: string, user: string, permission: Permission): void;
  createIssue(
    owner: string,
    repo: string,
    fields: { title: string; body?: string; user: string; labels?: string[] },
  ): number;
  /** Changes an issue's title or body as `user` would, and delivers `issues.edited`. */
  editIssue(
    owner: string,
    repo: string,
    issue: number,
    fields: { title?: string; body?: string },
    user: string,
  ): Promise<DeliveryResult>;
  /** Adds the label (if absent) and delivers `issues.labeled` either way. */
  label(owner: string, repo: string, issue: number, label: string, sender: string): Promise<DeliveryResult>;
  /** Stores the comment and delivers `issue_comment.created` (issues and pull requests alike). */
  comment(
    owner: string,
    repo: string,
    issue: number,
    body: string,
    user: string,
    opts?: { isBot?: boolean },
  ): Promise<DeliveryResult>;
  /**
   * Submits a review of a pull request's head with inline comments (new-side lines of the diff) and
   * delivers `pull_request_review.submitted`.
   */
  review(
    owner: string,
    repo: string,
    pull: number,
    review: {
      user: string;
      state: 'approve' | 'request_changes' | 'comment';
      body?: string;
      comments?: { path: string; line: number; body: string }[];
    },
  ): Promise<DeliveryResult>;
  /**
   * A single inline comment on a pull request's diff (in a review of its own, as on GitHub), or a reply
   * in the thread of `inReplyTo`; delivers `pull_request_review_comment.created`.
   */
  reviewComment(
    owner: string,
    repo: string,
    pull: number,
    comment: { user: string; body: string } & ({ path: string; line: number } | { inReplyTo: number }),
  ): Promise<DeliveryResult>;
  /**
   * A CI app reports a check suite with these runs on the head of `branch`; when every run is
   * completed, `check_suite.completed` is delivered (`delivery`, else null). `fork`: the suite of a
   * fork's pull request whose head is the same commit (GitHub gives it no head branch and no pull
   * requests).
   */
  checkSuite(
    owner: string,
    repo: string,
    suite: { branch: string; app?: string; fork?: boolean; runs: CheckRunInput[] },
  ): Promise<{ id: number; runs: number[]; delivery: DeliveryResult | null }>;
  /** Completes a check run; delivers `check_suite.completed` when it was its suite's last one. */
  completeCheckRun(
    owner: string,
    repo: string,
    runId: number,
    result: Omit<CheckRunInput, 'name' | 'status'>,
  ): Promise<DeliveryResult | null>;
  /** Someone deletes the issue with its comments: GitHub answers 410 Gone for it from then on; no webhook. */
  deleteIssue(owner: string, repo: string, issue: number): void;
  /**
   * A maintainer moves the issue, comments included, to `to` (labels the target has are kept); returns
   * its number there. The old URL answers 301 to it, the old issue's comments and labels 404; no webhook.
   */
  transferIssue(owner: string, repo: string, issue: number, to: { owner: string; repo: string }): number;
  /** A maintainer locks the conversation: GitHub refuses the app's comments on it (403); no webhook. */
  lockIssue(owner: string, repo: string, issue: number, reason?: LockReason): void;
  /** Someone deletes the branch; an open pull request from it is closed, as on GitHub; no webhook. */
  deleteBranch(owner: string, repo: string, branch: string): void;
  /** Marks the review thread that starts with comment `rootId` resolved (or unresolved). */
  resolveThread(owner: string, repo: string, rootId: number, resolved?: boolean): void;
  /**
   * A person pushes a commit with these files to `branch` (a new branch starts at the default branch's
   * head); no webhook. Returns the commit.
   */
  pushFiles(
    owner: string,
    repo: string,
    branch: string,
    files: Record<string, string>,
    opts: { message: string; author: string },
  ): string;
  /** A person pushes `count` small commits at once to the existing `branch` (each appends a line to `file`); no webhook. Returns the last. */
  pushCommits(
    owner: string,
    repo: string,
    branch: string,
    count: number,
    opts: { file: string; author: string },
  ): string;
  /** A pull request's commits, oldest first. */
  pullCommits(owner: string, repo: string, pull: number): string[];
  reviewComments(pull: number, repoFullName?: string): ReviewCommentRecord[];
  readonly reviews: ReviewRecord[];
  /** Logins whose review was requested on the pull request. */
  requestedReviewers(owner: string, repo: string, pull: number): string[];
  deliver(event: string, payload: unknown, opts?: { signature?: string }): Promise<DeliveryResult>;
  /** GitHub's "redeliver": the same body under the same delivery id. */
  redeliver(deliveryId: string): Promise<DeliveryResult>;
  /** A replay attack: the same signed body under a new delivery id (not recorded as a delivery). */
  replay(deliveryId: string): Promise<DeliveryResult>;
  setWebhookUrl(url: string): void;
  /** The installation id covering the owner's repositories. */
  installationId(owner: string): number;
  /** Issues an installation token directly, skipping the JWT exchange. */
  installationToken(owner: string): string;
  /**
   * Delivers what GitHub sends when `owner` installs the app on all its repositories
   * (`installation.created`, listing them), sent by `sender` (the account itself by default).
   */
  install(owner: string, sender?: string): Promise<DeliveryResult>;
  /** The repository's labels as defined on it (not those merely named on issues). */
  repoLabels(owner: string, repo: string): LabelRecord[];
  /** Expires every installation token issued so far. */
  revokeTokens(): void;
  /**
   * The next matching requests get these responses, one each, instead of the real handler; git's smart
   * HTTP requests (`/git/<owner>/<repo>.git/...`) too.
   */
  failNext(match: FaultMatch, responses: FaultResponse[]): void;
  /**
   * The next matching REST request is held `ms` on its way, then made as sent, whether or not its
   * client still waits for the answer: a write that lands after the client gave up on it.
   */
  holdNext(match: FaultMatch, ms: number): void;
  /** Every REST answer from now on waits `ms` first: GitHub's own latency, for benchmarks. */
  setLatency(ms: number): void;
  branchHead(owner: string, repo: string, branch: string): string | null;
  readonly issues: IssueRecord[];
  comments(issueNumber: number, repoFullName?: string): CommentRecord[];
  readonly pulls: IssueRecord[];
  readonly reactions: ReactionRecord[];
  readonly requests: RecordedRequest[];
  readonly deliveries: StoredDelivery[];
  close(): Promise<void>;
}

export interface CheckRunInput {
  name: string;
  status?: 'queued' | 'in_progress' | 'completed'; // completed by default
  conclusion?: string;
  output?: { title?: string; summary?: string; text?: string };
  annotations?: { path: string; line: number; message: string }[];
}

const APP = { slug: 'agenticfix', name: 'AgenticFix' };

/**
 * Called with each emulator's record once it has closed; a rejection fails its `close()`. The test
 * suite checks every request the app sent, and every answer, against GitHub's published description
 * here (test/support/contract-setup.ts).
 */
export type CloseObserver = (requests: RecordedRequest[]) => void | Promise<void>;
const closeObservers = new Set<CloseObserver>();
export function onEmulatorClose(observer: CloseObserver): () => void {
  closeObservers.add(observer);
  return () => closeObservers.delete(observer);
}
const GIT_PATH = /^\/git\/([^/]+)\/([^/]+?)\.git(\/.*)$/;

export async function startGitHubEmulator(opts: GitHubEmulatorOptions): Promise<GitHubEmulator> {
  const appId = opts.appId ?? 1;
  const ownsDataDir = !opts.dataDir;
  const dataDir = opts.dataDir ?? mkdtempSync(path.join(tmpdir(), 'github-emulator-'));
  const projectRoot = path.join(dataDir, 'repos');
  let baseUrl = '';

  const state = new EmulatorState(`${APP.slug}[bot]`);
  const auth = new AppAuth(appId, opts.publicKeyPem);
  const shapes = new Shapes(state, () => baseUrl);
  const route = createRouter({ state, auth, shapes, baseUrl: () => baseUrl, app: { id: appId, ...APP } });
  const oauth = new OAuthFlow(state, shapes);
  const webhooks = new WebhookSender(opts.webhookSecret, opts.webhookUrl);
  const manifests = new ManifestFlow({
    app: { id: appId, ...APP },
    owner: () => shapes.user(state.botLogin),
    baseUrl: () => baseUrl,
    created: (app) => {
      auth.setPublicKey(app.publicKeyPem);
      webhooks.secret = app.webhookSecret;
      if (app.hookUrl) webhooks.url = app.hookUrl;
    },
  });
  const requests: RecordedRequest[] = [];
  const faults: { match: FaultMatch; responses: FaultResponse[]; pass: number }[] = [];
  let latencyMs = 0;
  const holds: { match: FaultMatch; ms: number }[] = [];
  const matches = (m: FaultMatch, method: string, pathname: string) =>
    (!m.method || m.method.toUpperCase() === method) && m.path.test(pathname);

  const takeFault = (method: string, pathname: string): FaultResponse | undefined => {
    const rule = faults.find((f) => f.responses.length > 0 && matches(f.match, method, pathname));
    if (rule && rule.pass > 0) return void rule.pass--;
    return rule?.responses.shift();
  };
  const takeHold = (method: string, pathname: string): number => {
    const i = holds.findIndex((h) => matches(h.match, method, pathname));
    return i < 0 ? 0 : (holds.splice(i, 1)[0]?.ms ?? 0);
  };

  async function handleGit(
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    m: RegExpExecArray,
  ): Promise<number> {
    const repo = state.repo(decodeURIComponent(m[1] as string), decodeURIComponent(m[2] as string));
    if (!repo) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Repository not found.\n');
      return 404;
    }
    const rest = m[3] as string;
    const fault = takeFault(req.method ?? 'GET', safeDecode(url.pathname));
    const answer = (f: FaultResponse) => {
      res.writeHead(f.status, { 'content-type': 'text/plain', ...f.headers });
      res.end(`${STATUS_CODES[f.status] ?? 'Error'}\n`);
      return f.status;
    };
    if (fault && !fault.landed) return answer(fault);
    const isPush = url.searchParams.get('service') === 'git-receive-pack' || rest === '/git-receive-pack';
    let remoteUser: string | undefined;
    if (isPush || repo.private) {
      const token = auth.installationToken(parseAuthorization(req.headers.authorization));
      if (!token) {
        // The challenge makes git retry with credentials from the URL or a helper, as with GitHub.
        res.writeHead(401, { 'www-authenticate': 'Basic realm="GitHub"', 'content-type': 'text/plain' });
        res.end('Invalid username or token.\n');
        return 401;
      }
      if (token.installationId !== repo.installationId) {
        res
          .writeHead(403, { 'content-type': 'text/plain' })
          .end(`Permission to ${repo.fullName}.git denied.\n`);
        return 403;
      }
      remoteUser = state.botLogin;
    }
    const cgi = {
      projectRoot,
      pathInfo: `/${repo.owner}/${repo.name}.git${rest}`,
      query: url.search.slice(1),
      remoteUser,
    };
    if (!fault) return serveGitHttp(req, res, cgi);
    await serveGitHttp(req, discard(), cgi);
    return answer(fault);
  }

  async function handleRest(
    req: IncomingMessage,
    url: URL,
  ): Promise<{ reply: Reply; body: unknown; fault?: true }> {
    const raw = await readAll(req);
    let body: unknown;
    if (raw.length > 0) {
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        return {
          reply: { status: 400, body: { message: 'Problems parsing JSON' } },
          body: raw.toString('utf8'),
        };
      }
    }
    const method = req.method ?? 'GET';
    const request = {
      method,
      pathname: url.pathname,
      query: url.searchParams,
      body,
      creds: parseAuthorization(req.headers.authorization),
      accept: req.headers.accept ?? '',
    };
    const made = () => manifests.convert(method, url.pathname) ?? oauth.handle(request) ?? route(request);
    const fault = takeFault(method, safeDecode(url.pathname));
    if (fault) {
      if (fault.landed) made();
      const faultBody = fault.body ?? { message: STATUS_CODES[fault.status] ?? 'Error' };
      return { reply: { status: fault.status, body: faultBody, headers: fault.headers }, body, fault: true };
    }
    const held = takeHold(method, safeDecode(url.pathname));
    if (held > 0) await new Promise((resolve) => setTimeout(resolve, held));
    return { reply: made(), body };
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', baseUrl);
    // GitHub Enterprise serves the REST API under /api/v3 (Probot's GHE_HOST); accept both forms.
    if (url.pathname.startsWith('/api/v3/')) url.pathname = url.pathname.slice('/api/v3'.length);
    const record = (status: number, body: unknown, response?: RecordedRequest['response'], fault?: true) =>
      requests.push({
        method: req.method ?? 'GET',
        path: safeDecode(url.pathname),
        rawPath: url.pathname,
        query: url.search,
        status,
        body,
        response,
        ...(fault ? { fault } : {}),
      });
    const gitMatch = GIT_PATH.exec(url.pathname);
    const work = gitMatch
      ? handleGit(req, res, url, gitMatch).then((status) => record(status, undefined))
      : manifests.isPage(url.pathname)
        ? // GitHub's web page for a new app from a manifest: a form post, not the REST API.
          readAll(req).then((form) => {
            const reply = manifests.page(req.method ?? 'GET', url.searchParams, form.toString('utf8'));
            send(res, reply);
            record(reply.status, undefined);
          })
        : handleRest(req, url).then(async ({ reply, body, fault }) => {
            if (latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, latencyMs));
            send(res, reply);
            // The OAuth web flow is github.com's, not the REST API: like the manifest page, no REST answer.
            const web = url.pathname.startsWith('/login/oauth/');
            record(
              reply.status,
              body,
              web
                ? undefined
                : {
                    headers: reply.headers ?? {},
                    body: Buffer.isBuffer(reply.body) ? undefined : reply.body,
                  },
              fault,
            );
          });
    work.catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify({ message: `emulator error: ${String(err)}` }));
      record(500, undefined);
    });
  });
  // Idle connections outlive the clients' own idle timeout (undici: 4 s), as real APIs' do: with Node's
  // 5 s a loaded machine let the server close a connection just as a client reused it (ECONNRESET).
  server.keepAliveTimeout = 65_000;
  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, resolve);
  });
  baseUrl = `http://${host}:${(server.address() as AddressInfo).port}`;

  const repoOf = (owner: string, name: string): RepoRecord => {
    const repo = state.repo(owner, name);
    if (!repo) throw new Error(`no repository ${owner}/${name} in the emulator`);
    return repo;
  };
  const issueOf = (repo: RepoRecord, number: number): IssueRecord => {
    const issue = state.issue(repo, number);
    if (!issue) throw new Error(`no issue #${number} in ${repo.fullName}`);
    return issue;
  };
  const envelope = (repo: RepoRecord, sender: string) => ({
    repository: shapes.repo(repo),
    sender: shapes.user(sender),
    installation: { id: repo.installationId, node_id: `MDIz_${repo.installationId}` },
  });
  const newReview = (
    repo: RepoRecord,
    number: number,
    user: string,
    kind: 'approve' | 'request_changes' | 'comment',
    body: string,
  ) => {
    const issue = issueOf(repo, number);
    if (!issue.pull) throw new Error(`#${number} is not a pull request`);
    const head = resolveCommit(repo.bareDir, issue.pull.head);
    if (!head) throw new Error(`the head branch ${issue.pull.head} of #${number} is gone`);
    state.user(user);
    const states = {
      approve: 'APPROVED',
      request_changes: 'CHANGES_REQUESTED',
      comment: 'COMMENTED',
    } as const;
    const review: ReviewRecord = {
      id: state.newId(),
      repo: repo.fullName,
      pullNumber: number,
      user,
      state: states[kind],
      body,
      commitId: head,
      submittedAt: timestamp(),
    };
    return { issue, review };
  };
  /** A new inline comment on new-side `line` of `path` at the review's commit. */
  const inlineComment = (
    repo: RepoRecord,
    issue: IssueRecord,
    review: ReviewRecord,
    c: { path: string; line: number; body: string },
  ): ReviewCommentRecord => {
    const hunk = diffHunk(repo.bareDir, issue.pull!.base, review.commitId, c.path, c.line);
    if (hunk === null) throw new Error(`${c.path}:${c.line} is not part of the diff of #${issue.number}`);
    return {
      id: state.newId(),
      repo: repo.fullName,
      pullNumber: issue.number,
      reviewId: review.id,
      inReplyTo: null,
      user: review.user,
      body: c.body,
      path: c.path,
      line: c.line,
      originalLine: c.line,
      diffHunk: hunk,
      commitId: review.commitId,
      createdAt: review.submittedAt,
    };
  };
  const deliverReviewComment = (repo: RepoRecord, issue: IssueRecord, c: ReviewCommentRecord) =>
    webhooks.deliver('pull_request_review_comment', {
      action: 'created',
      comment: shapes.reviewComment(repo, c),
      pull_request: shapes.pull(repo, issue),
      ...envelope(repo, c.user),
    });
  const finishRun = (run: CheckRunRecord, r: Omit<CheckRunInput, 'name' | 'status'>) => {
    run.conclusion = r.conclusion ?? 'success';
    run.output = {
      title: r.output?.title ?? '',
      summary: r.output?.summary ?? '',
      text: r.output?.text ?? '',
    };
    run.annotations = (r.annotations ?? []).map((a) => ({
      path: a.path,
      start_line: a.line,
      end_line: a.line,
      annotation_level: 'failure' as const,
      message: a.message,
    }));
  };
  /** GitHub sends `check_suite.completed` once every run of the suite is completed. */
  const deliverIfComplete = async (repo: RepoRecord, suite: CheckSuiteRecord) => {
    if (state.checkRuns.some((r) => r.suiteId === suite.id && r.status !== 'completed')) return null;
    return webhooks.deliver('check_suite', {
      action: 'completed',
      check_suite: shapes.checkSuite(repo, suite),
      ...envelope(repo, `${suite.app}[bot]`),
    });
  };
  const installationId = (owner: string): number => {
    const inst = [...state.installations.values()].find(
      (i) => i.account.toLowerCase() === owner.toLowerCase(),
    );
    if (!inst) throw new Error(`no installation for ${owner}: create one of its repositories first`);
    return inst.id;
  };

  return {
    url: baseUrl,
    appId,
    botLogin: state.botLogin,
    oauth: oauth.client,
    createRepo(owner, name, { fromDir, files, defaultBranch = 'main', private: isPrivate = false } = {}) {
      if (state.repo(owner, name)) throw new Error(`repository ${owner}/${name} already exists`);
      const bareDir = path.join(projectRoot, owner, `${name}.git`);
      const headSha = createBareRepo(bareDir, defaultBranch, { fromDir, files });
      const repo = state.addRepo(owner, name, defaultBranch, bareDir, isPrivate);
      return { cloneUrl: shapes.cloneUrl(repo), bareDir, headSha };
    },
    setPermission(owner, repo, user, permission) {
      state.user(user);
      repoOf(owner, repo).permissions.set(user, permission);
    },
    createIssue(owner, repo, fields) {
      return state.createIssue(repoOf(owner, repo), fields).number;
    },
    editIssue(owner, repoName, number, fields, user) {
      const repo = repoOf(owner, repoName);
      const issue = issueOf(repo, number);
      state.user(user);
      const changes = {
        ...(fields.title !== undefined ? { title: { from: issue.title } } : {}),
        ...(fields.body !== undefined ? { body: { from: issue.body ?? '' } } : {}),
      };
      Object.assign(issue, fields, { updatedAt: timestamp() });
      return webhooks.deliver('issues', {
        action: 'edited',
        issue: shapes.issue(repo, issue),
        changes,
        ...envelope(repo, user),
      });
    },
    label(owner, repoName, number, label, sender) {
      const repo = repoOf(owner, repoName);
      const issue = issueOf(repo, number);
      state.user(sender);
      if (!issue.labels.includes(label)) issue.labels.push(label);
      issue.updatedAt = timestamp(); // as on GitHub: labelling updates the issue
      return webhooks.deliver('issues', {
        action: 'labeled',
        issue: shapes.issue(repo, issue),
        label: shapes.label(repo, label),
        ...envelope(repo, sender),
      });
    },
    comment(owner, repoName, number, body, user, { isBot = false } = {}) {
      const repo = repoOf(owner, repoName);
      const issue = issueOf(repo, number);
      const comment = state.addComment(repo, issue.number, body, user, isBot ? 'Bot' : undefined);
      return webhooks.deliver('issue_comment', {
        action: 'created',
        issue: shapes.issue(repo, issue),
        comment: shapes.comment(repo, comment),
        ...envelope(repo, user),
      });
    },
    async review(owner, repoName, number, input) {
      const repo = repoOf(owner, repoName);
      const { issue, review } = newReview(repo, number, input.user, input.state, input.body ?? '');
      const comments = (input.comments ?? []).map((c) => inlineComment(repo, issue, review, c));
      state.reviews.push(review);
      state.reviewComments.push(...comments);
      state.reviewRequests.get(`${repo.fullName}#${number}`)?.delete(input.user);
      // As on GitHub: one delivery per inline comment, then the review's.
      for (const c of comments) await deliverReviewComment(repo, issue, c);
      return webhooks.deliver('pull_request_review', {
        action: 'submitted',
        // The webhook spells the state in lower case, unlike the REST API.
        review: { ...shapes.review(repo, review), state: review.state.toLowerCase() },
        pull_request: shapes.pull(repo, issue),
        ...envelope(repo, input.user),
      });
    },
    reviewComment(owner, repoName, number, input) {
      const repo = repoOf(owner, repoName);
      const { issue, review } = newReview(repo, number, input.user, 'comment', '');
      let comment: ReviewCommentRecord;
      if ('inReplyTo' in input) {
        const parent = state.reviewComments.find((c) => c.id === input.inReplyTo && c.repo === repo.fullName);
        if (!parent) throw new Error(`no review comment ${input.inReplyTo} in ${repo.fullName}`);
        comment = {
          ...parent,
          id: state.newId(),
          reviewId: review.id,
          inReplyTo: parent.inReplyTo ?? parent.id,
          user: input.user,
          body: input.body,
          createdAt: review.submittedAt,
        };
      } else comment = inlineComment(repo, issue, review, input);
      state.reviews.push(review);
      state.reviewComments.push(comment);
      return deliverReviewComment(repo, issue, comment);
    },
    checkSuite(owner, repoName, input) {
      const repo = repoOf(owner, repoName);
      const headSha = resolveCommit(repo.bareDir, input.branch);
      if (!headSha) throw new Error(`no branch ${input.branch}`);
      const suite: CheckSuiteRecord = {
        id: state.newId(),
        repo: repo.fullName,
        app: input.app ?? 'github-actions',
        headBranch: input.fork ? null : input.branch,
        headSha,
        createdAt: timestamp(),
        updatedAt: timestamp(),
      };
      state.checkSuites.push(suite);
      const runs = input.runs.map((r) => {
        const run: CheckRunRecord = {
          id: state.newId(),
          suiteId: suite.id,
          repo: repo.fullName,
          name: r.name,
          headSha,
          status: r.status ?? 'completed',
          conclusion: null,
          output: { title: '', summary: '', text: '' },
          annotations: [],
        };
        if (run.status === 'completed') finishRun(run, r);
        state.checkRuns.push(run);
        return run.id;
      });
      return deliverIfComplete(repo, suite).then((delivery) => ({ id: suite.id, runs, delivery }));
    },
    completeCheckRun(owner, repoName, runId, result) {
      const repo = repoOf(owner, repoName);
      const run = state.checkRuns.find((r) => r.id === runId && r.repo === repo.fullName);
      if (!run) throw new Error(`no check run ${runId} in ${repo.fullName}`);
      run.status = 'completed';
      finishRun(run, result);
      const suite = state.checkSuites.find((c) => c.id === run.suiteId)!;
      suite.updatedAt = timestamp();
      return deliverIfComplete(repo, suite);
    },
    deleteIssue(owner, repoName, number) {
      const repo = repoOf(owner, repoName);
      const issue = issueOf(repo, number);
      state.issues.splice(state.issues.indexOf(issue), 1);
      for (const c of state.comments.filter((x) => x.repo === repo.fullName && x.issueNumber === number))
        state.comments.splice(state.comments.indexOf(c), 1);
      state.deletedIssues.add(`${repo.fullName}#${number}`);
    },
    transferIssue(owner, repoName, number, to) {
      const from = repoOf(owner, repoName);
      const target = repoOf(to.owner, to.repo);
      const issue = issueOf(from, number);
      if (issue.pull) throw new Error(`#${number} is a pull request: only issues are transferred`);
      const moved = state.createIssue(target, {
        title: issue.title,
        body: issue.body,
        user: issue.user,
        labels: issue.labels.filter((l) => target.labels.has(l.toLowerCase())),
      });
      for (const c of state.comments)
        if (c.repo === from.fullName && c.issueNumber === number) {
          c.repo = target.fullName;
          c.issueNumber = moved.number;
        }
      state.issues.splice(state.issues.indexOf(issue), 1);
      state.movedIssues.set(`${from.fullName}#${number}`, { repo: target.fullName, number: moved.number });
      return moved.number;
    },
    lockIssue(owner, repoName, number, reason) {
      const issue = issueOf(repoOf(owner, repoName), number);
      issue.locked = { reason: reason ?? null };
      issue.updatedAt = timestamp();
    },
    deleteBranch(owner, repoName, branch) {
      const { bareDir } = repoOf(owner, repoName);
      if (!branchExists(bareDir, branch)) throw new Error(`no branch ${branch} in ${owner}/${repoName}`);
      const last = resolveCommit(bareDir, branch) ?? undefined;
      if (!git(bareDir, ['update-ref', '-d', `refs/heads/${branch}`]).ok)
        throw new Error(`could not delete ${branch}`);
      // As on GitHub: an open pull request whose head branch goes is closed, and still names its head.
      for (const i of state.issues)
        if (i.repo === `${owner}/${repoName}` && i.pull?.head === branch) {
          i.pull.lastHead = last;
          if (i.state !== 'open') continue;
          i.state = 'closed';
          i.updatedAt = timestamp();
        }
    },
    resolveThread(owner, repoName, rootId, resolved = true) {
      const repo = repoOf(owner, repoName);
      const root = state.reviewComments.find((c) => c.id === rootId && c.repo === repo.fullName);
      if (!root || root.inReplyTo !== null) throw new Error(`no review thread starts with ${rootId}`);
      if (resolved) state.resolvedThreads.add(rootId);
      else state.resolvedThreads.delete(rootId);
    },
    pushFiles(owner, repoName, branch, files, { message, author }) {
      state.user(author);
      const repo = repoOf(owner, repoName);
      return commitFiles(repo.bareDir, branch, repo.defaultBranch, files, message, author);
    },
    pushCommits(owner, repoName, branch, count, { file, author }) {
      state.user(author);
      return commitMany(repoOf(owner, repoName).bareDir, branch, file, count, author);
    },
    pullCommits(owner, repoName, number) {
      const repo = repoOf(owner, repoName);
      const pull = issueOf(repo, number).pull;
      if (!pull) throw new Error(`#${number} is not a pull request`);
      return commitsBetween(repo.bareDir, pull.base, pull.head);
    },
    reviewComments(number, repoFullName) {
      return structuredClone(
        state.reviewComments.filter(
          (c) => c.pullNumber === number && (!repoFullName || c.repo === repoFullName),
        ),
      );
    },
    get reviews() {
      return structuredClone(state.reviews);
    },
    requestedReviewers(owner, repoName, number) {
      const repo = repoOf(owner, repoName);
      return [...(state.reviewRequests.get(`${repo.fullName}#${number}`) ?? [])];
    },
    deliver: (event, payload, deliverOpts) => webhooks.deliver(event, payload, deliverOpts),
    redeliver: (id) => webhooks.redeliver(id),
    replay: (id) => webhooks.replay(id),
    setWebhookUrl(url) {
      webhooks.url = url;
    },
    installationId,
    installationToken: (owner) => auth.issueToken(installationId(owner)).token,
    install(owner, sender = owner) {
      const id = installationId(owner);
      const repos = [...state.repos.values()].filter((r) => r.installationId === id);
      return webhooks.deliver('installation', {
        action: 'created',
        installation: { id, node_id: `MDIz_${id}`, account: shapes.user(owner), repository_selection: 'all' },
        repositories: repos.map((r) => ({
          id: r.id,
          node_id: `R_${r.id}`,
          name: r.name,
          full_name: r.fullName,
          private: r.private,
        })),
        requester: null,
        sender: shapes.user(sender),
      });
    },
    repoLabels: (owner, name) => [...repoOf(owner, name).labels.values()].map((l) => ({ ...l })),
    revokeTokens: () => auth.revokeAll(),
    failNext(match, responses) {
      faults.push({ match, responses: [...responses], pass: match.after ?? 0 });
    },
    holdNext(match, ms) {
      holds.push({ match, ms });
    },
    setLatency(ms) {
      latencyMs = ms;
    },
    branchHead(owner, repoName, branch) {
      const { bareDir } = repoOf(owner, repoName);
      return branchExists(bareDir, branch) ? resolveCommit(bareDir, branch) : null;
    },
    get issues() {
      return structuredClone(state.issues);
    },
    comments(issueNumber, repoFullName) {
      return structuredClone(
        state.comments.filter(
          (c) => c.issueNumber === issueNumber && (!repoFullName || c.repo === repoFullName),
        ),
      );
    },
    get pulls() {
      return structuredClone(state.issues.filter((i) => i.pull));
    },
    get reactions() {
      return structuredClone(state.reactions);
    },
    get requests() {
      return structuredClone(requests);
    },
    get deliveries() {
      return structuredClone(webhooks.deliveries);
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      if (ownsDataDir) rmSync(dataDir, { recursive: true, force: true });
      for (const observe of closeObservers) await observe(structuredClone(requests));
    },
  };
}

function safeDecode(p: string): string {
  try {
    return decodeURIComponent(p);
  } catch {
    return p;
  }
}

function readAll(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, reply: Reply): void {
  const headers: Record<string, string> = { 'x-github-media-type': 'github.v3', ...reply.headers };
  if (reply.body === undefined) {
    res.writeHead(reply.status, headers).end();
  } else if (Buffer.isBuffer(reply.body)) {
    res.writeHead(reply.status, headers).end(reply.body);
  } else {
    res.writeHead(reply.status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    res.end(JSON.stringify(reply.body));
  }
}
